//! Triggers end to end against the real RabbitMQ and Redis: results, log
//! lines, failures, timeouts, panics, batches.

mod common;

use std::time::{Duration, Instant};

use common::{Harness, test_config};
use rondo_core::trigger::code;
use rondo_executor::{JobContext, JobError, builtin};

/// A test config whose executor offers the `shell` handler.
fn commands_on() -> rondo_core::Config {
    let mut config = test_config("exec");
    config.executor.command_handlers = true;
    config
}

async fn boom(ctx: JobContext) -> Result<(), JobError> {
    if ctx.params() != "calm" {
        panic!("kaboom {}", ctx.params());
    }
    Ok(())
}

#[tokio::test]
async fn a_success_ships_its_log_lines_before_its_result() {
    let mut h = Harness::start_with(commands_on(), builtin::register).await;
    h.publish(vec![h.trigger(
        "t-ok",
        "shell",
        "echo hello; echo oops >&2",
    )])
    .await;
    let (result, logs) = h.result_for("t-ok").await;
    assert_eq!(result.code, code::SUCCESS, "{result:?}");
    assert_eq!(result.executor_id, h.executor_id);
    assert_eq!(result.job_id, 42);
    assert!(result.start_ms <= result.end_ms);
    let lines: Vec<&str> = logs
        .iter()
        .flat_map(|l| &l.lines)
        .map(|l| l.text.as_str())
        .collect();
    assert!(lines.contains(&"hello"), "{lines:?}");
    assert!(lines.contains(&"[stderr] oops"), "{lines:?}");
    assert_eq!(logs[0].first_seq, 0);
    h.stop().await;
}

/// Command handlers are off by default: a `shell` trigger fails, not
/// retried, saying how to enable them, and nothing runs.
#[tokio::test]
async fn a_shell_trigger_is_refused_unless_the_executor_enables_command_handlers() {
    let marker = std::env::temp_dir().join(format!("rondo-shell-off-{}", std::process::id()));
    let _ = std::fs::remove_file(&marker);
    let mut h = Harness::start("exec", builtin::register).await;
    let command = format!("touch {}", marker.display());
    h.publish(vec![h.trigger("t-off", "shell", &command)]).await;
    let (result, logs) = h.result_for("t-off").await;
    assert_eq!((result.code, result.retryable), (code::FAIL, false));
    assert!(
        result.msg.contains("executor.command_handlers = true"),
        "{}",
        result.msg
    );
    assert!(logs.is_empty(), "no run, no log lines: {logs:?}");
    assert!(!marker.exists(), "the command did not run");
    h.stop().await;
}

#[tokio::test]
async fn a_failing_shell_command_reports_its_exit_code() {
    let mut h = Harness::start_with(commands_on(), builtin::register).await;
    h.publish(vec![h.trigger(
        "t-exit",
        "shell",
        "echo about to fail; exit 3",
    )])
    .await;
    let (result, _) = h.result_for("t-exit").await;
    assert_eq!(result.code, code::FAIL);
    assert_eq!(result.msg, "exit code 3");
    h.stop().await;
}

#[tokio::test]
async fn a_timeout_kills_the_run_and_reports_502() {
    let mut h = Harness::start_with(commands_on(), builtin::register).await;
    let mut trigger = h.trigger("t-slow", "shell", "sleep 30");
    trigger.timeout_s = 1;
    let started = Instant::now();
    h.publish(vec![trigger]).await;
    let (result, _) = h.result_for("t-slow").await;
    assert_eq!(result.code, code::TIMEOUT);
    assert_eq!(result.msg, "timeout after 1s");
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    h.stop().await;
}

#[tokio::test]
async fn a_panicking_handler_reports_500_and_the_executor_carries_on() {
    let mut h = Harness::start("exec", |b| b.handler("boom", boom)).await;
    h.publish(vec![h.trigger("t-panic", "boom", "now")]).await;
    let (result, _) = h.result_for("t-panic").await;
    assert_eq!(result.code, code::FAIL);
    assert_eq!(result.msg, "handler panicked: kaboom now");
    h.publish(vec![h.trigger("t-after", "boom", "calm")]).await;
    let (result, _) = h.result_for("t-after").await;
    assert_eq!(result.code, code::SUCCESS);
    h.stop().await;
}

#[tokio::test]
async fn an_unknown_handler_is_named_in_the_result() {
    let mut h = Harness::start_with(commands_on(), builtin::register).await;
    h.publish(vec![h.trigger("t-unknown", "nosuch", "")]).await;
    let (result, _) = h.result_for("t-unknown").await;
    assert_eq!(result.code, code::FAIL);
    assert!(result.msg.contains("\"nosuch\""), "{}", result.msg);
    assert!(result.msg.contains(&h.executor_id), "{}", result.msg);
    h.stop().await;
}

#[tokio::test]
async fn the_triggers_of_a_batch_run_concurrently_with_their_own_results() {
    let mut h = Harness::start_with(commands_on(), builtin::register).await;
    // Three jobs: triggers of one job would take turns (SERIAL_EXECUTION).
    let batch: Vec<_> = [("t-b1", "700"), ("t-b2", "700"), ("t-b3", "fail")]
        .into_iter()
        .zip(42..)
        .map(|((id, params), job_id)| {
            let mut trigger = h.trigger(id, "demo", params);
            trigger.job_id = job_id;
            trigger
        })
        .collect();
    h.publish(batch).await;
    let mut results = h.results_until(3).await;
    results.sort_by(|a, b| a.trigger_id.cmp(&b.trigger_id));
    let codes: Vec<i32> = results.iter().map(|r| r.code).collect();
    assert_eq!(codes, vec![code::SUCCESS, code::SUCCESS, code::FAIL]);
    let (b1, b2) = (&results[0], &results[1]);
    assert!(
        b1.start_ms < b2.end_ms && b2.start_ms < b1.end_ms,
        "the two sleeps overlap: {b1:?} {b2:?}"
    );
    h.stop().await;
}

#[tokio::test]
async fn log_lines_are_shipped_while_the_handler_runs() {
    let mut h = Harness::start_with(commands_on(), builtin::register).await;
    h.publish(vec![h.trigger(
        "t-live",
        "shell",
        "echo early; sleep 2; echo late",
    )])
    .await;
    let started = Instant::now();
    let first = loop {
        match h.next_event(common::PATIENCE).await {
            Some(rondo_core::Event::Log(l)) if l.trigger_id == "t-live" => break l,
            Some(rondo_core::Event::Result(r)) => panic!("result before any log line: {r:?}"),
            Some(_) => {}
            None => panic!("no log line"),
        }
    };
    assert_eq!(first.lines[0].text, "early");
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "{:?}",
        started.elapsed()
    );
    let (result, logs) = h.result_for("t-live").await;
    assert_eq!(result.code, code::SUCCESS);
    assert_eq!(logs.last().unwrap().lines.last().unwrap().text, "late");
    h.stop().await;
}
