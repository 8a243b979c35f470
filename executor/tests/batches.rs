//! Big trigger batches against the real RabbitMQ and Redis: thousands of
//! triggers in a handful of messages each run exactly once, with exactly
//! one result each, acked only once all of them are confirmed. An ignored
//! test measures triggers per second through one executor.

mod common;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use common::{Harness, test_config};
use rondo_core::trigger::code;
use rondo_core::{ExecResult, Trigger};
use rondo_executor::{ExecutorBuilder, JobContext};

type Runs = Arc<Mutex<HashMap<String, usize>>>;

/// A trivial handler that counts its runs per trigger id.
fn counting(runs: &Runs) -> impl Fn(ExecutorBuilder) -> ExecutorBuilder + use<> {
    let runs = runs.clone();
    move |builder: ExecutorBuilder| {
        let runs = runs.clone();
        builder.handler("noop", move |ctx: JobContext| {
            let runs = runs.clone();
            async move {
                *runs
                    .lock()
                    .unwrap()
                    .entry(ctx.trigger_id().to_owned())
                    .or_default() += 1;
                Ok(())
            }
        })
    }
}

/// `n` triggers of `n` different jobs (a job's triggers would take turns).
fn triggers(h: &Harness, prefix: &str, n: usize) -> Vec<Trigger> {
    (0..n)
        .map(|i| {
            let mut t = h.trigger(&format!("{prefix}-{i}"), "noop", "");
            t.job_id = 1000 + i as u64;
            t
        })
        .collect()
}

/// Collects results until `want` distinct trigger ids have one (or
/// `patience` passes); returns every result seen, duplicates included.
async fn collect(h: &mut Harness, want: usize, patience: Duration) -> Vec<ExecResult> {
    let deadline = tokio::time::Instant::now() + patience;
    let mut seen = HashSet::new();
    let mut results = Vec::new();
    while seen.len() < want {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match h.next_event(left).await {
            Some(rondo_core::Event::Result(r)) => {
                seen.insert(r.trigger_id.clone());
                results.push(r);
            }
            Some(_) => {}
            None => panic!("only {} of {want} results within {patience:?}", seen.len()),
        }
    }
    results
}

async fn publish_in_messages(h: &Harness, triggers: &[Trigger], per_message: usize) {
    for chunk in triggers.chunks(per_message) {
        h.publish(chunk.to_vec()).await;
    }
}

#[tokio::test]
async fn thousands_of_triggers_in_a_handful_of_messages_each_run_once() {
    let runs = Runs::default();
    let mut h = Harness::start("batches", counting(&runs)).await;
    let n = 3000;
    let all = triggers(&h, "big", n);
    publish_in_messages(&h, &all, 500).await;
    // Some ids again, in a message of their own: they must not run again.
    h.publish(all[..300].to_vec()).await;
    let mut results = collect(&mut h, n, Duration::from_secs(60)).await;
    results.extend(h.results_within(Duration::from_millis(1500)).await);

    let mut per_id: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &results {
        assert_eq!(r.code, code::SUCCESS, "{r:?}");
        *per_id.entry(r.trigger_id.as_str()).or_default() += 1;
    }
    assert_eq!(per_id.len(), n, "every trigger has a result");
    let repeated: Vec<_> = per_id.iter().filter(|(_, c)| **c != 1).collect();
    assert!(repeated.is_empty(), "one result each: {repeated:?}");
    {
        let runs = runs.lock().unwrap();
        assert_eq!(runs.len(), n, "every trigger ran");
        assert!(runs.values().all(|c| *c == 1), "each exactly once");
    }
    assert_eq!(h.ready_messages(&h.queue).await, 0, "every message acked");

    // Every mark says confirmed.
    let mut redis = h.redis().await;
    let keys: Vec<String> = all
        .iter()
        .map(|t| h.names.dedupe(&h.config.executor.app, &t.trigger_id))
        .collect();
    let marks: Vec<Option<String>> = redis::cmd("MGET")
        .arg(&keys)
        .query_async(&mut redis)
        .await
        .unwrap();
    let unconfirmed = marks
        .iter()
        .filter(|m| !m.as_deref().is_some_and(|m| m.contains("\"confirmed\"")))
        .count();
    assert_eq!(unconfirmed, 0, "marks not confirmed");
    h.stop().await;
}

/// `INFO commandstats` as command -> calls.
async fn command_calls(redis: &mut redis::aio::MultiplexedConnection) -> HashMap<String, u64> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query_async(redis)
        .await
        .unwrap();
    info.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix("cmdstat_")?;
            let (name, stats) = rest.split_once(':')?;
            let calls = stats.split(',').find_map(|kv| kv.strip_prefix("calls="))?;
            Some((name.to_owned(), calls.parse().ok()?))
        })
        .collect()
}

/// CPU time this process has used (user + system), from `/proc` (Linux).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, in ticks of 10 ms.
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Triggers per second through one executor with a trivial handler.
/// `TP_TRIGGERS` (default 20000) triggers in messages of `TP_BATCH`
/// (default 500), then waits for every result (the executor's config
/// takes `RONDO_*` overrides, e.g. `RONDO_EXECUTOR_PREFETCH`):
///
/// ```text
/// cargo test -p rondo-executor --release --test batches -- --ignored --nocapture throughput
/// ```
#[tokio::test(flavor = "multi_thread")]
#[ignore = "a measurement, not a check"]
async fn throughput() {
    let env = |name: &str, default: usize| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let n = env("TP_TRIGGERS", 20_000);
    let per_message = env("TP_BATCH", 500);
    let runs = Runs::default();
    let mut h = Harness::start_with(test_config("tp"), counting(&runs)).await;
    h.registered().await;
    let all = triggers(&h, "tp", n);
    let mut redis = h.redis().await;
    let before = command_calls(&mut redis).await;
    let cpu_before = cpu_time();
    let started = Instant::now();
    publish_in_messages(&h, &all, per_message).await;
    let published = started.elapsed();
    let results = collect(&mut h, n, Duration::from_secs(600)).await;
    let elapsed = started.elapsed();
    let cpu = cpu_time()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    let after = command_calls(&mut redis).await;
    assert_eq!(results.len(), n, "one result each");
    let mut deltas: Vec<(String, u64)> = after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, d)| *d > 0)
        .collect();
    deltas.sort_by_key(|d| std::cmp::Reverse(d.1));
    eprintln!(
        "throughput: {n} triggers in messages of {per_message}: {:.0} triggers/s \
         ({elapsed:?} in all, publishing took {published:?})",
        n as f64 / elapsed.as_secs_f64()
    );
    if let Some(cpu) = cpu {
        eprintln!(
            "CPU of this process (executor and test harness): {cpu:?}, {:.0} µs per trigger",
            cpu.as_secs_f64() * 1e6 / n as f64
        );
    }
    eprintln!("redis commands meanwhile (whole server): {deltas:?}");
    h.stop().await;
}
