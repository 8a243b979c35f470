//! Calls to an executor's embedded server: `/beat`, `/idleBeat`, `/run` or
//! `/trigger`, `/kill`, `/log`, each a JSON `POST` with its group's access
//! token (and, for 3.5, the appname) in its headers, and only to an address
//! `xxl.address_allow`'s destination rule allows (judged on the resolved
//! address of every new connection: a refused one is
//! [`CallError::Unreachable`], nothing sent).
//!
//! A call ends in one of five ways, and callers branch on which, because
//! they mean different things for a trigger:
//! * an [`Reply`]: the executor answered (success or its refusal);
//! * [`CallError::Unreachable`]: no connection was made, so the request
//!   certainly did not reach it (the trigger can go elsewhere);
//! * [`CallError::Late`]: the call's send-by instant passed before the
//!   request went (this gateway stalled): it was not sent;
//! * [`CallError::NoAnswer`]: sent, but no answer in time or the
//!   connection broke: whether it was taken is unknown;
//! * [`CallError::Garbage`]: it answered something that is not XXL-JOB's
//!   JSON (the first bytes are kept for the message).

use std::time::Duration;

use reqwest::header::{CONTENT_TYPE, HeaderMap, HeaderValue};
use rondo_core::destination::Destinations;
use serde::Serialize;

use crate::wire::{self, Generation, LogPage, LogParam, Reply, TriggerParam};

/// The first bytes of a garbage answer kept for the trigger's message.
const GARBAGE_BYTES: usize = 200;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CallError {
    #[error("cannot reach {address}: {detail}")]
    Unreachable { address: String, detail: String },
    #[error("not sent to {address}: this gateway stalled past the send's deadline")]
    Late { address: String },
    #[error("no answer from {address}: {detail}")]
    NoAnswer { address: String, detail: String },
    #[error("{address} answered what is not XXL-JOB's JSON (HTTP {status}): {first_bytes:?}")]
    Garbage {
        address: String,
        status: u16,
        first_bytes: String,
    },
}

/// Where an executor is and what it speaks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Its address as registered, ending in `/` (`http://10.0.0.5:9999/`).
    pub address: String,
    pub app: String,
    pub generation: Generation,
    /// The access token it is sent (its group's; empty: none).
    pub token: String,
}

/// The HTTP client every call goes through: kept-alive connections of its
/// own for `http://` executors (`http1`), reqwest for `https://` ones.
#[derive(Clone)]
pub struct Client {
    http: reqwest::Client,
    plain: std::sync::Arc<crate::http1::Pool>,
    rule: std::sync::Arc<Destinations>,
    timeout: Duration,
}

impl Client {
    /// A client whose calls wait `timeout` for their answer and go only
    /// where `rule` allows.
    pub fn new(timeout: Duration, rule: Destinations) -> Result<Client, reqwest::Error> {
        let builder = reqwest::Client::builder()
            .connect_timeout(timeout.min(Duration::from_secs(3)))
            // Small requests and answers, one after another on a kept-alive
            // connection: no waiting for Nagle's algorithm.
            .tcp_nodelay(true)
            .http1_only()
            // An executor's answer is small; one that talks without end
            // is cut by the timeout.
            .pool_idle_timeout(Duration::from_secs(50));
        // No redirect is followed: an executor's server never sends one.
        let http = rondo_core::outbound::guard(builder, rule.clone())
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Client {
            http,
            plain: std::sync::Arc::new(crate::http1::Pool::guarded(rule.clone())),
            rule: std::sync::Arc::new(rule),
            timeout,
        })
    }

    /// Where calls may go (`xxl.address_allow`'s rule).
    pub fn rule(&self) -> &Destinations {
        &self.rule
    }

    /// How long a call waits for its answer.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    pub async fn beat(&self, target: &Target, timeout: Duration) -> Result<Reply, CallError> {
        self.call_within(target, "beat", &serde_json::json!({}), timeout)
            .await
    }

    pub async fn idle_beat(&self, target: &Target, job_id: i32) -> Result<Reply, CallError> {
        self.call(target, "idleBeat", &wire::JobIdParam { job_id })
            .await
    }

    /// Posts a trigger to the path of the target's generation, unless
    /// `send_by` passed before it went.
    pub async fn trigger(
        &self,
        target: &Target,
        param: &TriggerParam,
        send_by: tokio::time::Instant,
    ) -> Result<Reply, CallError> {
        self.call_by(
            target,
            target.generation.trigger_path(),
            param,
            self.timeout,
            Some(send_by),
        )
        .await
    }

    pub async fn kill(&self, target: &Target, job_id: i32) -> Result<Reply, CallError> {
        self.call(target, "kill", &wire::JobIdParam { job_id })
            .await
    }

    /// A page of a run's log from line `from` (1-based); `Ok(None)` when
    /// the executor answered without a page (it has no such log).
    pub async fn log(
        &self,
        target: &Target,
        log_id: i64,
        log_date_ms: i64,
        from: i32,
    ) -> Result<Option<LogPage>, CallError> {
        let reply = self
            .call(target, "log", &LogParam::new(log_id, log_date_ms, from))
            .await?;
        Ok(reply
            .payload()
            .and_then(|p| serde_json::from_value::<LogPage>(p.clone()).ok()))
    }

    async fn call(
        &self,
        target: &Target,
        path: &str,
        body: &impl Serialize,
    ) -> Result<Reply, CallError> {
        self.call_within(target, path, body, self.timeout).await
    }

    async fn call_within(
        &self,
        target: &Target,
        path: &str,
        body: &impl Serialize,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        self.call_by(target, path, body, timeout, None).await
    }

    async fn call_by(
        &self,
        target: &Target,
        path: &str,
        body: &impl Serialize,
        timeout: Duration,
        send_by: Option<tokio::time::Instant>,
    ) -> Result<Reply, CallError> {
        if send_by.is_some_and(|by| tokio::time::Instant::now() >= by) {
            return Err(CallError::Late {
                address: target.address.clone(),
            });
        }
        let url = format!("{}{path}", target.address);
        let started = std::time::Instant::now();
        let outcome = match crate::http1::split_http(&url) {
            Some((authority, path)) => {
                let body = serde_json::to_vec(body).unwrap_or_default();
                self.call_plain(target, authority, path, &body, (timeout, send_by))
                    .await
            }
            None => self.call_tls(target, &url, body, timeout).await,
        };
        metrics::histogram!("rondo_xxl_call_seconds", "call" => call_label(path))
            .record(started.elapsed().as_secs_f64());
        outcome
    }

    /// An `https://` call, through reqwest (the rule in its resolver, and
    /// on an address written in the URL).
    async fn call_tls(
        &self,
        target: &Target,
        url: &str,
        body: &impl Serialize,
        timeout: Duration,
    ) -> Result<Reply, CallError> {
        let unreachable = |detail: String| CallError::Unreachable {
            address: target.address.clone(),
            detail,
        };
        let parsed = reqwest::Url::parse(url).map_err(|e| unreachable(e.to_string()))?;
        rondo_core::outbound::check_url(&self.rule, &parsed).map_err(|refused| {
            metrics::counter!("rondo_xxl_calls_refused_total").increment(1);
            unreachable(format!("{refused} (xxl.address_allow)"))
        })?;
        let sent = self
            .http
            .post(parsed)
            .headers(headers(target))
            .json(body)
            .timeout(timeout)
            .send()
            .await;
        match sent {
            Ok(response) => read(&target.address, response).await,
            Err(e) => Err(classify(&target.address, &e)),
        }
    }

    async fn call_plain(
        &self,
        target: &Target,
        authority: &str,
        path: &str,
        body: &[u8],
        (timeout, send_by): (Duration, Option<tokio::time::Instant>),
    ) -> Result<Reply, CallError> {
        let address = target.address.as_str();
        let mut headers = Vec::with_capacity(2);
        if !target.token.is_empty() {
            headers.push((wire::TOKEN_HEADER, target.token.as_str()));
        }
        headers.push((wire::APPNAME_HEADER, target.app.as_str()));
        let answer = self
            .plain
            .post_by(authority, path, &headers, body, timeout, send_by)
            .await
            .map_err(|failure| match failure {
                crate::http1::Failure::Late => CallError::Late {
                    address: address.to_owned(),
                },
                crate::http1::Failure::Connect(e) => CallError::Unreachable {
                    address: address.to_owned(),
                    detail: e.to_string(),
                },
                crate::http1::Failure::Lost(e) => CallError::NoAnswer {
                    address: address.to_owned(),
                    detail: e.to_string(),
                },
                crate::http1::Failure::Malformed(why) => CallError::Garbage {
                    address: address.to_owned(),
                    status: 0,
                    first_bytes: why,
                },
            })?;
        match serde_json::from_slice::<Reply>(&answer.body) {
            Ok(reply) if answer.status == 200 => Ok(reply),
            _ => Err(CallError::Garbage {
                address: address.to_owned(),
                status: answer.status,
                first_bytes: first_bytes(&answer.body),
            }),
        }
    }
}

/// The headers of an `https://` call to `target`.
fn headers(target: &Target) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/json;charset=UTF-8"),
    );
    if let Ok(token) = HeaderValue::from_str(&target.token)
        && !target.token.is_empty()
    {
        headers.insert(wire::TOKEN_HEADER, token);
    }
    if let Ok(app) = HeaderValue::from_str(&target.app) {
        headers.insert(wire::APPNAME_HEADER, app);
    }
    headers
}

/// The metric label of a path (bounded: the five calls).
fn call_label(path: &str) -> &'static str {
    match path {
        "beat" => "beat",
        "idleBeat" => "idle_beat",
        "run" | "trigger" => "trigger",
        "kill" => "kill",
        _ => "log",
    }
}

async fn read(address: &str, response: reqwest::Response) -> Result<Reply, CallError> {
    let status = response.status().as_u16();
    let body = response.bytes().await.map_err(|e| CallError::NoAnswer {
        address: address.to_owned(),
        detail: format!("the answer broke off: {e}"),
    })?;
    match serde_json::from_slice::<Reply>(&body) {
        Ok(reply) if status == 200 => Ok(reply),
        _ => Err(CallError::Garbage {
            address: address.to_owned(),
            status,
            first_bytes: first_bytes(&body),
        }),
    }
}

/// Up to [`GARBAGE_BYTES`] of `body`, cut at a character boundary.
fn first_bytes(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(GARBAGE_BYTES + 4)]);
    rondo_core::model::prefix(&text, GARBAGE_BYTES).to_owned()
}

fn classify(address: &str, e: &reqwest::Error) -> CallError {
    let detail = rondo_core::error::chain(e);
    if e.is_connect() {
        CallError::Unreachable {
            address: address.to_owned(),
            detail,
        }
    } else {
        CallError::NoAnswer {
            address: address.to_owned(),
            detail,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn garbage_is_cut_at_a_character_boundary() {
        let body = "é".repeat(300);
        let cut = first_bytes(body.as_bytes());
        assert!(cut.len() <= GARBAGE_BYTES);
        assert!(cut.chars().all(|c| c == 'é'));
        assert_eq!(first_bytes(b"<html>"), "<html>");
    }

    fn loopback() -> Destinations {
        Destinations::parse("xxl.address_allow", &["127.0.0.0/8".into()]).unwrap()
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable_and_garbage_is_kept() {
        let client = Client::new(Duration::from_secs(2), loopback()).unwrap();
        let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = closed.local_addr().unwrap().port();
        drop(closed);
        let target = Target {
            address: format!("http://127.0.0.1:{port}/"),
            app: "a".into(),
            generation: Generation::Two,
            token: "t".into(),
        };
        let e = client
            .beat(&target, Duration::from_secs(1))
            .await
            .unwrap_err();
        assert!(matches!(e, CallError::Unreachable { .. }), "{e:?}");

        let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}/", server.local_addr().unwrap());
        let app = axum::Router::new().fallback(|| async { "<html>busy</html>" });
        tokio::spawn(async move { axum::serve(server, app).await });
        let target = Target { address, ..target };
        let e = client
            .beat(&target, Duration::from_secs(2))
            .await
            .unwrap_err();
        match e {
            CallError::Garbage { first_bytes, .. } => assert_eq!(first_bytes, "<html>busy</html>"),
            other => panic!("{other:?}"),
        }
    }

    #[tokio::test]
    async fn an_address_outside_the_rule_is_never_connected_to() {
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        server.set_nonblocking(true).unwrap();
        let port = server.local_addr().unwrap().port();
        let strict = Client::new(Duration::from_secs(2), Destinations::default()).unwrap();
        for address in [
            format!("http://127.0.0.1:{port}/"),
            format!("http://localhost:{port}/"),
            format!("https://127.0.0.1:{port}/"),
        ] {
            let target = Target {
                address: address.clone(),
                app: "a".into(),
                generation: Generation::Two,
                token: "t".into(),
            };
            match strict.beat(&target, Duration::from_secs(1)).await {
                Err(CallError::Unreachable { detail, .. }) => {
                    assert!(detail.contains("xxl.address_allow"), "{address}: {detail}");
                }
                other => panic!("{address}: {other:?}"),
            }
        }
        assert!(
            matches!(server.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "no connection was made"
        );
    }
}
