//! XXL-JOB's tables as the importer reads them: `xxl_job_group` and
//! `xxl_job_info` in both column generations, and the rows that do not
//! map (a [`Problem`] names the table, the id and the column).

use anyhow::Context;
use serde_json::{Value, json};
use sqlx::mysql::MySqlRow;
use sqlx::{MySqlConnection, Row};

use super::layout::{Layout, columns};

/// A group as XXL-JOB has it.
#[derive(Debug, Clone)]
pub(super) struct XxlGroup {
    pub(super) id: i64,
    pub(super) app: String,
    pub(super) title: String,
    /// Its executors' addresses when fed by hand (`address_type = 1`),
    /// as rondo keeps them; empty for a group its executors register in.
    pub(super) addresses: Vec<String>,
    /// Its executors' access token (XXL-JOB 3.5's `access_token`); empty
    /// before 3.5 (one token in the admin's properties) or when unset.
    pub(super) access_token: String,
}

/// A job as XXL-JOB has it (the columns the importer maps).
#[derive(Debug, Clone, Default)]
pub(super) struct XxlJob {
    pub(super) id: i64,
    pub(super) group: i64,
    pub(super) desc: String,
    pub(super) author: String,
    pub(super) alarm_email: String,
    pub(super) schedule_type: String,
    pub(super) schedule_conf: String,
    pub(super) misfire: String,
    pub(super) routing: String,
    pub(super) handler: String,
    pub(super) params: String,
    pub(super) block: String,
    pub(super) timeout_s: i64,
    pub(super) retries: i64,
    pub(super) glue_type: String,
    pub(super) glue_source: String,
    pub(super) glue_remark: String,
    pub(super) children: String,
    pub(super) running: bool,
    pub(super) next_ms: i64,
}

/// A row that does not map, and why.
#[derive(Debug, Clone)]
pub(super) struct Problem {
    pub(super) table: &'static str,
    pub(super) id: i64,
    pub(super) column: String,
    pub(super) reason: String,
}

impl Problem {
    pub(super) fn to_json(&self) -> Value {
        json!({ "table": self.table, "id": self.id, "column": self.column, "reason": self.reason })
    }
}

/// `new` if the table has it, else `old` (XXL-JOB renamed a few columns).
pub(super) fn either(columns: &[String], new: &str, old: &str) -> anyhow::Result<String> {
    [new, old]
        .into_iter()
        .find(|c| columns.iter().any(|have| have == c))
        .map(str::to_owned)
        .with_context(|| format!("neither {new} nor {old} is a column"))
}

pub(super) async fn read_groups(conn: &mut MySqlConnection) -> anyhow::Result<Vec<XxlGroup>> {
    let cols = columns(conn, "xxl_job_group").await?;
    let title = either(&cols, "name", "title")?;
    let token = if cols.iter().any(|c| c == "access_token") {
        "CAST(access_token AS CHAR)"
    } else {
        "''"
    };
    let sql = format!(
        "SELECT id, CAST(app_name AS CHAR) AS app, CAST({title} AS CHAR) AS title, \
         address_type, CAST(address_list AS CHAR) AS address_list, \
         {token} AS access_token \
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
                access_token: text(r, "access_token")?.trim().to_owned(),
            })
        })
        .collect()
}

/// A user of XXL-JOB's console (`xxl_job_user`).
#[derive(Debug, Clone)]
pub(super) struct XxlUser {
    pub(super) id: i64,
    pub(super) username: String,
    /// The unsalted hash of the password, as XXL-JOB keeps it: MD5 to
    /// 3.1, SHA-256 from 3.2 (hex).
    pub(super) hash: String,
    pub(super) admin: bool,
    /// The XXL-JOB group ids granted (`permission`, comma-separated).
    pub(super) groups: Vec<i64>,
}

/// XXL-JOB's users; none when the database has no `xxl_job_user` (a
/// version without a console of its own users).
pub(super) async fn read_users(conn: &mut MySqlConnection) -> anyhow::Result<Vec<XxlUser>> {
    let exists: Option<String> = sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() AND table_name = 'xxl_job_user'",
    )
    .fetch_optional(&mut *conn)
    .await?;
    if exists.is_none() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(
        "SELECT id, CAST(username AS CHAR) AS username, CAST(password AS CHAR) AS password, \
         role, CAST(permission AS CHAR) AS permission FROM xxl_job_user ORDER BY id",
    )
    .fetch_all(&mut *conn)
    .await
    .context("reading xxl_job_user")?;
    rows.iter()
        .map(|r| {
            Ok(XxlUser {
                id: int(r, "id")?,
                username: text(r, "username")?,
                hash: text(r, "password")?,
                admin: int(r, "role")? == 1,
                groups: text(r, "permission")?
                    .split(',')
                    .filter_map(|g| g.trim().parse().ok())
                    .collect(),
            })
        })
        .collect()
}

/// The groups with their manual addresses as rondo keeps them; an address
/// rondo refuses (or too many) is a problem naming `address_list`.
pub(super) fn manual_addresses(groups: Vec<XxlGroup>) -> (Vec<XxlGroup>, Vec<Problem>) {
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

pub(super) async fn read_jobs(
    conn: &mut MySqlConnection,
    layout: Layout,
) -> anyhow::Result<Vec<XxlJob>> {
    let desc = layout.desc_column();
    // Before 2.3, XXL-JOB had only cron (`job_cron`) and no misfire choice:
    // a fire missed was skipped.
    let (schedule_type, schedule_conf, misfire) = if layout.typed() {
        ("schedule_type", "schedule_conf", "misfire_strategy")
    } else {
        ("'CRON'", "job_cron", "'DO_NOTHING'")
    };
    let sql = format!(
        "SELECT id, job_group, CAST({desc} AS CHAR) AS job_desc, CAST(author AS CHAR) AS author, \
         CAST(alarm_email AS CHAR) AS alarm_email, CAST({schedule_type} AS CHAR) AS schedule_type, \
         CAST({schedule_conf} AS CHAR) AS schedule_conf, CAST({misfire} AS CHAR) AS misfire_strategy, \
         CAST(executor_route_strategy AS CHAR) AS executor_route_strategy, \
         CAST(executor_handler AS CHAR) AS executor_handler, CAST(executor_param AS CHAR) AS executor_param, \
         CAST(executor_block_strategy AS CHAR) AS executor_block_strategy, \
         executor_timeout, executor_fail_retry_count, CAST(glue_type AS CHAR) AS glue_type, \
         CAST(glue_source AS CHAR) AS glue_source, CAST(glue_remark AS CHAR) AS glue_remark, \
         CAST(child_jobid AS CHAR) AS child_jobid, trigger_status, trigger_next_time \
         FROM xxl_job_info ORDER BY id",
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
                author: text(r, "author")?,
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

/// A time as XXL-JOB's tables keep it: a `DATETIME` as written, in the
/// zone of XXL-JOB's admin (its JVM's), or a `TIMESTAMP` (2.1's script
/// history) as its instant, `@<seconds>`; empty when NULL.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct XxlTime(pub(super) String);

impl XxlTime {
    /// The instant (ms), a `DATETIME` read in `zone`; None when NULL or
    /// not a time (a local time the zone skips is taken an hour on).
    pub(super) fn to_ms(&self, zone: chrono_tz::Tz) -> Option<i64> {
        use chrono::TimeZone;
        if let Some(seconds) = self.0.strip_prefix('@') {
            return seconds.parse::<i64>().ok().map(|s| s * 1000);
        }
        let local = chrono::NaiveDateTime::parse_from_str(&self.0, "%Y-%m-%d %H:%M:%S").ok()?;
        let instant = match zone.from_local_datetime(&local) {
            chrono::LocalResult::Single(t) => t,
            chrono::LocalResult::Ambiguous(first, _) => first,
            chrono::LocalResult::None => zone
                .from_local_datetime(&(local + chrono::Duration::hours(1)))
                .earliest()?,
        };
        Some(instant.timestamp_millis())
    }
}

/// The SQL that reads `table.column` as an [`XxlTime`] (the column's type
/// decides how).
async fn time_sql(conn: &mut MySqlConnection, table: &str, column: &str) -> anyhow::Result<String> {
    let kind: Option<String> = sqlx::query_scalar(
        "SELECT CAST(data_type AS CHAR) FROM information_schema.columns \
         WHERE table_schema = DATABASE() AND table_name = ? AND column_name = ?",
    )
    .bind(table)
    .bind(column)
    .fetch_optional(&mut *conn)
    .await?;
    Ok(match kind.as_deref() {
        Some("timestamp") => {
            format!("CAST(CONCAT('@', CAST(UNIX_TIMESTAMP({column}) AS SIGNED)) AS CHAR)")
        }
        Some(_) => format!("CAST(DATE_FORMAT({column}, '%Y-%m-%d %H:%i:%s') AS CHAR)"),
        None => anyhow::bail!("{table} has no column {column}"),
    })
}

/// One kept version of a job's script (`xxl_job_logglue`): XXL-JOB adds
/// one at each save of a script in its editor (the newest is the job's
/// current script), and keeps the newest 30.
#[derive(Debug, Clone)]
pub(super) struct XxlGlue {
    pub(super) glue_type: String,
    pub(super) source: String,
    pub(super) remark: String,
    pub(super) saved: XxlTime,
}

/// Each job's kept script versions, oldest first, by XXL-JOB job id.
pub(super) async fn read_glue_history(
    conn: &mut MySqlConnection,
) -> anyhow::Result<std::collections::HashMap<i64, Vec<XxlGlue>>> {
    let sql = format!(
        "SELECT job_id, CAST(glue_type AS CHAR) AS glue_type, \
         CAST(glue_source AS CHAR) AS glue_source, CAST(glue_remark AS CHAR) AS glue_remark, \
         {saved} AS saved FROM xxl_job_logglue ORDER BY job_id, id",
        saved = time_sql(conn, "xxl_job_logglue", "add_time").await?
    );
    let rows = sqlx::query(sqlx::AssertSqlSafe(sql))
        .fetch_all(&mut *conn)
        .await
        .context("reading xxl_job_logglue")?;
    let mut history: std::collections::HashMap<i64, Vec<XxlGlue>> = Default::default();
    for r in &rows {
        history.entry(int(r, "job_id")?).or_default().push(XxlGlue {
            glue_type: text(r, "glue_type")?,
            source: text(r, "glue_source")?,
            remark: text(r, "glue_remark")?,
            saved: XxlTime(text(r, "saved")?),
        });
    }
    Ok(history)
}

/// An integer column of any width, NULL as 0.
pub(super) fn int(row: &MySqlRow, column: &str) -> anyhow::Result<i64> {
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
pub(super) fn text(row: &MySqlRow, column: &str) -> anyhow::Result<String> {
    Ok(row
        .try_get::<Option<String>, _>(column)
        .with_context(|| format!("reading column {column}"))?
        .unwrap_or_default())
}
