use std::sync::Arc;

use super::*;

const SEC: Duration = Duration::from_secs(1);

fn window() -> SlowWindow {
    SlowWindow::new(Duration::from_secs(60), 10)
}

#[test]
fn a_job_is_slow_after_more_than_ten_slow_dispatches_in_a_minute() {
    let t0 = Instant::now();
    let mut w = window();
    for i in 0..10 {
        w.record_slow(7, t0 + i * SEC);
    }
    assert!(!w.is_slow(7, t0 + 10 * SEC), "ten is not more than ten");
    w.record_slow(7, t0 + 10 * SEC);
    assert!(w.is_slow(7, t0 + 10 * SEC));
    assert_eq!(w.slow_in_window(7, t0 + 10 * SEC), 11);
    assert!(!w.is_slow(8, t0 + 10 * SEC), "other jobs are not affected");
}

#[test]
fn the_window_slides() {
    let t0 = Instant::now();
    let mut w = window();
    for i in 0..11 {
        w.record_slow(7, t0 + i * SEC);
    }
    // The first slow dispatch (t0) leaves the window at t0 + 60 s.
    assert!(w.is_slow(7, t0 + 59 * SEC));
    assert!(!w.is_slow(7, t0 + 60 * SEC));
    // One more slow dispatch brings it back, until t0 + 1 s leaves too.
    w.record_slow(7, t0 + 60 * SEC);
    assert!(w.is_slow(7, t0 + 60 * SEC));
    assert!(!w.is_slow(7, t0 + 61 * SEC));
    assert!(!w.is_slow(7, t0 + 200 * SEC));
}

#[test]
fn slow_dispatches_spread_over_more_than_a_minute_do_not_count() {
    let t0 = Instant::now();
    let mut w = window();
    for i in 0..30 {
        w.record_slow(7, t0 + i * 7 * SEC);
        assert!(!w.is_slow(7, t0 + i * 7 * SEC), "at most 9 per minute");
    }
}

#[test]
fn slow_jobs_are_listed_and_idle_jobs_forgotten() {
    let t0 = Instant::now();
    let mut w = window();
    for _ in 0..11 {
        w.record_slow(9, t0);
        w.record_slow(3, t0);
    }
    w.record_slow(5, t0);
    let listed: Vec<(u64, usize)> = w
        .slow_jobs(t0)
        .iter()
        .map(|j| (j.job_id, j.slow_in_window))
        .collect();
    assert_eq!(listed, [(3, 11), (9, 11)]);
    assert_eq!(w.tracked_jobs(), 3);
    w.sweep(t0 + 61 * SEC);
    assert_eq!(w.tracked_jobs(), 0);
    assert!(w.slow_jobs(t0 + 61 * SEC).is_empty());
}

#[test]
fn memory_per_job_is_bounded() {
    let t0 = Instant::now();
    let mut w = window();
    for _ in 0..5000 {
        w.record_slow(1, t0);
    }
    assert_eq!(w.slow_in_window(1, t0), MAX_KEPT_PER_JOB);
    assert!(w.is_slow(1, t0));
}

/// `n` dispatches of `job` taking 1 ms each: the node's usual pace.
async fn quick_peers(lanes: &Lanes, job: u64, n: usize) {
    for _ in 0..n {
        lanes
            .run(job, tokio::time::sleep(Duration::from_millis(1)))
            .await;
    }
}

fn lanes(fast: usize, slow: usize) -> Arc<Lanes> {
    Arc::new(Lanes::new(LaneConfig {
        fast_permits: fast,
        slow_permits: slow,
        ..LaneConfig::default()
    }))
}

#[tokio::test(start_paused = true)]
async fn a_job_with_slow_dispatches_moves_to_the_slow_lane_and_back() {
    let lanes = lanes(8, 2);
    for _ in 0..11 {
        assert_eq!(lanes.lane_of(7), Lane::Fast);
        // Its peers are quick: job 7 is slow for this node.
        quick_peers(&lanes, 8, 10).await;
        lanes
            .run(7, tokio::time::sleep(Duration::from_millis(501)))
            .await;
    }
    // Dispatches of another job up to the threshold do not count.
    for _ in 0..20 {
        lanes
            .run(8, tokio::time::sleep(Duration::from_millis(500)))
            .await;
    }
    assert_eq!(lanes.lane_of(7), Lane::Slow);
    assert_eq!(lanes.lane_of(8), Lane::Fast);
    let stats = lanes.stats();
    assert_eq!(stats.fast.dispatched, 11 + 110 + 20);
    assert_eq!(stats.fast.slow_dispatches, 11);
    assert_eq!(
        stats.slow_jobs,
        [SlowJob {
            job_id: 7,
            slow_in_window: 11
        }]
    );

    lanes.run(7, async {}).await;
    assert_eq!(lanes.stats().slow.dispatched, 1);

    tokio::time::advance(Duration::from_secs(60)).await;
    assert_eq!(lanes.lane_of(7), Lane::Fast);
    assert!(lanes.stats().slow_jobs.is_empty());
}

#[tokio::test(start_paused = true)]
async fn the_slow_lane_is_bounded_and_does_not_hold_up_the_fast_lane() {
    let lanes = lanes(8, 1);
    for _ in 0..11 {
        quick_peers(&lanes, 8, 10).await;
        lanes
            .run(7, tokio::time::sleep(Duration::from_secs(1)))
            .await;
    }
    let start = Instant::now();
    let slow_runs: Vec<_> = (0..3)
        .map(|_| {
            let lanes = lanes.clone();
            tokio::spawn(async move {
                // An async block: the sleep's deadline is set when it runs.
                let dispatch = async { tokio::time::sleep(Duration::from_secs(1)).await };
                lanes.run(7, dispatch).await;
                start.elapsed()
            })
        })
        .collect();
    tokio::task::yield_now().await;
    let stats = lanes.stats();
    assert_eq!((stats.slow.busy, stats.slow.waiting), (1, 2));

    lanes
        .run(8, tokio::time::sleep(Duration::from_millis(10)))
        .await;
    assert!(
        start.elapsed() < Duration::from_millis(100),
        "fast lane waited"
    );

    let mut ends = Vec::new();
    for run in slow_runs {
        ends.push(run.await.unwrap().as_millis());
    }
    ends.sort_unstable();
    assert_eq!(ends, [1000, 2000, 3000], "one slow dispatch at a time");
}

#[tokio::test(start_paused = true)]
async fn a_dispatch_given_up_while_waiting_is_not_counted_as_waiting() {
    let lanes = lanes(1, 1);
    let holder = {
        let lanes = lanes.clone();
        tokio::spawn(async move {
            let dispatch = async { tokio::time::sleep(Duration::from_secs(5)).await };
            lanes.run(1, dispatch).await;
        })
    };
    tokio::task::yield_now().await;
    let gave_up = tokio::time::timeout(SEC, lanes.run(2, async {})).await;
    assert!(gave_up.is_err(), "the only fast slot was taken");
    assert_eq!(lanes.stats().fast.waiting, 0);
    holder.await.unwrap();
    assert_eq!(lanes.stats().fast.busy, 0);
}

#[tokio::test(start_paused = true)]
async fn a_node_slow_for_everyone_moves_no_job_but_an_outlier_still_moves() {
    let lanes = lanes(1024, 8);
    // 100 jobs, 15 rounds, every dispatch 600 ms: the node is loaded, no
    // job is slower than its peers.
    for _ in 0..15 {
        let round = (0..100u64).map(|job| {
            let lanes = lanes.clone();
            async move {
                let dispatch = async { tokio::time::sleep(Duration::from_millis(600)).await };
                lanes.run(job, dispatch).await;
            }
        });
        futures_util::future::join_all(round).await;
    }
    assert!(
        lanes.stats().slow_jobs.is_empty(),
        "{:?}",
        lanes.stats().slow_jobs
    );
    assert!(lanes.lane_of(3) == Lane::Fast);
    // Job 500 takes 5 s while its peers take 600 ms: singled out.
    for _ in 0..11 {
        let peers = (0..20u64).map(|job| {
            let lanes = lanes.clone();
            async move {
                let dispatch = async { tokio::time::sleep(Duration::from_millis(600)).await };
                lanes.run(job, dispatch).await;
            }
        });
        futures_util::future::join_all(peers).await;
        lanes
            .run(500, tokio::time::sleep(Duration::from_secs(5)))
            .await;
    }
    assert_eq!(lanes.lane_of(500), Lane::Slow);
    assert_eq!(lanes.lane_of(3), Lane::Fast);
}
