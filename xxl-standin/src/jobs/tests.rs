use super::*;
use crate::joblog::testdir;
use tokio::sync::mpsc::UnboundedReceiver;

fn jobs(generation: Generation) -> (Jobs, UnboundedReceiver<Callback>, LogDir) {
    let (callbacks, rx) = CallbackQueue::new();
    let logs = LogDir::new(testdir::fresh("jobs"));
    let jobs = Jobs::new(Env {
        generation,
        logs: logs.clone(),
        runs: RunsFile::new(None),
        callbacks,
        idle_remove: Duration::from_secs(90),
    });
    (jobs, rx, logs)
}

fn bean(job_id: i32, log_id: i64, handler: &str, params: &str, strategy: &str) -> Trigger {
    Trigger {
        job_id,
        log_id,
        log_date_time: 1_700_000_000_000,
        glue_type: Some("BEAN".into()),
        executor_handler: Some(handler.into()),
        executor_params: Some(params.into()),
        executor_block_strategy: Some(strategy.into()),
        broadcast_total: 1,
        ..Trigger::default()
    }
}

async fn next(rx: &mut UnboundedReceiver<Callback>) -> (i64, i32, Option<String>) {
    let c = rx.recv().await.expect("a callback");
    (c.log_id, c.handle_code, c.handle_msg)
}

fn killed(reason: &str) -> Option<String> {
    Some(format!("{reason} [job running, killed]"))
}

fn dropped(reason: &str) -> Option<String> {
    Some(format!(
        "{reason} [job not executed, in the job queue, killed.]"
    ))
}

#[tokio::test(start_paused = true)]
async fn serial_runs_in_order_and_refuses_a_queued_log_id() {
    let (jobs, mut rx, logs) = jobs(Generation::V3);
    jobs.trigger(bean(1, 10, "sleepJobHandler", "300", "SERIAL_EXECUTION"))
        .expect("first");
    jobs.trigger(bean(1, 11, "sleepJobHandler", "100", "SERIAL_EXECUTION"))
        .expect("second");
    assert_eq!(
        jobs.trigger(bean(1, 11, "sleepJobHandler", "100", "SERIAL_EXECUTION")),
        Err("repeat trigger job, logId:11".into())
    );
    assert!(jobs.busy(1));
    assert_eq!(next(&mut rx).await, (10, 200, None));
    assert_eq!(next(&mut rx).await, (11, 200, None));
    let log = logs.read(1_700_000_000_000, 10, 1).log_content;
    assert!(log.contains("xxl-job job execute start -----------<br>----------- Param:300"));
    assert!(log.contains("sleep 300 ms") && log.contains("slept 300 ms"));
    assert!(log.contains(
        "execute end(finish) -----------<br>----------- Result: handleCode=200, handleMsg = null"
    ));
}

#[tokio::test(start_paused = true)]
async fn generation_2_misspells_repeat() {
    let (jobs, _rx, _) = jobs(Generation::V2);
    jobs.trigger(bean(1, 1, "sleepJobHandler", "1000", "SERIAL_EXECUTION"))
        .expect("first");
    jobs.trigger(bean(1, 2, "sleepJobHandler", "1000", "SERIAL_EXECUTION"))
        .expect("second");
    assert_eq!(
        jobs.trigger(bean(1, 2, "sleepJobHandler", "1000", "SERIAL_EXECUTION")),
        Err("repeate trigger job, logId:2".into())
    );
}

#[tokio::test(start_paused = true)]
async fn the_handler_change_reason_reaches_the_running_and_the_queued() {
    let (jobs, mut rx, _) = jobs(Generation::V3);
    jobs.trigger(bean(1, 1, "sleepJobHandler", "5000", "SERIAL_EXECUTION"))
        .expect("first");
    tokio::time::sleep(Duration::from_millis(10)).await;
    jobs.trigger(bean(1, 2, "sleepJobHandler", "5000", "SERIAL_EXECUTION"))
        .expect("queued");
    jobs.trigger(bean(1, 3, "demoJobHandler", "", "SERIAL_EXECUTION"))
        .expect("new handler");
    let reason = "change jobhandler or glue type, and terminate the old job thread.";
    let mut got = vec![
        next(&mut rx).await,
        next(&mut rx).await,
        next(&mut rx).await,
    ];
    got.sort();
    assert_eq!(
        got,
        vec![
            (1, 500, killed(reason)),
            (2, 500, dropped(reason)),
            (3, 200, None)
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn discard_later_refuses_while_busy() {
    let (jobs, mut rx, _) = jobs(Generation::V3);
    jobs.trigger(bean(1, 1, "sleepJobHandler", "500", "DISCARD_LATER"))
        .expect("first");
    assert_eq!(
        jobs.trigger(bean(1, 2, "sleepJobHandler", "500", "DISCARD_LATER")),
        Err("block strategy effect：Discard Later".into())
    );
    assert_eq!(next(&mut rx).await, (1, 200, None));
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(!jobs.busy(1));
    jobs.trigger(bean(1, 2, "sleepJobHandler", "500", "DISCARD_LATER"))
        .expect("idle again");
    assert_eq!(next(&mut rx).await, (2, 200, None));
}

#[tokio::test(start_paused = true)]
async fn cover_early_kills_the_running_and_the_queued() {
    let (jobs, mut rx, _) = jobs(Generation::V3);
    jobs.trigger(bean(1, 1, "sleepJobHandler", "5000", "SERIAL_EXECUTION"))
        .expect("first");
    tokio::time::sleep(Duration::from_millis(10)).await;
    jobs.trigger(bean(1, 2, "sleepJobHandler", "5000", "SERIAL_EXECUTION"))
        .expect("queued");
    jobs.trigger(bean(1, 3, "sleepJobHandler", "100", "COVER_EARLY"))
        .expect("cover");
    let reason = "block strategy effect：Cover Early";
    assert_eq!(next(&mut rx).await, (1, 500, killed(reason)));
    assert_eq!(next(&mut rx).await, (2, 500, dropped(reason)));
    assert_eq!(next(&mut rx).await, (3, 200, None));
}

#[tokio::test(start_paused = true)]
async fn kill_stops_the_running_and_the_queued() {
    let (jobs, mut rx, logs) = jobs(Generation::V3);
    assert!(!jobs.kill(1), "no thread yet");
    jobs.trigger(bean(1, 1, "sleepJobHandler", "5000", "SERIAL_EXECUTION"))
        .expect("first");
    tokio::time::sleep(Duration::from_millis(10)).await;
    jobs.trigger(bean(1, 2, "sleepJobHandler", "1", "SERIAL_EXECUTION"))
        .expect("queued");
    assert!(jobs.kill(1));
    assert!(!jobs.busy(1), "removed at once");
    assert_eq!(next(&mut rx).await, (1, 500, killed(KILL_REASON)));
    assert_eq!(next(&mut rx).await, (2, 500, dropped(KILL_REASON)));
    let log = logs.read(1_700_000_000_000, 1, 1).log_content;
    assert!(log.contains("JobThread toStop, stopReason:scheduling center kill job."));
    assert!(
        !logs
            .read(1_700_000_000_000, 2, 1)
            .log_content
            .contains("execute start")
    );
    // A new trigger after the kill gets a new thread.
    jobs.trigger(bean(1, 3, "demoJobHandler", "", "SERIAL_EXECUTION"))
        .expect("new thread");
    assert_eq!(next(&mut rx).await, (3, 200, None));
}

#[tokio::test(start_paused = true)]
async fn timeout_is_502() {
    let (jobs, mut rx, logs) = jobs(Generation::V3);
    let mut t = bean(1, 1, "sleepJobHandler", "10000", "SERIAL_EXECUTION");
    t.executor_timeout = 2;
    let started = tokio::time::Instant::now();
    jobs.trigger(t).expect("admitted");
    assert_eq!(
        next(&mut rx).await,
        (1, 502, Some("job execute timeout ".into()))
    );
    assert_eq!(started.elapsed(), Duration::from_secs(2));
    let log = logs.read(1_700_000_000_000, 1, 1).log_content;
    assert!(log.contains("<br>----------- xxl-job job execute timeout"));
    assert!(log.contains("slept 1900 ms") && !log.contains("slept 2100 ms"));
    assert!(log.contains("Result: handleCode=502, handleMsg = job execute timeout "));
}

#[tokio::test(start_paused = true)]
async fn failures_and_glue_versions() {
    let (jobs, mut rx, _) = jobs(Generation::V3);
    jobs.trigger(bean(1, 1, "failJobHandler", "", "SERIAL_EXECUTION"))
        .expect("fail");
    assert_eq!(next(&mut rx).await, (1, 500, Some("failed".into())));
    let glue = |log_id, version| Trigger {
        job_id: 2,
        log_id,
        glue_type: Some("GLUE_GROOVY".into()),
        glue_source: Some(
            "class A {\n XxlJobHelper.log(\"hi\")\n XxlJobHelper.handleFail()\n}".into(),
        ),
        glue_updatetime: version,
        ..Trigger::default()
    };
    jobs.trigger(glue(2, 5)).expect("glue");
    assert_eq!(next(&mut rx).await, (2, 500, Some("glue failed".into())));
    assert_eq!(
        jobs.trigger(Trigger {
            glue_type: Some("GLUE_X".into()),
            ..glue(3, 5)
        }),
        Err("glueType[GLUE_X] is not valid.".into())
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_thread_removes_itself() {
    let (jobs, mut rx, _) = jobs(Generation::V3);
    jobs.trigger(bean(1, 1, "demoJobHandler", "", "SERIAL_EXECUTION"))
        .expect("run");
    assert_eq!(next(&mut rx).await, (1, 200, None));
    assert!(jobs.kill(1), "still there");
    jobs.trigger(bean(1, 2, "demoJobHandler", "", "SERIAL_EXECUTION"))
        .expect("run");
    assert_eq!(next(&mut rx).await, (2, 200, None));
    tokio::time::sleep(Duration::from_secs(91)).await;
    assert!(!jobs.kill(1), "removed when idle");
    jobs.stop_all(SHUTDOWN_REASON);
    jobs.join(Duration::from_secs(1)).await;
    assert!(rx.try_recv().is_err(), "an idle removal calls nothing back");
}
