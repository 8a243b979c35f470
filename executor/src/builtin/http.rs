//! `http`: calls a URL (XXL-JOB's `httpJobHandler`).
//!
//! # Params
//!
//! A URL, for a `GET`:
//!
//! ```text
//! http://billing.internal:8080/jobs/close-day
//! ```
//!
//! or a JSON object:
//!
//! ```json
//! {"method": "POST", "url": "http://billing.internal:8080/jobs/close-day",
//!  "headers": {"Content-Type": "application/json", "Authorization": "Bearer …"},
//!  "body": "{\"day\": \"2026-01-31\"}", "timeout_s": 30}
//! ```
//!
//! `method` defaults to `GET`, `headers` to none, `body` to empty,
//! `timeout_s` to 10 (0 = no limit of its own; the trigger's timeout and a
//! kill still apply). Two headers are added: `User-Agent` and
//! [`TRIGGER_ID_HEADER`] with the trigger id, which a receiver can use as
//! an idempotency key (a retry has an id of its own; a trigger id reaches
//! the handler once). Set `Content-Type` for a body yourself. Redirects are
//! followed (10 at most).
//!
//! # Result
//!
//! A 2xx status succeeds. Any other status fails the run with `http: status
//! <code> <reason>` (retryable); so does a connection error or no complete
//! response within `timeout_s`. Params that cannot work (not JSON, no URL,
//! a bad method or header, another scheme) abort the run (not retryable).
//! The log shows the request line, the status with the elapsed time, and
//! the first [`BODY_PREVIEW_BYTES`] bytes of the response body.
//!
//! Plain `http://` only: the executor is built without a TLS stack (see the
//! crate's README); an `https://` URL is refused with a message saying so.

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Client, Method, Url};
use serde::Deserialize;

use crate::context::JobContext;
use crate::error::JobError;

/// How much of the response body goes to the job log.
pub(crate) const BODY_PREVIEW_BYTES: usize = 1024;
/// The header that carries the trigger id.
pub const TRIGGER_ID_HEADER: &str = "X-Rondo-Trigger-Id";
/// `timeout_s` when the params do not give one.
const DEFAULT_TIMEOUT_S: u64 = 10;

/// The request the params describe.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestSpec {
    #[serde(default = "default_method")]
    method: String,
    url: String,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    body: Option<String>,
    #[serde(default = "default_timeout_s")]
    timeout_s: u64,
}

fn default_method() -> String {
    "GET".into()
}

fn default_timeout_s() -> u64 {
    DEFAULT_TIMEOUT_S
}

/// The http handler (see the module doc).
pub async fn http(ctx: JobContext) -> Result<(), JobError> {
    let spec = parse(ctx.params())?;
    let request = build(&spec)?.header(TRIGGER_ID_HEADER, ctx.trigger_id());
    ctx.log(format!(
        "http: {} {}",
        spec.method.to_ascii_uppercase(),
        spec.url
    ));
    let started = Instant::now();
    let response = tokio::select! {
        sent = request.send() => sent.map_err(|e| failure(&e, &spec))?,
        () = ctx.cancelled() => return Err(cancelled(&ctx)),
    };
    let status = response.status();
    ctx.log(format!(
        "http: {status} in {} ms",
        started.elapsed().as_millis()
    ));
    let preview = tokio::select! {
        preview = body_preview(response) => preview,
        () = ctx.cancelled() => return Err(cancelled(&ctx)),
    };
    match preview {
        Ok(preview) if !preview.is_empty() => ctx.log(format!("http: body: {preview}")),
        Ok(_) => {}
        Err(e) => ctx.log(format!("http: reading the body failed: {}", chain(&e))),
    }
    if status.is_success() {
        Ok(())
    } else {
        Err(JobError::fail(format!("http: status {status}")))
    }
}

fn parse(params: &str) -> Result<RequestSpec, JobError> {
    let params = params.trim();
    if params.is_empty() {
        return Err(JobError::abort(
            "http: the params must hold a URL or a JSON request",
        ));
    }
    if !params.starts_with('{') {
        return Ok(RequestSpec {
            method: default_method(),
            url: params.to_owned(),
            headers: BTreeMap::new(),
            body: None,
            timeout_s: DEFAULT_TIMEOUT_S,
        });
    }
    serde_json::from_str(params).map_err(|e| JobError::abort(format!("http: bad params: {e}")))
}

fn build(spec: &RequestSpec) -> Result<reqwest::RequestBuilder, JobError> {
    let url = Url::parse(&spec.url)
        .map_err(|e| JobError::abort(format!("http: bad url {:?}: {e}", spec.url)))?;
    match url.scheme() {
        "http" => {}
        "https" => {
            return Err(JobError::abort(
                "http: https is not supported by this build (no TLS stack); use http://",
            ));
        }
        other => {
            return Err(JobError::abort(format!(
                "http: unsupported scheme {other:?}"
            )));
        }
    }
    let method = Method::from_bytes(spec.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| JobError::abort(format!("http: bad method {:?}", spec.method)))?;
    let mut request = client()?.request(method, url);
    for (name, value) in &spec.headers {
        let name = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| JobError::abort(format!("http: bad header name {name:?}")))?;
        let value = HeaderValue::from_str(value)
            .map_err(|_| JobError::abort(format!("http: bad value for header {name}")))?;
        request = request.header(name, value);
    }
    if let Some(body) = &spec.body {
        request = request.body(body.clone());
    }
    if spec.timeout_s > 0 {
        request = request.timeout(Duration::from_secs(spec.timeout_s));
    }
    Ok(request)
}

/// One client for every run: its connection pool is shared.
fn client() -> Result<&'static Client, JobError> {
    static CLIENT: OnceLock<Client> = OnceLock::new();
    if let Some(client) = CLIENT.get() {
        return Ok(client);
    }
    let client = Client::builder()
        .user_agent(concat!("rondo-executor/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|e| JobError::fail(format!("http: cannot build a client: {}", chain(&e))))?;
    Ok(CLIENT.get_or_init(|| client))
}

/// Up to [`BODY_PREVIEW_BYTES`] of the body, as text.
async fn body_preview(mut response: reqwest::Response) -> Result<String, reqwest::Error> {
    let mut bytes = Vec::new();
    let mut truncated = false;
    while let Some(chunk) = response.chunk().await? {
        let room = BODY_PREVIEW_BYTES - bytes.len();
        if chunk.len() >= room {
            truncated = chunk.len() > room;
            bytes.extend_from_slice(&chunk[..room]);
            break;
        }
        bytes.extend_from_slice(&chunk);
    }
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if truncated {
        text.push_str(" …");
    }
    Ok(text)
}

fn failure(e: &reqwest::Error, spec: &RequestSpec) -> JobError {
    if e.is_timeout() {
        return JobError::fail(format!(
            "http: no response within {}s from {}",
            spec.timeout_s, spec.url
        ));
    }
    JobError::fail(format!("http: {}", chain(e)))
}

fn cancelled(ctx: &JobContext) -> JobError {
    ctx.log("http: cancelled");
    JobError::fail("http: cancelled")
}

/// An error with its causes: reqwest's own message alone rarely says why.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests;
