//! The saved versions of script jobs' scripts (`job_glue`, XXL-JOB's
//! `xxl_job_logglue`): written by the persistence worker from `job.upsert`
//! events (see `upsert`), read here by the API to list and restore them.

use serde::Serialize;
use sqlx::MySqlPool;

use crate::Error;

/// One saved version of a job's script.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, sqlx::FromRow, utoipa::ToSchema)]
pub struct GlueVersion {
    pub version: u32,
    /// `GLUE_SHELL`, `GLUE_PYTHON`, …
    pub glue_type: String,
    pub glue_source: String,
    pub glue_remark: String,
    /// When it was saved (ms).
    pub created_ms: i64,
}

const COLUMNS: &str = "version, glue_type, glue_source, glue_remark, created_ms";

/// The kept versions of job `job_id`'s script, newest first.
pub async fn versions(pool: &MySqlPool, job_id: u64) -> Result<Vec<GlueVersion>, Error> {
    let sql = format!("SELECT {COLUMNS} FROM job_glue WHERE job_id = ? ORDER BY version DESC");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(job_id)
        .fetch_all(pool)
        .await?)
}

/// Version `version` of job `job_id`'s script, if kept.
pub async fn version(
    pool: &MySqlPool,
    job_id: u64,
    version: u32,
) -> Result<Option<GlueVersion>, Error> {
    let sql = format!("SELECT {COLUMNS} FROM job_glue WHERE job_id = ? AND version = ?");
    Ok(sqlx::query_as(sqlx::AssertSqlSafe(sql))
        .bind(job_id)
        .bind(version)
        .fetch_optional(pool)
        .await?)
}
