//! XXL-JOB's admin API, as `xxl-job-core` calls it: `POST
//! <context>/api/registry`, `<context>/api/registryRemove` and
//! `<context>/api/callback` (any context path: the executors'
//! `xxl.job.admin.addresses` name it).
//!
//! Every answer is HTTP 200 with XXL-JOB's own JSON shape (`{"code":200}`,
//! or `{"code":500,"msg":…}`), which is what its clients read; a failure's
//! message names what is wrong. A call without the right
//! `XXL-JOB-ACCESS-TOKEN` gets XXL-JOB's own refusal and is counted
//! (`rondo_xxl_token_refusals_total`).

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use rondo_core::clock;

use crate::ctx::Ctx;
use crate::executors::Refusal;
use crate::wire::{self, Answer, CallbackBody, RegistryParam};

/// The largest body taken (XXL-JOB's executors accept 5 MiB too).
const MAX_BODY: usize = 5 * 1024 * 1024;

/// The calls this API serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    Registry,
    RegistryRemove,
    Callback,
}

impl Call {
    fn of(path: &str) -> Option<Call> {
        let path = path.trim_end_matches('/');
        let (_, last) = path.rsplit_once("/api/")?;
        match last {
            "registry" => Some(Call::Registry),
            "registryRemove" => Some(Call::RegistryRemove),
            "callback" => Some(Call::Callback),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            Call::Registry => "registry",
            Call::RegistryRemove => "registry_remove",
            Call::Callback => "callback",
        }
    }
}

/// The admin API's router.
pub(crate) fn router(ctx: Arc<Ctx>) -> Router {
    Router::new()
        .fallback(serve)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(ctx)
}

async fn serve(
    State(ctx): State<Arc<Ctx>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let answer = match Call::of(uri.path()) {
        _ if method != Method::POST => Answer::fail("invalid request, HttpMethod not support."),
        None => Answer::fail(format!(
            "invalid request, uri-mapping({}) not found.",
            uri.path()
        )),
        Some(call) if !token_matches(&ctx.xxl.access_token, &headers) => {
            metrics::counter!("rondo_xxl_token_refusals_total", "call" => call.label())
                .increment(1);
            tracing::warn!(
                call = call.label(),
                "a call with a wrong or missing access token; refused"
            );
            Answer::fail(wire::WRONG_TOKEN)
        }
        Some(call) => handle(&ctx, call, &body).await,
    };
    (
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        serde_json::to_string(&answer).unwrap_or_default(),
    )
        .into_response()
}

/// Compares the token in constant time (no timing tells how much of it
/// was right).
fn token_matches(token: &str, headers: &HeaderMap) -> bool {
    let given = headers
        .get(wire::TOKEN_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if token.is_empty() {
        return true;
    }
    let expected = token.as_bytes();
    let mut diff = u8::from(given.len() != expected.len());
    for (i, e) in expected.iter().enumerate() {
        diff |= e ^ given.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

async fn handle(ctx: &Arc<Ctx>, call: Call, body: &[u8]) -> Answer {
    match call {
        Call::Registry => registry(ctx, body, true).await,
        Call::RegistryRemove => registry(ctx, body, false).await,
        Call::Callback => callback(ctx, body).await,
    }
}

async fn registry(ctx: &Arc<Ctx>, body: &[u8], add: bool) -> Answer {
    let param: RegistryParam = match serde_json::from_slice(body) {
        Ok(p) => p,
        Err(e) => return Answer::fail(format!("registry: the body is not a RegistryParam: {e}")),
    };
    let (app, address) = match check_registration(&param) {
        Ok(pair) => pair,
        Err(msg) => return Answer::fail(msg),
    };
    let outcome = if add {
        register(ctx, &app, &address).await
    } else {
        remove(ctx, &app, &address).await
    };
    match outcome {
        Ok(answer) => answer,
        Err(e) => {
            tracing::warn!(error = %e, app, address, "cannot record a registration");
            Answer::fail(format!(
                "registry: rondo cannot record it now ({e}); try again"
            ))
        }
    }
}

/// The app and normalized address of a registration; the error names the
/// field.
fn check_registration(param: &RegistryParam) -> Result<(String, String), String> {
    match param.registry_group.as_deref() {
        Some("EXECUTOR") => {}
        other => {
            return Err(format!(
                "registryGroup must be EXECUTOR, got {:?}",
                other.unwrap_or_default()
            ));
        }
    }
    let app = param.registry_key.clone().unwrap_or_default();
    rondo_core::model::validate_app_name("registryKey", &app)
        .map_err(|e| format!("registryKey {app:?}: {}", e.message))?;
    let address = param.registry_value.as_deref().unwrap_or_default();
    let address = rondo_core::model::normalize_xxl_address(address)
        .map_err(|why| format!("registryValue {address:?}: {why}"))?;
    Ok((app, address))
}

async fn register(ctx: &Arc<Ctx>, app: &str, address: &str) -> Result<Answer, rondo_core::Error> {
    if !ctx.executors.group_exists(app).await? {
        metrics::counter!("rondo_xxl_registrations_refused_total").increment(1);
        return Ok(Answer::fail(format!(
            "registryKey {app:?}: rondo has no executor group {app:?}; create it (rondo group create {app}) or import it from XXL-JOB (rondo import xxl-job), then the executor's next registration is taken"
        )));
    }
    match ctx
        .executors
        .register(app, address, false, clock::now_ms())
        .await?
    {
        Ok(record) => {
            if ctx.fleet.get(&record.id).is_none() {
                ctx.fleet.changed();
            }
            Ok(Answer::success())
        }
        Err(Refusal::IdTaken { id, address: known }) => Ok(Answer::fail(format!(
            "registryValue {address:?}: its rondo executor id {id} is that of {known:?} already; give the executor another address"
        ))),
    }
}

async fn remove(ctx: &Arc<Ctx>, app: &str, address: &str) -> Result<Answer, rondo_core::Error> {
    let id = crate::executors::executor_id(app, address);
    ctx.executors.remove(&id).await?;
    if let Some(served) = ctx.fleet.get(&id) {
        // Routing stops now; the other instances follow at their next read.
        served.remove();
        ctx.fleet.changed();
    }
    tracing::info!(executor_id = %id, app, address, "the executor removed its registration");
    Ok(Answer::success())
}

async fn callback(ctx: &Arc<Ctx>, body: &[u8]) -> Answer {
    let entries = match serde_json::from_slice::<CallbackBody>(body) {
        Ok(b) => b.entries(),
        Err(e) => {
            return Answer::fail(format!(
                "callback: the body is neither a list of {{logId, handleCode, handleMsg}} nor {{callbackList: [...]}}: {e}"
            ));
        }
    };
    match crate::callback::handle(ctx, entries).await {
        Ok(()) => Answer::success(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot take a callback now; the executor sends it again");
            Answer::fail(format!(
                "callback: rondo cannot take it now ({e}); send it again"
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_are_found_under_any_context_path() {
        assert_eq!(
            Call::of("/xxl-job-admin/api/registry"),
            Some(Call::Registry)
        );
        assert_eq!(Call::of("/api/registryRemove/"), Some(Call::RegistryRemove));
        assert_eq!(Call::of("/a/b/api/callback"), Some(Call::Callback));
        assert_eq!(Call::of("/api/addJob"), None);
        assert_eq!(Call::of("/registry"), None);
    }

    #[test]
    fn the_token_must_match_exactly() {
        let mut h = HeaderMap::new();
        assert!(!token_matches("s3cret", &h), "missing");
        h.insert(wire::TOKEN_HEADER, "s3cre".parse().unwrap());
        assert!(!token_matches("s3cret", &h), "a prefix");
        h.insert(wire::TOKEN_HEADER, "s3cretx".parse().unwrap());
        assert!(!token_matches("s3cret", &h), "longer");
        h.insert(wire::TOKEN_HEADER, "s3cret".parse().unwrap());
        assert!(token_matches("s3cret", &h));
        assert!(token_matches("", &HeaderMap::new()), "no token configured");
    }

    #[test]
    fn registrations_are_checked_field_by_field() {
        let p = |g: &str, k: &str, v: &str| RegistryParam {
            registry_group: Some(g.into()),
            registry_key: Some(k.into()),
            registry_value: Some(v.into()),
        };
        assert_eq!(
            check_registration(&p("EXECUTOR", "demo", "http://127.0.0.1:9999")).unwrap(),
            ("demo".into(), "http://127.0.0.1:9999/".into())
        );
        assert!(
            check_registration(&p("ADMIN", "demo", "http://h:1/"))
                .unwrap_err()
                .contains("registryGroup")
        );
        assert!(
            check_registration(&p("EXECUTOR", "de mo", "http://h:1/"))
                .unwrap_err()
                .contains("registryKey")
        );
        assert!(
            check_registration(&p("EXECUTOR", "demo", "h:1"))
                .unwrap_err()
                .contains("registryValue")
        );
    }
}
