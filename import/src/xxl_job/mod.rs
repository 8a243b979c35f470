//! `rondo import xxl-job`: brings XXL-JOB's executor groups and jobs over.
//!
//! It reads `xxl_job_group` and `xxl_job_info` from XXL-JOB's MySQL (both
//! column generations: `title`/`name` and `job_desc`/`name`), maps every row
//! to rondo's job model, checks each with the model's own validation, and
//! only then writes through the admin API: groups first, then jobs, then
//! their child jobs (XXL-JOB ids mapped to rondo ids). A row that does not
//! map stops the import before anything is written; `--dry-run` lists what
//! would be done, every row that does not map with the reason, and each
//! job's next fires beside XXL-JOB's `trigger_next_time`.
//!
//! Each job keeps where it came from in `import_ref`
//! (`xxl-job/<source>#<id>`, the source being the database name unless
//! `--source` names it), so running the import again finds the jobs it made
//! and changes nothing, or only what changed in XXL-JOB since.
//!
//! The layout of XXL-JOB's tables tells its release (`layout`: 2.1-2.2,
//! 2.3-3.4, 3.5); a database that is not XXL-JOB's, or of a release the
//! importer does not know, is refused before anything is read.
//!
//! `author` becomes the job's `owner`; `xxl_job_user` becomes rondo's users
//! (their MD5 or SHA-256 password taken once); a script job's kept
//! versions (`xxl_job_logglue`) become its script versions, with their
//! remarks and times. Times XXL-JOB kept as `DATETIME` are read in its
//! admin's zone (`--zone`, else the cluster's). Not taken over: XXL-JOB's
//! `trigger_next_time` (rondo computes the next fire from now; the switch
//! takes it), `add_time`/`update_time`, the executors' registered
//! addresses (they register with the gateway again), and logs.
//!
//! Every imported group is marked as served by the XXL-JOB gateway, with
//! the access token its executors send: XXL-JOB 3.5's own
//! (`xxl_job_group.access_token`), else the one given (`--access-token`,
//! from the admin's `xxl.job.accessToken`), never XXL-JOB's stock
//! `default_token`; a group whose token rondo already has keeps it.

use std::collections::HashMap;

use anyhow::Context;
use rondo_model::JobSpec;
use serde_json::{Map, Value, json};
use sqlx::Connection;

use rondo_cli::Api;

mod glue;
mod imported;
mod layout;
mod map;
mod switch;
mod tables;
#[cfg(test)]
mod tests;

use imported::{connect, existing_jobs};
use map::{import_ref, map_jobs};
pub use switch::{SwitchArgs, switch};
use tables::{
    Problem, XxlGroup, XxlUser, manual_addresses, read_glue_history, read_groups, read_jobs,
    read_users,
};

/// What the command was asked.
pub struct ImportArgs<'a> {
    pub mysql: &'a str,
    pub zone: Option<&'a str>,
    pub source: Option<&'a str>,
    pub dry_run: bool,
    /// Creates every job stopped, those running in XXL-JOB too (the
    /// switch starts them).
    pub stopped: bool,
    /// The access token XXL-JOB's executors send (`xxl.job.accessToken`),
    /// for each imported group XXL-JOB keeps none of (before 3.5).
    pub access_token: Option<&'a str>,
    /// XXL-JOB's admins come over enabled (else disabled).
    pub enable_admins: bool,
}

/// Creates or updates group `g` in rondo, served by the XXL-JOB gateway,
/// with its access token when rondo's has none (3.5's own, or the
/// `--access-token` given): what was done, or the failed call's status and
/// answer.
async fn import_group(
    api: &mut Api,
    g: &XxlGroup,
    args: &ImportArgs<'_>,
) -> anyhow::Result<Result<Value, (u16, Value)>> {
    let path = format!("/api/v1/groups/{}", g.app);
    let (status, current) = api.call(reqwest::Method::GET, &path, None).await?;
    let have: Vec<String> =
        serde_json::from_value(current["xxl_addresses"].clone()).unwrap_or_default();
    let served = current["xxl_gateway"].as_bool().unwrap_or(false);
    let has_token = current["xxl_access"]["token"]
        .as_str()
        .is_some_and(|t| !t.is_empty());
    let written = |status: u16, out: Value| Err((status, json!({ "group": g.app, "error": out })));
    let action = match status {
        200 if have == g.addresses && served => "exists",
        200 if args.dry_run => "update",
        200 => {
            let change = json!({ "xxl_addresses": g.addresses, "xxl_gateway": true });
            let (status, out) = api.call(reqwest::Method::PUT, &path, Some(change)).await?;
            if status != 200 {
                return Ok(written(status, out));
            }
            "updated"
        }
        404 if args.dry_run => "create",
        404 => {
            let mut spec = json!({ "app": g.app, "title": g.title, "xxl_gateway": true });
            if !g.addresses.is_empty() {
                spec["xxl_addresses"] = json!(g.addresses);
            }
            let (status, out) = api
                .call(reqwest::Method::POST, "/api/v1/groups", Some(spec))
                .await?;
            if status != 201 {
                return Ok(written(status, out));
            }
            "created"
        }
        other => anyhow::bail!("reading group {}: status {other}", g.app),
    };
    let token = match group_token(g, args) {
        _ if has_token => json!("kept: the group has a token in rondo already"),
        Err(why) => json!(format!("none: {why}")),
        Ok((_, from)) if args.dry_run => json!(format!("set from {from}")),
        Ok((token, from)) => {
            let body = json!({ "token": token });
            let (status, out) = api
                .call(
                    reqwest::Method::POST,
                    &format!("{path}/xxl-token"),
                    Some(body),
                )
                .await?;
            if status != 200 {
                return Ok(written(status, out));
            }
            json!(format!("set from {from}"))
        }
    };
    Ok(Ok(
        json!({ "xxl_id": g.id, "app": g.app, "action": action, "xxl_token": token }),
    ))
}

/// The access token group `g` gets and where it comes from, or why it
/// gets none (the gateway then refuses its executors until an admin sets
/// one).
fn group_token<'a>(
    g: &'a XxlGroup,
    args: &'a ImportArgs<'_>,
) -> Result<(&'a str, &'static str), String> {
    let (token, from) = match (g.access_token.as_str(), args.access_token) {
        ("", None) => {
            return Err(format!(
                "XXL-JOB has none for this group; give the executors' token with --access-token, or set one: rondo group xxl-token {}",
                g.app
            ));
        }
        ("", Some(given)) => (given, "--access-token"),
        (own, _) => (own, "xxl_job_group.access_token"),
    };
    rondo_model::model::validate_xxl_token("access_token", token).map_err(|e| {
        format!(
            "{from} {}; set another: rondo group xxl-token {} (and give it to its executors)",
            e.message, g.app
        )
    })?;
    Ok((token, from))
}

/// Runs the import; the report is printed by the caller (status 200, or
/// 400 when rows do not map and nothing was written).
pub async fn xxl_job(api: &mut Api, args: &ImportArgs<'_>) -> anyhow::Result<(u16, Value)> {
    let (mut conn, source) = connect(args.mysql, args.source).await?;
    let layout = layout::detect(&mut conn).await?;
    let (groups, group_problems) = manual_addresses(read_groups(&mut conn).await?);
    let jobs = read_jobs(&mut conn, layout).await?;
    let users = read_users(&mut conn).await?;
    let history = read_glue_history(&mut conn).await?;
    let _ = conn.close().await;
    let zone = xxl_zone(api, args.zone).await?;
    let now_ms = chrono::Utc::now().timestamp_millis();

    let (mapped, problems) = map_jobs(&groups, &jobs, args.zone, &source);
    let used_groups: Vec<&XxlGroup> = groups
        .iter()
        .filter(|g| mapped.iter().any(|m| m.xxl.group == g.id))
        .collect();
    let mut problems = problems;
    for g in &used_groups {
        if let Err(e) = rondo_model::model::validate_app_name("app", &g.app) {
            problems.push(Problem {
                table: "xxl_job_group",
                id: g.id,
                column: "app_name".into(),
                reason: e.message,
            });
        }
    }
    problems.extend(
        group_problems
            .into_iter()
            .filter(|p| used_groups.iter().any(|g| g.id == p.id)),
    );

    problems.extend(user_problems(&users));

    let existing = existing_jobs(api, &source).await?;
    let mut report = Map::new();
    report.insert("source".into(), json!(format!("xxl-job/{source}")));
    report.insert("xxl_version".into(), json!(layout.releases()));
    report.insert("xxl_zone".into(), json!(zone.name()));
    report.insert("dry_run".into(), json!(args.dry_run));
    report.insert("stopped".into(), json!(args.stopped));
    report.insert(
        "problems".into(),
        Value::Array(problems.iter().map(Problem::to_json).collect()),
    );
    if !problems.is_empty() && !args.dry_run {
        report.insert(
            "written".into(),
            json!("nothing: fix or remove the rows above, then run the import again"),
        );
        return Ok((400, Value::Object(report)));
    }

    // Groups.
    let mut group_actions = Vec::new();
    for g in &used_groups {
        match import_group(api, g, args).await? {
            Ok(action) => group_actions.push(action),
            Err(failed) => return Ok(failed),
        }
    }
    report.insert("groups".into(), Value::Array(group_actions));

    // Jobs, without children first: a child may come later in the list.
    let mut ids: HashMap<i64, u64> = HashMap::new();
    let mut job_actions = Vec::new();
    for m in &mapped {
        let reference = import_ref(&source, m.xxl.id);
        let current = existing.get(&reference);
        // Whether a job runs belongs to the switch once it is imported: a
        // later import never starts or stops it.
        let mut spec = m.spec.clone();
        if current.is_some() {
            spec.enabled = None;
        } else if args.stopped {
            spec.enabled = Some(false);
        }
        let m = &map::Mapped { spec, ..m.clone() };
        let (versions, left_out) = if glue::is_script(&m.spec) {
            glue::versions(
                &m.xxl,
                history.get(&m.xxl.id).map_or(&[][..], Vec::as_slice),
                zone,
                now_ms,
            )
        } else {
            (Vec::new(), 0)
        };
        let mut entry = json!({ "xxl_id": m.xxl.id, "import_ref": reference });
        let action = match current {
            Some(job) if same(&m.spec, job) => "unchanged",
            Some(_) if args.dry_run => "update",
            None if args.dry_run => "create",
            Some(job) => {
                let id = job["id"].as_u64().context("a job id")?;
                let (status, out) = api
                    .call(
                        reqwest::Method::PUT,
                        &format!("/api/v1/jobs/{id}"),
                        Some(spec_json(&m.spec)),
                    )
                    .await?;
                if status != 200 {
                    return Ok((status, json!({ "xxl_id": m.xxl.id, "error": out })));
                }
                "updated"
            }
            None => {
                // A new script job comes with its kept versions; a job
                // imported before keeps the versions it has.
                let (status, out) = glue::create(api, spec_json(&m.spec), &versions).await?;
                if status != 201 {
                    return Ok((status, json!({ "xxl_id": m.xxl.id, "error": out })));
                }
                ids.insert(m.xxl.id, out["id"].as_u64().context("the new job's id")?);
                "created"
            }
        };
        if let Some(id) = current.and_then(|j| j["id"].as_u64()) {
            ids.insert(m.xxl.id, id);
        }
        entry["action"] = json!(action);
        if let Some(id) = ids.get(&m.xxl.id) {
            entry["id"] = json!(id);
        }
        if current.is_none() && !versions.is_empty() {
            entry["script_versions"] = json!(versions.len());
            if left_out > 0 {
                entry["script_versions_left_out"] = json!(left_out);
            }
        }
        if args.dry_run {
            entry["job"] = spec_json(&m.spec);
            entry["next_fires"] = next_fires(api, &m.spec).await?;
            entry["xxl_trigger_next_ms"] = json!(m.xxl.next_ms);
        }
        job_actions.push(entry);
    }

    // Children, by rondo id.
    if !args.dry_run {
        for (m, entry) in mapped.iter().zip(job_actions.iter_mut()) {
            let want: Vec<u64> = m
                .children
                .iter()
                .filter_map(|c| ids.get(c).copied())
                .collect();
            let reference = import_ref(&source, m.xxl.id);
            let had: Vec<u64> = existing
                .get(&reference)
                .and_then(|j| serde_json::from_value(j["child_jobs"].clone()).ok())
                .unwrap_or_default();
            if want == had || (want.is_empty() && !existing.contains_key(&reference)) {
                continue;
            }
            let id = ids[&m.xxl.id];
            let (status, out) = api
                .call(
                    reqwest::Method::PUT,
                    &format!("/api/v1/jobs/{id}"),
                    Some(json!({ "child_jobs": want })),
                )
                .await?;
            if status != 200 {
                return Ok((status, json!({ "xxl_id": m.xxl.id, "error": out })));
            }
            if entry["action"] == "unchanged" {
                entry["action"] = json!("updated");
            }
        }
    }
    let user_actions = import_users(api, &users, &groups, args).await?;
    report.insert("users".into(), Value::Array(user_actions));
    let count = |what: &str| job_actions.iter().filter(|j| j["action"] == what).count();
    report.insert(
        "summary".into(),
        json!({
            "jobs": mapped.len(),
            "created": count("created") + count("create"),
            "updated": count("updated") + count("update"),
            "unchanged": count("unchanged"),
            "problems": problems.len(),
        }),
    );
    report.insert("jobs".into(), Value::Array(job_actions));
    let status = if problems.is_empty() { 200 } else { 400 };
    Ok((status, Value::Object(report)))
}

/// Users whose rows rondo cannot take: a username it refuses, or a
/// password that is not an MD5 nor a SHA-256.
fn user_problems(users: &[XxlUser]) -> Vec<Problem> {
    let mut problems = Vec::new();
    for u in users {
        if let Err(e) = rondo_model::model::check_username("username", &u.username) {
            problems.push(Problem {
                table: "xxl_job_user",
                id: u.id,
                column: "username".into(),
                reason: e.message,
            });
        }
        if !matches!(u.hash.len(), 32 | 64) || !u.hash.bytes().all(|b| b.is_ascii_hexdigit()) {
            problems.push(Problem {
                table: "xxl_job_user",
                id: u.id,
                column: "password".into(),
                reason: "not an MD5 (32 hex digits) nor a SHA-256 (64)".into(),
            });
        }
    }
    problems
}

/// Creates the users rondo does not have yet: XXL-JOB's admins as
/// admins (disabled unless `--enable-admins`), its other users as
/// operators of the groups their `permission` names. Each signs in once
/// with their XXL-JOB password and must then set a new one; a user who
/// kept XXL-JOB's stock `123456` comes over disabled (sign-in never takes
/// it) for an admin to reset. A user rondo has already is left as it is.
/// The report never holds a password hash.
async fn import_users(
    api: &mut Api,
    users: &[XxlUser],
    groups: &[XxlGroup],
    args: &ImportArgs<'_>,
) -> anyhow::Result<Vec<Value>> {
    let dry_run = args.dry_run;
    let mut actions = Vec::new();
    for u in users {
        let apps: Vec<&str> = u
            .groups
            .iter()
            .filter_map(|id| groups.iter().find(|g| g.id == *id))
            .map(|g| g.app.as_str())
            .collect();
        let role = if u.admin { "admin" } else { "operator" };
        let disabled_because = if stock_password(&u.hash) {
            Some("XXL-JOB's stock password: an admin resets it, then enables the user")
        } else if u.admin && !args.enable_admins {
            Some("an XXL-JOB admin: enabled by an admin of rondo (or import with --enable-admins)")
        } else {
            None
        };
        let (status, _) = api
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/users/{}", u.username),
                None,
            )
            .await?;
        let action = match status {
            200 => "exists",
            404 if dry_run => "create",
            404 => {
                let mut spec = json!({
                    "username": u.username, "xxl_password_hash": u.hash, "role": role,
                    "enabled": disabled_because.is_none(),
                });
                if !u.admin {
                    spec["groups"] = json!(apps);
                }
                let (status, out) = api
                    .call(reqwest::Method::POST, "/api/v1/users", Some(spec))
                    .await?;
                if status != 201 {
                    anyhow::bail!("creating user {}: status {status}: {out}", u.username);
                }
                "created"
            }
            other => anyhow::bail!("reading user {}: status {other}", u.username),
        };
        actions.push(json!({
            "xxl_id": u.id,
            "username": u.username,
            "role": role,
            "groups": if u.admin { Vec::new() } else { apps },
            "action": action,
            "disabled": disabled_because,
        }));
    }
    Ok(actions)
}

/// Whether an `xxl_job_user.password` is the hash of XXL-JOB's stock
/// `123456` (MD5 to 3.1, SHA-256 from 3.2).
fn stock_password(hash: &str) -> bool {
    const STOCK: [&str; 2] = [
        "e10adc3949ba59abbe56e057f20f883e",
        "8d969eef6ecad3c29a3a629280e686cf0c3f5d5a86aff3ca12020c923adc6c92",
    ];
    STOCK.iter().any(|s| s.eq_ignore_ascii_case(hash))
}

/// The spec as the API takes it (fields that are set).
fn spec_json(spec: &JobSpec) -> Value {
    let mut value = serde_json::to_value(spec).unwrap_or_default();
    if let Value::Object(m) = &mut value {
        m.retain(|_, v| !v.is_null());
    }
    value
}

/// Whether the stored job already has every field the spec sets.
fn same(spec: &JobSpec, job: &Value) -> bool {
    let Value::Object(want) = spec_json(spec) else {
        return false;
    };
    // A remark belongs to a script version: rondo keeps it only when the
    // source changes, so a remark edited alone in XXL-JOB is not a change
    // (else every later run would "update" the job again).
    let same_source = want.get("glue_source") == job.get("glue_source");
    want.iter()
        .filter(|(k, _)| !(same_source && k.as_str() == "glue_remark"))
        .all(|(k, v)| job.get(k) == Some(v))
}

/// The zone XXL-JOB's admin ran in: `zone`, or else the cluster's (as the
/// API names it). Its cron is read in it, and its `DATETIME` columns too.
async fn xxl_zone(api: &mut Api, zone: Option<&str>) -> anyhow::Result<chrono_tz::Tz> {
    let name = match zone {
        Some(zone) => zone.to_owned(),
        None => {
            let body = json!({ "schedule_type": "FIX_RATE", "schedule_conf": "60", "count": 1 });
            let (status, out) = api
                .call(
                    reqwest::Method::POST,
                    "/api/v1/schedules/preview",
                    Some(body),
                )
                .await?;
            match out["zone"].as_str() {
                Some(zone) if status == 200 => zone.to_owned(),
                _ => anyhow::bail!("reading the cluster's zone: status {status}: {out}"),
            }
        }
    };
    rondo_model::schedule::parse_zone("zone", &name)
        .map_err(|e| anyhow::anyhow!("--zone {name:?}: {}", e.message))
}

/// The job's next five fires, as the API previews them.
async fn next_fires(api: &mut Api, spec: &JobSpec) -> anyhow::Result<Value> {
    let mut body = json!({
        "schedule_type": spec.schedule_type,
        "schedule_conf": spec.schedule_conf,
        "count": 5,
    });
    if let Some(zone) = &spec.zone {
        body["zone"] = json!(zone);
    }
    let (_, out) = api
        .call(
            reqwest::Method::POST,
            "/api/v1/schedules/preview",
            Some(body),
        )
        .await?;
    Ok(out["fires"].clone())
}
