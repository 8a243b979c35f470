//! API tokens: a caller creates its own (shown once, hashed at rest, with
//! an expiry), lists and revokes them; an admin sees and revokes anyone's.

use std::collections::HashMap;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::{self, Access};
use rondo_core::{Error, clock};
use rondo_history::auth::NewToken;
use rondo_history::auth::TokenRow;
use serde::{Deserialize, Serialize};

use super::auth::{Caller, Via};
use super::doc::ApiErrors;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

/// The longest a token may live, and what it gets when not told.
pub const MAX_TOKEN_DAYS: u32 = 365;
pub const DEFAULT_TOKEN_DAYS: u32 = 90;
const DAY_MS: i64 = 86_400_000;

/// A token to create.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TokenSpec {
    /// What it is for: 1 to 64 characters (trimmed).
    #[schema(min_length = 1, max_length = 64)]
    name: String,
    /// 1 to 365 days (default 90); a token made with a token ends no
    /// later than that one.
    #[schema(minimum = 1, maximum = 365)]
    expires_in_days: Option<u32>,
    /// Only the reading rights of its user (default false).
    #[serde(default)]
    read_only: bool,
}

/// Tokens.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct TokenList {
    items: Vec<TokenRow>,
}

/// A new token: `token` is shown this once (only its hash is kept).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct NewTokenView {
    id: u64,
    /// `rondo_pat_…`: send as `Authorization: Bearer <token>`.
    token: String,
    name: String,
    prefix: String,
    username: String,
    read_only: bool,
    created_ms: i64,
    expires_ms: i64,
}

/// The `{id}` path parameter of a token.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // only describes the path; the handler reads it as text
struct TokenIdParam {
    /// The token's id.
    #[param(minimum = 0)]
    id: i64,
}

/// `GET /api/v1/tokens[?user=]`: the caller's tokens; an admin's sees
/// everyone's, or one user's.
#[utoipa::path(get, path = "/api/v1/tokens", tag = "tokens",
    params(("user" = Option<String>, Query, description = "One user's tokens (admins).", pattern = "^[A-Za-z0-9._@-]{1,64}$")),
    responses((status = 200, description = "Tokens, without their secrets.", body = TokenList), ApiErrors))]
pub(super) async fn list_tokens(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<TokenList>> {
    let user = q.get("user").map(String::as_str);
    if let Some(u) = user {
        auth::check_username("user", u)?;
    }
    let whose = if caller.principal.may(Access::ReadAdmin) {
        user
    } else {
        if user.is_some_and(|u| u != caller.username()) {
            caller.require(Access::ReadAdmin, "user")?;
        }
        Some(caller.username())
    };
    Ok(Json(TokenList {
        items: s.history.tokens(whose).await?,
    }))
}

/// `POST /api/v1/tokens`: a new token for the caller, shown once. Made
/// with a token, it ends no later than that one and is revoked with it.
#[utoipa::path(post, path = "/api/v1/tokens", tag = "tokens",
    request_body = TokenSpec,
    responses((status = 201, description = "The token, shown once.", body = NewTokenView), ApiErrors))]
pub(super) async fn create_token(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<NewTokenView>)> {
    let spec = parse_body::<TokenSpec>(&body)?;
    let name = spec.name.trim();
    if name.is_empty() || name.chars().count() > 64 {
        return Err(Error::invalid("name", "must be 1 to 64 characters").into());
    }
    let days = spec.expires_in_days.unwrap_or(DEFAULT_TOKEN_DAYS);
    if !(1..=MAX_TOKEN_DAYS).contains(&days) {
        let msg = format!("must be between 1 and {MAX_TOKEN_DAYS}");
        return Err(Error::invalid("expires_in_days", msg).into());
    }
    if caller.principal.read_only && !spec.read_only {
        return Err(Error::forbidden(
            "read_only",
            "a read-only token may only create read-only tokens",
        )
        .into());
    }
    let (token, hash) = auth::new_token();
    let prefix = &token[..auth::TOKEN_PREFIX.len() + 6];
    let now = clock::now_ms();
    let (parent_id, parent_end) = match &caller.via {
        Via::Token { id, expires_ms } => (Some(*id), *expires_ms),
        Via::Session { .. } => (None, None),
    };
    let asked = now + i64::from(days) * DAY_MS;
    let expires_ms = parent_end.map_or(asked, |end| asked.min(end));
    let id = s
        .history
        .create_token(&NewToken {
            username: caller.username(),
            name,
            hash: &hash,
            prefix,
            read_only: spec.read_only,
            parent_id,
            created_ms: now,
            expires_ms: Some(expires_ms),
        })
        .await?;
    let detail = format!("name {name:?}, {days} days, read_only {}", spec.read_only);
    s.events
        .publish(&[caller.audit("token.create", format!("token:{id}"), None, Some(detail))])
        .await?;
    Ok((
        StatusCode::CREATED,
        Json(NewTokenView {
            id,
            prefix: prefix.to_owned(),
            token,
            name: name.to_owned(),
            username: caller.username().to_owned(),
            read_only: spec.read_only,
            created_ms: now,
            expires_ms,
        }),
    ))
}

/// `DELETE /api/v1/tokens/{id}`: revokes one of the caller's tokens (an
/// admin: anyone's), and the tokens made with it. A read-only token may
/// revoke its user's: revoking only takes rights away.
#[utoipa::path(delete, path = "/api/v1/tokens/{id}", tag = "tokens",
    params(TokenIdParam),
    responses((status = 204, description = "Revoked, with the tokens made with it."), ApiErrors))]
pub(super) async fn revoke_token(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let id: u64 = id
        .parse()
        .ok()
        .filter(|id| *id <= super::input::MAX_ID)
        .ok_or_else(|| Error::invalid("id", format!("must be a token id, got {id:?}")))?;
    // Anyone's for an admin; a read-only token only its own user's.
    let whose = (!caller.principal.may(Access::Admin)).then(|| caller.username());
    if !s.history.revoke_token(id, whose, clock::now_ms()).await? {
        return Err(Error::not_found("id", format!("no token {id} of yours to revoke")).into());
    }
    s.auth.forget();
    s.events
        .publish(&[caller.audit("token.revoke", format!("token:{id}"), None, None)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
