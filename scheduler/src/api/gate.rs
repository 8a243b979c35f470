//! The gate in front of the routes: [`client_address`] on every request,
//! [`authenticate`] on every protected one (finding the [`Caller`] from a
//! token or a session, or answering 401 / 403 itself). What a token, a
//! session and a caller are is `auth`.

use std::net::{IpAddr, SocketAddr};

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rondo_core::Error;
use rondo_core::auth;
use rondo_core::auth::Role;
use rondo_core::destination::Cidr;

use super::auth::{
    BACKGROUND_HEADER, CSRF_HEADER, Caller, ClientAddress, Via, principal_of, session_cookie_name,
};
use super::state::{ApiError, AppState, ServerErrorDetail};

/// Sets [`ClientAddress`] on every request: the TCP peer, or, when the
/// peer is one of `auth.trusted_proxies`, the address its
/// `X-Forwarded-For` says it served. In-process calls (tests) have no
/// peer: `in-process`.
pub async fn client_address(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    let address = match req.extensions().get::<ConnectInfo<SocketAddr>>() {
        Some(peer) => client_of(peer.0.ip(), req.headers(), &s.auth.proxies).to_string(),
        None => "in-process".to_owned(),
    };
    req.extensions_mut().insert(ClientAddress(address));
    next.run(req).await
}

/// Who sent a request that reached us from `peer`: the peer itself unless
/// it is a trusted proxy; then, reading `X-Forwarded-For` from the right
/// (each proxy appends the address it was reached from), the first entry
/// that is not a trusted proxy. A header that does not parse counts for
/// nothing: the request is then the last trusted proxy's own.
fn client_of(peer: IpAddr, headers: &HeaderMap, proxies: &[Cidr]) -> IpAddr {
    let trusted = |ip: IpAddr| proxies.iter().any(|p| p.contains(ip));
    let mut client = peer;
    if !trusted(client) {
        return client;
    }
    let entries = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|e| e.trim().parse::<IpAddr>())
        .collect::<Vec<_>>();
    for entry in entries.into_iter().rev() {
        let Ok(ip) = entry else { return client };
        client = ip;
        if !trusted(ip) {
            break;
        }
    }
    client
}

/// The value of the session cookie named `name`, if the request has one.
pub fn session_cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(n, _)| *n == name)
        .map(|(_, value)| value.to_owned())
}

/// The headers every answer gets, and every HTML page more: no content
/// sniffing; a page is never framed and sends no referrer; over https
/// (`auth.cookie_secure`), browsers are told to keep to https. The
/// console's pages set a full CSP of their own; other pages (the API
/// reference) get at least `frame-ancestors 'none'`.
pub async fn security_headers(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let mut response = next.run(req).await;
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    let headers = response.headers_mut();
    let mut set = |name: header::HeaderName, value: &'static str| {
        if !headers.contains_key(&name) {
            headers.insert(name, header::HeaderValue::from_static(value));
        }
    };
    set(header::X_CONTENT_TYPE_OPTIONS, "nosniff");
    if html {
        set(header::X_FRAME_OPTIONS, "DENY");
        set(header::REFERRER_POLICY, "no-referrer");
        set(header::CONTENT_SECURITY_POLICY, "frame-ancestors 'none'");
    }
    if s.auth.config.cookie_secure {
        set(header::STRICT_TRANSPORT_SECURITY, "max-age=31536000");
    }
    response
}

/// Finds the caller of a protected route or answers 401/403.
pub async fn authenticate(State(s): State<AppState>, mut req: Request, next: Next) -> Response {
    let address = req
        .extensions()
        .get::<ClientAddress>()
        .map_or_else(|| "in-process".to_owned(), |a| a.0.clone());
    match identify(&s, req.method(), req.headers(), address).await {
        Ok((_, true)) if !while_password_must_change(req.method(), req.uri().path()) => {
            ApiError::from(Error::forbidden(
                "password",
                "set a new password first (PUT /api/v1/auth/password): \
                 the one you signed in with was moved from XXL-JOB",
            ))
            .into_response()
        }
        Ok((caller, _)) => {
            let admin = caller.principal.role == Role::Admin;
            req.extensions_mut().insert(caller);
            let mut response = next.run(req).await;
            // A server error's own text is for admins only.
            match response.extensions_mut().remove::<ServerErrorDetail>() {
                Some(detail) if admin => detail.answer(response.status()),
                _ => response,
            }
        }
        Err(e) => ApiError::from(e).into_response(),
    }
}

/// What a user who must set a new password may still do: read who they
/// are, set it (or their language), and sign out.
fn while_password_must_change(method: &Method, path: &str) -> bool {
    matches!(
        (method.as_str(), path),
        ("GET", "/api/v1/auth/me")
            | ("PUT", "/api/v1/auth/password")
            | ("PUT", "/api/v1/auth/language")
            | ("POST", "/api/v1/auth/logout")
    )
}

/// The caller, and whether its user must set a new password first.
async fn identify(
    s: &AppState,
    method: &Method,
    headers: &HeaderMap,
    address: String,
) -> Result<(Caller, bool), Error> {
    if let Some(value) = headers.get(header::AUTHORIZATION) {
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .ok_or_else(|| {
                Error::unauthenticated("authorization", "expected `Authorization: Bearer <token>`")
            })?;
        let (via, principal, must_change) = s.auth.token(token, &address).await?;
        let caller = Caller {
            principal,
            address,
            via,
        };
        return Ok((caller, must_change));
    }
    let name = session_cookie_name(s.auth.config.cookie_secure);
    let Some(cookie) = session_cookie(headers, name) else {
        return Err(Error::unauthenticated(
            "authorization",
            "sign in: send `Authorization: Bearer <token>`, or the session cookie from POST /api/v1/auth/login",
        ));
    };
    let renew = !headers.contains_key(BACKGROUND_HEADER);
    let Some((id_hash, session)) = s.auth.session(&cookie, renew).await? else {
        return Err(Error::unauthenticated(
            "cookie",
            "the session has ended (signed out, idle too long or too old): sign in again",
        ));
    };
    let user = s.auth.user(&session.username).await?;
    let Some(user) = user.filter(|u| u.enabled) else {
        s.auth.close_session(&id_hash, &session.username).await?;
        return Err(Error::unauthenticated(
            "cookie",
            "the session's user is disabled or deleted",
        ));
    };
    if !matches!(*method, Method::GET | Method::HEAD) {
        let sent = headers.get(CSRF_HEADER).and_then(|v| v.to_str().ok());
        if !sent.is_some_and(|t| auth::same_secret(t, &session.csrf)) {
            return Err(Error::forbidden(
                CSRF_HEADER,
                "a write with the session cookie must send the session's CSRF token in X-CSRF-Token",
            ));
        }
    }
    let caller = Caller {
        principal: principal_of(&user),
        address,
        via: Via::Session {
            id_hash,
            csrf: session.csrf,
        },
    };
    Ok((caller, user.must_change_password))
}

#[cfg(test)]
mod tests {
    use super::super::auth::{SECURE_SESSION_COOKIE, SESSION_COOKIE};
    use super::*;

    #[test]
    fn the_session_cookie_is_found_among_others() {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::COOKIE,
            "a=1; rondo_session=abc-_; b=2".parse().unwrap(),
        );
        assert_eq!(
            session_cookie(&headers, SESSION_COOKIE).as_deref(),
            Some("abc-_")
        );
        assert_eq!(session_cookie(&HeaderMap::new(), SESSION_COOKIE), None);
        assert_eq!(session_cookie(&headers, SECURE_SESSION_COOKIE), None);
    }

    #[test]
    fn only_a_trusted_proxy_names_the_client() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let proxies: Vec<Cidr> = vec!["10.0.0.0/24".parse().unwrap()];
        let with = |xff: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("x-forwarded-for", xff.parse().unwrap());
            headers
        };
        // A peer that is no proxy: the header is the caller's own word.
        let direct = client_of(ip("192.0.2.7"), &with("1.2.3.4"), &proxies);
        assert_eq!(direct, ip("192.0.2.7"));
        assert_eq!(
            client_of(ip("10.0.0.5"), &with("1.2.3.4"), &[]),
            ip("10.0.0.5"),
            "no trusted proxies: the peer"
        );
        // Through the proxy: the entry it appended, not one the client
        // wrote itself in front of it.
        let spoofed = with("6.6.6.6, 1.2.3.4");
        assert_eq!(client_of(ip("10.0.0.5"), &spoofed, &proxies), ip("1.2.3.4"));
        // Two proxies in a row: the first address neither of them is.
        let chained = with("6.6.6.6, 1.2.3.4, 10.0.0.9");
        assert_eq!(client_of(ip("10.0.0.5"), &chained, &proxies), ip("1.2.3.4"));
        // A header that does not parse names nobody: the proxy's own.
        assert_eq!(
            client_of(ip("10.0.0.5"), &with("garbage"), &proxies),
            ip("10.0.0.5")
        );
        assert_eq!(
            client_of(ip("10.0.0.5"), &HeaderMap::new(), &proxies),
            ip("10.0.0.5")
        );
    }
}
