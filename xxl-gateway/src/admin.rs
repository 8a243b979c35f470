//! XXL-JOB's admin API, as `xxl-job-core` calls it: `POST
//! <context>/api/registry`, `<context>/api/registryRemove` and
//! `<context>/api/callback` (any context path: the executors'
//! `xxl.job.admin.addresses` name it).
//!
//! Every answer is HTTP 200 with XXL-JOB's own JSON shape (`{"code":200}`,
//! or `{"code":500,"msg":…}`), which is what its clients read; a failure's
//! message names what is wrong.
//!
//! Each call is judged on its group (`access`): a registration or a
//! `registryRemove` is taken only with the `XXL-JOB-ACCESS-TOKEN` of the
//! group it names, and only for a group an admin marked as the gateway's; a
//! callback's entries only for runs of groups its token opens. A token that
//! opens no group gets XXL-JOB's own refusal; one of another group a refusal
//! that says so; both are counted (`rondo_xxl_token_refusals_total`). A
//! registered address must be one `xxl.address_allow` allows.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, Method, Uri, header};
use axum::response::{IntoResponse, Response};
use rondo_core::clock;

use crate::access::Verdict;
use crate::ctx::Ctx;
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
    let token = headers
        .get(wire::TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let answer = match Call::of(uri.path()) {
        _ if method != Method::POST => Answer::fail("invalid request, HttpMethod not support."),
        None => Answer::fail(format!(
            "invalid request, uri-mapping({}) not found.",
            uri.path()
        )),
        Some(Call::Callback) if !ctx.access.opens_any(token) => wrong_token(Call::Callback),
        Some(Call::Callback) => callback(&ctx, &body, token).await,
        Some(call) => registry(&ctx, &body, call, token).await,
    };
    (
        [(header::CONTENT_TYPE, "application/json;charset=UTF-8")],
        serde_json::to_string(&answer).unwrap_or_default(),
    )
        .into_response()
}

/// XXL-JOB's own refusal of a token that opens nothing, counted.
fn wrong_token(call: Call) -> Answer {
    metrics::counter!("rondo_xxl_token_refusals_total", "call" => call.label()).increment(1);
    tracing::warn!(
        call = call.label(),
        "a call with a wrong or missing access token; refused"
    );
    Answer::fail(wire::WRONG_TOKEN)
}

async fn registry(ctx: &Arc<Ctx>, body: &[u8], call: Call, token: &str) -> Answer {
    let param: RegistryParam = match serde_json::from_slice(body) {
        Ok(p) => p,
        Err(_) if !ctx.access.opens_any(token) => return wrong_token(call),
        Err(e) => return Answer::fail(format!("registry: the body is not a RegistryParam: {e}")),
    };
    let (app, address) = match check_registration(&param) {
        Ok(pair) => pair,
        Err(_) if !ctx.access.opens_any(token) => return wrong_token(call),
        Err(msg) => return Answer::fail(msg),
    };
    let outcome = match admitted(ctx, call, &app, token).await {
        Ok(Ok(fp)) if call == Call::Registry => register(ctx, &app, &address, &fp).await,
        Ok(Ok(_)) => remove(ctx, &app, &address).await,
        Ok(Err(refused)) => Ok(refused),
        Err(e) => Err(e),
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

/// Whether `token` opens group `app` for `call`: the fingerprint of the
/// token taken, or the refusal to answer.
async fn admitted(
    ctx: &Ctx,
    call: Call,
    app: &str,
    token: &str,
) -> Result<Result<String, Answer>, rondo_core::Error> {
    let mut verdict = ctx.access.verdict(app, token);
    let mut group = None;
    if !matches!(verdict, Verdict::Opens(_)) {
        // A group made, marked or given a token since the last read: read
        // it now.
        group = ctx.executors.group(app).await?;
        if let Some(g) = &group {
            ctx.access.learn(g.clone());
            verdict = ctx.access.verdict(app, token);
        }
    }
    let refusal = match verdict {
        Verdict::Opens(fp) => return Ok(Ok(fp)),
        _ if !ctx.access.opens_any(token) => wrong_token(call),
        Verdict::WrongToken => {
            metrics::counter!("rondo_xxl_token_refusals_total", "call" => call.label())
                .increment(1);
            Answer::fail(format!(
                "registryKey {app:?}: this access token is not group {app:?}'s; send the group's own (xxl.job.accessToken)"
            ))
        }
        Verdict::NotServed => {
            metrics::counter!("rondo_xxl_registrations_refused_total").increment(1);
            tracing::warn!(
                app,
                exists = group.is_some(),
                "a registration for a group the gateway does not serve; refused"
            );
            Answer::fail(match group {
                Some(_) => format!(
                    "registryKey {app:?}: rondo's group {app:?} is not served by the XXL-JOB gateway; an admin marks it (rondo group update {app} --xxl-gateway) and gives it an access token (rondo group xxl-token {app}), then the executor's next registration is taken"
                ),
                None => format!(
                    "registryKey {app:?}: rondo has no executor group {app:?}; create it (rondo group create {app} --xxl-gateway) or import it from XXL-JOB (rondo import xxl-job), then the executor's next registration is taken"
                ),
            })
        }
    };
    Ok(Err(refusal))
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

async fn register(
    ctx: &Arc<Ctx>,
    app: &str,
    address: &str,
    token_fp: &str,
) -> Result<Answer, rondo_core::Error> {
    if let Some(refused) = destination_refused(ctx, address).await {
        metrics::counter!("rondo_xxl_registrations_refused_total").increment(1);
        return Ok(Answer::fail(format!(
            "registryValue {address:?}: {refused} (xxl.address_allow)"
        )));
    }
    match ctx
        .executors
        .register(app, address, false, token_fp, clock::now_ms())
        .await?
    {
        Ok(record) => {
            if ctx.fleet.get(&record.id).is_none() {
                ctx.fleet.changed();
            }
            Ok(Answer::success())
        }
        Err(refusal) => {
            metrics::counter!("rondo_xxl_registrations_refused_total").increment(1);
            Ok(Answer::fail(refusal.message(address)))
        }
    }
}

/// Why the destination rule refuses `address`, if it does (a name that
/// does not resolve now is left to the rule at each call).
async fn destination_refused(ctx: &Ctx, address: &str) -> Option<String> {
    let url = reqwest::Url::parse(address).ok()?;
    let host = url.host_str()?;
    let port = url.port_or_known_default().unwrap_or(80);
    match rondo_core::outbound::resolve(ctx.client.rule(), host, port).await {
        Ok(Err(refused)) => Some(refused.to_string()),
        _ => None,
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

async fn callback(ctx: &Arc<Ctx>, body: &[u8], token: &str) -> Answer {
    let entries = match serde_json::from_slice::<CallbackBody>(body) {
        Ok(b) => b.entries(),
        Err(e) => {
            return Answer::fail(format!(
                "callback: the body is neither a list of {{logId, handleCode, handleMsg}} nor {{callbackList: [...]}}: {e}"
            ));
        }
    };
    match crate::callback::handle(ctx, entries, token).await {
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
