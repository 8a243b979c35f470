//! Browser sign-in: log in (a session cookie and its CSRF token), who am
//! I, log out, and changing one's password and console language. Sign-in
//! is throttled per username, per client address, per pair of them and
//! per username across addresses (`auth.login_*`); a browser that signed
//! a user in before (its device cookie) is counted on its own. A sign-in
//! the server could not judge (MySQL down, no user table yet) answers 503
//! and is not counted. XXL-JOB's stock password is refused outright, and a
//! user who signed in with a password moved from XXL-JOB must set a new
//! one before anything else (`gate`).

use std::sync::LazyLock;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use rondo_core::auth;
use rondo_core::auth::Role;
use rondo_core::language::Language;
use rondo_core::{Error, ErrorKind, clock};
use serde::{Deserialize, Serialize};

use super::auth::{
    Caller, ClientAddress, DEVICE_DAYS, Via as Signed, audit_event, device_cookie_name,
    session_cookie_name,
};
use super::doc::ApiErrors;
use super::gate;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

/// Verified against when the username is unknown, so a wrong username
/// takes as long as a wrong password.
static DUMMY_HASH: LazyLock<String> =
    LazyLock::new(|| auth::hash_password("not a password anyone has").expect("hashing a constant"));

/// The password XXL-JOB ships its `admin` with: never taken, whoever signs
/// in with it (an imported user who kept it is reset by an admin).
const XXL_STOCK_PASSWORD: &str = "123456";

/// A sign-in.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct Login {
    #[schema(pattern = "^[A-Za-z0-9._@-]{1,64}$")]
    username: String,
    #[schema(format = Password)]
    password: String,
}

/// A new session (its cookie is set with the answer).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Session {
    username: String,
    role: Role,
    /// Executor groups granted (empty for an admin, who has them all).
    groups: Vec<String>,
    /// Send as `X-CSRF-Token` with every request that changes something.
    csrf_token: String,
    /// The session ends after this many seconds without a request.
    idle_s: u64,
    /// ... and at the latest at this time (ms since the epoch).
    expires_ms: i64,
    /// The console language the user chose; null when none (the console
    /// follows the browser).
    language: Option<Language>,
    /// The password was moved from XXL-JOB: until a new one is set
    /// (`PUT /api/v1/auth/password`), nothing else is allowed.
    must_change_password: bool,
}

/// How the caller is signed in.
#[derive(Serialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub(super) enum Via {
    Token,
    Session,
}

/// Who the caller is.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Me {
    username: String,
    role: Role,
    /// Executor groups granted (empty for an admin, who has them all).
    groups: Vec<String>,
    /// A read-only token: only the reading rights of its user.
    read_only: bool,
    via: Via,
    /// The session's CSRF token; null for a token.
    csrf_token: Option<String>,
    /// The console language the user chose; null when none (the console
    /// follows the browser).
    language: Option<Language>,
    /// Nothing but setting a new password is allowed until it is set.
    must_change_password: bool,
}

/// Checks a password against a stored hash off the async threads
/// (Argon2id takes tens of milliseconds of CPU on purpose).
async fn verify(password: String, hash: Option<String>) -> Result<bool, Error> {
    tokio::task::spawn_blocking(move || match hash {
        Some(hash) if auth::is_xxl_hash(&hash) => {
            // An imported hash is quick to check: spend Argon2id's time as
            // well, so timing does not tell who has not signed in yet.
            auth::verify_password(&password, &DUMMY_HASH);
            auth::verify_password(&password, &hash)
        }
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
    cookie(
        s,
        session_cookie_name(s.auth.config.cookie_secure),
        value,
        max_age_s,
    )
}

fn cookie(s: &AppState, name: &str, value: &str, max_age_s: u64) -> HeaderValue {
    let secure = if s.auth.config.cookie_secure {
        "; Secure"
    } else {
        ""
    };
    let cookie =
        format!("{name}={value}; Path=/; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}");
    HeaderValue::from_str(&cookie).expect("a cookie of base64url characters")
}

/// `POST /api/v1/auth/login`: a session for a username and password.
///
/// The body must be sent as `application/json`: a cross-site HTML form
/// cannot send that type, so no other site can sign a browser in to an
/// account of its choosing.
#[utoipa::path(post, path = "/api/v1/auth/login", tag = "auth",
    security(()),
    request_body = Login,
    responses((status = 200, description = "Signed in; the answer sets the `rondo_session` cookie (HttpOnly, SameSite=Strict).", body = Session), ApiErrors))]
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
    let device_name = device_cookie_name(s.auth.config.cookie_secure);
    let device = gate::session_cookie(&headers, device_name);
    let device = device.as_deref();
    if let Err(throttled) = s.auth.attempt(&login.username, &address, device).await {
        if throttled.kind != ErrorKind::TooManyRequests {
            return Err(throttled.into());
        }
        let event = audit_event(
            &login.username,
            &address,
            "session.login_throttled",
            format!("user:{}", login.username),
            None,
            Some(throttled.message.clone()),
        );
        s.events.publish(&[event]).await?;
        return Err(throttled.into());
    }
    let failed = async |detail: Option<&str>, why: &str| -> ApiResult<Response> {
        let failed = audit_event(
            &login.username,
            &address,
            "session.login_failed",
            format!("user:{}", login.username),
            None,
            detail.map(str::to_owned),
        );
        s.events.publish(&[failed]).await?;
        Err(Error::unauthenticated("password", why).into())
    };
    if login.password == XXL_STOCK_PASSWORD {
        let why = "XXL-JOB's stock password is never taken: an admin sets a new one \
                   (rondo user update NAME --reset-password)";
        return failed(Some("XXL-JOB's stock password"), why).await;
    }
    let judged = judge(&s, &login.username, login.password.clone()).await;
    let user = match judged {
        Ok(user) => user,
        Err(e) => {
            // Not a guess that failed: the server could not tell.
            s.auth.unanswered(&login.username, &address, device).await?;
            let why = format!("sign-in could not be checked just now: {}", e.message);
            return Err(Error::new(ErrorKind::Unavailable, why).into());
        }
    };
    let Some(user) = user else {
        let why = "wrong username or password, or the user is disabled";
        return failed(None, why).await;
    };
    s.auth.succeeded(&user.username, &address, device).await?;
    let device = s.auth.known_device(&user.username, device).await?;
    // Read before the session opens: a failed read leaves no session.
    let language = stored_language(&s, &user.username).await?;
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
    let body = Session {
        username: user.username,
        role: user.role,
        groups: user.groups,
        csrf_token: csrf,
        idle_s: s.auth.config.session_idle_s,
        expires_ms: clock::now_ms() + max as i64 * 1000,
        language,
        must_change_password: user.must_change_password,
    };
    let mut response = (StatusCode::OK, Json(body)).into_response();
    let headers = response.headers_mut();
    headers.insert(header::SET_COOKIE, session_cookie(&s, &id, max));
    let device = cookie(&s, device_name, &device, DEVICE_DAYS * 86_400);
    headers.append(header::SET_COOKIE, device);
    Ok(response)
}

/// The enabled user `username` is, if `password` is theirs (as stored
/// now: an imported hash taken is marked to be changed); `Err` when the
/// server could not tell.
async fn judge(
    s: &AppState,
    username: &str,
    password: String,
) -> Result<Option<rondo_history::auth::UserRow>, Error> {
    let stored = s.history.user(username).await?;
    let (user, hash) = match stored {
        Some((user, hash)) if user.enabled => (Some(user), Some(hash)),
        _ => (None, None),
    };
    let imported = hash.clone().filter(|h| auth::is_xxl_hash(h));
    let again = password.clone();
    let mut valid = verify(password, hash).await?;
    let Some(mut user) = user else {
        return Ok(None);
    };
    if let (true, Some(old)) = (valid, imported) {
        // An XXL-JOB password hash is taken once: replaced now by Argon2id
        // (unless a reset replaced it first: then this password is no
        // longer the user's), and the user must choose a new password,
        // under rondo's rule, before anything else.
        let new = tokio::task::spawn_blocking(move || auth::hash_password(&again))
            .await
            .map_err(|e| Error::internal(format!("hashing a password: {e}")))??;
        valid = s
            .history
            .replace_password_hash(&user.username, &old, &new, clock::now_ms())
            .await?;
        user.must_change_password = true;
    }
    Ok(valid.then_some(user))
}

/// The language `username` chose, read from MySQL each time rather than
/// from the user cache (`Auth::user`), so a page reloaded right after a
/// change, on any node, shows it. A stored tag the API no longer offers
/// reads as none.
async fn stored_language(s: &AppState, username: &str) -> Result<Option<Language>, Error> {
    let stored = s.history.user_language(username).await?;
    Ok(stored.and_then(|tag| Language::parse("language", &tag).ok()))
}

/// `GET /api/v1/auth/me`: who the caller is, with the session's CSRF token
/// (a reloaded page reads it here) and the user's console language.
#[utoipa::path(get, path = "/api/v1/auth/me", tag = "auth",
    responses((status = 200, description = "The caller.", body = Me), ApiErrors))]
pub(super) async fn me(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Me>> {
    let p = &caller.principal;
    let (via, csrf_token) = match &caller.via {
        Signed::Token { .. } => (Via::Token, None),
        Signed::Session { csrf, .. } => (Via::Session, Some(csrf.clone())),
    };
    let user = s.auth.user(&p.username).await?;
    Ok(Json(Me {
        username: p.username.clone(),
        role: p.role,
        groups: p.groups.iter().cloned().collect(),
        read_only: p.read_only,
        via,
        csrf_token,
        language: stored_language(&s, &p.username).await?,
        must_change_password: user.is_some_and(|u| u.must_change_password),
    }))
}

/// `POST /api/v1/auth/logout`: ends the session and clears its cookie.
#[utoipa::path(post, path = "/api/v1/auth/logout", tag = "auth",
    responses((status = 204, description = "Signed out (with a token: nothing to end)."), ApiErrors))]
pub(super) async fn logout(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Response> {
    if let Signed::Session { id_hash, .. } = &caller.via {
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

/// Refuses a read-only token the change of one's own `what`.
fn refuse_read_only(caller: &Caller, what: &str) -> Result<(), Error> {
    if caller.principal.read_only {
        return Err(Error::forbidden(
            "authorization",
            format!("a read-only token may not change {what}"),
        ));
    }
    Ok(())
}

/// A password change.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PasswordChange {
    #[schema(format = Password)]
    current_password: String,
    /// 12 to 256 characters.
    #[schema(format = Password, min_length = 12, max_length = 256)]
    new_password: String,
}

/// `PUT /api/v1/auth/password`: the caller's new password, given the
/// current one. The caller's other sessions end.
#[utoipa::path(put, path = "/api/v1/auth/password", tag = "auth",
    request_body = PasswordChange,
    responses((status = 204, description = "Changed."), ApiErrors))]
pub(super) async fn change_password(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    refuse_read_only(&caller, "a password")?;
    let change = parse_body::<PasswordChange>(&body)?;
    auth::check_new_password("new_password", &change.new_password)?;
    if change.new_password == change.current_password {
        return Err(Error::invalid("new_password", "must differ from the current one").into());
    }
    // Guessing the current password is throttled like signing in.
    if let Err(throttled) = s
        .auth
        .attempt(caller.username(), &caller.address, None)
        .await
    {
        if throttled.kind != ErrorKind::TooManyRequests {
            return Err(throttled.into());
        }
        let target = format!("user:{}", caller.username());
        let detail = Some(throttled.message.clone());
        let event = caller.audit("user.password_throttled", target, None, detail);
        s.events.publish(&[event]).await?;
        return Err(throttled.into());
    }
    let stored = s.history.user(caller.username()).await?;
    let valid = verify(change.current_password, stored.map(|(_, h)| h)).await?;
    if !valid {
        let target = format!("user:{}", caller.username());
        s.events
            .publish(&[caller.audit("user.password_failed", target, None, None)])
            .await?;
        return Err(Error::invalid("current_password", "is not the current password").into());
    }
    s.auth
        .succeeded(caller.username(), &caller.address, None)
        .await?;
    let new = change.new_password;
    let hash = tokio::task::spawn_blocking(move || auth::hash_password(&new))
        .await
        .map_err(|e| Error::internal(format!("hashing a password: {e}")))??;
    let now = clock::now_ms();
    s.history
        .set_password(caller.username(), &hash, now)
        .await?;
    // The change ends every API token the user made (the one this call
    // came with too); the session it was made from stays.
    s.history.revoke_user_tokens(caller.username(), now).await?;
    s.auth.forget();
    let keep = match &caller.via {
        Signed::Session { id_hash, .. } => Some(id_hash.as_str()),
        Signed::Token { .. } => None,
    };
    s.auth.close_sessions_of(caller.username(), keep).await?;
    let target = format!("user:{}", caller.username());
    s.events
        .publish(&[caller.audit("user.password", target, None, None)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The caller's console language.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LanguageChange {
    /// The language the console shows this user; null clears the choice
    /// (the console then follows the browser). Required: `{}` is refused
    /// rather than read as a clear.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<Language>, required = true)]
    language: Option<Option<Language>>,
}

/// A field that is there, `null` or not: `Some(None)` for `null`, so that
/// a missing field (`None`, by `default`) can be told apart.
fn present<'de, D, T>(de: D) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(de).map(Some)
}

/// `PUT /api/v1/auth/language`: the caller's console language, or none.
/// Every role may choose its own; a read-only token may not.
#[utoipa::path(put, path = "/api/v1/auth/language", tag = "auth",
    request_body = LanguageChange,
    responses((status = 204, description = "Changed."), ApiErrors))]
pub(super) async fn change_language(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<StatusCode> {
    refuse_read_only(&caller, "the language")?;
    let change = parse_body::<LanguageChange>(&body)?;
    let Some(language) = change.language else {
        let expected = Language::NAMES.join(", ");
        let msg = format!("is required: one of {expected}, or null to clear it");
        return Err(Error::invalid("language", msg).into());
    };
    let tag = language.map(Language::as_str);
    let found = s
        .history
        .set_user_language(caller.username(), tag, clock::now_ms())
        .await?;
    if !found {
        return Err(Error::not_found("user", "the caller's user no longer exists").into());
    }
    let target = format!("user:{}", caller.username());
    let detail = Some(tag.unwrap_or("none").to_owned());
    s.events
        .publish(&[caller.audit("user.language", target, None, detail)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}
