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
        "admin-pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/admin-pages.js"),
    ),
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
        "editor.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/editor.js"),
    ),
    (
        "groups-pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/groups-pages.js"),
    ),
    (
        "i18n.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/i18n.js"),
    ),
    (
        "jobs-pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/jobs-pages.js"),
    ),
    (
        "logs-pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/logs-pages.js"),
    ),
    (
        "messages-en.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/messages-en.js"),
    ),
    (
        "messages-zh-CN.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/messages-zh-CN.js"),
    ),
    (
        "messages-zh-TW.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/messages-zh-TW.js"),
    ),
    (
        "ops-pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/ops-pages.js"),
    ),
    (
        "pages.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/pages.js"),
    ),
    ("routes.js", "text/javascript; charset=utf-8", ROUTES_JS),
    (
        "ui.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/ui.js"),
    ),
    (
        "widgets.js",
        "text/javascript; charset=utf-8",
        include_str!("../../console/widgets.js"),
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

/// The console's route table, which its router (app.js) reads too.
const ROUTES_JS: &str = include_str!("../../console/routes.js");

/// The paths of the console's screens, read from its route table: each
/// answers with the page, which draws the screen the path names. A
/// `:name` segment (with its pattern, if any) is an axum `{name}`.
fn screen_paths() -> Vec<String> {
    ROUTES_JS
        .lines()
        .filter_map(|line| line.trim_start().strip_prefix("['"))
        .filter_map(|line| line.split_once('\''))
        .map(|(route, _)| {
            route
                .split('/')
                .map(|part| match part.strip_prefix(':') {
                    Some(param) => format!("{{{}}}", param.split('(').next().unwrap_or(param)),
                    None => part.to_owned(),
                })
                .collect::<Vec<_>>()
                .join("/")
        })
        .collect()
}

/// The console's routes (open: see the module's note).
pub(super) fn routes() -> Router<AppState> {
    let mut router = Router::new().route("/assets/{file}", get(asset));
    for path in screen_paths() {
        router = router.route(&path, get(page));
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

#[cfg(test)]
mod tests {
    use super::screen_paths;

    #[test]
    fn the_screens_are_read_from_the_route_table() {
        let paths = screen_paths();
        for path in [
            "/",
            "/login",
            "/jobs",
            "/jobs/new",
            "/jobs/{id}",
            "/logs/{trigger}",
            "/audit",
        ] {
            assert!(paths.iter().any(|p| p == path), "{path} in {paths:?}");
        }
        assert_eq!(paths.len(), 18, "{paths:?}");
    }

    /// Every file of the console's folder is served: a module added there
    /// and not listed would fail in the browser only.
    #[test]
    fn every_console_file_is_an_asset() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("console");
        for entry in std::fs::read_dir(dir).expect("console/") {
            let name = entry.expect("an entry").file_name();
            let name = name.to_string_lossy();
            if name == "index.html" {
                continue;
            }
            assert!(
                super::ASSETS.iter().any(|(file, _, _)| *file == name),
                "{name} is not served"
            );
        }
    }
}
