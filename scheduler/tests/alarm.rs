//! Failure alarms against a local SMTP sink and a local webhook receiver,
//! both started inside the test on loopback port 0 (no outside service).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::routing::post;
use axum::{Json, Router};
use rondo_core::Job;
use rondo_core::config::AlarmConfig;
use rondo_core::event::{AlarmRecord, alarm_status};
use rondo_core::model::ScheduleType;
use rondo_scheduler::alarm::{Alarmer, Failure};
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

const TRIGGER_ID: &str = "42-1700000000000-0";
/// Short, so the timeout tests are quick; long enough for loopback.
const TIMEOUT_MS: u64 = 400;
/// What a bounded alarm may take beyond its timeout on a busy machine.
const SLACK: Duration = Duration::from_millis(1500);

// ---- fixtures ----

fn job(alarm_email: &str, alarm_webhook: &str) -> Job {
    Job {
        description: "nightly report".into(),
        schedule_type: ScheduleType::Cron,
        schedule_conf: "0 0 3 * * ?".into(),
        params: "--day=today".into(),
        retries: 1,
        alarm_email: alarm_email.into(),
        alarm_webhook: alarm_webhook.into(),
        ..Job::new(42, "demo", "report")
    }
}

fn failure() -> Failure {
    Failure {
        trigger_id: TRIGGER_ID.into(),
        fire_ms: 1_700_000_000_000,
        executor_id: "demo-host-1".into(),
        code: 500,
        msg: "boom: disk full".into(),
        retry_count: 1,
        params: "--day=today".into(),
        failures: 1,
    }
}

fn config(smtp: Option<SocketAddr>) -> AlarmConfig {
    AlarmConfig {
        smtp_host: smtp.map(|a| a.ip().to_string()).unwrap_or_default(),
        smtp_port: smtp.map_or(25, |a| a.port()),
        smtp_tls: "none".into(),
        smtp_from: "rondo <rondo@example.com>".into(),
        timeout_ms: TIMEOUT_MS,
        // The test webhooks listen on loopback.
        webhook_allow: vec!["127.0.0.1".into()],
        email_allow: vec!["example.com".into(), "example.org".into()],
        ..AlarmConfig::default()
    }
}

async fn alarm(config: &AlarmConfig, job: &Job) -> (AlarmRecord, Duration) {
    let alarmer = Alarmer::try_new(config).expect("a valid alarm config");
    let started = Instant::now();
    let record = alarmer.alarm(job, &[], &failure()).await;
    assert_eq!(record.trigger_id, TRIGGER_ID);
    assert_eq!((record.job_id, record.fire_ms), (42, 1_700_000_000_000));
    (record, started.elapsed())
}

// ---- a local SMTP sink ----

#[derive(Debug, Clone, Default)]
struct Mail {
    from: String,
    rcpts: Vec<String>,
    data: String,
    /// The decoded `AUTH PLAIN` response: `\0user\0password`.
    auth: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SmtpMode {
    Accept,
    /// Answers the end of DATA with a permanent error.
    RejectData,
    /// Accepts the connection and never says a word.
    Silent,
}

struct SmtpSink {
    addr: SocketAddr,
    mails: Arc<Mutex<Vec<Mail>>>,
}

impl SmtpSink {
    async fn start(mode: SmtpMode, required_auth: Option<&str>) -> SmtpSink {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let mails = Arc::new(Mutex::new(Vec::new()));
        let sink_mails = mails.clone();
        let required_auth = required_auth.map(str::to_owned);
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (mails, auth) = (sink_mails.clone(), required_auth.clone());
                tokio::spawn(async move {
                    if mode == SmtpMode::Silent {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        drop(stream);
                        return;
                    }
                    let _ = smtp_session(stream, mode, auth, mails).await;
                });
            }
        });
        SmtpSink { addr, mails }
    }

    fn mails(&self) -> Vec<Mail> {
        self.mails.lock().unwrap().clone()
    }
}

/// Enough of RFC 5321 for one client: EHLO/HELO, AUTH PLAIN, MAIL, RCPT,
/// DATA (with dot-unstuffing), RSET, NOOP, QUIT.
async fn smtp_session(
    stream: TcpStream,
    mode: SmtpMode,
    required_auth: Option<String>,
    mails: Arc<Mutex<Vec<Mail>>>,
) -> std::io::Result<()> {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read);
    write.write_all(b"220 sink.test ESMTP ready\r\n").await?;
    let mut mail = Mail::default();
    let mut authed = false;
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).await? == 0 {
            return Ok(());
        }
        let line = line.trim_end().to_owned();
        let verb = line
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_ascii_uppercase();
        let reply: String = match verb.as_str() {
            "EHLO" => "250-sink.test\r\n250-AUTH PLAIN\r\n250 8BITMIME".into(),
            "HELO" | "RSET" | "NOOP" => "250 ok".into(),
            "AUTH" => {
                let decoded = line.split_whitespace().nth(2).and_then(base64_decode);
                let decoded = decoded.map(|b| String::from_utf8_lossy(&b).into_owned());
                authed = decoded.is_some() && decoded == required_auth;
                mail.auth = decoded;
                if authed {
                    "235 ok"
                } else {
                    "535 bad credentials"
                }
                .into()
            }
            "MAIL" if required_auth.is_some() && !authed => "530 authentication required".into(),
            "MAIL" => {
                mail.from = angle(&line);
                "250 ok".into()
            }
            "RCPT" => {
                mail.rcpts.push(angle(&line));
                "250 ok".into()
            }
            "DATA" => {
                write.write_all(b"354 go ahead\r\n").await?;
                mail.data = read_data(&mut lines).await?;
                mails.lock().unwrap().push(std::mem::take(&mut mail));
                match mode {
                    SmtpMode::RejectData => "554 5.7.1 message rejected as spam".into(),
                    _ => "250 queued".into(),
                }
            }
            "QUIT" => {
                write.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            _ => "502 not implemented".into(),
        };
        write.write_all(format!("{reply}\r\n").as_bytes()).await?;
    }
}

/// The message lines up to the lone dot, unstuffed, joined by CRLF.
async fn read_data(
    lines: &mut BufReader<tokio::net::tcp::OwnedReadHalf>,
) -> std::io::Result<String> {
    let mut data = Vec::new();
    loop {
        let mut line = String::new();
        if lines.read_line(&mut line).await? == 0 {
            break;
        }
        let line = line.trim_end_matches(['\r', '\n']);
        if line == "." {
            break;
        }
        data.push(line.strip_prefix('.').unwrap_or(line).to_owned());
    }
    Ok(data.join("\r\n"))
}

/// `x@y` out of `MAIL FROM:<x@y> SIZE=1`.
fn angle(line: &str) -> String {
    let start = line.find('<').map_or(0, |i| i + 1);
    let end = line.find('>').unwrap_or(line.len());
    line[start..end].to_owned()
}

fn base64_decode(text: &str) -> Option<Vec<u8>> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = Vec::new();
    let (mut buffer, mut bits) = (0u32, 0);
    for byte in text.trim_end_matches('=').bytes() {
        let value = ALPHABET.iter().position(|&a| a == byte)? as u32;
        buffer = (buffer << 6) | value;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    Some(out)
}

// ---- a local webhook receiver ----

#[derive(Debug, Clone)]
struct Hook {
    path: &'static str,
    headers: HeaderMap,
    body: Value,
}

type Hooks = Arc<Mutex<Vec<Hook>>>;

/// Receives webhooks on `/ok` (204), `/fail` (500 with a reason), `/hang`
/// (never answers) and `/moved` (302 elsewhere).
struct Receiver {
    addr: SocketAddr,
    hooks: Hooks,
}

impl Receiver {
    async fn start() -> Receiver {
        let hooks: Hooks = Arc::default();
        let app = Router::new()
            .route("/ok", post(ok))
            .route("/fail", post(fail))
            .route("/hang", post(hang))
            .route("/moved", post(moved))
            .with_state(hooks.clone());
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Receiver { addr, hooks }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn hooks(&self) -> Vec<Hook> {
        self.hooks.lock().unwrap().clone()
    }
}

fn record(hooks: &Hooks, path: &'static str, headers: HeaderMap, body: Value) {
    hooks.lock().unwrap().push(Hook {
        path,
        headers,
        body,
    });
}

async fn ok(State(hooks): State<Hooks>, headers: HeaderMap, Json(body): Json<Value>) -> StatusCode {
    record(&hooks, "/ok", headers, body);
    StatusCode::NO_CONTENT
}

async fn fail(
    State(hooks): State<Hooks>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, &'static str) {
    record(&hooks, "/fail", headers, body);
    (StatusCode::INTERNAL_SERVER_ERROR, "database down\n")
}

async fn hang(State(hooks): State<Hooks>, headers: HeaderMap, Json(body): Json<Value>) {
    record(&hooks, "/hang", headers, body);
    tokio::time::sleep(Duration::from_secs(3600)).await;
}

async fn moved(
    State(hooks): State<Hooks>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, [(header::HeaderName, &'static str); 1]) {
    record(&hooks, "/moved", headers, body);
    (StatusCode::FOUND, [(header::LOCATION, "/ok")])
}

// ---- e-mail ----

#[tokio::test]
async fn a_mail_to_two_recipients_is_one_message_with_both() {
    let sink = SmtpSink::start(SmtpMode::Accept, None).await;
    let job = job("ops@example.com, oncall@example.org", "");
    let (record, _) = alarm(&config(Some(sink.addr)), &job).await;
    assert_eq!(record.status, alarm_status::SENT, "{}", record.msg);
    assert_eq!(record.msg, "email: sent to 2 recipients");
    let mails = sink.mails();
    assert_eq!(mails.len(), 1, "one message");
    let mail = &mails[0];
    assert_eq!(mail.from, "rondo@example.com");
    assert_eq!(mail.rcpts, ["ops@example.com", "oncall@example.org"]);
    assert!(mail.data.contains(TRIGGER_ID), "{}", mail.data);
    for needle in [
        "Subject: rondo alarm: job 42 (nightly report) failed",
        "Group:        demo",
        "Handler:      report",
        "Executor:     demo-host-1",
        "Code:         500 (failed)",
        "boom: disk full",
        "--day=today",
    ] {
        assert!(
            mail.data.contains(needle),
            "{needle:?} missing:\n{}",
            mail.data
        );
    }
    assert_eq!(mail.auth, None);
}

#[tokio::test]
async fn an_invalid_address_fails_the_alarm_but_not_the_others_mail() {
    let sink = SmtpSink::start(SmtpMode::Accept, None).await;
    let job = job("ops@example.com, not an address", "");
    let (record, _) = alarm(&config(Some(sink.addr)), &job).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert_eq!(
        record.msg,
        "email failed: not an address: \"not an address\" (sent to the other 1 recipient)"
    );
    assert_eq!(sink.mails()[0].rcpts, ["ops@example.com"]);
}

/// Issue 47: `alarm_email` took any recipient, so an operator could have
/// the organisation's SMTP relay mail job output anywhere. A recipient
/// outside `alarm.email_allow` (empty: the sender's domain) is not sent
/// to, even when a job was saved with it before the list changed.
#[tokio::test]
async fn a_recipient_outside_the_allowed_domains_gets_no_mail() {
    let sink = SmtpSink::start(SmtpMode::Accept, None).await;
    // The default list: the domain of `smtp_from`, example.com.
    let mut defaults = config(Some(sink.addr));
    defaults.email_allow = Vec::new();
    let job = job(
        "ops@example.com, drop@evil.io, ops@example.com.evil.io, oncall@example.org",
        "",
    );
    let (record, _) = alarm(&defaults, &job).await;
    assert_eq!(record.status, alarm_status::FAILED);
    for refused in [
        "evil.io is not",
        "example.com.evil.io is not",
        "example.org is not",
    ] {
        assert!(record.msg.contains(refused), "{refused}: {}", record.msg);
    }
    assert!(
        record.msg.contains("(sent to the other 1 recipient)"),
        "{}",
        record.msg
    );
    assert_eq!(sink.mails().len(), 1);
    assert_eq!(
        sink.mails()[0].rcpts,
        ["ops@example.com"],
        "only the allowed one"
    );
}

#[tokio::test]
async fn smtp_auth_is_used_when_a_user_is_set() {
    let sink = SmtpSink::start(SmtpMode::Accept, Some("\0alarm\0s3cret")).await;
    let mut config = config(Some(sink.addr));
    config.smtp_user = "alarm".into();
    config.smtp_password = "s3cret".into();
    let (record, _) = alarm(&config, &job("ops@example.com", "")).await;
    assert_eq!(record.status, alarm_status::SENT, "{}", record.msg);
    assert_eq!(sink.mails()[0].auth.as_deref(), Some("\0alarm\0s3cret"));

    config.smtp_password = "wrong".into();
    let (record, _) = alarm(&config, &job("ops@example.com", "")).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(record.msg.contains("535"), "{}", record.msg);
}

#[tokio::test]
async fn a_refusing_smtp_server_fails_the_alarm_with_its_answer() {
    let sink = SmtpSink::start(SmtpMode::RejectData, None).await;
    let (record, _) = alarm(&config(Some(sink.addr)), &job("ops@example.com", "")).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(record.msg.starts_with("email failed: "), "{}", record.msg);
    assert!(record.msg.contains("554"), "{}", record.msg);
}

#[tokio::test]
async fn a_silent_smtp_server_fails_the_alarm_within_the_timeout() {
    let sink = SmtpSink::start(SmtpMode::Silent, None).await;
    let (record, elapsed) = alarm(&config(Some(sink.addr)), &job("ops@example.com", "")).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(record.msg.contains("timed out"), "{}", record.msg);
    assert!(
        elapsed < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn an_smtp_server_that_is_down_fails_the_alarm_at_once() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let (record, elapsed) = alarm(&config(Some(addr)), &job("ops@example.com", "")).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(record.msg.starts_with("email failed: "), "{}", record.msg);
    assert!(
        elapsed < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "{elapsed:?}"
    );
}

#[tokio::test]
async fn tls_modes_refuse_a_plaintext_server() {
    let sink = SmtpSink::start(SmtpMode::Accept, None).await;
    // The sink offers no STARTTLS, and answers a TLS hello in clear text.
    for (tls, reason) in [("starttls", "STARTTLS is not supported"), ("tls", "")] {
        let mut config = config(Some(sink.addr));
        config.smtp_tls = tls.into();
        let (record, elapsed) = alarm(&config, &job("ops@example.com", "")).await;
        assert_eq!(record.status, alarm_status::FAILED, "{tls}");
        assert!(
            record.msg.starts_with("email failed: "),
            "{tls}: {}",
            record.msg
        );
        assert!(record.msg.contains(reason), "{tls}: {}", record.msg);
        assert!(
            elapsed < Duration::from_millis(TIMEOUT_MS) + SLACK,
            "{elapsed:?}"
        );
    }
    assert!(sink.mails().is_empty(), "nothing sent in clear text");
}

#[tokio::test]
async fn an_email_without_an_smtp_host_fails() {
    let (record, _) = alarm(&config(None), &job("ops@example.com", "")).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert_eq!(
        record.msg,
        "email failed: alarm.smtp_host is not configured"
    );
}

// ---- webhook ----

#[tokio::test]
async fn a_webhook_answered_2xx_is_sent_with_the_documented_json() {
    let receiver = Receiver::start().await;
    let (record, _) = alarm(&config(None), &job("", &receiver.url("/ok"))).await;
    assert_eq!(record.status, alarm_status::SENT, "{}", record.msg);
    assert_eq!(record.msg, "webhook: sent (HTTP 204)");
    let hooks = receiver.hooks();
    assert_eq!(hooks.len(), 1);
    let hook = &hooks[0];
    assert_eq!(hook.headers[header::CONTENT_TYPE], "application/json");
    let agent = hook.headers[header::USER_AGENT].to_str().unwrap();
    assert!(agent.starts_with("rondo-scheduler/"), "{agent}");
    let body = &hook.body;
    assert_eq!(body["v"], 1);
    assert_eq!(body["job_id"], 42);
    assert_eq!(body["job_description"], "nightly report");
    assert_eq!(body["group"], "demo");
    assert_eq!(body["handler"], "report");
    assert_eq!(body["trigger_id"], TRIGGER_ID);
    assert_eq!(body["fire_ms"], 1_700_000_000_000_i64);
    assert_eq!(body["fire_time"], "2023-11-14T22:13:20.000Z");
    assert_eq!(body["executor_id"], "demo-host-1");
    assert_eq!(body["code"], 500);
    assert_eq!(body["msg"], "boom: disk full");
    assert_eq!(body["params"], "--day=today");
    assert_eq!(body["retry_count"], 1);
    assert!(body["sent_ms"].as_i64().unwrap() > 1_700_000_000_000);
    let text = body["text"].as_str().unwrap();
    assert!(text.contains(TRIGGER_ID) && text.contains("boom"), "{text}");
}

#[tokio::test]
async fn a_webhook_answered_500_fails_with_the_status_and_the_answer() {
    let receiver = Receiver::start().await;
    let (record, _) = alarm(&config(None), &job("", &receiver.url("/fail"))).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert_eq!(
        record.msg,
        "webhook failed: HTTP 500 Internal Server Error: database down"
    );
    assert_eq!(receiver.hooks().len(), 1);
}

#[tokio::test]
async fn a_hanging_webhook_fails_within_the_timeout() {
    let receiver = Receiver::start().await;
    let (record, elapsed) = alarm(&config(None), &job("", &receiver.url("/hang"))).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert_eq!(
        record.msg,
        format!("webhook failed: timed out after {TIMEOUT_MS} ms")
    );
    assert!(elapsed >= Duration::from_millis(TIMEOUT_MS), "{elapsed:?}");
    assert!(
        elapsed < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "{elapsed:?}"
    );
    assert_eq!(receiver.hooks().len(), 1, "the request did arrive");
}

#[tokio::test]
async fn a_redirect_is_not_followed() {
    let receiver = Receiver::start().await;
    let (record, _) = alarm(&config(None), &job("", &receiver.url("/moved"))).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(record.msg.contains("HTTP 302"), "{}", record.msg);
    let paths: Vec<&str> = receiver.hooks().iter().map(|h| h.path).collect();
    assert_eq!(paths, ["/moved"]);
}

#[tokio::test]
async fn an_unreachable_webhook_fails_without_revealing_its_url() {
    let closed = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = closed.local_addr().unwrap();
    drop(closed);
    let url = format!("http://{addr}/hook?token=very-secret");
    let (record, elapsed) = alarm(&config(None), &job("", &url)).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(record.msg.starts_with("webhook failed: "), "{}", record.msg);
    assert!(!record.msg.contains("very-secret"), "{}", record.msg);
    assert!(
        elapsed < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "{elapsed:?}"
    );
}

// ---- both, neither ----

#[tokio::test]
async fn a_job_without_channels_needs_no_alarm() {
    let (record, _) = alarm(&config(None), &job("", "")).await;
    assert_eq!(record.status, alarm_status::NOT_NEEDED);
}

#[tokio::test]
async fn both_channels_sent_is_sent() {
    let sink = SmtpSink::start(SmtpMode::Accept, None).await;
    let receiver = Receiver::start().await;
    let job = job("ops@example.com", &receiver.url("/ok"));
    let (record, _) = alarm(&config(Some(sink.addr)), &job).await;
    assert_eq!(record.status, alarm_status::SENT, "{}", record.msg);
    assert_eq!(
        record.msg,
        "email: sent to 1 recipient; webhook: sent (HTTP 204)"
    );
    assert_eq!((sink.mails().len(), receiver.hooks().len()), (1, 1));
}

#[tokio::test]
async fn one_failing_channel_of_two_fails_the_alarm_and_says_which() {
    let sink = SmtpSink::start(SmtpMode::Accept, None).await;
    let receiver = Receiver::start().await;
    let job_hook_fails = job("ops@example.com", &receiver.url("/fail"));
    let (record, _) = alarm(&config(Some(sink.addr)), &job_hook_fails).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(
        record
            .msg
            .starts_with("email: sent to 1 recipient; webhook failed: HTTP 500"),
        "{}",
        record.msg
    );
    assert_eq!(sink.mails().len(), 1, "the mail still went out");

    // The other way round: no SMTP server configured, the webhook works.
    let job_mail_fails = job("ops@example.com", &receiver.url("/ok"));
    let (record, _) = alarm(&config(None), &job_mail_fails).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert_eq!(
        record.msg,
        "email failed: alarm.smtp_host is not configured; webhook: sent (HTTP 204)"
    );
}

#[tokio::test]
async fn a_hanging_channel_does_not_delay_the_other_beyond_the_timeout() {
    let sink = SmtpSink::start(SmtpMode::Silent, None).await;
    let receiver = Receiver::start().await;
    let job = job("ops@example.com", &receiver.url("/hang"));
    let (record, elapsed) = alarm(&config(Some(sink.addr)), &job).await;
    assert_eq!(record.status, alarm_status::FAILED);
    assert!(
        elapsed < Duration::from_millis(TIMEOUT_MS) + SLACK,
        "channels run concurrently: {elapsed:?}"
    );
}
