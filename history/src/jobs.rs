//! The `job` and `executor_group` rows, mapped both ways in one place: the
//! persistence worker writes them from events ([`crate::upsert`] binds
//! through [`bind_job`]), and the scheduler reads them back to rebuild an
//! empty Redis ([`decode_job`], [`crate::History::jobs_after`]).
//!
//! Enums are stored by their XXL-JOB names, child job ids as a JSON array.
//! A delete is a tombstone row (`deleted = 1`) that readers skip.

use rondo_core::model::{BlockStrategy, GlueType, Group, Job, Misfire, Routing, ScheduleType};
use rondo_core::{Error, ErrorKind};
use sqlx::mysql::MySqlRow;
use sqlx::query_builder::Separated;
use sqlx::{MySql, Row};

/// The `job` columns every statement names, in bind order; `deleted` last.
pub(crate) const JOB_COLUMNS: [&str; 31] = [
    "id",
    "group_app",
    "description",
    "owner",
    "schedule_type",
    "schedule_conf",
    "zone",
    "misfire",
    "misfire_threshold_ms",
    "routing",
    "block_strategy",
    "handler",
    "params",
    "timeout_s",
    "retries",
    "child_jobs",
    "retry_backoff_s",
    "alarm_email",
    "alarm_webhook",
    "alarm_channels",
    "glue_type",
    "glue_source",
    "glue_remark",
    "glue_version",
    "glue_updated_ms",
    "import_ref",
    "secrets",
    "enabled",
    "created_ms",
    "updated_ms",
    "deleted",
];

/// The columns a newer job version overwrites (all but the key and the
/// version columns).
pub(crate) fn job_data_columns() -> Vec<&'static str> {
    JOB_COLUMNS[1..JOB_COLUMNS.len() - 2].to_vec()
}

/// Binds one job row in [`JOB_COLUMNS`] order.
pub(crate) fn bind_job(b: &mut Separated<'_, MySql, &'static str>, job: &Job, deleted: bool) {
    b.push_bind(job.id)
        .push_bind(&job.group)
        .push_bind(&job.description)
        .push_bind(&job.owner)
        .push_bind(job.schedule_type.as_str())
        .push_bind(&job.schedule_conf)
        .push_bind(&job.zone)
        .push_bind(job.misfire.as_str())
        .push_bind(job.misfire_threshold_ms)
        .push_bind(job.routing.as_str())
        .push_bind(job.block.as_str())
        .push_bind(&job.handler)
        .push_bind(&job.params)
        .push_bind(job.timeout_s)
        .push_bind(job.retries)
        .push_bind(child_jobs_json(&job.child_jobs))
        .push_bind(job.retry_backoff_s)
        .push_bind(&job.alarm_email)
        .push_bind(&job.alarm_webhook)
        .push_bind(
            (!job.alarm_channels.is_empty())
                .then(|| serde_json::to_string(&job.alarm_channels).unwrap_or_default()),
        )
        .push_bind(job.glue_type.as_str())
        .push_bind(&job.glue_source)
        .push_bind(&job.glue_remark)
        .push_bind(job.glue_version)
        .push_bind(job.glue_updated_ms)
        .push_bind(&job.import_ref)
        .push_bind(secrets_json(&job.secrets))
        .push_bind(job.enabled)
        .push_bind(job.created_ms)
        .push_bind(job.updated_ms)
        .push_bind(deleted);
}

/// The secrets as stored: a JSON object, or NULL for none.
fn secrets_json(secrets: &std::collections::BTreeMap<String, String>) -> Option<String> {
    (!secrets.is_empty()).then(|| serde_json::to_string(secrets).unwrap_or_default())
}

/// The child job ids as stored: a JSON array.
pub(crate) fn child_jobs_json(ids: &[u64]) -> String {
    serde_json::to_string(ids).unwrap_or_else(|_| "[]".to_owned())
}

/// A `job` row read back, enums still text: [`StoredJob::into_job`] parses
/// them, so a row a newer rondo wrote with an unknown value is refused with
/// the column named instead of guessed.
#[derive(Debug, Clone, Default)]
pub(crate) struct StoredJob {
    pub id: u64,
    pub group: String,
    pub description: String,
    pub owner: String,
    pub schedule_type: String,
    pub schedule_conf: String,
    pub zone: String,
    pub misfire: String,
    pub misfire_threshold_ms: Option<u64>,
    pub routing: String,
    pub block: String,
    pub handler: String,
    pub params: Option<String>,
    pub timeout_s: u32,
    pub retries: u32,
    pub child_jobs: Option<String>,
    pub retry_backoff_s: u32,
    pub alarm_email: String,
    pub alarm_webhook: String,
    pub alarm_channels: Option<String>,
    pub glue_type: String,
    pub glue_source: Option<String>,
    pub glue_remark: String,
    pub glue_version: u32,
    pub glue_updated_ms: i64,
    pub import_ref: String,
    pub secrets: Option<String>,
    pub enabled: i8,
    pub created_ms: i64,
    pub updated_ms: i64,
}

impl StoredJob {
    pub(crate) fn decode(row: &MySqlRow) -> Result<StoredJob, Error> {
        let get = |e: sqlx::Error| Error::internal(format!("job row: {e}"));
        Ok(StoredJob {
            id: row.try_get("id").map_err(get)?,
            group: row.try_get("group_app").map_err(get)?,
            description: row.try_get("description").map_err(get)?,
            owner: row.try_get("owner").map_err(get)?,
            schedule_type: row.try_get("schedule_type").map_err(get)?,
            schedule_conf: row.try_get("schedule_conf").map_err(get)?,
            zone: row.try_get("zone").map_err(get)?,
            misfire: row.try_get("misfire").map_err(get)?,
            misfire_threshold_ms: row.try_get("misfire_threshold_ms").map_err(get)?,
            routing: row.try_get("routing").map_err(get)?,
            block: row.try_get("block_strategy").map_err(get)?,
            handler: row.try_get("handler").map_err(get)?,
            params: row.try_get("params").map_err(get)?,
            timeout_s: row.try_get("timeout_s").map_err(get)?,
            retries: row.try_get("retries").map_err(get)?,
            child_jobs: row.try_get("child_jobs").map_err(get)?,
            retry_backoff_s: row.try_get("retry_backoff_s").map_err(get)?,
            alarm_email: row.try_get("alarm_email").map_err(get)?,
            alarm_webhook: row.try_get("alarm_webhook").map_err(get)?,
            alarm_channels: row.try_get("alarm_channels").map_err(get)?,
            glue_type: row.try_get("glue_type").map_err(get)?,
            glue_source: row.try_get("glue_source").map_err(get)?,
            glue_remark: row.try_get("glue_remark").map_err(get)?,
            glue_version: row.try_get("glue_version").map_err(get)?,
            glue_updated_ms: row.try_get("glue_updated_ms").map_err(get)?,
            import_ref: row.try_get("import_ref").map_err(get)?,
            secrets: row.try_get("secrets").map_err(get)?,
            enabled: row.try_get("enabled").map_err(get)?,
            created_ms: row.try_get("created_ms").map_err(get)?,
            updated_ms: row.try_get("updated_ms").map_err(get)?,
        })
    }

    /// The job, with its enums parsed. The schedule itself is not checked
    /// here, so a job with a cron this rondo no longer accepts is still
    /// read (its caller decides what to do with it).
    pub(crate) fn into_job(self) -> Result<Job, Error> {
        let child_jobs = match self.child_jobs.as_deref().map(str::trim) {
            None | Some("") => Vec::new(),
            Some(text) => serde_json::from_str(text)
                .map_err(|e| Error::invalid("child_jobs", format!("not a JSON id array: {e}")))?,
        };
        Ok(Job {
            id: self.id,
            group: self.group,
            description: self.description,
            owner: self.owner,
            schedule_type: ScheduleType::parse("schedule_type", &self.schedule_type)?,
            schedule_conf: self.schedule_conf,
            zone: if self.zone.is_empty() {
                "UTC".to_owned()
            } else {
                self.zone
            },
            misfire: Misfire::parse("misfire", &self.misfire)?,
            misfire_threshold_ms: self.misfire_threshold_ms,
            routing: Routing::parse("routing", &self.routing)?,
            block: BlockStrategy::parse("block_strategy", &self.block)?,
            handler: self.handler,
            params: self.params.unwrap_or_default(),
            timeout_s: self.timeout_s,
            retries: self.retries,
            child_jobs,
            retry_backoff_s: self.retry_backoff_s,
            alarm_email: self.alarm_email,
            alarm_webhook: self.alarm_webhook,
            alarm_channels: match self.alarm_channels.as_deref().map(str::trim) {
                None | Some("") => Vec::new(),
                Some(text) => serde_json::from_str(text).map_err(|e| {
                    Error::invalid("alarm_channels", format!("not a JSON array of names: {e}"))
                })?,
            },
            glue_type: match self.glue_type.as_str() {
                "" => GlueType::Bean,
                text => GlueType::parse("glue_type", text)?,
            },
            glue_source: self.glue_source.unwrap_or_default(),
            glue_remark: self.glue_remark,
            glue_version: self.glue_version,
            glue_updated_ms: self.glue_updated_ms,
            import_ref: self.import_ref,
            secrets: match self.secrets.as_deref().map(str::trim) {
                None | Some("") => Default::default(),
                Some(text) => serde_json::from_str(text).map_err(|e| {
                    Error::invalid("secrets", format!("not a JSON object of strings: {e}"))
                })?,
            },
            enabled: self.enabled != 0,
            run_until_ms: 0,
            created_ms: self.created_ms,
            updated_ms: self.updated_ms,
        })
    }
}

/// A job row that could not be read back: its id (if that much decoded)
/// and why.
#[derive(Debug, Clone)]
pub struct BadRow {
    pub id: Option<u64>,
    pub error: Error,
}

/// Decodes one `job` row.
pub(crate) fn decode_job(row: &MySqlRow) -> Result<Job, BadRow> {
    StoredJob::decode(row)
        .and_then(StoredJob::into_job)
        .map_err(|error| BadRow {
            id: row.try_get("id").ok(),
            error,
        })
}

/// Decodes one `executor_group` row.
pub(crate) fn decode_group(row: &MySqlRow) -> Result<Group, Error> {
    let get = |e: sqlx::Error| Error::new(ErrorKind::Internal, format!("group row: {e}"));
    let addresses: String = row.try_get("xxl_addresses").map_err(get)?;
    let xxl_addresses = if addresses.is_empty() {
        Vec::new()
    } else {
        serde_json::from_str(&addresses).map_err(|e| {
            Error::new(
                ErrorKind::Internal,
                format!("group row: xxl_addresses: {e}"),
            )
        })?
    };
    let access: String = row.try_get("xxl_access").map_err(get)?;
    let xxl_access = if access.is_empty() {
        rondo_core::model::XxlAccess::default()
    } else {
        serde_json::from_str(&access)
            .map_err(|e| Error::new(ErrorKind::Internal, format!("group row: xxl_access: {e}")))?
    };
    Ok(Group {
        app: row.try_get("app").map_err(get)?,
        title: row.try_get("title").map_err(get)?,
        updated_ms: row.try_get("updated_ms").map_err(get)?,
        xxl_addresses,
        xxl_gateway: row.try_get("xxl_gateway").map_err(get)?,
        xxl_access,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(schedule_type: &str, conf: &str, misfire: &str) -> StoredJob {
        StoredJob {
            id: 7,
            group: "app".into(),
            schedule_type: schedule_type.into(),
            schedule_conf: conf.into(),
            misfire: misfire.into(),
            routing: "FIRST".into(),
            block: "SERIAL_EXECUTION".into(),
            handler: "h".into(),
            enabled: 1,
            child_jobs: Some("[3, 4]".into()),
            ..StoredJob::default()
        }
    }

    #[test]
    fn a_row_becomes_the_job_it_stores() {
        let job = row("CRON", "0 * * * * ?", "FIRE_ONCE_NOW")
            .into_job()
            .expect("valid row");
        assert_eq!(job.child_jobs, vec![3, 4]);
        assert_eq!(job.misfire, Misfire::FireOnceNow);
        assert_eq!(job.params, "");
        assert!(job.enabled);
    }

    #[test]
    fn rows_with_unknown_enums_or_bad_children_are_refused_naming_the_column() {
        let e = row("CRON", "", "LATER").into_job().unwrap_err();
        assert_eq!(e.field.as_deref(), Some("misfire"));
        let mut bad = row("CRON", "0 * * * * ?", "DO_NOTHING");
        bad.child_jobs = Some("3,4".into());
        assert_eq!(
            bad.into_job().unwrap_err().field.as_deref(),
            Some("child_jobs")
        );
        let mut empty = row("CRON", "0 * * * * ?", "DO_NOTHING");
        empty.child_jobs = None;
        assert_eq!(empty.into_job().unwrap().child_jobs, Vec::<u64>::new());
    }

    #[test]
    fn child_jobs_are_a_json_array() {
        assert_eq!(child_jobs_json(&[]), "[]");
        assert_eq!(child_jobs_json(&[1, 22]), "[1,22]");
    }

    #[test]
    fn the_update_moves_every_data_column_and_no_key_or_version() {
        let data = job_data_columns();
        assert_eq!(data.len(), JOB_COLUMNS.len() - 3);
        assert!(
            !data
                .iter()
                .any(|c| ["id", "updated_ms", "deleted"].contains(c))
        );
    }
}
