//! Which XXL-JOB wrote the database: its table layouts in use, told apart
//! by the columns of `xxl_job_info` (read from XXL-JOB's DDL of each
//! release).
//!
//! | layout | releases | what sets it apart |
//! | --- | --- | --- |
//! | `2.1-2.2` | 2.1.0 – 2.2.x | `job_cron`: cron only, no misfire choice |
//! | `2.3-3.4` | 2.3.0 – 3.4.x | `schedule_type`, `schedule_conf`, `misfire_strategy` |
//! | `3.5` | after 3.4 | `name` for `job_desc` (and for the group's `title`) |
//!
//! XXL-JOB 2.0 kept its tables under `XXL_JOB_QRTZ_*` and let Quartz
//! schedule them; the importer names it and stops. A database that is not
//! XXL-JOB's, or whose `xxl_job_info` matches none of the layouts (a later
//! release, a fork with columns of its own), is refused with what differs:
//! a column the importer does not know may carry a meaning it would lose.

use std::collections::BTreeSet;

use sqlx::MySqlConnection;

/// A table layout the importer reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Layout {
    Cron21,
    Typed23,
    Named35,
}

/// The columns `xxl_job_info` has in every layout.
const COMMON: [&str; 20] = [
    "id",
    "job_group",
    "add_time",
    "update_time",
    "author",
    "alarm_email",
    "executor_route_strategy",
    "executor_handler",
    "executor_param",
    "executor_block_strategy",
    "executor_timeout",
    "executor_fail_retry_count",
    "glue_type",
    "glue_source",
    "glue_remark",
    "glue_updatetime",
    "child_jobid",
    "trigger_status",
    "trigger_last_time",
    "trigger_next_time",
];

impl Layout {
    const ALL: [Layout; 3] = [Layout::Cron21, Layout::Typed23, Layout::Named35];

    /// The releases that wrote it.
    pub(super) fn releases(self) -> &'static str {
        match self {
            Layout::Cron21 => "2.1-2.2",
            Layout::Typed23 => "2.3-3.4",
            Layout::Named35 => "3.5",
        }
    }

    /// The columns of `xxl_job_info` beside [`COMMON`] (the description is
    /// `job_desc`, or `name` from 3.5).
    fn own(self) -> &'static [&'static str] {
        match self {
            Layout::Cron21 => &["job_cron", "job_desc"],
            Layout::Typed23 => &[
                "schedule_type",
                "schedule_conf",
                "misfire_strategy",
                "job_desc",
            ],
            Layout::Named35 => &["schedule_type", "schedule_conf", "misfire_strategy", "name"],
        }
    }

    fn columns(self) -> BTreeSet<&'static str> {
        COMMON
            .iter()
            .copied()
            .chain(self.own().iter().copied())
            .collect()
    }

    /// `xxl_job_info`'s description column.
    pub(super) fn desc_column(self) -> &'static str {
        match self {
            Layout::Named35 => "name",
            _ => "job_desc",
        }
    }

    /// Whether jobs carry a schedule type and a misfire choice (else
    /// every job is cron, and a misfired fire is skipped).
    pub(super) fn typed(self) -> bool {
        self != Layout::Cron21
    }
}

/// The names of `table`'s columns in the current database.
pub(super) async fn columns(
    conn: &mut MySqlConnection,
    table: &str,
) -> anyhow::Result<Vec<String>> {
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

/// The names of the tables in the current database.
async fn tables(conn: &mut MySqlConnection) -> anyhow::Result<Vec<String>> {
    Ok(sqlx::query_scalar(
        "SELECT CAST(table_name AS CHAR) FROM information_schema.tables \
         WHERE table_schema = DATABASE() ORDER BY table_name",
    )
    .fetch_all(&mut *conn)
    .await?)
}

/// The layout of the current database, or why it is not one the importer
/// reads.
pub(super) async fn detect(conn: &mut MySqlConnection) -> anyhow::Result<Layout> {
    let tables = tables(conn).await?;
    let has = |name: &str| tables.iter().any(|t| t == name);
    if !has("xxl_job_info") || !has("xxl_job_group") {
        if tables
            .iter()
            .any(|t| t.eq_ignore_ascii_case("XXL_JOB_QRTZ_TRIGGER_INFO"))
        {
            anyhow::bail!(
                "this is XXL-JOB 2.0 (tables XXL_JOB_QRTZ_*, scheduled by Quartz): the importer reads \
                 2.1 and later; upgrade XXL-JOB with its 2.1 upgrade script, then import"
            );
        }
        let shown: Vec<&str> = tables.iter().take(10).map(String::as_str).collect();
        anyhow::bail!(
            "not XXL-JOB's database: it has no xxl_job_info and xxl_job_group tables (it has {}{})",
            if shown.is_empty() {
                "no tables".to_owned()
            } else {
                shown.join(", ")
            },
            if tables.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    let found: BTreeSet<String> = columns(conn, "xxl_job_info").await?.into_iter().collect();
    layout_of(&found)
}

/// The layout whose `xxl_job_info` has exactly `found`'s columns.
pub(super) fn layout_of(found: &BTreeSet<String>) -> anyhow::Result<Layout> {
    let differences = |layout: Layout| {
        let want = layout.columns();
        let missing: Vec<&str> = want
            .iter()
            .copied()
            .filter(|c| !found.contains(*c))
            .collect();
        let unknown: Vec<&str> = found
            .iter()
            .map(String::as_str)
            .filter(|c| !want.contains(c))
            .collect();
        (missing, unknown)
    };
    if let Some(layout) = Layout::ALL.into_iter().find(|l| {
        let (missing, unknown) = differences(*l);
        missing.is_empty() && unknown.is_empty()
    }) {
        return Ok(layout);
    }
    let closest = Layout::ALL
        .into_iter()
        .min_by_key(|l| {
            let (missing, unknown) = differences(*l);
            missing.len() + unknown.len()
        })
        .unwrap_or(Layout::Typed23);
    let (missing, unknown) = differences(closest);
    let mut what = Vec::new();
    if !unknown.is_empty() {
        what.push(format!(
            "has columns it does not know: {}",
            unknown.join(", ")
        ));
    }
    if !missing.is_empty() {
        what.push(format!("lacks {}", missing.join(", ")));
    }
    let known: Vec<&str> = Layout::ALL.iter().map(|l| l.releases()).collect();
    anyhow::bail!(
        "an XXL-JOB version the importer does not know: xxl_job_info matches none of the layouts of \
         releases {}; beside {}'s it {}",
        known.join(", "),
        closest.releases(),
        what.join(" and ")
    )
}
