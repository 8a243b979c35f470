//! Webhook alarms: the HTTP client and the JSON `POST`.

use std::time::Duration;

use rondo_core::destination::Destinations;
use rondo_core::error::chain;
use rondo_core::outbound;

use super::channel::{AlarmConfigError, timed_out};
use super::render::{Report, clip, one_line, webhook_body};

/// At most this much of a refusing webhook's answer goes into the reason.
const MAX_REPLY_BYTES: usize = 256;

/// The webhook client and the destinations it may reach.
#[derive(Clone)]
pub(super) struct Webhook {
    client: reqwest::Client,
    allow: Destinations,
}

/// Posts `report` to `url` with `http` (or why there is no client),
/// within `timeout`. Ok: the 2xx status; Err: the status and the start of
/// the answer, or why there was none.
pub(super) async fn post(
    http: &Result<Webhook, String>,
    timeout: Duration,
    url: &str,
    report: &Report<'_>,
) -> Result<String, String> {
    let http = http.as_ref().map_err(Clone::clone)?;
    let parsed = reqwest::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    check_destination(http, &parsed)?;
    let body = webhook_body(report);
    let exchange = async {
        let response = http
            .client
            .post(parsed)
            .json(&body)
            .send()
            .await
            .map_err(|e| http_error(e, timeout))?;
        let status = response.status();
        if status.is_success() {
            return Ok(format!("sent (HTTP {})", status.as_u16()));
        }
        Err(format!("HTTP {status}{}", reply_excerpt(response).await))
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(timed_out(timeout)))
}

impl Webhook {
    pub(super) fn client(&self) -> &reqwest::Client {
        &self.client
    }
}

/// Whether `url` is a destination the client may reach (the guard checks
/// again at connect time, for every address a name resolves to).
pub(super) fn check_destination(http: &Webhook, url: &reqwest::Url) -> Result<(), String> {
    outbound::check_url(&http.allow, url).map_err(|r| refused(&r))
}

/// The webhook client: only to the destinations `alarm.webhook_allow`
/// permits beside public addresses, no redirect followed.
pub(super) fn http_client(
    timeout: Duration,
    allow: &[String],
) -> Result<Webhook, AlarmConfigError> {
    let allow = Destinations::parse("alarm.webhook_allow", allow)
        .map_err(|e| AlarmConfigError::Http(format!("alarm.webhook_allow: {}", e.message)))?;
    let builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .user_agent(concat!("rondo-scheduler/", env!("CARGO_PKG_VERSION")));
    let client = outbound::guard(builder, allow.clone())
        // After the guard's policy: a webhook follows none.
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .map_err(|e| AlarmConfigError::Http(chain(&e)))?;
    Ok(Webhook { client, allow })
}

fn refused(refused: &outbound::Refused) -> String {
    format!("{refused} (alarm.webhook_allow)")
}

/// `: <the start of the answer>`, or nothing when it is empty or unreadable.
pub(super) async fn reply_excerpt(mut response: reqwest::Response) -> String {
    let mut bytes = Vec::new();
    while bytes.len() < MAX_REPLY_BYTES {
        match response.chunk().await {
            Ok(Some(chunk)) => bytes.extend_from_slice(&chunk),
            Ok(None) | Err(_) => break,
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    let text = one_line(&clip(&text, MAX_REPLY_BYTES));
    match text.trim() {
        "" => String::new(),
        text => format!(": {text}"),
    }
}

/// A webhook error without its URL (it may hold a token), with its causes.
pub(super) fn http_error(error: reqwest::Error, timeout: Duration) -> String {
    if error.is_timeout() {
        return timed_out(timeout);
    }
    if let Some(r) = outbound::refused(&error) {
        return refused(r);
    }
    chain(&error.without_url())
}
