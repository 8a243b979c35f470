//! The web console: one page and its script and style, inside the binary,
//! served by every node at `/` (and at each of the console's own paths, so
//! a deep link or a reload opens the right screen).
//!
//! The page is a client of the JSON API and nothing else: it signs in with
//! `POST /api/v1/auth/login` (the session cookie and its CSRF token), reads
//! and writes through the same routes, permission checks and service code
//! as `rondo` and any other client, so nothing it shows or does can go
//! around what the API would refuse. These files hold no data and are
//! served without credentials, like the API's sign-in route; every piece of
//! data comes through the API, behind sign-in. No CDN, no remote font, no
//! build step: plain modules a browser runs as they are.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::state::AppState;

const INDEX: &str = include_str!("../../console/index.html");

/// The console's files: name, content type, body.
const ASSETS: &[(&str, &str, &str)] = &[
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/app.js"),
    ),
    (
        "choices.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/choices.js"),
    ),
    (
        "pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/pages.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../console/style.css"),
    ),
];

/// Scripts, styles and requests from this node only; no inline script, no
/// framing.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
     connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
     frame-ancestors 'none'";

/// The console's screens: each answers with the page, which draws the
/// screen the path names.
const SCREENS: &[&str] = &[
    "/",
    "/login",
    "/account",
    "/jobs",
    "/jobs/{*rest}",
    "/logs",
    "/logs/{*rest}",
    "/groups",
    "/groups/{*rest}",
    "/users",
    "/users/{*rest}",
    "/audit",
    "/cluster",
];

/// The console's routes (open: see the module's note).
pub(super) fn routes() -> Router<AppState> {
    let mut router = Router::new().route("/assets/{file}", get(asset));
    for path in SCREENS {
        router = router.route(path, get(page));
    }
    router
}

fn with_headers(mut response: Response, content_type: &'static str) -> Response {
    let headers = response.headers_mut();
    let set = [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::X_FRAME_OPTIONS, "DENY"),
        // The files change with the binary: revalidate rather than keep a
        // stale script after an upgrade.
        (header::CACHE_CONTROL, "no-cache"),
    ];
    for (name, value) in set {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}

async fn page() -> Response {
    with_headers(INDEX.into_response(), "text/html; charset=utf-8")
}

async fn asset(Path(file): Path<String>) -> Response {
    match ASSETS.iter().find(|(name, _, _)| *name == file) {
        Some((_, content_type, body)) => with_headers(body.into_response(), content_type),
        None => (StatusCode::NOT_FOUND, "no such file").into_response(),
    }
}
