//! Admission control in front of the wheel: a node allowed two fires in
//! flight (`scheduler.max_fires_in_flight = 2`) and fifty in memory
//! (`scheduler.max_fires_loaded = 50`) is offered 200 fires every second,
//! far more than two at a time can settle (each fire waits for its
//! trigger's batch, its confirm, its in-flight record, its event and its
//! ring ack: tens of ms). The node saturates at both bounds and never
//! exceeds either: the backlog waits in its rings in Redis. The fires go
//! out late, in order, and every one of them runs exactly once: nothing is
//! refused or lost.

use std::collections::BTreeMap;
use std::time::Duration;

use rondo_testkit::recorder::Recorder;
use rondo_testkit::{Cluster, World, eventually};
use sqlx::Row;

const JOBS: u64 = 200;
const IN_FLIGHT: usize = 2;
const LOADED: usize = 50;
/// The seconds of schedule counted.
const SECONDS: i64 = 3;

/// `rondo_fires_in_flight` and `rondo_fires_loaded` from one scrape of the
/// node's `/metrics`.
async fn gauges(metrics: &str, token: &str) -> Option<(f64, f64)> {
    let text = reqwest::Client::new()
        .get(metrics)
        .bearer_auth(token)
        .send()
        .await
        .ok()?
        .text()
        .await
        .ok()?;
    let gauge = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
    };
    Some((
        gauge("rondo_fires_in_flight")?,
        gauge("rondo_fires_loaded")?,
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_overloaded_node_holds_its_bounds_and_fires_everything_late_in_order() {
    let mut world = World::new("admission").await;
    world.config.executor.app = "adm".into();
    world.config.scheduler.max_fires_in_flight = IN_FLIGHT;
    world.config.scheduler.max_fires_loaded = LOADED;
    let token = world.admin.token.clone();
    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.start_recording_executor("adm-1", &recorder);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let metrics = format!("http://{}/metrics", cluster.addr(node));

    let first = api.every_second_jobs("adm", JOBS).await;
    let last = first + (SECONDS - 1) * 1000;

    // Saturated: two fires in flight and fifty held, seen while the
    // backlog builds, and never more in any sample until the counted fires
    // ran.
    let mut samples = Vec::new();
    let (mut saturated, mut full) = (false, false);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        if let Some((n, held)) = gauges(&metrics, &token).await {
            samples.push((n, held));
            saturated |= n == IN_FLIGHT as f64;
            full |= held == LOADED as f64;
        }
        let ran = recorder
            .runs()
            .iter()
            .filter(|r| (first..=last).contains(&r.fire_ms))
            .count();
        if ran as u64 >= JOBS * SECONDS as u64 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the counted fires ran within 90 s: {ran} of {}",
            JOBS * SECONDS as u64
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(saturated, "two fires in flight at some point: {samples:?}");
    assert!(full, "{LOADED} fires held at some point: {samples:?}");
    assert!(
        samples.iter().all(|&(n, _)| n <= IN_FLIGHT as f64),
        "never more than {IN_FLIGHT} in flight: {samples:?}"
    );
    assert!(
        samples.iter().all(|&(_, held)| held <= LOADED as f64),
        "never more than {LOADED} held: {samples:?}"
    );

    // Nothing refused or lost: every counted fire ran, once.
    recorder.assert_each_ran_once(JOBS, first, last);

    // Late: the last counted second went out well after its instant (two
    // at a time cannot keep 200 a second on time).
    let runs = recorder.runs();
    let latest_start = runs
        .iter()
        .filter(|r| r.fire_ms == last)
        .map(|r| r.start_ms)
        .max()
        .expect("runs of the last second");
    assert!(
        latest_start - last > 1_000,
        "the backlog made fires late: {} ms",
        latest_start - last
    );

    // In order: triggers were sent (stored `trigger_time`) second by
    // second; while the last fire of a second was being sent, at most the
    // other fire in flight could belong to the next second.
    let sent = eventually("the triggers stored", Duration::from_secs(30), || async {
        let rows = sqlx::query(
            "SELECT fire_ms, CAST(TIMESTAMPDIFF(MICROSECOND, '1970-01-01', trigger_time) DIV 1000 AS SIGNED) AS sent \
             FROM job_log WHERE fire_ms BETWEEN ? AND ? AND trigger_time IS NOT NULL",
        )
        .bind(first)
        .bind(last)
        .fetch_all(cluster.db())
        .await
        .ok()?;
        (rows.len() as u64 >= JOBS * SECONDS as u64).then(|| {
            rows.iter()
                .map(|r| (r.get::<i64, _>("fire_ms"), r.get::<i64, _>("sent")))
                .collect::<Vec<_>>()
        })
    })
    .await;
    let mut by_second: BTreeMap<i64, Vec<i64>> = BTreeMap::new();
    for (fire, sent) in sent {
        by_second.entry(fire).or_default().push(sent);
    }
    let seconds: Vec<(&i64, &Vec<i64>)> = by_second.iter().collect();
    for pair in seconds.windows(2) {
        let (earlier, later) = (pair[0], pair[1]);
        let last_of_earlier = earlier.1.iter().max().expect("sent");
        let overtaking = later.1.iter().filter(|s| *s < last_of_earlier).count();
        assert!(
            overtaking <= IN_FLIGHT,
            "{overtaking} fires of {} went out before the last of {}",
            later.0,
            earlier.0
        );
    }
    cluster.stop().await;
}
