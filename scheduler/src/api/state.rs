//! What every handler holds, and how an error becomes a response.

use std::sync::Arc;

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use rondo_core::Error;
use rondo_dispatcher::{Dispatcher, EventPublisher};
use rondo_history::History;

use crate::cluster::ClusterView;
use crate::leader::claim::Claimer;
use crate::node::Firing;
use crate::store::Store;
use crate::store::triggers::TriggerStore;

/// Everything a request handler needs.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub triggers: TriggerStore,
    pub dispatcher: Arc<Dispatcher>,
    pub events: EventPublisher,
    pub view: ClusterView,
    pub node: String,
    pub history: History,
    pub firing: Arc<Firing>,
    pub claimer: Arc<Claimer>,
    /// `persist.retention_days`, the retention endpoint's default.
    pub retention_days: u32,
    /// `executor.dedupe_ttl_s`: how long a kill of a queued trigger is
    /// remembered.
    pub dedupe_ttl_s: u64,
    /// Sign-in: token and user caches, sessions, throttling.
    pub auth: Arc<super::auth::Auth>,
    /// `scheduler.metrics_public`: `/metrics` needs no credentials.
    pub metrics_public: bool,
    /// The cluster's `zone`: jobs created without one get it.
    pub default_zone: chrono_tz::Tz,
    /// The config's `report_zone`: the days the daily report counts.
    pub report_zone: chrono_tz::Tz,
}

/// An error as the API answers it: `{"error": {"kind", "field", "message"}}`
/// with the kind's status.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl From<rondo_history::Error> for ApiError {
    fn from(e: rondo_history::Error) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.kind.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "api request failed");
        }
        (status, Json(super::doc::ErrorBody { error: self.0 })).into_response()
    }
}

pub(super) type ApiResult<T> = Result<T, ApiError>;
