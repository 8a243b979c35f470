//! Tests of the alarm's public surface and its orchestration; the
//! fixtures are shared with the submodules' tests.

use rondo_core::event::TriggerRecord;
use rondo_core::model::ScheduleType;
use rondo_core::trigger::code;
use rondo_core::{BlockStrategy, ExecResult, Trigger, TriggerType};

use super::*;

pub(super) fn job(email: &str, webhook: &str) -> Job {
    Job {
        description: "nightly report".into(),
        schedule_type: ScheduleType::Cron,
        schedule_conf: "0 0 3 * * ?".into(),
        params: "--day=today".into(),
        alarm_email: email.into(),
        alarm_webhook: webhook.into(),
        ..Job::new(42, "demo", "report")
    }
}

pub(super) fn failure() -> Failure {
    Failure {
        trigger_id: "42-1700000000000-0".into(),
        fire_ms: 1_700_000_000_000,
        executor_id: "demo-host-1".into(),
        code: code::FAIL,
        msg: "boom\nat line 3".into(),
        retry_count: 1,
        params: "--day=today".into(),
        failures: 1,
    }
}

fn config(host: &str) -> AlarmConfig {
    AlarmConfig {
        smtp_host: host.into(),
        ..AlarmConfig::default()
    }
}

#[test]
fn status_follows_the_channels() {
    let ok = |c| Outcome::new(c, Ok("sent".into()));
    let bad = |c| Outcome::new(c, Err("HTTP 500".into()));
    assert_eq!(summarize(&[]).0, alarm_status::NOT_NEEDED);
    assert_eq!(
        summarize(&[ok("email"), ok("webhook")]),
        (alarm_status::SENT, "email: sent; webhook: sent".into())
    );
    assert_eq!(
        summarize(&[ok("email"), bad("webhook")]),
        (
            alarm_status::FAILED,
            "email: sent; webhook failed: HTTP 500".into()
        )
    );
}

#[test]
fn bad_settings_are_refused_by_try_new_and_reported_by_new() {
    let mut bad_from = config("smtp.example.com");
    bad_from.smtp_from = "not a mailbox".into();
    assert!(matches!(
        Alarmer::try_new(&bad_from),
        Err(AlarmConfigError::From { .. })
    ));
    let mut bad_tls = config("smtp.example.com");
    bad_tls.smtp_tls = "ssl".into();
    assert!(matches!(
        Alarmer::try_new(&bad_tls),
        Err(AlarmConfigError::Tls(_))
    ));
    for tls in ["none", "starttls", "tls"] {
        let mut c = config("smtp.example.com");
        c.smtp_tls = tls.into();
        Alarmer::try_new(&c).unwrap_or_else(|e| panic!("{tls}: {e}"));
    }
    // No host: the from address does not matter.
    let mut unused = config("");
    unused.smtp_from = "not a mailbox".into();
    assert!(Alarmer::try_new(&unused).is_ok());
}

#[test]
fn a_zero_timeout_means_the_default() {
    let mut c = config("");
    c.timeout_ms = 0;
    assert_eq!(Alarmer::new(&c).timeout(), DEFAULT_TIMEOUT);
    c.timeout_ms = 250;
    assert_eq!(Alarmer::new(&c).timeout(), Duration::from_millis(250));
}

#[tokio::test]
async fn channels_that_need_no_network_answer_at_once() {
    let failure = failure();
    let alarmer = Alarmer::new(&config(""));
    let none = alarmer.alarm(&job(" ", ""), &[], &failure).await;
    assert_eq!(none.status, alarm_status::NOT_NEEDED);
    assert_eq!((none.job_id, none.fire_ms), (42, failure.fire_ms));
    assert_eq!(none.trigger_id, failure.trigger_id);

    let unconfigured = alarmer.alarm(&job("a@x.io", ""), &[], &failure).await;
    assert_eq!(unconfigured.status, alarm_status::FAILED);
    assert_eq!(
        unconfigured.msg,
        "email failed: alarm.smtp_host is not configured"
    );

    let mut bad_from = config("smtp.example.com");
    bad_from.smtp_from = "nope".into();
    let broken = Alarmer::new(&bad_from)
        .alarm(&job("a@x.io", ""), &[], &failure)
        .await;
    assert_eq!(broken.status, alarm_status::FAILED);
    assert!(broken.msg.contains("alarm.smtp_from"), "{}", broken.msg);
}

#[test]
fn failures_are_built_from_results_and_trigger_records() {
    let trigger = Trigger {
        trigger_id: "t".into(),
        job_id: 42,
        group: "demo".into(),
        executor_id: "e".into(),
        handler: "report".into(),
        params: "p".into(),
        trigger_type: TriggerType::Retry,
        fire_ms: 9,
        sent_ms: 10,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: BlockStrategy::SerialExecution,
        retry_count: 2,
        script: None,
        secrets: Default::default(),
    };
    let result = ExecResult {
        trigger_id: "t".into(),
        job_id: 42,
        executor_id: "e".into(),
        fire_ms: 9,
        start_ms: 10,
        end_ms: 11,
        code: code::TIMEOUT,
        msg: "timed out".into(),
        retryable: true,
    };
    let f = Failure::of_result(&result, &trigger);
    assert_eq!((f.code, f.retry_count, f.params.as_str()), (502, 2, "p"));
    let record = TriggerRecord {
        trigger,
        code: code::FAIL,
        msg: "no route".into(),
    };
    let f = Failure::of_trigger(&record);
    assert_eq!((f.code, f.msg.as_str(), f.fire_ms), (500, "no route", 9));
}

/// A webhook server on loopback that answers 204 and counts connections.
async fn counting_webhook() -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::atomic::AtomicUsize>,
) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = std::sync::Arc::new(AtomicUsize::new(0));
    let count = seen.clone();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 8192];
            let _ = sock.read(&mut buf).await;
            let _ = sock
                .write_all(b"HTTP/1.1 204 No Content\r\nConnection: close\r\n\r\n")
                .await;
        }
    });
    (addr, seen)
}

#[tokio::test]
async fn a_webhook_to_a_restricted_address_is_refused_unless_allowed() {
    use std::sync::atomic::Ordering;
    let (addr, seen) = counting_webhook().await;
    let alarmer = Alarmer::new(&config(""));
    for (url, kind) in [
        (format!("http://{addr}/hook"), "loopback"),
        (format!("http://localhost:{}/hook", addr.port()), "loopback"),
        ("http://169.254.169.254/latest".to_owned(), "link-local"),
        ("http://192.168.1.10/hook".to_owned(), "private"),
    ] {
        let record = alarmer.alarm(&job("", &url), &[], &failure()).await;
        assert_eq!(record.status, alarm_status::FAILED, "{url}");
        assert!(
            record.msg.contains("destination refused") && record.msg.contains(kind),
            "{url}: {}",
            record.msg
        );
        assert!(
            record.msg.ends_with("(alarm.webhook_allow)"),
            "{}",
            record.msg
        );
    }
    assert_eq!(seen.load(Ordering::SeqCst), 0, "nothing reached the server");

    let mut allowing = config("");
    allowing.webhook_allow = vec!["127.0.0.1".into()];
    let record = Alarmer::new(&allowing)
        .alarm(&job("", &format!("http://{addr}/hook")), &[], &failure())
        .await;
    assert_eq!(record.status, alarm_status::SENT, "{}", record.msg);
    assert_eq!(seen.load(Ordering::SeqCst), 1);
}
