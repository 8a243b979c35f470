//! The audit log (admins only): who changed or ran what, when and from
//! where, newest first, by filter.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::{Extension, Json};
use rondo_core::Error;
use rondo_core::auth::Access;
use rondo_core::event::AuditRecord;
use rondo_history::auth::AuditFilter;
use serde::Serialize;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::query_usize;
use super::state::{ApiResult, AppState};

fn text(q: &HashMap<String, String>, key: &str) -> Result<Option<String>, Error> {
    match q.get(key) {
        Some(v) if v.len() > 128 => Err(Error::invalid(key, "must be at most 128 characters")),
        Some(v) => Ok(Some(v.clone())),
        None => Ok(None),
    }
}

fn millis(q: &HashMap<String, String>, key: &str) -> Result<Option<i64>, Error> {
    q.get(key)
        .map(|v| {
            v.parse::<i64>().map_err(|_| {
                Error::invalid(
                    key,
                    format!("must be milliseconds since the epoch, got {v:?}"),
                )
            })
        })
        .transpose()
}

/// Audit records.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct AuditPage {
    items: Vec<AuditRecord>,
}

/// The audit log, newest first, by filter (every filter optional; text
/// filters match exactly). Admins, or an admin's read-only token.
#[utoipa::path(get, path = "/api/v1/audit", tag = "audit",
    params(
        ("user" = Option<String>, Query, description = "Who.", max_length = 128),
        ("action" = Option<String>, Query, description = "What, e.g. `job.update`.", max_length = 128),
        ("target" = Option<String>, Query, description = "To what, e.g. `job:7`.", max_length = 128),
        ("group" = Option<String>, Query, description = "The executor group concerned.", max_length = 128),
        ("since_ms" = Option<i64>, Query, description = "From (ms since the epoch)."),
        ("until_ms" = Option<i64>, Query, description = "Until (ms since the epoch)."),
        ("limit" = Option<u32>, Query, description = "How many (default 100).", maximum = 1000),
    ),
    responses((status = 200, description = "Audit records.", body = AuditPage), ApiErrors))]
pub(super) async fn audit_log(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<AuditPage>> {
    caller.require(Access::ReadAdmin, "audit")?;
    let filter = AuditFilter {
        username: text(&q, "user")?,
        action: text(&q, "action")?,
        target: text(&q, "target")?,
        group: text(&q, "group")?,
        since_ms: millis(&q, "since_ms")?,
        until_ms: millis(&q, "until_ms")?,
        limit: query_usize(&q, "limit", 100, 1000)? as u32,
    };
    Ok(Json(AuditPage {
        items: s.history.audit_log(&filter).await?,
    }))
}
