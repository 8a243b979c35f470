//! The audit log (admins only): who changed or ran what, when and from
//! where, newest first, by filter.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::{Extension, Json};
use rondo_core::Error;
use rondo_core::auth::Access;
use rondo_history::auth::AuditFilter;
use serde_json::{Value, json};

use super::auth::Caller;
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

/// `GET /api/v1/audit?user=&action=&target=&group=&since_ms=&until_ms=&limit=`.
pub(super) async fn audit_log(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
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
    Ok(Json(
        json!({ "items": s.history.audit_log(&filter).await? }),
    ))
}
