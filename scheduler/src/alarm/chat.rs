//! Alarm channels: the message each kind of receiver takes, its signature,
//! and how it says it took it.
//!
//! | kind | body | signature | taken when |
//! | --- | --- | --- | --- |
//! | `dingtalk` | `{"msgtype": "text", "text": {"content": …}}` | with a secret: `&timestamp=<ms>&sign=<s>` on the URL, `s` = URL-encoded base64 of HMAC-SHA256(key = secret, `<ms>\n<secret>`) | 2xx and `errcode` 0 |
//! | `wecom` | `{"msgtype": "text", "text": {"content": …}}` | none (the key is in the URL) | 2xx and `errcode` 0 |
//! | `feishu` | `{"msg_type": "text", "content": {"text": …}}`, with a secret also `"timestamp": "<s>"` and `"sign"` = base64 of HMAC-SHA256(key = `<s>\n<secret>`, empty message) | in the body | 2xx and `code` (or `StatusCode`) 0 |
//! | `slack` | `{"text": …}` | none | 2xx |
//! | `json` | rondo's webhook body (version 1) with `text` the rendered template | none | 2xx |
//!
//! The vendors answer a refused message (a bad signature, a keyword the
//! robot requires, a rate limit) with HTTP 200 and an error code in the
//! body: that is a failure, with the vendor's code and message as its
//! reason. The text is the channel's template with the failure's fields.
//!
//! # Fields are shown literally
//!
//! The template is an admin's; the fields are not (a job's name, its
//! output in `msg`, an executor id), so a field never becomes markup:
//!
//! * `slack`: the text is mrkdwn, where `<!channel>`, `<@U…>` and
//!   `<http://evil|bank>` are a mention of everyone, a user and a
//!   disguised link. Slack's escaping (`&` → `&amp;`, `<` → `&lt;`,
//!   `>` → `&gt;`) is applied to every field, so they show as typed;
//! * `feishu`: a text message reads `<at user_id="all"></at>` as a mention
//!   of everyone, so fields get the same escaping;
//! * `dingtalk`, `wecom`: a text message is shown as sent; a mention is
//!   made only by the `at` / `mentioned_list` fields, which rondo never
//!   sends, so fields go as they are;
//! * `json`: for programs; fields go as they are.
//!
//! The template itself is not escaped: an admin's `<{link}|open the log>`
//! stays a Slack link.

use std::time::Duration;

use base64::Engine;
use hmac::{Hmac, Mac};
use rondo_core::model::channel::render_template;
use rondo_core::model::{AlarmChannel, ChannelKind};
use serde_json::{Value, json};
use sha2::Sha256;

use super::channel::timed_out;
use super::render::{Report, clip, one_line, slack_escape, utc_rfc3339, webhook_body};
use super::webhook::{Webhook, check_destination, http_error, reply_excerpt};

/// At most this much of a vendor's refusal goes into the reason.
const MAX_REFUSAL_BYTES: usize = 256;

/// Where links to a trigger in the console start (`alarm.console_url`);
/// empty: no link.
pub(super) fn trigger_link(console_url: &str, trigger_id: &str) -> String {
    match console_url.trim_end_matches('/') {
        "" => String::new(),
        base => format!("{base}/logs/{trigger_id}"),
    }
}

/// The channel's text for `report`, each field literal for `kind`.
pub(super) fn text(
    channel: &AlarmChannel,
    kind: ChannelKind,
    report: &Report<'_>,
    console_url: &str,
) -> String {
    render_template(&channel.template, |field| {
        literal(kind, field_value(field, report, console_url))
    })
}

/// A field as shown in `kind`'s text (see the module doc).
fn literal(kind: ChannelKind, value: String) -> String {
    match kind {
        ChannelKind::Slack | ChannelKind::Feishu => slack_escape(&value),
        ChannelKind::DingTalk | ChannelKind::WeCom | ChannelKind::Json => value,
    }
}

/// The value of one template field.
fn field_value(field: &str, report: &Report<'_>, console_url: &str) -> String {
    let f = report.failure;
    let job = report.job;
    match field {
        "job_id" => job.id.to_string(),
        "job" => one_line(report.job_name()),
        "group" => job.group.clone(),
        "handler" => job.handler.clone(),
        "trigger_id" => f.trigger_id.clone(),
        "fire_time" => utc_rfc3339(f.fire_ms),
        "executor" => match f.executor_id.as_str() {
            "" => "no executor".to_owned(),
            id => id.to_owned(),
        },
        "code" => f.code.to_string(),
        "msg" => clip(&f.msg, 2_000),
        "retry_count" => f.retry_count.to_string(),
        "failures" => f.failures.to_string(),
        "link" => trigger_link(console_url, &f.trigger_id),
        _ => String::new(),
    }
}

/// HMAC-SHA256 of `message` with `key`, base64.
fn hmac_base64(key: &[u8], message: &[u8]) -> String {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(key) else {
        // HMAC takes a key of any length.
        return String::new();
    };
    mac.update(message);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// DingTalk's signature of `timestamp_ms`: base64 of HMAC-SHA256 with the
/// secret as key over `"<timestamp>\n<secret>"` (URL-encode it for the
/// query).
pub fn dingtalk_sign(secret: &str, timestamp_ms: i64) -> String {
    hmac_base64(
        secret.as_bytes(),
        format!("{timestamp_ms}\n{secret}").as_bytes(),
    )
}

/// Feishu's signature of `timestamp_s`: base64 of HMAC-SHA256 with
/// `"<timestamp>\n<secret>"` as key over nothing.
pub fn feishu_sign(secret: &str, timestamp_s: i64) -> String {
    hmac_base64(format!("{timestamp_s}\n{secret}").as_bytes(), b"")
}

/// The URL and body to post for `channel`, signed at `now_ms`.
pub(super) fn request(
    channel: &AlarmChannel,
    kind: ChannelKind,
    report: &Report<'_>,
    text: String,
    now_ms: i64,
) -> Result<(reqwest::Url, Value), String> {
    let mut url = reqwest::Url::parse(&channel.url).map_err(|e| format!("not a URL: {e}"))?;
    let body = match kind {
        ChannelKind::DingTalk => {
            if !channel.secret.is_empty() {
                url.query_pairs_mut()
                    .append_pair("timestamp", &now_ms.to_string())
                    .append_pair("sign", &dingtalk_sign(&channel.secret, now_ms));
            }
            json!({ "msgtype": "text", "text": { "content": text } })
        }
        ChannelKind::WeCom => json!({ "msgtype": "text", "text": { "content": text } }),
        ChannelKind::Feishu => {
            let mut body = json!({ "msg_type": "text", "content": { "text": text } });
            if !channel.secret.is_empty() {
                let seconds = now_ms.div_euclid(1000);
                body["timestamp"] = json!(seconds.to_string());
                body["sign"] = json!(feishu_sign(&channel.secret, seconds));
            }
            body
        }
        ChannelKind::Slack => json!({ "text": text }),
        ChannelKind::Json => {
            let mut body = serde_json::to_value(webhook_body(report)).unwrap_or_default();
            body["text"] = json!(text);
            body
        }
    };
    Ok((url, body))
}

/// Whether the vendor took the message: its answer's error code, when the
/// kind has one.
fn vendor_refusal(kind: ChannelKind, answer: &[u8]) -> Option<String> {
    let fields: &[&str] = match kind {
        ChannelKind::DingTalk | ChannelKind::WeCom => &["errcode"],
        ChannelKind::Feishu => &["code", "StatusCode"],
        ChannelKind::Slack | ChannelKind::Json => return None,
    };
    let Ok(reply) = serde_json::from_slice::<Value>(answer) else {
        return Some(format!(
            "the answer is not {kind}'s JSON: {}",
            one_line(&clip(&String::from_utf8_lossy(answer), MAX_REFUSAL_BYTES))
        ));
    };
    let code = fields
        .iter()
        .find_map(|f| reply.get(*f).and_then(Value::as_i64));
    match code {
        Some(0) => None,
        Some(code) => {
            let message = ["errmsg", "msg", "StatusMessage"]
                .iter()
                .find_map(|f| reply.get(*f).and_then(Value::as_str))
                .unwrap_or("");
            Some(format!(
                "{kind} refused it: code {code}: {}",
                one_line(&clip(message, MAX_REFUSAL_BYTES))
            ))
        }
        None => Some(format!("{kind}'s answer has no {}", fields.join(" or "))),
    }
}

/// Posts the failure to `channel`. Ok: what the receiver said; Err: why
/// it was not taken.
pub(super) async fn post(
    http: &Result<Webhook, String>,
    timeout: Duration,
    channel: &AlarmChannel,
    report: &Report<'_>,
    console_url: &str,
) -> Result<String, String> {
    let http = http.as_ref().map_err(Clone::clone)?;
    let kind = ChannelKind::parse("kind", &channel.kind).map_err(|e| e.message)?;
    let text = text(channel, kind, report, console_url);
    let (url, body) = request(channel, kind, report, text, report.sent_ms)?;
    check_destination(http, &url)?;
    let exchange = async {
        let response = http
            .client()
            .post(url)
            .json(&body)
            .send()
            .await
            .map_err(|e| http_error(e, timeout))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("HTTP {status}{}", reply_excerpt(response).await));
        }
        let answer = response.bytes().await.map_err(|e| http_error(e, timeout))?;
        match vendor_refusal(kind, &answer) {
            Some(reason) => Err(reason),
            None => Ok(format!("sent (HTTP {})", status.as_u16())),
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or_else(|_| Err(timed_out(timeout)))
}
