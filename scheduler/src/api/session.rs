//! Browser sign-in: log in (a session cookie and its CSRF token), who am
//! I, log out, and changing one's password. Sign-in is throttled per
//! username and per client address (`auth.login_*`).

use std::sync::LazyLock;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use rondo_core::auth;
use rondo_core::{Error, clock};
use serde::Deserialize;
use serde_json::json;

use super::auth::{Caller, ClientAddress, SESSION_COOKIE, Via, audit_event};
use super::input::parse_body;
use super::state::{ApiResult, AppState};

/// Verified against when the username is unknown, so a wrong username
/// takes as long as a wrong password.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| auth::hash_password("not a password anyone has").expect("hashing a constant"));

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Login {
    username: String,
    password: String,
}

/// Checks a password against a stored hash off the async threads
/// (Argon2id takes tens of milliseconds of CPU on purpose).
async fn verify(password: String, hash: Option<String>) -> Result<bool, Error> {
    tokio::task::spawn_blocking(move || match hash {
        Some(hash) => auth::verify_password(&password, &hash),
        None => {
            auth::verify_password(&password, &DUMMY_HASH);
            false
        }
    })
    .await
    .map_err(|e| Error::internal(format!("verifying a password: {e}")))
}

fn session_cookie(s: &AppState, value: &str, max_age_s: u64) -> HeaderValue {
    let secure = if s.auth.config.cookie_secure {
        "; Secure"
    } else {
        ""
    };
    let cookie = format!(
        "{SESSION_COOKIE}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}"
    );
    HeaderValue::from_str(&cookie).expect("a cookie of base64url characters")
}

/// `POST /api/v1/auth/login`: a session for a username and password.
///
/// The body must be sent as `application/json`: a cross-site HTML form
/// cannot send that type, so no other site can sign a browser in to an
/// account of its choosing.
pub(super) async fn login(
    State(s): State<AppState>,
    Extension(ClientAddress(address)): Extension<ClientAddress>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !json {
        return Err(Error::invalid("content-type", "sign-in takes application/json").into());
    }
    let login = parse_body::<Login>(&body)?;
    auth::check_username("username", &login.username)?;
    s.auth.attempt(&login.username, &address).await?;
    let stored = s.history.user(&login.username).await?;
    let (user, hash) = match stored {
        Some((user, hash)) if user.enabled => (Some(user), Some(hash)),
        _ => (None, None),
    };
    let valid = verify(login.password, hash).await?;
    let Some(user) = user.filter(|_| valid) else {
        let failed = audit_event(
            &login.username,
            &address,
            "session.login_failed",
            format!("user:{}", login.username),
            None,
            None,
        );
        s.events.publish(&[failed]).await?;
        return Err(Error::unauthenticated(
            "password",
            "wrong username or password, or the user is disabled",
        )
        .into());
    };
    s.auth.succeeded(&user.username, &address).await?;
    let (id, csrf) = s.auth.open_session(&user.username).await?;
    let target = format!("user:{}", user.username);
    let login = audit_event(
        &user.username,
        &address,
        "session.login",
        target,
        None,
        None,
    );
    s.events.publish(&[login]).await?;
    let max = s.auth.config.session_max_s;
    let body = json!({
        "username": user.username,
        "role": user.role,
        "groups": user.groups,
        "csrf_token": csrf,
        "idle_s": s.auth.config.session_idle_s,
        "expires_ms": clock::now_ms() + max as i64 * 1000,
    });
    let mut response = (StatusCode::OK, Json(body)).into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(&s, &id, max));
    Ok(response)
}

/// `GET /api/v1/auth/me`: who the caller is, with the session's CSRF token
/// (a reloaded page reads it here).
pub(super) async fn me(Extension(caller): Extension<Caller>) -> Json<serde_json::Value> {
    let p = &caller.principal;
    let (via, csrf) = match &caller.via {
        Via::Token { .. } => ("token", None),
        Via::Session { csrf, .. } => ("session", Some(csrf.clone())),
    };
    Json(json!({
        "username": p.username,
        "role": p.role,
        "groups": p.groups,
        "read_only": p.read_only,
        "via": via,
        "csrf_token": csrf,
    }))
}

/// `POST /api/v1/auth/logout`: ends the session and clears its cookie.
pub(super) async fn logout(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Response> {
    if let Via::Session { id_hash, .. } = &caller.via {
        s.auth.close_session(id_hash, caller.username()).await?;
        let target = format!("user:{}", caller.username());
        s.events
            .publish(&[caller.audit("session.logout", target, None, None)])
            .await?;
    }
    let mut response = StatusCode::NO_CONTENT.into_response();
    response
        .headers_mut()
        .insert(header::SET_COOKIE, session_cookie(&s, "", 0));
    Ok(response)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct PasswordChange {
    current_password: String,
    new_password: String,
}

/// `PUT /api/v1/auth/password`: the caller's new password, given the
/// current one. The caller's other sessions end.
pub(super) async fn change_password(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    if caller.principal.read_only {
        return Err(Error::forbidden(
            "authorization",
            "a read-only token may not change a password",
        )
        .into());
    }
    let change = parse_body::<PasswordChange>(&body)?;
    auth::check_new_password("new_password", &change.new_password)?;
    // Guessing the current password is throttled like signing in.
    s.auth.attempt(caller.username(), &caller.address).await?;
    let stored = s.history.user(caller.username()).await?;
    let valid = verify(change.current_password, stored.map(|(_, h)| h)).await?;
    if !valid {
        let target = format!("user:{}", caller.username());
        s.events
            .publish(&[caller.audit("user.password_failed", target, None, None)])
            .await?;
        return Err(Error::invalid("current_password", "is not the current password").into());
    }
    s.auth.succeeded(caller.username(), &caller.address).await?;
    let new = change.new_password;
    let hash = tokio::task::spawn_blocking(move || auth::hash_password(&new))
        .await
        .map_err(|e| Error::internal(format!("hashing a password: {e}")))??;
    s.history
        .set_password(caller.username(), &hash, clock::now_ms())
        .await?;
    let keep = match &caller.via {
        Via::Session { id_hash, .. } => Some(id_hash.as_str()),
        Via::Token { .. } => None,
    };
    s.auth.close_sessions_of(caller.username(), keep).await?;
    let target = format!("user:{}", caller.username());
    s.events
        .publish(&[caller.audit("user.password", target, None, None)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
