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
//! # Destinations
//!
//! A run reaches public addresses of other hosts only: a URL, or a
//! redirect, to an address of this host, a loopback, link-local (cloud
//! metadata), private, shared, unique-local or other special-purpose
//! address, or to a name that resolves only to such addresses, aborts the
//! run (`http: destination refused: …`), unless `executor.http_allow`
//! names the address or its range (this host's own addresses: only the
//! address itself; `rondo_core::destination`).
//!
//! # Result
//!
//! A run waits for the whole response body. A 2xx status succeeds. Any
//! other status fails the run with `http: status <code> <reason>`
//! (retryable); so does a connection error, a server certificate that
//! fails verification (`http: certificate verification failed: …`, naming
//! `executor.http_ca_file` when the CA is unknown), or no complete
//! response within `timeout_s`. A body longer than
//! `executor.http_max_response_bytes` (1 MiB by default) fails the run
//! with `http: response exceeded <n> bytes
//! (executor.http_max_response_bytes)`, not retried: the endpoint did
//! answer, and a retry would call it again. Params that cannot work (not
//! JSON, no URL, a bad method or header, another scheme) abort the run
//! (not retryable). The log shows the request line, the status with the
//! elapsed time, and the first `BODY_PREVIEW_BYTES` (1 KiB) of the body.
//!
//! # https
//!
//! Through rustls, checking certificates against the Mozilla roots built
//! into the binary plus `executor.http_ca_file`, or not at all with
//! `executor.http_insecure` (see `client`). [`Http::from_config`] builds
//! the handler with an executor's keys; [`http`](fn@http) is the handler
//! with their defaults.

mod body;
mod client;

use std::collections::BTreeMap;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use futures_util::future::BoxFuture;
use reqwest::header::{HeaderName, HeaderValue};
use reqwest::{Client, Method, StatusCode, Url};
use rondo_core::config::ExecutorConfig;
use serde::Deserialize;

use crate::context::JobContext;
use crate::error::{ExecutorError, JobError};
use crate::handler::Handler;

use body::End;
use client::{ALLOW_KEY, CA_FILE_KEY, INSECURE_KEY, MAX_RESPONSE_KEY, Settings};
use rondo_core::destination::Destinations;
use rondo_core::error::chain;
use rondo_core::outbound;

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

/// The http handler with the defaults of the executor's `http_*` keys:
/// certificates checked against the bundled roots only, bodies up to
/// 1 MiB. The built-in `register` uses [`Http::from_config`]
/// instead, which honours the keys.
pub async fn http(ctx: JobContext) -> Result<(), JobError> {
    default_handler()?.run(ctx).await
}

/// The http handler with an executor's `http_*` keys (see the module
/// doc). Cheap to clone: its runs share one client and connection pool.
#[derive(Clone)]
pub struct Http {
    client: Client,
    max_response_bytes: u64,
    allow: Destinations,
}

impl Http {
    /// Checks `executor.http_*` and reads `executor.http_ca_file`; an
    /// unusable key is [`ExecutorError::Config`] naming it. With
    /// `executor.http_insecure` on, logs a warning.
    pub fn from_config(config: &ExecutorConfig) -> Result<Http, ExecutorError> {
        let settings = Settings::from_config(config).map_err(ExecutorError::Config)?;
        let handler = Http::with(&settings).map_err(ExecutorError::Config)?;
        if settings.insecure {
            tracing::warn!(
                "{INSECURE_KEY} is on: the http handler accepts any certificate for https:// URLs"
            );
        }
        Ok(handler)
    }

    fn with(settings: &Settings) -> Result<Http, String> {
        Ok(Http {
            client: settings.client()?,
            max_response_bytes: settings.max_response_bytes,
            allow: settings.allow.clone(),
        })
    }

    async fn run(self, ctx: JobContext) -> Result<(), JobError> {
        let spec = parse(ctx.params())?;
        let request =
            build(&self.client, &self.allow, &spec)?.header(TRIGGER_ID_HEADER, ctx.trigger_id());
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
        let body = tokio::select! {
            body = body::read(response, self.max_response_bytes) => body,
            () = ctx.cancelled() => return Err(cancelled(&ctx)),
        };
        if !body.preview.is_empty() {
            ctx.log(format!("http: body: {}", body.preview));
        }
        let body_error = self.body_error(body.end, &spec);
        verdict(status, body_error, &ctx)
    }

    /// Why the body did not come whole, if it did not.
    fn body_error(&self, end: End, spec: &RequestSpec) -> Option<JobError> {
        match end {
            End::Complete => None,
            End::TooLarge => Some(JobError::abort(format!(
                "http: response exceeded {} bytes ({MAX_RESPONSE_KEY})",
                self.max_response_bytes
            ))),
            End::Failed(e) if e.is_timeout() => Some(JobError::fail(format!(
                "http: no complete response within {}s from {}",
                spec.timeout_s, spec.url
            ))),
            End::Failed(e) => Some(JobError::fail(format!(
                "http: reading the response body failed: {}",
                chain(&e)
            ))),
        }
    }
}

impl Handler for Http {
    fn call(&self, ctx: JobContext) -> BoxFuture<'static, Result<(), JobError>> {
        Box::pin(self.clone().run(ctx))
    }
}

/// The status decides; on a 2xx a body that did not come whole fails the
/// run, on another status it is only logged.
fn verdict(
    status: StatusCode,
    body_error: Option<JobError>,
    ctx: &JobContext,
) -> Result<(), JobError> {
    if status.is_success() {
        return body_error.map_or(Ok(()), Err);
    }
    if let Some(JobError::Fail(reason) | JobError::Abort(reason)) = body_error {
        ctx.log(reason);
    }
    Err(JobError::fail(format!("http: status {status}")))
}

/// The `http` handler's checks for an executor's config: what
/// [`Http::from_config`] would refuse, without building a client.
pub fn check_config(config: &ExecutorConfig) -> Result<(), ExecutorError> {
    Settings::from_config(config)
        .map(drop)
        .map_err(ExecutorError::Config)
}

/// [`http`](fn@http)'s handler, built on its first run.
fn default_handler() -> Result<Http, JobError> {
    static DEFAULT: OnceLock<Http> = OnceLock::new();
    if let Some(handler) = DEFAULT.get() {
        return Ok(handler.clone());
    }
    let settings = Settings::from_config(&ExecutorConfig::default()).map_err(JobError::fail)?;
    let handler = Http::with(&settings).map_err(JobError::fail)?;
    Ok(DEFAULT.get_or_init(|| handler).clone())
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

fn build(
    client: &Client,
    allow: &Destinations,
    spec: &RequestSpec,
) -> Result<reqwest::RequestBuilder, JobError> {
    let url = Url::parse(&spec.url)
        .map_err(|e| JobError::abort(format!("http: bad url {:?}: {e}", spec.url)))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(JobError::abort(format!(
            "http: unsupported scheme {:?}; use http:// or https://",
            url.scheme()
        )));
    }
    let method = Method::from_bytes(spec.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| JobError::abort(format!("http: bad method {:?}", spec.method)))?;
    let headers = spec
        .headers
        .iter()
        .map(|(name, value)| {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| JobError::abort(format!("http: bad header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| JobError::abort(format!("http: bad value for header {name}")))?;
            Ok((name, value))
        })
        .collect::<Result<Vec<_>, JobError>>()?;
    // Last: params that cannot work say so first.
    outbound::check_url(allow, &url).map_err(|refused| destination_refused(&refused))?;
    let mut request = client.request(method, url);
    for (name, value) in headers {
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

fn failure(e: &reqwest::Error, spec: &RequestSpec) -> JobError {
    if e.is_timeout() {
        return JobError::fail(format!(
            "http: no response within {}s from {}",
            spec.timeout_s, spec.url
        ));
    }
    if let Some(refused) = outbound::refused(e) {
        return destination_refused(refused);
    }
    match client::refused_certificate(e) {
        // Most often an internal CA: say where it goes.
        Some(rustls::CertificateError::UnknownIssuer) => JobError::fail(format!(
            "http: certificate verification failed: {}; if the server's CA is an internal one, add it to {CA_FILE_KEY}",
            chain(e)
        )),
        Some(_) => JobError::fail(format!(
            "http: certificate verification failed: {}",
            chain(e)
        )),
        None => JobError::fail(format!("http: {}", chain(e))),
    }
}

/// Not retried: the same destination would be refused again.
fn destination_refused(refused: &outbound::Refused) -> JobError {
    JobError::abort(format!("http: {refused} ({ALLOW_KEY})"))
}

fn cancelled(ctx: &JobContext) -> JobError {
    ctx.log("http: cancelled");
    JobError::fail("http: cancelled")
}

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;
