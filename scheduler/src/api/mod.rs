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
//! * one file per resource: `channels` (alarm channels), `cluster`, `groups`, `jobs`, `logs` (trigger
//!   logs and kill), `reports` (the daily report and retention), `session`
//!   (sign-in, sign-out, password, console language), `tokens`, `users`,
//!   `audit`.

mod audit;
pub mod auth;
mod channels;
mod clean;
mod cluster;
mod console;
mod doc;
mod gate;
mod groups;
mod input;
mod jobs;
mod logs;
mod metrics;
mod reports;
mod schedules;
mod session;
mod state;
mod tokens;
mod users;

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::middleware::from_fn_with_state;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use rondo_core::Error;
use utoipa::OpenApi;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use auth::Auth;
pub use state::{ApiError, AppState};

/// The routes that need credentials, each with its part of the spec.
fn protected_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(session::me))
        .routes(routes!(session::logout))
        .routes(routes!(session::change_password))
        .routes(routes!(session::change_language))
        .routes(routes!(tokens::list_tokens, tokens::create_token))
        .routes(routes!(tokens::revoke_token))
        .routes(routes!(users::list_users, users::create_user))
        .routes(routes!(
            users::get_user,
            users::update_user,
            users::delete_user
        ))
        .routes(routes!(audit::audit_log))
        .routes(routes!(cluster::cluster_status))
        .routes(routes!(cluster::reset_stats))
        .routes(routes!(channels::list_channels, channels::create_channel))
        .routes(routes!(
            channels::get_channel,
            channels::update_channel,
            channels::delete_channel
        ))
        .routes(routes!(groups::create_group, groups::list_groups))
        .routes(routes!(
            groups::get_group,
            groups::update_group,
            groups::delete_group
        ))
        .routes(routes!(groups::set_xxl_token))
        .routes(routes!(groups::end_xxl_token_rotation))
        .routes(routes!(groups::group_executors))
        .routes(routes!(groups::list_executors))
        .routes(routes!(jobs::create_job, jobs::list::list_jobs))
        .routes(routes!(jobs::get_job, jobs::update_job, jobs::delete_job))
        .routes(routes!(jobs::start_job))
        .routes(routes!(jobs::stop_job))
        .routes(routes!(jobs::trigger::trigger_job))
        .routes(routes!(jobs::trigger::kill_job))
        .routes(routes!(jobs::history::job_history))
        .routes(routes!(jobs::history::restore_job))
        .routes(routes!(jobs::next_fires))
        .routes(routes!(jobs::job_misfires))
        .routes(routes!(jobs::scripts::script_versions))
        .routes(routes!(jobs::scripts::restore_script))
        .routes(routes!(schedules::preview))
        .routes(routes!(logs::job_logs))
        .routes(routes!(logs::search_logs))
        .routes(routes!(logs::trigger_log))
        .routes(routes!(logs::kill_trigger))
        .routes(routes!(clean::clean_logs))
        .routes(routes!(reports::reports))
        .routes(routes!(reports::retention_setting, reports::retention))
}

/// The routes open to anyone.
fn open_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(metrics::healthz))
        .routes(routes!(metrics::ready))
        .routes(routes!(session::login))
}

/// The admin API's OpenAPI 3.1 document, as `/api/v1/openapi.json` serves
/// it (the committed `docs/openapi.json` is this, checked by a test).
pub fn openapi() -> utoipa::openapi::OpenApi {
    OpenApiRouter::with_openapi(doc::ApiDoc::openapi())
        .merge(open_routes())
        .merge(protected_routes())
        .routes(routes!(metrics::metrics))
        .into_openapi()
}

/// The admin API's routes over `state`; tests call it directly. Only
/// `/healthz`, `/readyz`, sign-in and the reference page's sign-in form
/// are open (and `/metrics` with `scheduler.metrics_public`): every other
/// route first goes through [`gate::authenticate`].
pub fn router(state: AppState) -> Router {
    let spec = Arc::new(
        openapi()
            .to_json()
            .expect("the OpenAPI document serializes"),
    );
    let mut protected = protected_routes();
    let mut open = open_routes();
    if state.metrics_public {
        open = open.routes(routes!(metrics::metrics));
    } else {
        protected = protected.routes(routes!(metrics::metrics));
    }
    let (protected, _) = protected.split_for_parts();
    let (open, _) = open.split_for_parts();
    let protected = protected
        .route(
            "/api/v1/openapi.json",
            get(move || {
                let spec = spec.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "application/json")],
                        spec.to_string(),
                    )
                }
            }),
        )
        .route("/api/v1/docs/assets/{file}", get(doc::docs_asset))
        .route_layer(from_fn_with_state(state.clone(), gate::authenticate));
    let open = open
        .route(
            "/api/v1/docs",
            get(|| async { Redirect::permanent("/api/v1/docs/") }),
        )
        .route("/api/v1/docs/", get(doc::docs_page));
    open.merge(protected)
        .merge(console::routes())
        .fallback(|| async {
            ApiError::from(Error::not_found("path", "no such endpoint")).into_response()
        })
        .layer(from_fn_with_state(state.clone(), gate::client_address))
        .layer(from_fn_with_state(state.clone(), gate::security_headers))
        .with_state(state)
}
