//! `rondo import xxl-switch`: moves the firing of imported jobs from
//! XXL-JOB to rondo, a group at a time, and back.
//!
//! Forward, for each group, in one MySQL transaction that holds XXL-JOB's
//! own `schedule_lock` (its scheduler takes that lock before it reads due
//! jobs and advances `trigger_next_time`, so while it is held those times
//! are final): the group's running jobs are read, each imported job is
//! started in rondo from XXL-JOB's `trigger_next_time` (a `FIX_RATE` job
//! keeps its phase; a cron job's first fire is that instant; one in the
//! past is late, so the job's misfire rule decides it), and only then are
//! they stopped in XXL-JOB as its own stop does (`trigger_status = 0`,
//! both times 0) and the transaction committed. A fire XXL-JOB already
//! took is past that `trigger_next_time`, so rondo does not make it again.
//!
//! Back, the same in reverse: each of the group's imported jobs running in
//! rondo is stopped there, and its stop says the first fire it leaves
//! unmade (`handover_ms`: the fires a node already holds still run); XXL-JOB
//! gets the job running from that instant.
//!
//! Nothing is half-done: if rondo refuses a start (or a stop), the jobs
//! already moved are moved back and the transaction rolls back, so both
//! sides are as they were.

use std::collections::BTreeMap;

use anyhow::Context;
use serde_json::{Value, json};
use sqlx::{Connection, MySqlConnection, Row};

use rondo_cli::Api;

use super::imported::{connect, existing_jobs};
use super::map::import_ref;

/// What the command was asked.
pub struct SwitchArgs<'a> {
    pub mysql: &'a str,
    pub source: Option<&'a str>,
    /// The groups (app names); empty: every group with imported jobs.
    pub groups: &'a [String],
    /// From rondo back to XXL-JOB.
    pub back: bool,
}

/// One `xxl_job_info` row as the switch reads it.
struct XxlRow {
    id: i64,
    running: bool,
    next_ms: i64,
}

/// Switches each group; the report is printed by the caller. Stops at the
/// first group that cannot be switched (409 with the reason), the groups
/// before it switched.
pub async fn switch(api: &mut Api, args: &SwitchArgs<'_>) -> anyhow::Result<(u16, Value)> {
    let (mut conn, source) = connect(args.mysql, args.source).await?;
    // A database of a release the importer does not know is not switched.
    super::layout::detect(&mut conn).await?;
    let imported = existing_jobs(api, &source).await?;
    let groups: Vec<String> = if args.groups.is_empty() {
        let mut all: Vec<String> = imported
            .values()
            .filter_map(|j| j["group"].as_str().map(str::to_owned))
            .collect();
        all.sort();
        all.dedup();
        all
    } else {
        args.groups.to_vec()
    };
    let mut done = Vec::new();
    for app in &groups {
        let outcome = if args.back {
            back(api, &mut conn, &source, &imported, app).await?
        } else {
            forward(api, &mut conn, &source, &imported, app).await?
        };
        match outcome {
            Ok(report) => done.push(report),
            Err((status, reason)) => {
                let report = json!({
                    "direction": direction(args.back),
                    "switched": done,
                    "refused": { "group": app, "reason": reason },
                });
                return Ok((status, report));
            }
        }
    }
    Ok((
        200,
        json!({ "direction": direction(args.back), "switched": done }),
    ))
}

fn direction(back: bool) -> &'static str {
    if back {
        "rondo → xxl-job"
    } else {
        "xxl-job → rondo"
    }
}

/// A refusal: the status to answer and why.
type Refusal = (u16, String);

/// XXL-JOB's group ids of `app`.
async fn group_ids(conn: &mut MySqlConnection, app: &str) -> anyhow::Result<Vec<i64>> {
    sqlx::query_scalar("SELECT id FROM xxl_job_group WHERE app_name = ?")
        .bind(app)
        .fetch_all(&mut *conn)
        .await
        .context("reading xxl_job_group")
}

/// Takes XXL-JOB's scheduler lock (when the version has one) and reads the
/// jobs of `groups`, locked, in `tx`.
async fn lock_rows(
    tx: &mut sqlx::Transaction<'_, sqlx::MySql>,
    groups: &[i64],
) -> anyhow::Result<Vec<XxlRow>> {
    let has_lock: Option<String> = sqlx::query_scalar(
        "SELECT table_name FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = 'xxl_job_lock'",
    )
    .fetch_optional(&mut **tx)
    .await?;
    if has_lock.is_some() {
        sqlx::query(
            "SELECT lock_name FROM xxl_job_lock WHERE lock_name = 'schedule_lock' FOR UPDATE",
        )
        .fetch_optional(&mut **tx)
        .await
        .context("taking XXL-JOB's schedule_lock")?;
    }
    let mut rows = Vec::new();
    for group in groups {
        let found = sqlx::query(
            "SELECT CAST(id AS SIGNED) AS id, CAST(trigger_status AS SIGNED) AS trigger_status, \
             CAST(trigger_next_time AS SIGNED) AS trigger_next_time FROM xxl_job_info \
             WHERE job_group = ? ORDER BY id FOR UPDATE",
        )
        .bind(group)
        .fetch_all(&mut **tx)
        .await
        .context("reading xxl_job_info")?;
        for r in found {
            rows.push(XxlRow {
                id: r.try_get::<i64, _>("id")?,
                running: r.try_get::<i64, _>("trigger_status")? == 1,
                next_ms: r.try_get::<i64, _>("trigger_next_time")?,
            });
        }
    }
    Ok(rows)
}

/// The rondo job an XXL-JOB row was imported as.
fn rondo_job<'a>(
    imported: &'a BTreeMap<String, Value>,
    source: &str,
    xxl_id: i64,
) -> Option<(u64, &'a Value)> {
    let job = imported.get(&import_ref(source, xxl_id))?;
    Some((job["id"].as_u64()?, job))
}

async fn forward(
    api: &mut Api,
    conn: &mut MySqlConnection,
    source: &str,
    imported: &BTreeMap<String, Value>,
    app: &str,
) -> anyhow::Result<Result<Value, Refusal>> {
    let groups = group_ids(conn, app).await?;
    if groups.is_empty() {
        return Ok(Err((404, format!("XXL-JOB has no group {app:?}"))));
    }
    let (status, live) = api
        .call(
            reqwest::Method::GET,
            &format!("/api/v1/groups/{app}/executors"),
            None,
        )
        .await?;
    if status != 200 || live.as_array().is_none_or(Vec::is_empty) {
        return Ok(Err((
            409,
            format!(
                "no executor of group {app:?} is live in rondo: point its executors at the XXL-JOB gateway (or start rondo executors) first"
            ),
        )));
    }
    let mut tx = conn.begin().await?;
    let rows = lock_rows(&mut tx, &groups).await?;
    // Check every row before anything moves.
    let mut moving = Vec::new();
    for row in &rows {
        let Some((id, job)) = rondo_job(imported, source, row.id) else {
            if row.running {
                return Ok(Err((
                    409,
                    format!(
                        "xxl_job_info id {} runs in XXL-JOB but was not imported: run `rondo import xxl-job --stopped` first",
                        row.id
                    ),
                )));
            }
            continue;
        };
        let enabled = job["enabled"].as_bool().unwrap_or(false);
        if enabled {
            return Ok(Err((
                409,
                format!(
                    "group {app:?} was half-switched before: rondo job {id} (xxl_job_info id {}) runs in rondo already; switch the group back first",
                    row.id
                ),
            )));
        }
        if row.running {
            moving.push((row, id));
        }
    }
    let mut started: Vec<(u64, i64, Value)> = Vec::new();
    for (row, id) in &moving {
        let body = (row.next_ms > 0).then(|| json!({ "from_ms": row.next_ms }));
        let answer = api
            .call(
                reqwest::Method::POST,
                &format!("/api/v1/jobs/{id}/start"),
                body,
            )
            .await;
        let (status, out) = match answer {
            Ok(answer) => answer,
            Err(e) => {
                // The start may have happened: stop it with the others.
                started.push((*id, row.id, Value::Null));
                undo_starts(api, &started).await;
                return Err(e.context(format!(
                    "starting rondo job {id}; the starts were undone and nothing was switched"
                )));
            }
        };
        if status != 200 {
            undo_starts(api, &started).await;
            return Ok(Err((
                status,
                format!(
                    "rondo refused to start job {id} (xxl_job_info id {}): {out}; nothing was switched",
                    row.id
                ),
            )));
        }
        started.push((*id, row.id, out["next_fire_ms"].clone()));
    }
    // Stopped as XXL-JOB's own stop does: status 0, both times 0.
    let rows: Vec<(i64, i64)> = moving.iter().map(|(r, _)| (r.id, 0)).collect();
    let stopped = set_and_commit(tx, &rows).await;
    if let Err(e) = stopped {
        undo_starts(api, &started).await;
        anyhow::bail!("stopping the jobs in XXL-JOB failed ({e}); rondo's starts were undone");
    }
    let jobs: Vec<Value> = moving
        .iter()
        .zip(&started)
        .map(|((row, _), (id, _, next))| {
            json!({ "xxl_id": row.id, "id": id, "xxl_next_ms": row.next_ms, "next_fire_ms": next })
        })
        .collect();
    Ok(Ok(json!({ "group": app, "jobs": jobs })))
}

/// Writes each `(id, next_ms)` into XXL-JOB's rows, running from
/// `next_ms` (as its own start leaves a job) or, with 0, stopped (as its
/// own stop does), and commits.
async fn set_and_commit(
    mut tx: sqlx::Transaction<'_, sqlx::MySql>,
    rows: &[(i64, i64)],
) -> Result<(), sqlx::Error> {
    for (id, next_ms) in rows {
        sqlx::query(
            "UPDATE xxl_job_info SET trigger_status = ?, trigger_last_time = 0, \
             trigger_next_time = ? WHERE id = ?",
        )
        .bind(i8::from(*next_ms > 0))
        .bind(next_ms)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await
}

/// Stops jobs a failed switch started (best effort: a stop that fails is
/// said, the operator finishes it).
async fn undo_starts(api: &mut Api, started: &[(u64, i64, Value)]) {
    for (id, _, _) in started {
        let undone = api
            .call(
                reqwest::Method::POST,
                &format!("/api/v1/jobs/{id}/stop"),
                None,
            )
            .await;
        if !matches!(undone, Ok((200, _))) {
            eprintln!("could not stop rondo job {id} again: stop it by hand ({undone:?})");
        }
    }
}

async fn back(
    api: &mut Api,
    conn: &mut MySqlConnection,
    source: &str,
    imported: &BTreeMap<String, Value>,
    app: &str,
) -> anyhow::Result<Result<Value, Refusal>> {
    let groups = group_ids(conn, app).await?;
    if groups.is_empty() {
        return Ok(Err((
            404,
            format!("XXL-JOB has no group {app:?} any more: the way back needs its tables"),
        )));
    }
    let mut tx = conn.begin().await?;
    let rows = lock_rows(&mut tx, &groups).await?;
    let mut moving = Vec::new();
    for row in &rows {
        let Some((id, job)) = rondo_job(imported, source, row.id) else {
            continue;
        };
        let enabled = job["enabled"].as_bool().unwrap_or(false);
        if row.running {
            return Ok(Err((
                409,
                format!(
                    "group {app:?} was half-switched before: xxl_job_info id {} runs in XXL-JOB{}",
                    row.id,
                    if enabled { " and in rondo" } else { "" }
                ),
            )));
        }
        if enabled {
            moving.push((row, id));
        }
    }
    let mut stopped: Vec<(u64, i64, i64)> = Vec::new();
    for (row, id) in &moving {
        let answer = api
            .call(
                reqwest::Method::POST,
                &format!("/api/v1/jobs/{id}/stop"),
                None,
            )
            .await;
        let (status, out) = match answer {
            Ok(answer) => answer,
            Err(e) => {
                // The stop may have happened: start it again with the
                // others, from where a stop now would leave it.
                undo_stops(api, &stopped).await;
                eprintln!("rondo job {id} may be stopped: check it and start it by hand");
                return Err(e.context(format!(
                    "stopping rondo job {id}; the other stops were undone and nothing was switched"
                )));
            }
        };
        if status != 200 {
            undo_stops(api, &stopped).await;
            return Ok(Err((
                status,
                format!(
                    "rondo refused to stop job {id} (xxl_job_info id {}): {out}; nothing was switched",
                    row.id
                ),
            )));
        }
        // No handover (a job that no longer fires by itself): XXL-JOB
        // gets it stopped, rather than a 0 it would read as a misfire.
        let handover = out["handover_ms"].as_i64().unwrap_or(0);
        stopped.push((*id, row.id, handover));
    }
    let rows: Vec<(i64, i64)> = stopped.iter().map(|(_, xxl_id, h)| (*xxl_id, *h)).collect();
    let written = set_and_commit(tx, &rows).await;
    if let Err(e) = written {
        undo_stops(api, &stopped).await;
        anyhow::bail!("starting the jobs in XXL-JOB failed ({e}); rondo's stops were undone");
    }
    let jobs: Vec<Value> = stopped
        .iter()
        .map(
            |(id, xxl_id, handover)| json!({ "xxl_id": xxl_id, "id": id, "xxl_next_ms": handover }),
        )
        .collect();
    Ok(Ok(json!({ "group": app, "jobs": jobs })))
}

/// Starts again, from where they stopped, jobs a failed way back stopped.
async fn undo_stops(api: &mut Api, stopped: &[(u64, i64, i64)]) {
    for (id, _, handover) in stopped {
        let body = (*handover > 0).then(|| json!({ "from_ms": handover }));
        let undone = api
            .call(
                reqwest::Method::POST,
                &format!("/api/v1/jobs/{id}/start"),
                body,
            )
            .await;
        if !matches!(undone, Ok((200, _))) {
            eprintln!("could not start rondo job {id} again: start it by hand ({undone:?})");
        }
    }
}
