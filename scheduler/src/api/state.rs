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
    /// `scheduler.load_ahead_ms`: how far ahead a node may hold fires, so
    /// how long after a stop its claimed fires still run.
    pub load_ahead_ms: i64,
    /// `xxl.address_allow`: the XXL-JOB executor addresses a group may list.
    pub xxl_address_rule: Arc<rondo_core::destination::Destinations>,
    /// `alarm.email_allow`: where a job's `alarm_email` may send.
    pub mail_domains: rondo_core::mail_domains::MailDomains,
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
    /// A 4xx says what was wrong, to anyone. A 5xx's own text (a backend's
    /// error: a table, a host, a query) goes to the log under an incident
    /// id, and the answer names only the id; [`ServerErrorDetail`] carries
    /// the text for `gate::authenticate` to give admins.
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.kind.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if !status.is_server_error() {
            return (status, Json(super::doc::ErrorBody { error: self.0 })).into_response();
        }
        let incident: String = rand::random::<[u8; 6]>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        tracing::warn!(error = %self.0, %incident, "api request failed");
        let shown = Error {
            kind: self.0.kind,
            field: None,
            message: format!("the request failed on the server (incident {incident})"),
        };
        let detail = ServerErrorDetail(Error {
            message: format!("{} (incident {incident})", self.0.message),
            ..self.0
        });
        let mut response = (status, Json(super::doc::ErrorBody { error: shown })).into_response();
        response.extensions_mut().insert(detail);
        response
    }
}

/// A server error's own text, kept out of the answer's body (see
/// [`ApiError::into_response`]).
#[derive(Clone)]
pub(super) struct ServerErrorDetail(pub Error);

impl ServerErrorDetail {
    /// The answer with the error's own text, for an admin.
    pub(super) fn answer(self, status: StatusCode) -> Response {
        (status, Json(super::doc::ErrorBody { error: self.0 })).into_response()
    }
}

pub(super) type ApiResult<T> = Result<T, ApiError>;
