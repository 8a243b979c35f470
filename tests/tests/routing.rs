//! Every routing strategy against the real Redis and RabbitMQ, with fake
//! executors (registered in Redis, a durable queue each, no consumer):
//! distributions over a thousand triggers, checked both in the dispatcher's
//! records and in the queues; cluster-wide fairness with two dispatchers
//! (two scheduler nodes) routing the same job; FAILOVER and BUSYOVER reading
//! the registry; sharding; in-flight records of sent triggers.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use futures_util::{StreamExt, stream};
use redis::AsyncCommands;
use rondo_core::trigger::code;
use rondo_core::{Config, Job, JobSpec, Trigger, clock};
use rondo_dispatcher::{Dispatched, Dispatcher, Fire};
use rondo_testkit::World;
use rondo_testkit::fake_executors::FakeExecutors;

/// Triggers per distribution.
const N: usize = 1000;
/// Dispatches in progress at once where order does not matter.
const CONCURRENCY: usize = 32;
const GROUP: &str = "grp";
const THREE: [&str; 3] = ["ex-a", "ex-b", "ex-c"];

/// One test's fake executors and dispatcher, in its own [`World`] (which
/// removes the namespace and the executors' queues when dropped).
struct Routing {
    fakes: FakeExecutors,
    dispatcher: Arc<Dispatcher>,
    // Dropped last, once nothing beats or dispatches.
    world: World,
}

impl Routing {
    async fn new(tag: &str, executors: &[&str]) -> Routing {
        let world = World::new(tag).await;
        let fakes = FakeExecutors::start(&world, GROUP, executors).await;
        let dispatcher = Arc::new(another_dispatcher(&world.config).await);
        Routing {
            fakes,
            dispatcher,
            world,
        }
    }

    async fn end(self, others: &[Arc<Dispatcher>]) {
        for d in others.iter().chain([&self.dispatcher]) {
            d.close().await;
        }
        self.fakes.stop().await;
    }

    async fn redis(&self) -> rondo_core::redis::Connection {
        let pool = rondo_core::redis::pool(&self.world.config.redis).unwrap();
        pool.get().await.unwrap()
    }
}

/// A dispatcher as another scheduler node would have.
async fn another_dispatcher(config: &Config) -> Dispatcher {
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    Dispatcher::connect(config, pool).await.expect("dispatcher")
}

fn job(id: u64, routing: &str) -> Arc<Job> {
    let spec = JobSpec {
        group: Some(GROUP.into()),
        handler: Some("demo".into()),
        routing: Some(routing.into()),
        ..JobSpec::default()
    };
    Arc::new(spec.validate(id, clock::now_ms(), None).unwrap())
}

fn fire(job: &Arc<Job>, fire_ms: i64) -> Fire {
    Fire::scheduled(job.clone(), fire_ms)
}

/// `n` fires of a job, one millisecond apart.
fn fires(job: &Arc<Job>, n: usize) -> Vec<Fire> {
    (0..n).map(|i| fire(job, 1_000_000 + i as i64)).collect()
}

/// Dispatches concurrently; every fire must be sent.
async fn dispatch_all(dispatcher: &Dispatcher, fires: Vec<Fire>) -> Vec<Trigger> {
    let outcomes: Vec<Dispatched> = stream::iter(fires)
        .map(|f| async move { dispatcher.dispatch(&f).await.expect("dispatch") })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    sent(outcomes)
}

/// Waits out the dispatcher's cache of a group's live executors (re-read
/// at most every 100 ms): a registry change reaches routing within that.
async fn registry_change_seen() {
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
}

/// Dispatches one after the other, alternating between `dispatchers`.
async fn dispatch_in_turn(dispatchers: &[&Dispatcher], fires: Vec<Fire>) -> Vec<Trigger> {
    let mut outcomes = Vec::new();
    for (i, f) in fires.iter().enumerate() {
        let d = dispatchers[i % dispatchers.len()];
        outcomes.push(d.dispatch(f).await.expect("dispatch"));
    }
    sent(outcomes)
}

fn sent(outcomes: Vec<Dispatched>) -> Vec<Trigger> {
    outcomes
        .into_iter()
        .flat_map(|d| {
            assert!(d.all_sent(), "{:?}", d.records);
            d.records.into_iter().map(|r| r.trigger)
        })
        .collect()
}

fn per_executor(triggers: &[Trigger]) -> BTreeMap<String, usize> {
    let mut counts = BTreeMap::new();
    for t in triggers {
        *counts.entry(t.executor_id.clone()).or_default() += 1;
    }
    counts
}

/// The queues hold exactly the triggers the records say were sent to each
/// (counted per trigger: one message may carry several). Drains them.
async fn assert_queues_hold(fakes: &FakeExecutors, counts: &BTreeMap<String, usize>) {
    let depths = fakes.depths().await;
    for id in depths.keys() {
        let want = counts.get(id).copied().unwrap_or(0);
        let got = fakes.drain(id).await;
        let unique: std::collections::HashSet<&str> =
            got.iter().map(|t| t.trigger_id.as_str()).collect();
        assert_eq!(
            unique.len(),
            got.len(),
            "queue of {id} holds a trigger twice"
        );
        assert_eq!(got.len(), want, "queue of {id}: {counts:?}");
        assert!(got.iter().all(|t| &t.executor_id == id), "queue of {id}");
    }
}

fn picks(triggers: &[Trigger]) -> Vec<&str> {
    triggers.iter().map(|t| t.executor_id.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn first_and_last_send_every_trigger_to_one_end() {
    let w = Routing::new("route_ends", &THREE).await;
    let first = dispatch_all(&w.dispatcher, fires(&job(1, "FIRST"), N)).await;
    let last = dispatch_all(&w.dispatcher, fires(&job(2, "LAST"), N)).await;
    assert_eq!(per_executor(&first), BTreeMap::from([("ex-a".into(), N)]));
    assert_eq!(per_executor(&last), BTreeMap::from([("ex-c".into(), N)]));
    let both = BTreeMap::from([("ex-a".into(), N), ("ex-c".into(), N)]);
    assert_queues_hold(&w.fakes, &both).await;
    let lanes = w.dispatcher.lane_stats();
    assert_eq!(lanes.fast.dispatched + lanes.slow.dispatched, 2 * N as u64);
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_is_exactly_even() {
    let w = Routing::new("route_round", &THREE).await;
    let n = N + 2; // a multiple of 3
    let triggers = dispatch_all(&w.dispatcher, fires(&job(1, "ROUND"), n)).await;
    let counts = per_executor(&triggers);
    assert_eq!(
        counts.values().copied().collect::<Vec<_>>(),
        [n / 3; 3],
        "{counts:?}"
    );
    assert_queues_hold(&w.fakes, &counts).await;
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn round_is_fair_across_two_scheduler_nodes() {
    let w = Routing::new("route_round2", &THREE).await;
    let other = Arc::new(another_dispatcher(&w.world.config).await);
    let triggers = dispatch_in_turn(&[&w.dispatcher, &other], fires(&job(1, "ROUND"), 300)).await;
    let seq = picks(&triggers);
    // One rotation for the cluster: node-local counters would give a, a, b, b, …
    for (i, pair) in seq.windows(2).enumerate() {
        assert_ne!(
            pair[0],
            pair[1],
            "fires {i} and {} went to one executor",
            i + 1
        );
    }
    assert!(seq.windows(4).all(|w| w[0] == w[3]), "{seq:?}");
    assert_eq!(
        per_executor(&triggers)
            .values()
            .copied()
            .collect::<Vec<_>>(),
        [100; 3]
    );
    w.end(&[other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_is_roughly_even() {
    let w = Routing::new("route_random", &THREE).await;
    let triggers = dispatch_all(&w.dispatcher, fires(&job(1, "RANDOM"), N)).await;
    let counts = per_executor(&triggers);
    assert_eq!(counts.len(), 3, "{counts:?}");
    for (id, n) in &counts {
        let share = *n as f64 / N as f64;
        assert!(
            (0.25..=0.42).contains(&share),
            "{id} got {share:.3}: {counts:?}"
        );
    }
    assert_queues_hold(&w.fakes, &counts).await;
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn consistent_hash_is_stable_and_moves_few_jobs_when_an_executor_leaves() {
    let four = ["ex-a", "ex-b", "ex-c", "ex-d"];
    let w = Routing::new("route_hash", &four).await;
    let jobs: Vec<Arc<Job>> = (1..=N as u64)
        .map(|id| job(id, "CONSISTENT_HASH"))
        .collect();
    let one_fire_each = |fire_ms: i64| jobs.iter().map(|j| fire(j, fire_ms)).collect::<Vec<_>>();
    let placement = |triggers: Vec<Trigger>| -> HashMap<u64, String> {
        triggers
            .into_iter()
            .map(|t| (t.job_id, t.executor_id))
            .collect()
    };

    let before = placement(dispatch_all(&w.dispatcher, one_fire_each(1_000)).await);
    let again = placement(dispatch_all(&w.dispatcher, one_fire_each(2_000)).await);
    assert_eq!(before, again, "a job moved while the group was unchanged");
    let repeated = dispatch_all(&w.dispatcher, fires(&jobs[41], 50)).await;
    assert!(repeated.iter().all(|t| t.executor_id == before[&42]));
    let mut spread: BTreeMap<&str, usize> = BTreeMap::new();
    for id in before.values() {
        *spread.entry(id.as_str()).or_default() += 1;
    }
    assert_eq!(spread.len(), 4, "every executor holds jobs: {spread:?}");

    w.fakes.remove("ex-c").await;
    registry_change_seen().await;
    let after = placement(dispatch_all(&w.dispatcher, one_fire_each(3_000)).await);
    let moved: Vec<u64> = (1..=N as u64).filter(|j| before[j] != after[j]).collect();
    for j in &moved {
        assert_eq!(
            before[j], "ex-c",
            "job {j} left {}, which stayed",
            before[j]
        );
    }
    assert!(after.values().all(|id| id != "ex-c"));
    let bound = N / four.len() + N * 8 / 100;
    assert!(
        moved.len() <= bound,
        "{} of {N} jobs moved (bound {bound})",
        moved.len()
    );
    assert_eq!(moved.len(), spread["ex-c"]);
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lfu_is_even_with_two_scheduler_nodes_routing_at_once() {
    let w = Routing::new("route_lfu", &THREE).await;
    let other = Arc::new(another_dispatcher(&w.world.config).await);
    let lfu = job(1, "LEAST_FREQUENTLY_USED");
    let total = N + 2; // a multiple of 3
    let (mine, theirs): (Vec<Fire>, Vec<Fire>) = fires(&lfu, total)
        .into_iter()
        .partition(|f| f.fire_ms % 2 == 0);
    let (a, b) = tokio::join!(
        dispatch_all(&w.dispatcher, mine),
        dispatch_all(&other, theirs)
    );
    let counts = per_executor(&[a, b].concat());
    // New executors start at a random count below 3, so picks differ by at
    // most 3; node-local maps would drift apart.
    for (id, n) in &counts {
        assert!(n.abs_diff(total / 3) <= 3, "{id}: {counts:?}");
    }
    assert_queues_hold(&w.fakes, &counts).await;

    // The shared state: one count per live executor; a leaver is forgotten.
    let key = format!("{}:lfu:1", w.world.config.namespace);
    let stored: HashMap<String, u64> = w.redis().await.hgetall(&key).await.unwrap();
    assert_eq!(stored.len(), 3, "{stored:?}");
    w.fakes.remove("ex-b").await;
    registry_change_seen().await;
    let more = dispatch_all(&w.dispatcher, fires(&lfu, 20)).await;
    assert!(more.iter().all(|t| t.executor_id != "ex-b"));
    let stored: HashMap<String, u64> = w.redis().await.hgetall(&key).await.unwrap();
    assert!(!stored.contains_key("ex-b"), "{stored:?}");
    w.end(&[other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lru_never_repeats_and_is_fair_across_two_scheduler_nodes() {
    let w = Routing::new("route_lru", &THREE).await;
    let other = Arc::new(another_dispatcher(&w.world.config).await);
    let lru = job(1, "LEAST_RECENTLY_USED");
    // Sequential dispatches wait for each other's broker confirms: 300 of
    // them show the rotation, the thousand at once the fairness.
    let all = fires(&lru, 300 + N);
    let (in_turn, at_once) = all.split_at(300);

    let seq_triggers = dispatch_in_turn(&[&w.dispatcher, &other], in_turn.to_vec()).await;
    let seq = picks(&seq_triggers);
    for (i, pair) in seq.windows(2).enumerate() {
        assert_ne!(
            pair[0],
            pair[1],
            "fires {i} and {} went to one executor",
            i + 1
        );
    }
    assert_eq!(&seq[..3], THREE, "never-used executors first, in id order");

    // Both nodes at once: Redis serialises the picks, so the rotation holds
    // and the counts stay within one of each other.
    let (mine, theirs): (Vec<Fire>, Vec<Fire>) =
        at_once.iter().cloned().partition(|f| f.fire_ms % 2 == 0);
    let (a, b) = tokio::join!(
        dispatch_all(&w.dispatcher, mine),
        dispatch_all(&other, theirs)
    );
    let counts = per_executor(&[seq_triggers, a, b].concat());
    let (min, max) = (
        counts.values().min().unwrap(),
        counts.values().max().unwrap(),
    );
    assert!(max - min <= 1, "{counts:?}");
    assert_queues_hold(&w.fakes, &counts).await;
    w.end(&[other]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failover_skips_executors_whose_heartbeat_is_stale() {
    let w = Routing::new("route_failover", &THREE).await;
    let failover = job(1, "FAILOVER");
    // Three quarters of a lease late: still live (the lease) but not fresh
    // (half the lease).
    let stale_ms = 3 * w.world.config.registry.lease_ms as i64 / 4;
    w.fakes.set_heartbeat_lag("ex-a", stale_ms).await;
    registry_change_seen().await;
    let triggers = dispatch_all(&w.dispatcher, fires(&failover, N)).await;
    assert_eq!(
        per_executor(&triggers),
        BTreeMap::from([("ex-b".into(), N)])
    );

    w.fakes.set_heartbeat_lag("ex-b", stale_ms).await;
    registry_change_seen().await;
    let triggers = dispatch_all(&w.dispatcher, fires(&failover, 10)).await;
    assert!(triggers.iter().all(|t| t.executor_id == "ex-c"));

    w.fakes.set_heartbeat_lag("ex-c", stale_ms).await;
    registry_change_seen().await;
    let out = w.dispatcher.dispatch(&fire(&failover, 5)).await.unwrap();
    assert_eq!(out.records.len(), 1);
    assert_eq!(out.records[0].code, code::FAIL);
    let msg = &out.records[0].msg;
    assert!(
        msg.contains("FAILOVER") && msg.contains("heartbeat"),
        "{msg}"
    );

    w.fakes.set_heartbeat_lag("ex-a", 0).await;
    registry_change_seen().await;
    let triggers = dispatch_all(&w.dispatcher, fires(&failover, 10)).await;
    assert!(triggers.iter().all(|t| t.executor_id == "ex-a"));
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busyover_skips_executors_busy_with_the_job() {
    let w = Routing::new("route_busyover", &THREE).await;
    w.fakes.set_running("ex-a", &[7, 9]).await;
    w.fakes.set_running("ex-b", &[70]).await;
    let triggers = dispatch_all(&w.dispatcher, fires(&job(7, "BUSYOVER"), N)).await;
    assert_eq!(
        per_executor(&triggers),
        BTreeMap::from([("ex-b".into(), N)])
    );
    let triggers = dispatch_all(&w.dispatcher, fires(&job(70, "BUSYOVER"), 10)).await;
    assert!(
        triggers.iter().all(|t| t.executor_id == "ex-a"),
        "70 is not 7"
    );

    for id in THREE {
        w.fakes.set_running(id, &[7]).await;
    }
    let out = w
        .dispatcher
        .dispatch(&fire(&job(7, "BUSYOVER"), 5))
        .await
        .unwrap();
    assert_eq!(out.records[0].code, code::FAIL);
    let msg = &out.records[0].msg;
    assert!(
        msg.contains("BUSYOVER") && msg.contains("busy with job 7"),
        "{msg}"
    );
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sharding_broadcast_gives_every_executor_one_shard() {
    let w = Routing::new("route_broadcast", &THREE).await;
    let broadcast = job(5, "SHARDING_BROADCAST");
    let out = w
        .dispatcher
        .dispatch(&fire(&broadcast, 1_000))
        .await
        .unwrap();
    let shards: Vec<(String, u32, u32, String)> = out
        .records
        .iter()
        .map(|r| {
            let t = &r.trigger;
            (
                t.executor_id.clone(),
                t.shard_index,
                t.shard_total,
                t.trigger_id.clone(),
            )
        })
        .collect();
    assert_eq!(
        shards,
        [
            ("ex-a".into(), 0, 3, "5-1000-0".into()),
            ("ex-b".into(), 1, 3, "5-1000-1".into()),
            ("ex-c".into(), 2, 3, "5-1000-2".into()),
        ]
    );

    let n = N / 3 + 1;
    let triggers = dispatch_all(&w.dispatcher, fires(&broadcast, n)).await;
    assert_eq!(triggers.len(), 3 * n);
    for (index, id) in THREE.iter().enumerate() {
        let got = w.fakes.drain(id).await;
        assert_eq!(got.len(), n + 1, "{id}");
        assert!(
            got.iter()
                .all(|t| t.shard_index == index as u32 && t.shard_total == 3)
        );
    }
    w.end(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sent_triggers_are_recorded_in_flight_and_failed_ones_are_not() {
    let w = Routing::new("route_inflight", &THREE).await;
    let names = w.world.config.names();
    let mut redis = w.redis().await;

    let first = job(3, "FIRST");
    let out = w.dispatcher.dispatch(&fire(&first, 1_000)).await.unwrap();
    let sent = &out.records[0].trigger;
    let p = names.partition_of(3);
    let score: Option<i64> = redis
        .zscore(names.inflight(p), &sent.trigger_id)
        .await
        .unwrap();
    assert_eq!(score, Some(sent.sent_ms));
    let json: String = redis
        .hget(names.inflight_data(p), &sent.trigger_id)
        .await
        .unwrap();
    assert_eq!(&serde_json::from_str::<Trigger>(&json).unwrap(), sent);

    let broadcast = job(6, "SHARDING_BROADCAST");
    let out = w
        .dispatcher
        .dispatch(&fire(&broadcast, 1_000))
        .await
        .unwrap();
    let p6 = names.partition_of(6);
    for r in &out.records {
        let stored: Option<String> = redis
            .hget(names.inflight_data(p6), &r.trigger.trigger_id)
            .await
            .unwrap();
        assert!(stored.is_some(), "{} not in flight", r.trigger.trigger_id);
    }

    // Failed triggers reached no executor: nothing in flight. An executor
    // without a queue (the message comes back) and a group without any.
    let _: () = redis
        .zadd(names.registry("solo"), "ghost", clock::now_ms())
        .await
        .unwrap();
    let mut ghost_job = (*job(8, "FIRST")).clone();
    ghost_job.group = "solo".into();
    let ghost_job = Arc::new(ghost_job);
    let out = w
        .dispatcher
        .dispatch(&fire(&ghost_job, 1_000))
        .await
        .unwrap();
    assert_eq!(out.records[0].code, code::FAIL, "{:?}", out.records);
    let mut nowhere = (*job(12, "FIRST")).clone();
    nowhere.group = "empty".into();
    let out = w
        .dispatcher
        .dispatch(&fire(&Arc::new(nowhere), 1_000))
        .await
        .unwrap();
    assert_eq!(out.records[0].msg, "no live executor in group empty");
    let p8 = names.partition_of(8);
    let p12 = names.partition_of(12);
    for p in [p8, p12] {
        let ids: Vec<String> = redis.zrange(names.inflight(p), 0, -1).await.unwrap();
        assert!(
            ids.iter()
                .all(|id| !id.starts_with("8-") && !id.starts_with("12-")),
            "{ids:?}"
        );
    }
    w.end(&[]).await;
}
