//! Schedules as XXL-JOB users expect them, on a real cluster (a scheduler
//! node, a `rondo-executor` process, the persistence worker, MySQL):
//!
//! * next fires in the job's zone and in UTC, for saved jobs and previews,
//!   and the cluster's default zone for a job that names none;
//! * a `FIX_DELAY` job's next fire follows the end of its slow run;
//! * a job found late: `DO_NOTHING` skips what it missed, `FIRE_ONCE_NOW`
//!   fires once as `MISFIRE`, a job's own larger threshold makes it a late
//!   fire instead; each visible through `GET /api/v1/jobs/{id}/misfires`.
//!
//! A late job is made the way a stalled leader leaves it: its due-set
//! score set 61 s in the past, which the next claim finds.

use std::time::Duration;

use rondo_core::clock;
use rondo_testkit::{Api, Cluster, PATIENCE, World, eventually};
use serde_json::{Value, json};
use sqlx::{MySqlPool, Row};

/// One node, the persistence worker and a Rust executor `<app>-1` in group
/// `app`, with the cluster's default zone `zone`.
async fn cluster(tag: &str, app: &str, zone: &str) -> (Cluster, Api) {
    let mut world = World::new(tag).await;
    world.config.zone = zone.into();
    world.config.executor.app = app.into();
    let mut cluster = Cluster::new(world);
    cluster.spawn_executor(&format!("{app}-1"));
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": app })).await.0,
        201
    );
    api.until_executors(app, &[&format!("{app}-1")]).await;
    (cluster, api)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn next_fires_are_shown_in_the_jobs_zone_and_in_utc() {
    let (c, api) = cluster("sched_next", "nx", "Europe/Berlin").await;

    let shanghai = api
        .create_job(
            json!({ "group": "nx", "handler": "demo", "schedule_type": "CRON",
            "schedule_conf": "0 0 2 * * ?", "zone": "Asia/Shanghai" }),
        )
        .await;
    let (status, next) = api
        .get(&format!("/api/v1/jobs/{shanghai}/next?count=3"))
        .await;
    assert_eq!(status, 200, "{next}");
    assert_eq!(next["zone"], "Asia/Shanghai");
    let fires = next["fires"].as_array().expect("fires");
    assert_eq!(fires.len(), 3, "{next}");
    for (i, fire) in fires.iter().enumerate() {
        let local = fire["local"].as_str().expect("local");
        let utc = fire["utc"].as_str().expect("utc");
        assert!(local.ends_with("T02:00:00+08:00"), "{fire}");
        assert!(utc.ends_with("T18:00:00Z"), "{fire}");
        if i > 0 {
            let gap = fire["at_ms"].as_i64().unwrap() - fires[i - 1]["at_ms"].as_i64().unwrap();
            assert_eq!(gap, 86_400_000, "a day apart: {next}");
        }
    }

    // No zone: the cluster's, stored with the job.
    let (status, job) = api
        .post(
            "/api/v1/jobs",
            json!({ "group": "nx", "handler": "demo", "schedule_type": "CRON",
                "schedule_conf": "0 30 9 * * ?" }),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    assert_eq!(job["zone"], "Europe/Berlin");
    let (_, next) = api.get(&format!("/api/v1/jobs/{}/next", job["id"])).await;
    assert_eq!(
        next["fires"].as_array().map(Vec::len),
        Some(5),
        "five by default"
    );
    let local = next["fires"][0]["local"].as_str().unwrap();
    assert!(
        local.ends_with("T09:30:00+01:00") || local.ends_with("T09:30:00+02:00"),
        "{next}"
    );

    // A schedule not saved yet.
    let (status, preview) = api
        .post(
            "/api/v1/schedules/preview",
            json!({ "schedule_type": "CRON", "schedule_conf": "0 0 12 ? * MON-FRI",
                "zone": "America/New_York", "count": 10 }),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    let fires = preview["fires"].as_array().expect("fires");
    assert_eq!(fires.len(), 10);
    for fire in fires {
        let local = fire["local"].as_str().unwrap();
        assert!(
            local.contains("T12:00:00-05:00") || local.contains("T12:00:00-04:00"),
            "{fire}"
        );
        let day = chrono::DateTime::parse_from_rfc3339(local).unwrap();
        assert!(
            !matches!(
                chrono::Datelike::weekday(&day),
                chrono::Weekday::Sat | chrono::Weekday::Sun
            ),
            "weekdays only: {fire}"
        );
    }
    let (status, preview) = api
        .post(
            "/api/v1/schedules/preview",
            json!({ "schedule_type": "FIX_DELAY", "schedule_conf": "90s", "count": 2 }),
        )
        .await;
    assert_eq!(status, 200, "{preview}");
    assert_eq!(preview["zone"], "Europe/Berlin");
    let at: Vec<i64> = preview["fires"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["at_ms"].as_i64().unwrap())
        .collect();
    assert_eq!(at[1] - at[0], 90_000, "{preview}");

    // Bad input names the field.
    for (body, field) in [
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "0 0 2 * * ?", "zone": "Mars/Olympus" }),
            "zone",
        ),
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "0 0 25 * * ?" }),
            "schedule_conf",
        ),
        (json!({ "schedule_type": "CRON" }), "schedule_conf"),
        (
            json!({ "schedule_type": "WEEKLY", "schedule_conf": "x" }),
            "schedule_type",
        ),
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "count": 0 }),
            "count",
        ),
        (
            json!({ "schedule_type": "CRON", "schedule_conf": "* * * * * ?", "count": 101 }),
            "count",
        ),
    ] {
        let (status, out) = api.post("/api/v1/schedules/preview", body.clone()).await;
        assert_eq!(
            (status, out["error"]["field"].as_str()),
            (400, Some(field)),
            "{body}: {out}"
        );
    }
    let (status, out) = api
        .get(&format!("/api/v1/jobs/{shanghai}/next?count=0"))
        .await;
    assert_eq!(
        (status, out["error"]["field"].as_str()),
        (400, Some("count")),
        "{out}"
    );
    let (status, out) = api
        .post(
            "/api/v1/jobs",
            json!({ "group": "nx", "handler": "demo", "schedule_type": "CRON",
                "schedule_conf": "0 0 2 * * ?", "zone": "Asia/Beijing" }),
        )
        .await;
    assert_eq!(
        (status, out["error"]["field"].as_str()),
        (400, Some("zone")),
        "{out}"
    );

    c.stop().await;
}

/// A stored run of job `job_id`: (trigger id, trigger type, fire, handler
/// start and end in ms, handle code).
type Run = (String, String, i64, i64, i64, i32);

async fn runs(db: &MySqlPool, job_id: u64) -> Vec<Run> {
    sqlx::query(
        "SELECT trigger_id, trigger_type, fire_ms, \
         CAST(UNIX_TIMESTAMP(handle_start) * 1000 AS SIGNED) AS start_ms, \
         CAST(UNIX_TIMESTAMP(handle_time) * 1000 AS SIGNED) AS end_ms, handle_code \
         FROM job_log WHERE job_id = ? AND handle_code IS NOT NULL AND handle_code <> 0 \
         ORDER BY fire_ms",
    )
    .bind(job_id)
    .fetch_all(db)
    .await
    .expect("read job_log")
    .iter()
    .map(|r| {
        (
            r.get("trigger_id"),
            r.get("trigger_type"),
            r.get("fire_ms"),
            r.get::<Option<i64>, _>("start_ms").unwrap_or_default(),
            r.get::<Option<i64>, _>("end_ms").unwrap_or_default(),
            r.get("handle_code"),
        )
    })
    .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fixed_delay_job_fires_a_delay_after_its_slow_run_ends() {
    let (c, api) = cluster("sched_delay", "fd", "UTC").await;
    // Each run takes 1.5 s; the next fires 1 s after it ended. A fixed rate
    // of 1 s would start runs while the last one still runs.
    let job = api
        .create_job(json!({ "group": "fd", "handler": "demo", "params": "1500",
            "schedule_type": "FIX_DELAY", "schedule_conf": "1s" }))
        .await;
    let stored = eventually(
        "four runs of the fixed-delay job",
        Duration::from_secs(40),
        || async {
            let runs = runs(c.db(), job).await;
            (runs.len() >= 4).then_some(runs)
        },
    )
    .await;
    for run in &stored {
        assert_eq!((run.1.as_str(), run.5), ("CRON", 200), "{stored:?}");
        assert!(run.4 - run.3 >= 1_400, "a slow run: {run:?}");
    }
    for pair in stored.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let gap = after.2 - before.4;
        assert!(
            (1_000..3_000).contains(&gap),
            "the next fire is 1 s after the run ended (+ result handling), got {gap} ms: {stored:?}"
        );
        assert!(after.3 >= before.4, "runs never overlap: {stored:?}");
    }
    c.stop().await;
}

/// Sets job `id`'s due score (it is in the due set) to `score`, in the
/// past, as a leader that stalled leaves it.
async fn make_late(c: &Cluster, id: u64, score: i64) {
    let pool = rondo_core::redis::pool(&c.config().redis).expect("a redis pool");
    let names = c.config().names();
    let due = names.due(names.partition_of(id));
    let mut conn = pool.get().await.expect("redis");
    let changed: i64 = redis::cmd("ZADD")
        .arg(&due)
        .arg("XX")
        .arg("CH")
        .arg(score)
        .arg(id)
        .query_async(&mut conn)
        .await
        .expect("zadd");
    assert_eq!(changed, 1, "job {id} was in its due set");
}

/// Waits until job `id` has a missed-fires record; returns the answer.
async fn until_missed(api: &Api, id: u64) -> Value {
    eventually(&format!("job {id}'s missed fires"), PATIENCE, || async {
        let (status, out) = api.get(&format!("/api/v1/jobs/{id}/misfires")).await;
        (status == 200 && out["recent"].as_array().is_some_and(|r| !r.is_empty())).then_some(out)
    })
    .await
}

/// Fires of `0/2 * * * * ?` from `first_ms` (a fire) up to `last_ms`.
fn every_two_s(first_ms: i64, last_ms: i64) -> u64 {
    assert_eq!(first_ms % 2_000, 0, "a fire of the schedule");
    ((last_ms - first_ms) / 2_000 + 1) as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_late_job_follows_its_misfire_strategy_and_the_skipped_fires_are_visible() {
    let (c, api) = cluster("sched_misfire", "mf", "UTC").await;
    let spec = |misfire: &str, threshold: Option<u64>| {
        let mut s = json!({ "group": "mf", "handler": "demo", "schedule_type": "CRON",
            "schedule_conf": "0/2 * * * * ?", "misfire": misfire });
        if let Some(t) = threshold {
            s["misfire_threshold_ms"] = t.into();
        }
        s
    };
    let created_ms = clock::now_ms();
    let skip = api.create_job(spec("DO_NOTHING", None)).await;
    let once = api.create_job(spec("FIRE_ONCE_NOW", None)).await;
    let patient = api.create_job(spec("DO_NOTHING", Some(120_000))).await;
    // A fire of the schedule, 61 to 63 s ago.
    let late = clock::now_ms() - 61_000;
    let late = late - late.rem_euclid(2_000);
    for id in [skip, once, patient] {
        make_late(&c, id, late).await;
    }

    // DO_NOTHING: every missed fire skipped, nothing run in their place.
    let missed = until_missed(&api, skip).await;
    let rec = &missed["recent"][0];
    assert_eq!(
        (rec["cause"].as_str(), rec["strategy"].as_str()),
        (Some("MISFIRE"), Some("DO_NOTHING")),
        "{missed}"
    );
    let (first, last) = (
        rec["first_ms"].as_i64().unwrap(),
        rec["last_ms"].as_i64().unwrap(),
    );
    let expected = every_two_s(first, last);
    assert!(expected >= 29, "about 30 fires missed: {missed}");
    assert_eq!(rec["count"].as_u64(), Some(expected), "{missed}");
    assert_eq!(rec["skipped"].as_u64(), Some(expected), "{missed}");
    assert_eq!(missed["skipped"].as_u64(), Some(expected), "{missed}");
    assert_eq!(rec["fired_ms"], Value::Null, "{missed}");
    assert_eq!(
        rec["threshold_ms"].as_i64(),
        Some(5_000),
        "the cluster's: {missed}"
    );

    // FIRE_ONCE_NOW: one MISFIRE run now, the rest skipped.
    let missed = until_missed(&api, once).await;
    let rec = &missed["recent"][0];
    let (first, last) = (
        rec["first_ms"].as_i64().unwrap(),
        rec["last_ms"].as_i64().unwrap(),
    );
    let expected = every_two_s(first, last);
    assert_eq!(
        (
            rec["cause"].as_str(),
            rec["count"].as_u64(),
            rec["skipped"].as_u64()
        ),
        (Some("MISFIRE"), Some(expected), Some(expected - 1)),
        "{missed}"
    );
    let fired = rec["fired_ms"].as_i64().expect("fired now");
    assert_eq!(fired, rec["detected_ms"].as_i64().unwrap(), "{missed}");
    let misfire = eventually(
        "the MISFIRE run stored",
        Duration::from_secs(30),
        || async {
            runs(c.db(), once)
                .await
                .into_iter()
                .find(|r| r.1 == "MISFIRE")
        },
    )
    .await;
    assert_eq!((misfire.2, misfire.5), (fired, 200), "{misfire:?}");

    // A threshold of its own (2 min): 61 s late is only late; the first
    // missed fire runs at its own instant (as CRON), the rest are skipped.
    let missed = until_missed(&api, patient).await;
    let rec = &missed["recent"][0];
    let (first, last) = (
        rec["first_ms"].as_i64().unwrap(),
        rec["last_ms"].as_i64().unwrap(),
    );
    let expected = every_two_s(first, last);
    assert_eq!(
        (
            rec["cause"].as_str(),
            rec["skipped"].as_u64(),
            rec["fired_ms"].as_i64(),
            rec["threshold_ms"].as_i64()
        ),
        (Some("LATE"), Some(expected - 1), Some(first), Some(120_000)),
        "{missed}"
    );
    let late_run = eventually("the late run stored", Duration::from_secs(30), || async {
        runs(c.db(), patient)
            .await
            .into_iter()
            .find(|r| r.2 == first)
    })
    .await;
    assert_eq!(
        (late_run.1.as_str(), late_run.5),
        ("CRON", 200),
        "{late_run:?}"
    );

    // Nothing ran for the skipped instants: before the jobs existed, only
    // the patient job's one late fire.
    for (id, allowed) in [(skip, 0), (once, 0), (patient, 1)] {
        let before = runs(c.db(), id)
            .await
            .into_iter()
            .filter(|r| r.1 == "CRON" && r.2 < created_ms)
            .count();
        assert_eq!(before, allowed, "job {id}");
    }
    // The jobs go on from now, on schedule.
    eventually(
        "the skipping job to fire again on schedule",
        Duration::from_secs(20),
        || async {
            runs(c.db(), skip)
                .await
                .into_iter()
                .find(|r| r.1 == "CRON" && r.2 > last && r.2 % 2_000 == 0)
        },
    )
    .await;
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_fixed_delay_job_restarted_during_a_run_keeps_one_chain_of_fires() {
    let (c, api) = cluster("sched_delay_restart", "fr", "UTC").await;
    let job = api
        .create_job(json!({ "group": "fr", "handler": "demo", "params": "1500",
            "schedule_type": "FIX_DELAY", "schedule_conf": "1s" }))
        .await;
    // Stop and start while its first run runs: the start arms a new first
    // fire, so the run in flight must not arm a second chain when it ends.
    let running = eventually(
        "the first run to start",
        Duration::from_secs(20),
        || async {
            let (_, logs) = api.get(&format!("/api/v1/jobs/{job}/logs")).await;
            logs.as_array()?
                .iter()
                .find(|l| l["handle_start_ms"].as_i64().is_some())
                .and_then(|l| l["fire_ms"].as_i64())
        },
    )
    .await;
    for action in ["stop", "start"] {
        let (status, out) = api
            .post(&format!("/api/v1/jobs/{job}/{action}"), json!({}))
            .await;
        assert_eq!(status, 200, "{action}: {out}");
    }
    let stored = eventually("six runs", Duration::from_secs(40), || async {
        let runs = runs(c.db(), job).await;
        (runs.len() >= 6).then_some(runs)
    })
    .await;
    assert_eq!(stored[0].2, running, "{stored:?}");
    // Around the restart two fires may overlap (one claimed before the
    // stop, the start's own). After them one chain goes on: each fire waits
    // for the run before it to end, plus the delay. Two chains (the run in
    // flight arming a fire of its own) would keep overlapping.
    for pair in stored[2..].windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        assert!(
            after.2 >= before.4 + 1_000,
            "fire {} came {} ms after the run before ended: {stored:?}",
            after.0,
            after.2 - before.4
        );
    }
    c.stop().await;
}
