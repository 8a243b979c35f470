//! The records two processes share, round-tripped through the real Redis:
//! what one side writes with `rondo_core`'s helpers, the other reads back
//! with them, unchanged.

use std::collections::HashMap;
use std::time::Duration;

use redis::AsyncCommands;
use rondo_core::testkit::{Namespace, fixtures};
use rondo_core::{inflight, registry};

async fn redis(ns: &Namespace) -> redis::aio::MultiplexedConnection {
    let client = redis::Client::open(ns.config.redis.url.as_str()).expect("redis url");
    client
        .get_multiplexed_async_connection()
        .await
        .expect("redis")
}

#[tokio::test]
async fn an_in_flight_record_reads_back_as_written_and_is_forgotten_whole() {
    let ns = Namespace::new("inflight");
    let names = ns.names();
    let mut conn = redis(&ns).await;
    let job = 6;
    let p = names.partition_of(job);
    let triggers = [
        fixtures::trigger("6-1000-0", job),
        rondo_core::Trigger {
            params: "{\"day\":\"2026-01-31\"}".into(),
            ..fixtures::trigger("6-2000-0", job)
        },
    ];
    let mut pipe = redis::pipe();
    inflight::record(&mut pipe, &names, p, &triggers).unwrap();
    let () = pipe.query_async(&mut conn).await.unwrap();

    let mut read = redis::pipe();
    for t in &triggers {
        inflight::read(&mut read, &names, t.job_id, &t.trigger_id);
    }
    let stored: Vec<Option<String>> = read.query_async(&mut conn).await.unwrap();
    let decoded: Vec<_> = stored
        .iter()
        .map(|j| inflight::decode(j.as_deref()))
        .collect();
    assert_eq!(
        decoded,
        triggers.iter().cloned().map(Some).collect::<Vec<_>>()
    );
    let scores: Vec<(String, i64)> = conn
        .zrange_withscores(names.inflight(p), 0, -1)
        .await
        .unwrap();
    assert_eq!(scores.len(), 2, "both on the lost-trigger scan, by sent_ms");

    let mut forget = redis::pipe();
    inflight::forget(&mut forget, &names, p, &["6-1000-0", "6-2000-0"]);
    let () = forget.query_async(&mut conn).await.unwrap();
    let left: (u64, u64) = redis::pipe()
        .zcard(names.inflight(p))
        .hlen(names.inflight_data(p))
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, (0, 0));
}

#[tokio::test]
async fn a_registry_entry_reads_back_as_written_and_expires() {
    let ns = Namespace::new("registry");
    let names = ns.names();
    let mut conn = redis(&ns).await;
    let entry = registry::Entry {
        app: "billing".into(),
        host: "h1".into(),
        handlers: vec!["demo".into(), "http".into()],
        started_ms: fixtures::T0,
        pid: 4242,
        incarnation: "00ff".into(),
        heartbeat_ms: fixtures::T0 + 1_000,
        running_jobs: vec![3, 12],
        via: String::new(),
    };
    let mut pipe = redis::pipe();
    registry::beat(
        &mut pipe,
        &names,
        "billing-1",
        &entry,
        Duration::from_secs(60),
    );
    let () = pipe.query_async(&mut conn).await.unwrap();

    let fields: HashMap<String, String> = conn.hgetall(names.executor("billing-1")).await.unwrap();
    assert_eq!(registry::Entry::from_fields(&fields), Some(entry.clone()));
    let score: Option<f64> = conn
        .zscore(names.registry("billing"), "billing-1")
        .await
        .unwrap();
    assert_eq!(score.map(|s| s as i64), Some(entry.heartbeat_ms));
    let ttl: i64 = conn.pttl(names.executor("billing-1")).await.unwrap();
    assert!(
        ttl > 0 && ttl <= 60_000,
        "the hash expires by itself: {ttl}"
    );

    let mut gone = redis::pipe();
    registry::remove(&mut gone, &names, "billing", "billing-1");
    let () = gone.query_async(&mut conn).await.unwrap();
    let left: (bool, Option<f64>) = redis::pipe()
        .exists(names.executor("billing-1"))
        .zscore(names.registry("billing"), "billing-1")
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, (false, None));
}
