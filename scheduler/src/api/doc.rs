//! The API's OpenAPI 3.1 document, built from the handlers' annotations as
//! the routes are added (so a route cannot be served undocumented), and
//! the reference page that renders it.
//!
//! The document (`GET /api/v1/openapi.json`) and the Swagger UI assets
//! need credentials like every other route; the page itself
//! (`GET /api/v1/docs/`) is only a sign-in form that loads them once the
//! browser holds a session. Swagger UI comes inside the binary (the
//! `vendored` feature of `utoipa-swagger-ui`): no CDN, no download.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::openapi::response::{Response as ApiResponse, ResponseBuilder};
use utoipa::openapi::security::{ApiKey, ApiKeyValue, HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr};
use utoipa::{Modify, OpenApi, ToSchema};

use super::auth::SESSION_COOKIE;

/// Every error the API answers: `{"error": {"kind", "field", "message"}}`.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: rondo_core::Error,
}

/// The error answers every operation may give (each operation lists the
/// success answers of its own). Which kinds a given call meets follows from
/// its description; listing all of them everywhere keeps clients honest
/// about handling each.
pub struct ApiErrors;

/// The shared error answers, by status: documented once under
/// `components.responses`, referenced by every operation.
const ERRORS: &[(u16, &str, &str)] = &[
    (
        400,
        "BadRequest",
        "Invalid input: `error.field` names the body field, path or query parameter at fault.",
    ),
    (
        401,
        "Unauthorized",
        "No credentials, or credentials that prove nothing (wrong, expired or revoked token; \
         ended session).",
    ),
    (
        403,
        "Forbidden",
        "The caller may not do this (role, group not granted, read-only token, missing CSRF \
         token on a cookie write).",
    ),
    (
        404,
        "NotFound",
        "The job, group, user, token or trigger named does not exist.",
    ),
    (
        409,
        "Conflict",
        "The thing exists already, is in use, or is not in a state that allows this.",
    ),
    (
        429,
        "TooManyRequests",
        "Too many sign-in attempts; try again later.",
    ),
    (500, "InternalError", "A bug or an unexpected state."),
    (
        503,
        "Unavailable",
        "A service rondo needs (Redis, RabbitMQ, ZooKeeper, MySQL) did not answer.",
    ),
];

impl utoipa::IntoResponses for ApiErrors {
    fn responses() -> BTreeMap<String, RefOr<ApiResponse>> {
        ERRORS
            .iter()
            .map(|(status, name, _)| {
                let to = Ref::new(format!("#/components/responses/{name}"));
                (status.to_string(), RefOr::Ref(to))
            })
            .collect()
    }
}

/// The shared error answers, and the security schemes: an API token, or a
/// browser session.
struct SharedComponents;

impl Modify for SharedComponents {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (_, name, description) in ERRORS {
            let content = ContentBuilder::new()
                .schema(Some(Ref::from_schema_name("ErrorBody")))
                .build();
            let response = ResponseBuilder::new()
                .description(*description)
                .content("application/json", content)
                .build();
            components
                .responses
                .insert((*name).to_owned(), RefOr::T(response));
        }
        components.add_security_scheme(
            "token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("rondo_pat_…")
                    .description(Some(
                        "An API token (`POST /api/v1/tokens`, `rondo token create`) as \
                         `Authorization: Bearer rondo_pat_…`.",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "session",
            SecurityScheme::ApiKey(ApiKey::Cookie(ApiKeyValue::with_description(
                SESSION_COOKIE,
                "The browser session cookie set by `POST /api/v1/auth/login` (named \
                 `__Host-rondo_session` when the node serves https, `auth.cookie_secure`). Every \
                 request that changes something must also send the session's CSRF token \
                 (from the login answer or `GET /api/v1/auth/me`) as `X-CSRF-Token`.",
            ))),
        );
    }
}

#[derive(OpenApi)]
#[openapi(
    info(
        title = "rondo admin API",
        description = "Executor groups, jobs, manual triggers, trigger logs, reports, users, \
            API tokens, the audit log and cluster status of a rondo cluster. Every answer is \
            JSON; every error is `{\"error\": {\"kind\", \"field\", \"message\"}}` with a 4xx \
            that names the field for bad input. Every route needs credentials (a token or a \
            session) except `/healthz`, `/readyz` and sign-in.",
        license(name = "Apache-2.0", identifier = "Apache-2.0")
    ),
    security(("token" = []), ("session" = [])),
    modifiers(&SharedComponents),
    components(schemas(ErrorBody)),
    tags(
        (name = "auth", description = "Sign-in, sessions and one's password."),
        (name = "tokens", description = "API tokens."),
        (name = "users", description = "Users and their roles (admins)."),
        (name = "audit", description = "Who changed or ran what (admins)."),
        (name = "groups", description = "Executor groups and their live executors."),
        (name = "alarms", description = "Alarm channels: chat group bots and webhooks that jobs' failures go to."),
        (name = "jobs", description = "Jobs: define, schedule, start, stop, trigger."),
        (name = "logs", description = "Trigger logs, and killing a running trigger."),
        (name = "reports", description = "The daily report and log retention."),
        (name = "cluster", description = "Cluster status, health, readiness, metrics."),
    )
)]
pub struct ApiDoc;

/// The sign-in page that loads Swagger UI once the browser has a session.
const DOCS_PAGE: &str = include_str!("doc/index.html");

/// `GET /api/v1/docs/`: the reference page (open: a sign-in form).
pub(super) async fn docs_page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        DOCS_PAGE,
    )
        .into_response()
}

/// `GET /api/v1/docs/assets/{file}`: Swagger UI's own files, from the
/// binary (behind the gate).
pub(super) async fn docs_asset(Path(file): Path<String>) -> Response {
    static CONFIG: std::sync::LazyLock<Arc<utoipa_swagger_ui::Config<'static>>> =
        std::sync::LazyLock::new(|| {
            Arc::new(utoipa_swagger_ui::Config::from("/api/v1/openapi.json"))
        });
    // Only the library's script and style sheets: its index page and
    // initializer are replaced by DOCS_PAGE.
    const ASSETS: &[&str] = &[
        "swagger-ui-bundle.js",
        "swagger-ui.css",
        "index.css",
        "favicon-32x32.png",
    ];
    if !ASSETS.contains(&file.as_str()) {
        return StatusCode::NOT_FOUND.into_response();
    }
    match utoipa_swagger_ui::serve(&file, CONFIG.clone()) {
        Ok(Some(asset)) => (
            [
                (header::CONTENT_TYPE, asset.content_type),
                (header::CACHE_CONTROL, "private, max-age=3600".to_owned()),
            ],
            asset.bytes.into_owned(),
        )
            .into_response(),
        _ => StatusCode::NOT_FOUND.into_response(),
    }
}

#[cfg(test)]
mod tests {
    /// `docs/openapi.json` is the reviewed contract: an API change shows
    /// up as a change of that file in the same commit.
    #[test]
    fn the_committed_spec_is_the_one_the_code_generates() {
        let generated = super::super::openapi()
            .to_pretty_json()
            .expect("the spec serializes")
            + "\n";
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
        if std::env::var_os("RONDO_BLESS_OPENAPI").is_some() {
            std::fs::write(path, &generated).expect("writing docs/openapi.json");
            return;
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "docs/openapi.json differs from the spec the handlers generate: review the API \
             change, then run `RONDO_BLESS_OPENAPI=1 cargo test -p rondo-scheduler --lib \
             committed_spec` and commit the file"
        );
    }
}
