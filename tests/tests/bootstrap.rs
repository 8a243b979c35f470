//! Bootstrap: a cluster whose Redis lost every key of the namespace rebuilds
//! groups, jobs and due sets from MySQL before it claims; a Redis that still
//! has jobs (or whose user deleted them all) is left alone.
//!
//! Real services: scheduler nodes, the persistence worker (so the API's jobs
//! reach MySQL) and a recording executor run in-process.

use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::{Config, clock, testkit};
use rondo_scheduler::leader::bootstrap::{check_layout, rebuild_if_empty};
use rondo_scheduler::store::Store;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::{Value, json};
use sqlx::MySqlPool;

const REBUILD_TIMEOUT: Duration = Duration::from_secs(20);

async fn create_job(api: &Api, spec: Value) -> Value {
    let (status, job) = api.post("/api/v1/jobs", spec).await;
    assert_eq!(status, 201, "{job}");
    job
}

fn id_of(job: &Value) -> u64 {
    job["id"].as_u64().expect("job id")
}

/// The job as the API returns it, without its next fire (which the rebuild
/// recomputes); `None` on 404.
async fn definition(api: &Api, id: u64) -> Option<Value> {
    let (status, mut job) = api.get(&format!("/api/v1/jobs/{id}")).await;
    if status == 404 {
        return None;
    }
    assert_eq!(status, 200, "{job}");
    job.as_object_mut()
        .expect("job object")
        .remove("next_fire_ms");
    Some(job)
}

async fn next_fire(api: &Api, id: u64) -> Option<i64> {
    let (status, job) = api.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!(status, 200, "{job}");
    job["next_fire_ms"].as_i64()
}

/// `(id, deleted)` of every job row in MySQL.
async fn mysql_jobs(db: &MySqlPool) -> Vec<(u64, i8)> {
    sqlx::query_as("SELECT id, deleted FROM job ORDER BY id")
        .fetch_all(db)
        .await
        .expect("job rows")
}

/// Waits until MySQL holds exactly these jobs (`true` = deleted).
async fn wait_for_mysql(db: &MySqlPool, expected: &[(u64, bool)]) {
    let expected: Vec<(u64, i8)> = expected.iter().map(|&(id, d)| (id, i8::from(d))).collect();
    eventually(
        "the persistence worker to store the jobs",
        Duration::from_secs(20),
        || async { (mysql_jobs(db).await == expected).then_some(()) },
    )
    .await;
}

/// A job only MySQL knows (written by hand, as by an older release).
async fn insert_mysql_job(db: &MySqlPool, id: u64, group: &str, conf: &str) {
    sqlx::query(
        "INSERT INTO job (id, group_app, schedule_type, schedule_conf, handler, enabled, updated_ms) \
         VALUES (?, ?, 'CRON', ?, 'record', 1, 1)",
    )
    .bind(id)
    .bind(group)
    .bind(conf)
    .execute(db)
    .await
    .expect("insert job row");
}

async fn redis(config: &Config) -> redis::aio::MultiplexedConnection {
    redis::Client::open(config.redis.url.as_str())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis")
}

async fn is_due(conn: &mut redis::aio::MultiplexedConnection, config: &Config, id: u64) -> bool {
    let names = config.names();
    let score: Option<f64> = conn
        .zscore(names.due(names.partition_of(id)), id)
        .await
        .expect("zscore");
    score.is_some()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_flushed_redis_is_rebuilt_from_mysql_and_fires_again() {
    let mut world = World::new("boot").await;
    world.config.executor.app = "boot".into();
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let recorder = Recorder::default();
    cluster.start_recording_executor("boot-1", &recorder);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let (config, db) = (cluster.config().clone(), cluster.db().clone());

    let (status, body) = api.post("/api/v1/groups", json!({ "app": "boot" })).await;
    assert_eq!(status, 201, "{body}");
    let job = |kind: &str, conf: &str, extra: Value| {
        let mut spec = json!({ "group": "boot", "handler": "record", "schedule_type": kind, "schedule_conf": conf });
        spec.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        spec
    };
    let cron = create_job(&api, job("CRON", "0 * * * * ?", json!({}))).await;
    let rate = create_job(&api, job("FIX_RATE", "1", json!({}))).await;
    let once = create_job(
        &api,
        job("FIX_RATE", "3600", json!({ "misfire": "FIRE_ONCE_NOW" })),
    )
    .await;
    let stopped = create_job(
        &api,
        job("CRON", "0 * * * * ?", json!({ "enabled": false })),
    )
    .await;
    let manual = create_job(&api, job("NONE", "", json!({}))).await;
    let gone = create_job(&api, job("FIX_RATE", "60", json!({}))).await;
    let (status, _) = api
        .call(
            reqwest::Method::DELETE,
            &format!("/api/v1/jobs/{}", id_of(&gone)),
            None,
        )
        .await;
    assert_eq!(status, 204);
    let kept = [&cron, &rate, &once, &stopped, &manual];
    let mut expected: Vec<(u64, bool)> = kept.iter().map(|j| (id_of(j), false)).collect();
    expected.push((id_of(&gone), true));
    expected.sort_unstable();
    wait_for_mysql(&db, &expected).await;
    // A row whose schedule no longer parses: restored, never scheduled.
    let broken = id_of(&gone) + 10;
    insert_mysql_job(&db, broken, "boot", "not a cron").await;
    let mut before = Vec::new();
    for j in kept {
        before.push(definition(&api, id_of(j)).await.expect("defined"));
    }

    // Redis loses the namespace while no node runs.
    cluster.stop_node(node).await;
    // As an operator would, not as a process of the cluster (`SCAN`).
    let mut admin = config.clone();
    admin.redis.url = cluster.world.redis_admin_url();
    testkit::cleanup_redis(&admin).await;
    let mut conn = redis(&config).await;
    let left: u64 = redis::cmd("BITCOUNT")
        .arg(config.names().job_bits(0))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "the namespace was flushed");
    // The executor's registration went with it; its next heartbeat (1 s)
    // brings it back. Wait, so the FIRE_ONCE_NOW fire finds it.
    let registry = config.names().registry("boot");
    eventually("the executor to register again", REBUILD_TIMEOUT, || {
        let (mut conn, registry) = (conn.clone(), registry.clone());
        async move {
            let beat: Option<f64> = conn.zscore(&registry, "boot-1").await.unwrap();
            beat.map(|_| ())
        }
    })
    .await;
    let restart_ms = clock::now_ms();
    let node = cluster.start_node().await;
    let api = cluster.api(node);

    eventually("the rebuild from mysql", REBUILD_TIMEOUT, || async {
        definition(&api, id_of(&manual)).await
    })
    .await;
    // Definitions come back as they were.
    for (j, old) in kept.iter().zip(&before) {
        let now = definition(&api, id_of(j)).await.expect("restored");
        assert_eq!(&now, old, "job {} restored as stored", id_of(j));
    }
    assert_eq!(
        definition(&api, id_of(&gone)).await,
        None,
        "deleted stays deleted"
    );
    let broken_job = definition(&api, broken).await.expect("broken row restored");
    assert_eq!(broken_job["schedule_conf"], "not a cron");
    let (status, group) = api.get("/api/v1/groups/boot").await;
    assert_eq!(status, 200, "{group}");

    // Due sets: every enabled scheduled job, and only those.
    for j in [&cron, &rate, &once] {
        assert!(is_due(&mut conn, &config, id_of(j)).await, "{j} is due");
    }
    for id in [id_of(&stopped), id_of(&manual), broken] {
        assert!(!is_due(&mut conn, &config, id).await, "job {id} is not due");
        assert_eq!(next_fire(&api, id).await, None);
    }
    let cron_next = next_fire(&api, id_of(&cron)).await.expect("cron next");
    assert!(
        cron_next > restart_ms && cron_next % 60_000 == 0,
        "{cron_next}"
    );
    // At most one period ahead, plus the pre-read: a fire due within it is
    // claimed at once and the score moves to the one after.
    let ahead = 60_000 + config.claim_ahead_ms();
    assert!(cron_next <= clock::now_ms() + ahead, "{cron_next}");

    // The FIX_RATE job fires again; the FIRE_ONCE_NOW one fires once now.
    let runs_after = |id: u64| {
        let recorder = recorder.clone();
        async move {
            let runs = recorder.runs();
            runs.iter()
                .any(|r| r.job_id == id && r.fire_ms >= restart_ms)
                .then_some(())
        }
    };
    eventually("the 1 s job to fire again", REBUILD_TIMEOUT, || {
        runs_after(id_of(&rate))
    })
    .await;
    eventually(
        "the FIRE_ONCE_NOW job to fire once now",
        REBUILD_TIMEOUT,
        || runs_after(id_of(&once)),
    )
    .await;
    let rate_next = next_fire(&api, id_of(&rate)).await.expect("rate next");
    assert!(rate_next > restart_ms, "{rate_next}");
    let once_next = next_fire(&api, id_of(&once)).await.expect("once next");
    assert!(once_next >= restart_ms + 3_600_000, "{once_next}");

    // The sequence is past every id MySQL has seen: a new job gets a fresh id.
    let seq: u64 = conn.get(config.names().job_seq()).await.unwrap();
    assert!(seq >= broken, "seq:job {seq} below the highest id {broken}");
    let fresh = create_job(&api, job("NONE", "", json!({}))).await;
    assert!(id_of(&fresh) > broken, "{fresh}");

    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_redis_with_jobs_or_a_sequence_is_not_rebuilt() {
    let mut cluster = Cluster::new(World::new("boot-keep").await);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let (config, db) = (cluster.config().clone(), cluster.db().clone());
    let (status, body) = api.post("/api/v1/groups", json!({ "app": "keep" })).await;
    assert_eq!(status, 201, "{body}");
    let spec = json!({ "group": "keep", "handler": "record", "schedule_type": "NONE" });
    let job = create_job(&api, spec.clone()).await;
    wait_for_mysql(&db, &[(id_of(&job), false)]).await;
    // A job only MySQL knows: a rebuild would bring it into Redis.
    let only_in_mysql = 900;
    insert_mysql_job(&db, only_in_mysql, "keep", "0 * * * * ?").await;

    let pool = rondo_core::redis::pool(&config.redis).expect("redis pool");
    let store = Store::new(pool, config.names());
    let mut conn = redis(&config).await;
    let term: u64 = conn.get(config.names().term(0)).await.unwrap();
    let outcome = rebuild_if_empty(&store, &rondo_history::History::from_pool(db.clone()), term)
        .await
        .unwrap();
    assert_eq!(outcome, None, "redis has a job: no rebuild");

    // The user deletes every job: the sequence remains, still no rebuild,
    // neither now nor by a restarted cluster.
    let path = format!("/api/v1/jobs/{}", id_of(&job));
    let (status, _) = api.call(reqwest::Method::DELETE, &path, None).await;
    assert_eq!(status, 204);
    let outcome = rebuild_if_empty(&store, &rondo_history::History::from_pool(db.clone()), term)
        .await
        .unwrap();
    assert_eq!(outcome, None, "redis has a sequence: no rebuild");
    cluster.stop_node(node).await;
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    eventually("the new leader to claim", REBUILD_TIMEOUT, || async {
        let (_, cluster) = api.get("/api/v1/cluster").await;
        (cluster["last_claim_ms"].as_i64() > Some(0)).then_some(())
    })
    .await;
    assert_eq!(definition(&api, only_in_mysql).await, None);
    let (_, jobs) = api.get("/api/v1/jobs").await;
    assert_eq!(jobs["total"], 0, "no job came back: {jobs}");
    let next = create_job(&api, spec).await;
    assert_eq!(id_of(&next), id_of(&job) + 1, "the sequence was not raised");

    cluster.stop().await;
}

/// A new namespace gets this build's key layout recorded by its first
/// check; one recorded in another layout (written by a build this one
/// cannot read) is refused with an error that names the key, every time,
/// and nothing is changed in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_namespace_in_another_key_layout_is_refused() {
    let world = World::new("boot-layout").await;
    let config = world.config.clone();
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).expect("redis pool");
    let store = Store::new(pool, config.names());
    let mut conn = redis(&config).await;
    let before: Option<u32> = conn.get(names.layout()).await.unwrap();
    assert_eq!(before, None, "a new namespace");
    check_layout(&store)
        .await
        .expect("a new namespace is taken");
    let recorded: Option<u32> = conn.get(names.layout()).await.unwrap();
    assert_eq!(recorded, Some(rondo_core::names::LAYOUT));
    check_layout(&store).await.expect("and taken again");

    let other = rondo_core::names::LAYOUT - 1;
    let () = conn.set(names.layout(), other).await.unwrap();
    for _ in 0..2 {
        let refused = check_layout(&store).await.expect_err("another layout");
        assert_eq!(
            refused.kind,
            rondo_core::ErrorKind::InvalidInput,
            "{refused:?}"
        );
        assert!(refused.message.contains(&names.layout()), "{refused:?}");
        let kept: Option<u32> = conn.get(names.layout()).await.unwrap();
        assert_eq!(kept, Some(other), "left as it was");
    }
    drop(world);
}

/// A rebuild gives every partition a definitions version, so the leader's
/// claim reuses the definitions it parsed instead of reading each of them
/// in every tick (a partition without one is read every time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rebuild_sets_the_partitions_definitions_versions() {
    let world = World::new("boot-ver").await;
    let names = world.config.names();
    insert_mysql_job(&world.db, 5, "ver", "0 0 3 * * ?").await;
    let pool = rondo_core::redis::pool(&world.config.redis).expect("redis pool");
    let store = Store::new(pool, names.clone());
    let history = rondo_history::History::from_pool(world.db.clone());
    let report = rebuild_if_empty(&store, &history, 1)
        .await
        .expect("rebuild")
        .expect("redis was empty");
    assert_eq!(report.jobs, 1);
    let mut conn = redis(&world.config).await;
    for p in 0..names.partitions() {
        let versioned: bool = conn.exists(names.defs_version(p)).await.unwrap();
        assert!(versioned, "partition {p} has a definitions version");
    }
}
