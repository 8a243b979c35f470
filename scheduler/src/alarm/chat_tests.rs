//! Each chat kind against a local HTTP server that checks what its vendor
//! checks, written from the vendor's documentation (not from `chat.rs`):
//!
//! * DingTalk custom robot: `timestamp` (ms, within an hour) and `sign` in
//!   the query, `sign` = base64(HMAC-SHA256(key = secret, message =
//!   `timestamp + "\n" + secret`)); body `msgtype` `text` with
//!   `text.content`; a bad signature is HTTP 200 with `errcode` 310000.
//! * WeCom group robot: its `key` in the query, body `msgtype` `text` with
//!   `text.content`; a bad key is HTTP 200 with `errcode` 93000.
//! * Feishu custom bot: body `timestamp` (s, as a string), `sign` =
//!   base64(HMAC-SHA256(key = `timestamp + "\n" + secret`, message = "")),
//!   `msg_type` `text` with `content.text`; a bad signature is HTTP 200 with
//!   `code` 19021.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::{Query, State};
use axum::routing::post;
use base64::Engine;
use hmac::{Hmac, Mac};
use rondo_core::model::{AlarmChannel, ChannelKind};
use serde_json::{Value, json};
use sha2::Sha256;

use super::tests::{failure, job};
use super::*;

const SECRET: &str = "SEC0123456789abcdef";
const KEY: &str = "wecom-key-1";

/// What a server took: the text of each message it accepted.
type Taken = Arc<Mutex<Vec<String>>>;

fn hmac_b64(key: &[u8], message: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
    mac.update(message);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn now_ms() -> i64 {
    rondo_core::clock::now_ms()
}

async fn dingtalk(
    State(taken): State<Taken>,
    Query(q): Query<HashMap<String, String>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    if q.get("access_token").map(String::as_str) != Some("robot-1") {
        return Json(json!({ "errcode": 300001, "errmsg": "token is not exist" }));
    }
    let ts: i64 = q.get("timestamp").and_then(|t| t.parse().ok()).unwrap_or(0);
    let want = hmac_b64(SECRET.as_bytes(), format!("{ts}\n{SECRET}").as_bytes());
    if (now_ms() - ts).abs() > 3_600_000 || q.get("sign") != Some(&want) {
        return Json(json!({ "errcode": 310000, "errmsg": "sign not match" }));
    }
    match (&body["msgtype"], body["text"]["content"].as_str()) {
        (Value::String(t), Some(content)) if t == "text" && !content.is_empty() => {
            taken.lock().unwrap().push(content.to_owned());
            Json(json!({ "errcode": 0, "errmsg": "ok" }))
        }
        _ => Json(json!({ "errcode": 40035, "errmsg": "missing parameter" })),
    }
}

async fn wecom(
    State(taken): State<Taken>,
    Query(q): Query<HashMap<String, String>>,
    Json(body): Json<Value>,
) -> Json<Value> {
    if q.get("key").map(String::as_str) != Some(KEY) {
        return Json(json!({ "errcode": 93000, "errmsg": "invalid webhook url" }));
    }
    match (&body["msgtype"], body["text"]["content"].as_str()) {
        (Value::String(t), Some(content)) if t == "text" && !content.is_empty() => {
            taken.lock().unwrap().push(content.to_owned());
            Json(json!({ "errcode": 0, "errmsg": "ok" }))
        }
        _ => Json(json!({ "errcode": 44004, "errmsg": "empty content" })),
    }
}

async fn feishu(State(taken): State<Taken>, Json(body): Json<Value>) -> Json<Value> {
    let ts: i64 = body["timestamp"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or(0);
    let want = hmac_b64(format!("{ts}\n{SECRET}").as_bytes(), b"");
    if (now_ms() / 1000 - ts).abs() > 3_600 || body["sign"].as_str() != Some(want.as_str()) {
        return Json(json!({
            "code": 19021,
            "msg": "sign match fail or timestamp is not within one hour from current time"
        }));
    }
    match (&body["msg_type"], body["content"]["text"].as_str()) {
        (Value::String(t), Some(text)) if t == "text" && !text.is_empty() => {
            taken.lock().unwrap().push(text.to_owned());
            Json(json!({ "code": 0, "msg": "success", "data": {} }))
        }
        _ => Json(json!({ "code": 9499, "msg": "Bad Request" })),
    }
}

async fn slack(State(taken): State<Taken>, Json(body): Json<Value>) -> &'static str {
    taken
        .lock()
        .unwrap()
        .push(body["text"].as_str().unwrap_or_default().to_owned());
    "ok"
}

async fn plain_json(State(taken): State<Taken>, Json(body): Json<Value>) -> &'static str {
    assert_eq!(body["v"], 1);
    assert_eq!(body["job_id"], 42);
    taken
        .lock()
        .unwrap()
        .push(body["text"].as_str().unwrap_or_default().to_owned());
    "ok"
}

/// The vendors' servers on loopback, and what they took.
async fn servers() -> (std::net::SocketAddr, Taken) {
    let taken = Taken::default();
    let app = axum::Router::new()
        .route("/robot/send", post(dingtalk))
        .route("/cgi-bin/webhook/send", post(wecom))
        .route("/open-apis/bot/v2/hook/abc", post(feishu))
        .route("/slack", post(slack))
        .route("/json", post(plain_json))
        .with_state(taken.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (addr, taken)
}

fn channel(name: &str, kind: &str, url: String, secret: &str, template: &str) -> AlarmChannel {
    AlarmChannel {
        name: name.into(),
        kind: kind.into(),
        url,
        secret: secret.into(),
        template: template.into(),
        updated_ms: 0,
    }
}

fn alarmer() -> Alarmer {
    Alarmer::new(&AlarmConfig {
        webhook_allow: vec!["127.0.0.1".into()],
        console_url: "https://rondo.example.com/".into(),
        ..AlarmConfig::default()
    })
}

#[tokio::test]
async fn each_chat_kind_is_taken_by_a_server_that_checks_it_as_its_vendor_does() {
    let (addr, taken) = servers().await;
    let base = format!("http://{addr}");
    let channels = [
        channel(
            "ding",
            "dingtalk",
            format!("{base}/robot/send?access_token=robot-1"),
            SECRET,
            "告警 {job} {trigger_id} {link}",
        ),
        channel(
            "wecom",
            "wecom",
            format!("{base}/cgi-bin/webhook/send?key={KEY}"),
            "",
            "",
        ),
        channel(
            "feishu",
            "feishu",
            format!("{base}/open-apis/bot/v2/hook/abc"),
            SECRET,
            "{group}/{job_id}: code {code}, {msg}",
        ),
        channel("slack", "slack", format!("{base}/slack"), "", "{executor}"),
        channel("json", "json", format!("{base}/json"), "", "{retry_count}"),
    ];
    let mut job = job("", "");
    job.alarm_channels = channels.iter().map(|c| c.name.clone()).collect();
    let found: Vec<Option<AlarmChannel>> = channels.iter().cloned().map(Some).collect();
    let record = alarmer().alarm(&job, &found, &failure()).await;
    assert_eq!(record.status, alarm_status::SENT, "{}", record.msg);
    let mut got = taken.lock().unwrap().clone();
    got.sort();
    let mut want = vec![
        "告警 nightly report 42-1700000000000-0 https://rondo.example.com/logs/42-1700000000000-0"
            .to_owned(),
        "demo/42: code 500, boom\nat line 3".to_owned(),
        "demo-host-1".to_owned(),
        "1".to_owned(),
        "rondo alarm: job 42 (nightly report) of demo failed\ntrigger 42-1700000000000-0 at \
         2023-11-14T22:13:20.000Z on demo-host-1: code 500\nboom\nat line 3\n\
         failures in this alarm: 1\nhttps://rondo.example.com/logs/42-1700000000000-0"
            .to_owned(),
    ];
    want.sort();
    assert_eq!(got, want);
    for name in ["ding", "wecom", "feishu", "slack", "json"] {
        assert!(
            record.msg.contains(&format!("channel {name}: sent")),
            "{}",
            record.msg
        );
    }
}

#[tokio::test]
async fn a_vendor_refusal_in_a_200_answer_fails_the_alarm_with_its_reason() {
    let (addr, taken) = servers().await;
    let base = format!("http://{addr}");
    let wrong = [
        channel(
            "ding",
            "dingtalk",
            format!("{base}/robot/send?access_token=robot-1"),
            "SECnot-the-secret",
            "",
        ),
        channel(
            "feishu",
            "feishu",
            format!("{base}/open-apis/bot/v2/hook/abc"),
            "",
            "",
        ),
        channel(
            "wecom",
            "wecom",
            format!("{base}/cgi-bin/webhook/send?key=stale"),
            "",
            "",
        ),
    ];
    let mut job = job("", "");
    job.alarm_channels = vec![
        "ding".into(),
        "feishu".into(),
        "wecom".into(),
        "gone".into(),
    ];
    let mut found: Vec<Option<AlarmChannel>> = wrong.iter().cloned().map(Some).collect();
    found.push(None);
    let record = alarmer().alarm(&job, &found, &failure()).await;
    assert_eq!(record.status, alarm_status::FAILED);
    for part in [
        "channel ding failed: dingtalk refused it: code 310000: sign not match",
        "channel feishu failed: feishu refused it: code 19021",
        "channel wecom failed: wecom refused it: code 93000",
        "channel gone failed: no such channel",
    ] {
        assert!(record.msg.contains(part), "{part} in {}", record.msg);
    }
    assert!(taken.lock().unwrap().is_empty());
}

#[test]
fn the_signatures_match_the_vendors_definitions() {
    let ts = 1_700_000_000_000;
    assert_eq!(
        chat::dingtalk_sign(SECRET, ts),
        hmac_b64(SECRET.as_bytes(), format!("{ts}\n{SECRET}").as_bytes())
    );
    assert_eq!(
        chat::feishu_sign(SECRET, ts / 1000),
        hmac_b64(format!("{}\n{SECRET}", ts / 1000).as_bytes(), b"")
    );
}

/// Issue 47: a Slack channel posted a job's output as mrkdwn, so output
/// holding `<!channel>`, `<@U…>` or `<http://evil|bank>` mentioned
/// everyone, a user, or showed a disguised link. Each field is shown
/// literally where the text is markup (Slack; Feishu's `<at>`), as sent
/// where it is not, and the admin's template keeps its own markup.
#[test]
fn a_jobs_output_is_shown_literally_where_the_text_is_markup() {
    let job = job("", "");
    let mut failure = failure();
    failure.msg = "<!channel> pay at <http://evil.example|your bank> & ask <@U024BE7LH> \
                   <at user_id=\"all\"></at>"
        .into();
    let report = render::Report {
        job: &job,
        failure: &failure,
        sent_ms: 0,
    };
    let template = "<{link}|log>: {msg}";
    let text_of = |kind: ChannelKind| {
        let c = channel("c", &kind.to_string(), String::new(), "", template);
        chat::text(&c, kind, &report, "https://rondo.example.com")
    };
    let escaped = "&lt;!channel&gt; pay at &lt;http://evil.example|your bank&gt; &amp; ask \
                   &lt;@U024BE7LH&gt; &lt;at user_id=\"all\"&gt;&lt;/at&gt;";
    let link = "https://rondo.example.com/logs/42-1700000000000-0";
    for kind in [ChannelKind::Slack, ChannelKind::Feishu] {
        assert_eq!(text_of(kind), format!("<{link}|log>: {escaped}"), "{kind}");
    }
    for kind in [ChannelKind::DingTalk, ChannelKind::WeCom, ChannelKind::Json] {
        assert_eq!(
            text_of(kind),
            format!("<{link}|log>: {}", failure.msg),
            "{kind}"
        );
    }
    // The plain webhook's `text`, for Slack-style hooks, is escaped too;
    // `msg` is as it was.
    let body = serde_json::to_value(render::webhook_body(&report)).unwrap();
    let text = body["text"].as_str().unwrap();
    assert!(
        text.contains(escaped) && !text.contains("<!channel>"),
        "{text}"
    );
    assert_eq!(body["msg"], failure.msg.as_str());
}
