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
//! * `auth`: who is calling (token or session), the caches, throttling,
//!   the first admin; every handler checks its right on the [`auth::Caller`]
//!   and publishes an audit record with each change. `gate`: the
//!   middleware that finds the caller or answers 401/403.
//! * one file per resource: `cluster`, `groups`, `jobs`, `logs` (trigger
//!   logs and kill), `reports` (the daily report and retention), `session`
//!   (sign-in, sign-out, password), `tokens`, `users`, `audit`.

mod audit;
pub mod auth;
mod cluster;
mod gate;
mod groups;
mod input;
mod jobs;
mod logs;
mod metrics;
mod reports;
mod session;
mod state;
mod tokens;
mod users;

use axum::Router;
use axum::middleware::from_fn_with_state;
use axum::routing::{delete, get, post, put};
use rondo_core::Error;

pub use auth::Auth;
pub use state::{ApiError, AppState};

/// The admin API's routes over `state`; tests call it directly. Only
/// `/healthz` and sign-in are open: every other route first goes through
/// [`gate::authenticate`].
pub fn router(state: AppState) -> Router {
    let metrics = get(metrics::metrics);
    let (public_metrics, protected_metrics) = if state.metrics_public {
        (Some(metrics), None)
    } else {
        (None, Some(metrics))
    };
    let mut protected = Router::new()
        .route("/api/v1/auth/me", get(session::me))
        .route("/api/v1/auth/logout", post(session::logout))
        .route("/api/v1/auth/password", put(session::change_password))
        .route(
            "/api/v1/tokens",
            get(tokens::list_tokens).post(tokens::create_token),
        )
        .route("/api/v1/tokens/{id}", delete(tokens::revoke_token))
        .route(
            "/api/v1/users",
            get(users::list_users).post(users::create_user),
        )
        .route(
            "/api/v1/users/{username}",
            get(users::get_user)
                .put(users::update_user)
                .delete(users::delete_user),
        )
        .route("/api/v1/audit", get(audit::audit_log))
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
        .route("/api/v1/maintenance/retention", post(reports::retention));
    if let Some(m) = protected_metrics {
        protected = protected.route("/metrics", m);
    }
    let protected = protected.route_layer(from_fn_with_state(state.clone(), gate::authenticate));
    let mut open = Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/readyz", get(metrics::ready))
        .route("/api/v1/auth/login", post(session::login));
    if let Some(m) = public_metrics {
        open = open.route("/metrics", m);
    }
    open.merge(protected)
        .fallback(|| async { ApiError::from(Error::not_found("path", "no such endpoint")) })
        .layer(from_fn_with_state(state.clone(), gate::client_address))
        .with_state(state)
}
