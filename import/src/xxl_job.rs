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
//! Not taken over: XXL-JOB's `trigger_next_time` (rondo computes the next
//! fire from now), `add_time`/`update_time`, `author`, the executors'
//! addresses and access tokens (rondo executors consume queues), users,
//! logs and script versions older than the current one.

use std::collections::{BTreeMap, HashMap};

use anyhow::Context;
use rondo_model::JobSpec;
use serde_json::{Map, Value, json};
use sqlx::mysql::MySqlRow;
use sqlx::{Connection, MySqlConnection, Row};

use rondo_cli::Api;

/// What the command was asked.
pub struct ImportArgs<'a> {
    pub mysql: &'a str,
    pub zone: Option<&'a str>,
    pub source: Option<&'a str>,
    pub dry_run: bool,
}

/// A group as XXL-JOB has it.
#[derive(Debug, Clone)]
struct XxlGroup {
    id: i64,
    app: String,
    title: String,
    /// Its executors' addresses when fed by hand (`address_type = 1`),
    /// as rondo keeps them; empty for a group its executors register in.
    addresses: Vec<String>,
}

/// A job as XXL-JOB has it (the columns the importer maps).
#[derive(Debug, Clone, Default)]
struct XxlJob {
    id: i64,
    group: i64,
    desc: String,
    alarm_email: String,
    schedule_type: String,
    schedule_conf: String,
    misfire: String,
    routing: String,
    handler: String,
    params: String,
    block: String,
    timeout_s: i64,
    retries: i64,
    glue_type: String,
    glue_source: String,
    glue_remark: String,
    children: String,
    running: bool,
    next_ms: i64,
}

/// A row that does not map, and why.
#[derive(Debug, Clone)]
struct Problem {
    table: &'static str,
    id: i64,
    column: String,
    reason: String,
}

impl Problem {
    fn to_json(&self) -> Value {
        json!({ "table": self.table, "id": self.id, "column": self.column, "reason": self.reason })
    }
}

/// A job row mapped to rondo: its spec (without children) and its
/// children's XXL-JOB ids.
#[derive(Debug, Clone)]
struct Mapped {
    xxl: XxlJob,
    spec: JobSpec,
    children: Vec<i64>,
}

/// Runs the import; the report is printed by the caller (status 200, or
/// 400 when rows do not map and nothing was written).
pub async fn xxl_job(api: &mut Api, args: &ImportArgs<'_>) -> anyhow::Result<(u16, Value)> {
    let mut conn = MySqlConnection::connect(args.mysql)
        .await
        .with_context(|| {
            format!(
                "connecting to XXL-JOB's MySQL at {}",
                rondo_model::redact::url(args.mysql)
            )
        })?;
    let database: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&mut conn)
        .await?;
    let source = match (args.source, database) {
        (Some(source), _) => source.to_owned(),
        (None, Some(db)) => db,
        (None, None) => {
            anyhow::bail!("the MySQL URL names no database: add /<database> or --source")
        }
    };
    let (groups, group_problems) = manual_addresses(read_groups(&mut conn).await?);
    let jobs = read_jobs(&mut conn).await?;
    let _ = conn.close().await;

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

    let existing = existing_jobs(api, &source).await?;
    let mut report = Map::new();
    report.insert("source".into(), json!(format!("xxl-job/{source}")));
    report.insert("dry_run".into(), json!(args.dry_run));
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
        let (status, current) = api
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/groups/{}", g.app),
                None,
            )
            .await?;
        let have: Vec<String> =
            serde_json::from_value(current["xxl_addresses"].clone()).unwrap_or_default();
        let action = match status {
            200 if have == g.addresses => "exists",
            200 if args.dry_run => "update",
            200 => {
                let (status, out) = api
                    .call(
                        reqwest::Method::PUT,
                        &format!("/api/v1/groups/{}", g.app),
                        Some(json!({ "xxl_addresses": g.addresses })),
                    )
                    .await?;
                if status != 200 {
                    return Ok((status, json!({ "group": g.app, "error": out })));
                }
                "updated"
            }
            404 if args.dry_run => "create",
            404 => {
                let mut spec = json!({ "app": g.app, "title": g.title });
                if !g.addresses.is_empty() {
                    spec["xxl_addresses"] = json!(g.addresses);
                }
                let (status, out) = api
                    .call(reqwest::Method::POST, "/api/v1/groups", Some(spec))
                    .await?;
                if status != 201 {
                    return Ok((status, json!({ "group": g.app, "error": out })));
                }
                "created"
            }
            other => anyhow::bail!("reading group {}: status {other}", g.app),
        };
        group_actions.push(json!({ "xxl_id": g.id, "app": g.app, "action": action }));
    }
    report.insert("groups".into(), Value::Array(group_actions));

    // Jobs, without children first: a child may come later in the list.
    let mut ids: HashMap<i64, u64> = HashMap::new();
    let mut job_actions = Vec::new();
    for m in &mapped {
        let reference = import_ref(&source, m.xxl.id);
        let current = existing.get(&reference);
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
                let (status, out) = api
                    .call(
                        reqwest::Method::POST,
                        "/api/v1/jobs",
                        Some(spec_json(&m.spec)),
                    )
                    .await?;
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

fn import_ref(source: &str, xxl_id: i64) -> String {
    format!("xxl-job/{source}#{xxl_id}")
}

/// The names of `table`'s columns in the current database.
async fn columns(conn: &mut MySqlConnection, table: &str) -> anyhow::Result<Vec<String>> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT CAST(column_name AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = ?",
    )
    .bind(table)
    .fetch_all(&mut *conn)
    .await?;
    if names.is_empty() {
        anyhow::bail!("no table {table} in this database: is it XXL-JOB's?");
    }
    Ok(names)
}

/// `new` if the table has it, else `old` (XXL-JOB renamed a few columns).
fn either(columns: &[String], new: &str, old: &str) -> anyhow::Result<String> {
    [new, old]
        .into_iter()
        .find(|c| columns.iter().any(|have| have == c))
        .map(str::to_owned)
        .with_context(|| format!("neither {new} nor {old} is a column"))
}

async fn read_groups(conn: &mut MySqlConnection) -> anyhow::Result<Vec<XxlGroup>> {
    let cols = columns(conn, "xxl_job_group").await?;
    let title = either(&cols, "name", "title")?;
    let sql = format!(
        "SELECT id, CAST(app_name AS CHAR) AS app, CAST({title} AS CHAR) AS title, \
         address_type, CAST(address_list AS CHAR) AS address_list \
         FROM xxl_job_group ORDER BY id"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| {
            let manual = int(r, "address_type")? == 1;
            let list = text(r, "address_list")?;
            Ok(XxlGroup {
                id: int(r, "id")?,
                app: text(r, "app")?,
                title: text(r, "title")?,
                addresses: if manual {
                    list.split(',')
                        .map(str::trim)
                        .filter(|a| !a.is_empty())
                        .map(str::to_owned)
                        .collect()
                } else {
                    Vec::new()
                },
            })
        })
        .collect()
}

/// The groups with their manual addresses as rondo keeps them; an address
/// rondo refuses (or too many) is a problem naming `address_list`.
fn manual_addresses(groups: Vec<XxlGroup>) -> (Vec<XxlGroup>, Vec<Problem>) {
    let mut problems = Vec::new();
    let groups = groups
        .into_iter()
        .map(|mut g| {
            let mut kept: Vec<String> = Vec::new();
            for address in &g.addresses {
                // XXL-JOB before 2.1 listed `ip:port` (its own RPC); 2.1
                // on, the executors' `http://ip:port/`.
                let url = if address.contains("://") {
                    address.clone()
                } else {
                    format!("http://{address}")
                };
                match rondo_model::model::normalize_xxl_address(&url) {
                    Ok(a) if !kept.contains(&a) => kept.push(a),
                    Ok(_) => {}
                    Err(why) => problems.push(Problem {
                        table: "xxl_job_group",
                        id: g.id,
                        column: "address_list".into(),
                        reason: format!("{address:?}: {why}"),
                    }),
                }
            }
            if kept.len() > rondo_model::model::MAX_XXL_ADDRESSES {
                problems.push(Problem {
                    table: "xxl_job_group",
                    id: g.id,
                    column: "address_list".into(),
                    reason: format!(
                        "{} addresses; rondo keeps at most {}",
                        kept.len(),
                        rondo_model::model::MAX_XXL_ADDRESSES
                    ),
                });
            }
            g.addresses = kept;
            g
        })
        .collect();
    (groups, problems)
}

async fn read_jobs(conn: &mut MySqlConnection) -> anyhow::Result<Vec<XxlJob>> {
    let cols = columns(conn, "xxl_job_info").await?;
    let desc = either(&cols, "name", "job_desc")?;
    // Before 2.3, XXL-JOB had only cron (`job_cron`) and no misfire choice.
    let (schedule_type, schedule_conf, misfire) = if cols.iter().any(|c| c == "schedule_type") {
        ("schedule_type", "schedule_conf", "misfire_strategy")
    } else {
        ("'CRON'", "job_cron", "'DO_NOTHING'")
    };
    let sql = format!(
        "SELECT id, job_group, CAST({desc} AS CHAR) AS job_desc, \
         CAST(alarm_email AS CHAR) AS alarm_email, CAST({schedule_type} AS CHAR) AS schedule_type, \
         CAST({schedule_conf} AS CHAR) AS schedule_conf, CAST({misfire} AS CHAR) AS misfire_strategy, \
         CAST(executor_route_strategy AS CHAR) AS executor_route_strategy, \
         CAST(executor_handler AS CHAR) AS executor_handler, CAST(executor_param AS CHAR) AS executor_param, \
         CAST(executor_block_strategy AS CHAR) AS executor_block_strategy, \
         executor_timeout, executor_fail_retry_count, CAST(glue_type AS CHAR) AS glue_type, \
         CAST(glue_source AS CHAR) AS glue_source, CAST(glue_remark AS CHAR) AS glue_remark, \
         CAST(child_jobid AS CHAR) AS child_jobid, trigger_status, trigger_next_time \
         FROM xxl_job_info ORDER BY id"
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await?;
    rows.iter()
        .map(|r| {
            Ok(XxlJob {
                id: int(r, "id")?,
                group: int(r, "job_group")?,
                desc: text(r, "job_desc")?,
                alarm_email: text(r, "alarm_email")?,
                schedule_type: text(r, "schedule_type")?,
                schedule_conf: text(r, "schedule_conf")?,
                misfire: text(r, "misfire_strategy")?,
                routing: text(r, "executor_route_strategy")?,
                handler: text(r, "executor_handler")?,
                params: text(r, "executor_param")?,
                block: text(r, "executor_block_strategy")?,
                timeout_s: int(r, "executor_timeout")?,
                retries: int(r, "executor_fail_retry_count")?,
                glue_type: text(r, "glue_type")?,
                glue_source: text(r, "glue_source")?,
                glue_remark: text(r, "glue_remark")?,
                children: text(r, "child_jobid")?,
                running: int(r, "trigger_status")? == 1,
                next_ms: int(r, "trigger_next_time")?,
            })
        })
        .collect()
}

/// An integer column of any width, NULL as 0.
fn int(row: &MySqlRow, column: &str) -> anyhow::Result<i64> {
    let value = row
        .try_get::<Option<i64>, _>(column)
        .or_else(|_| {
            row.try_get::<Option<i32>, _>(column)
                .map(|v| v.map(i64::from))
        })
        .or_else(|_| {
            row.try_get::<Option<i8>, _>(column)
                .map(|v| v.map(i64::from))
        })
        .or_else(|_| {
            row.try_get::<Option<i16>, _>(column)
                .map(|v| v.map(i64::from))
        })
        .with_context(|| format!("reading column {column}"))?;
    Ok(value.unwrap_or(0))
}

/// A text column, NULL as "".
fn text(row: &MySqlRow, column: &str) -> anyhow::Result<String> {
    Ok(row
        .try_get::<Option<String>, _>(column)
        .with_context(|| format!("reading column {column}"))?
        .unwrap_or_default())
}

/// Maps every job row, or says why it does not map.
fn map_jobs(
    groups: &[XxlGroup],
    jobs: &[XxlJob],
    zone: Option<&str>,
    source: &str,
) -> (Vec<Mapped>, Vec<Problem>) {
    let apps: HashMap<i64, &str> = groups.iter().map(|g| (g.id, g.app.as_str())).collect();
    let known: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    let mut mapped = Vec::new();
    let mut problems = Vec::new();
    for job in jobs {
        let problem = |column: &str, reason: String| Problem {
            table: "xxl_job_info",
            id: job.id,
            column: column.to_owned(),
            reason,
        };
        match map_job(job, &apps, &known, zone, source) {
            Ok(m) => mapped.push(m),
            Err((column, reason)) => problems.push(problem(column, reason)),
        }
    }
    let (mut keep, bad_graph) = check_child_graph(mapped);
    problems.extend(bad_graph);
    // A child that did not map makes its parent unmappable too: importing
    // the parent without it would change what the parent does (and so on
    // up the chain).
    loop {
        let good: Vec<i64> = keep.iter().map(|m| m.xxl.id).collect();
        let (ok, dropped): (Vec<Mapped>, Vec<Mapped>) = keep
            .into_iter()
            .partition(|m| m.children.iter().all(|c| good.contains(c)));
        keep = ok;
        if dropped.is_empty() {
            break;
        }
        for m in dropped {
            let missing: Vec<String> = m
                .children
                .iter()
                .filter(|c| !good.contains(c))
                .map(i64::to_string)
                .collect();
            problems.push(Problem {
                table: "xxl_job_info",
                id: m.xxl.id,
                column: "child_jobid".into(),
                reason: format!("child job {} does not map (see its row)", missing.join(",")),
            });
        }
    }
    problems.sort_by_key(|p| p.id);
    (keep, problems)
}

/// What the API would refuse of the child jobs only when the links are
/// written (after every job exists): a job its own child, a child named
/// twice, too many, or a cycle (XXL-JOB allows them; rondo would trigger
/// forever). Found here, so the import stops before writing anything.
fn check_child_graph(mapped: Vec<Mapped>) -> (Vec<Mapped>, Vec<Problem>) {
    let children: HashMap<i64, Vec<i64>> = mapped
        .iter()
        .map(|m| (m.xxl.id, m.children.clone()))
        .collect();
    let mut problems = Vec::new();
    for m in &mapped {
        let problem = |reason: String| Problem {
            table: "xxl_job_info",
            id: m.xxl.id,
            column: "child_jobid".into(),
            reason,
        };
        let kids = &m.children;
        if kids.contains(&m.xxl.id) {
            problems.push(problem("names the job itself".into()));
        } else if kids.len() > rondo_model::model::MAX_CHILD_JOBS {
            problems.push(problem(format!(
                "names {} jobs; rondo allows {}",
                kids.len(),
                rondo_model::model::MAX_CHILD_JOBS
            )));
        } else if let Some(twice) = kids
            .iter()
            .enumerate()
            .find_map(|(i, c)| kids[..i].contains(c).then_some(c))
        {
            problems.push(problem(format!("names job {twice} twice")));
        } else if reaches(&children, m.xxl.id) {
            problems.push(problem(
                "is part of a cycle of child jobs, which would trigger forever".into(),
            ));
        }
    }
    let bad: Vec<i64> = problems.iter().map(|p| p.id).collect();
    let keep = mapped
        .into_iter()
        .filter(|m| !bad.contains(&m.xxl.id))
        .collect();
    (keep, problems)
}

/// Whether `start` reaches itself through child links.
fn reaches(children: &HashMap<i64, Vec<i64>>, start: i64) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<i64> = children.get(&start).cloned().unwrap_or_default();
    while let Some(at) = stack.pop() {
        if at == start {
            return true;
        }
        if seen.insert(at) {
            stack.extend(children.get(&at).into_iter().flatten().copied());
        }
    }
    false
}

/// XXL-JOB column → the reason it does not map.
type Unmapped = (&'static str, String);

fn map_job(
    job: &XxlJob,
    apps: &HashMap<i64, &str>,
    known: &[i64],
    zone: Option<&str>,
    source: &str,
) -> Result<Mapped, Unmapped> {
    let app = apps.get(&job.group).ok_or_else(|| {
        (
            "job_group",
            format!("no xxl_job_group with id {}", job.group),
        )
    })?;
    let glue = match job.glue_type.as_str() {
        "" | "BEAN" => None,
        "GLUE_PYTHON2" => {
            return Err((
                "glue_type",
                "GLUE_PYTHON2 runs Python 2, which rondo's executors do not: port the script to Python 3 and set GLUE_PYTHON".into(),
            ));
        }
        other => Some(other.to_owned()),
    };
    let children: Vec<i64> = job
        .children
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            c.parse::<i64>()
                .map_err(|_| ("child_jobid", format!("{c:?} is not a job id")))
        })
        .collect::<Result<_, _>>()?;
    if let Some(missing) = children.iter().find(|c| !known.contains(c)) {
        return Err((
            "child_jobid",
            format!("names job {missing}, which is not in xxl_job_info"),
        ));
    }
    let number = |column: &'static str, value: i64| {
        u32::try_from(value.max(0)).map_err(|_| (column, format!("{value} is too large")))
    };
    let spec = JobSpec {
        group: Some((*app).to_owned()),
        description: Some(job.desc.clone()),
        schedule_type: Some(if job.schedule_type.is_empty() {
            "NONE".to_owned()
        } else {
            job.schedule_type.clone()
        }),
        schedule_conf: Some(job.schedule_conf.clone()),
        zone: zone.map(str::to_owned),
        misfire: Some(or(&job.misfire, "DO_NOTHING")),
        routing: Some(or(&job.routing, "FIRST")),
        block: Some(or(&job.block, "SERIAL_EXECUTION")),
        handler: glue.is_none().then(|| job.handler.clone()),
        params: Some(job.params.clone()),
        timeout_s: Some(number("executor_timeout", job.timeout_s)?),
        retries: Some(number("executor_fail_retry_count", job.retries)?),
        alarm_email: Some(job.alarm_email.clone()),
        // BEAN said out loud: a job XXL-JOB moved from a script back to a
        // handler must stop being a script here too.
        glue_type: Some(glue.clone().unwrap_or_else(|| "BEAN".to_owned())),
        glue_source: glue.as_ref().map(|_| job.glue_source.clone()),
        glue_remark: glue.as_ref().map(|_| job.glue_remark.clone()),
        import_ref: Some(import_ref(source, job.id)),
        enabled: Some(job.running),
        ..JobSpec::default()
    };
    // The model's own validation, with XXL-JOB's column names.
    if let Err(e) = spec.clone().validate(1, 0, None) {
        let field = e.field.as_deref().unwrap_or("");
        return Err((xxl_column(field), e.message));
    }
    Ok(Mapped {
        xxl: job.clone(),
        spec,
        children,
    })
}

fn or(value: &str, default: &str) -> String {
    if value.is_empty() { default } else { value }.to_owned()
}

/// The XXL-JOB column a rondo field comes from.
fn xxl_column(field: &str) -> &'static str {
    match field {
        "group" => "job_group",
        "description" => "job_desc",
        "schedule_type" => "schedule_type",
        "schedule_conf" => "schedule_conf",
        "zone" => "--zone",
        "misfire" => "misfire_strategy",
        "routing" => "executor_route_strategy",
        "block" => "executor_block_strategy",
        "handler" => "executor_handler",
        "params" => "executor_param",
        "timeout_s" => "executor_timeout",
        "retries" => "executor_fail_retry_count",
        "alarm_email" => "alarm_email",
        "glue_type" => "glue_type",
        "glue_source" => "glue_source",
        "glue_remark" => "glue_remark",
        _ => "row",
    }
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

/// Every job the API shows that an earlier import of `source` made, by
/// `import_ref`.
async fn existing_jobs(api: &mut Api, source: &str) -> anyhow::Result<BTreeMap<String, Value>> {
    let prefix = format!("xxl-job/{source}#");
    let mut found = BTreeMap::new();
    let mut offset = 0;
    loop {
        let (status, page) = api
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/jobs?limit=1000&offset={offset}"),
                None,
            )
            .await?;
        if status != 200 {
            anyhow::bail!("listing jobs: status {status}: {page}");
        }
        let items = page["items"].as_array().cloned().unwrap_or_default();
        for job in &items {
            if let Some(r) = job["import_ref"]
                .as_str()
                .filter(|r| r.starts_with(&prefix))
            {
                found.insert(r.to_owned(), job.clone());
            }
        }
        offset += items.len();
        if items.is_empty() || offset as u64 >= page["total"].as_u64().unwrap_or(0) {
            return Ok(found);
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn xxl(id: i64) -> XxlJob {
        XxlJob {
            id,
            group: 1,
            desc: format!("job {id}"),
            schedule_type: "CRON".into(),
            schedule_conf: "0 0 2 * * ?".into(),
            misfire: "DO_NOTHING".into(),
            routing: "FIRST".into(),
            handler: "demoJobHandler".into(),
            block: "SERIAL_EXECUTION".into(),
            glue_type: "BEAN".into(),
            running: true,
            ..XxlJob::default()
        }
    }

    fn groups() -> Vec<XxlGroup> {
        vec![XxlGroup {
            id: 1,
            app: "xxl-job-executor-sample".into(),
            title: "sample".into(),
            addresses: Vec::new(),
        }]
    }

    #[test]
    fn rows_that_do_not_map_name_the_xxl_column_and_take_their_parents_along() {
        let mut groovy = xxl(2);
        groovy.glue_type = "GLUE_BASIC".into();
        let mut py2 = xxl(3);
        py2.glue_type = "GLUE_PYTHON2".into();
        let mut cron = xxl(4);
        cron.schedule_conf = "0 0 25 * * ?".into();
        let mut parent = xxl(5);
        parent.children = "2".into();
        let mut orphan = xxl(6);
        orphan.group = 9;
        let mut ok = xxl(7);
        ok.children = "1".into();
        let jobs = [xxl(1), groovy, py2, cron, parent, orphan, ok];
        let (mapped, problems) = map_jobs(&groups(), &jobs, Some("Asia/Shanghai"), "xxl");
        let ids: Vec<i64> = mapped.iter().map(|m| m.xxl.id).collect();
        assert_eq!(ids, [1, 7]);
        let columns: Vec<(i64, &str)> =
            problems.iter().map(|p| (p.id, p.column.as_str())).collect();
        assert_eq!(
            columns,
            [
                (2, "glue_type"),
                (3, "glue_type"),
                (4, "schedule_conf"),
                (5, "child_jobid"),
                (6, "job_group")
            ]
        );
        assert_eq!(mapped[1].children, [1]);
        assert_eq!(mapped[0].spec.import_ref.as_deref(), Some("xxl-job/xxl#1"));

        let mut a = xxl(1);
        a.children = "2".into();
        let mut b = xxl(2);
        b.children = "1".into();
        let mut own = xxl(3);
        own.children = "3".into();
        let (mapped, problems) = map_jobs(&groups(), &[a, b, own, xxl(4)], None, "xxl");
        assert_eq!(mapped.iter().map(|m| m.xxl.id).collect::<Vec<_>>(), [4]);
        let reasons: Vec<(i64, &str)> =
            problems.iter().map(|p| (p.id, p.column.as_str())).collect();
        assert_eq!(
            reasons,
            [(1, "child_jobid"), (2, "child_jobid"), (3, "child_jobid")]
        );
    }

    #[test]
    fn groovy_jobs_map_for_xxl_jobs_own_executors() {
        let mut groovy = xxl(1);
        groovy.glue_type = "GLUE_GROOVY".into();
        groovy.glue_source = "class DemoGlueJobHandler {}".into();
        let (mapped, problems) = map_jobs(&groups(), &[groovy], None, "xxl");
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(mapped[0].spec.glue_type.as_deref(), Some("GLUE_GROOVY"));
    }

    #[test]
    fn manual_groups_keep_their_addresses_and_bad_ones_are_problems() {
        let manual = XxlGroup {
            addresses: vec![
                "http://10.0.0.5:9999/".into(),
                "http://10.0.0.6:9999".into(),
                "http://10.0.0.6:9999/".into(),
                "10.0.0.7:9999".into(),
                "ftp://10.0.0.8/".into(),
            ],
            ..groups().remove(0)
        };
        let (groups, problems) = manual_addresses(vec![manual]);
        assert_eq!(
            groups[0].addresses,
            [
                "http://10.0.0.5:9999/",
                "http://10.0.0.6:9999/",
                "http://10.0.0.7:9999/"
            ],
            "an address of XXL-JOB before 2.1 (ip:port) is read as http://"
        );
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].column, "address_list");
        assert!(problems[0].reason.contains("ftp://10.0.0.8/"));
    }
}
