//! The admin HTTP API (JSON): executor groups, jobs, manual triggers, trigger
//! logs, the daily report, log retention and cluster status. Built by
//! [`router`] over an [`AppState`], which tests build and call in-process.
//!
//! Every error is `{"error": {"kind", "field", "message"}}` with a 4xx for
//! bad input (naming the field) and 5xx for unavailable services.
//!
//! # Layout
//!
//! * `state`: [`AppState`] and [`ApiError`] (how an error becomes a
//!   response).
//! * `input`: reading bodies, ids and query numbers, naming the bad field.
//! * one file per resource: `cluster`, `groups`, `jobs`, `logs` (trigger
//!   logs and kill), `reports` (the daily report and retention).

mod cluster;
mod groups;
mod input;
mod jobs;
mod logs;
mod reports;
mod state;

use axum::Router;
use axum::routing::{get, post};
use rondo_core::Error;

pub use state::{ApiError, AppState};

/// The admin API's routes over `state`; tests call it directly.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/v1/cluster", get(cluster::cluster_status))
        .route("/api/v1/cluster/stats/reset", post(cluster::reset_stats))
        .route(
            "/api/v1/groups",
            post(groups::create_group).get(groups::list_groups),
        )
        .route(
            "/api/v1/groups/{app}",
            get(groups::get_group)
                .put(groups::update_group)
                .delete(groups::delete_group),
        )
        .route(
            "/api/v1/groups/{app}/executors",
            get(groups::group_executors),
        )
        .route("/api/v1/jobs", post(jobs::create_job).get(jobs::list_jobs))
        .route(
            "/api/v1/jobs/{id}",
            get(jobs::get_job)
                .put(jobs::update_job)
                .delete(jobs::delete_job),
        )
        .route("/api/v1/jobs/{id}/start", post(jobs::start_job))
        .route("/api/v1/jobs/{id}/stop", post(jobs::stop_job))
        .route("/api/v1/jobs/{id}/trigger", post(jobs::trigger_job))
        .route("/api/v1/jobs/{id}/logs", get(logs::job_logs))
        .route("/api/v1/logs/{trigger_id}", get(logs::trigger_log))
        .route("/api/v1/logs/{trigger_id}/kill", post(logs::kill_trigger))
        .route("/api/v1/reports", get(reports::reports))
        .route("/api/v1/maintenance/retention", post(reports::retention))
        .fallback(|| async { ApiError::from(Error::not_found("path", "no such endpoint")) })
        .with_state(state)
}
