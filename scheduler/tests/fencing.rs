//! Fencing against the real Redis: once a newer leader has raised the
//! partitions' term, every script that moves a fire refuses the old term
//! and changes nothing.

use redis::AsyncCommands;
use rondo_core::{ErrorKind, testkit};
use rondo_scheduler::store::triggers::{RetryItem, TriggerStore};
use rondo_scheduler::store::{ClaimItem, Move, Store};

#[tokio::test]
async fn a_stale_term_cannot_claim_or_reassign() {
    let namespace = testkit::Namespace::new("fence");
    let config = namespace.config.clone();
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let store = Store::new(pool.clone(), names.clone());
    let p = names.partition_of(7);
    let mut conn = pool.get().await.unwrap();
    let _: () = conn.zadd(names.due(p), 7, 1_000).await.unwrap();

    assert_eq!(store.leader().raise_term(p, 1).await.unwrap(), 1);
    let nodes = vec!["a".to_owned(), "b".to_owned()];
    let item = |expected| ClaimItem {
        job_id: 7,
        expected_score: expected,
        next: Some(2_000),
        node: 0,
        fires: vec![1_000],
        misfire_fire: None,
        missed: None,
        awaited: None,
    };
    assert_eq!(
        store
            .leader()
            .claim(p, 1, &nodes, &[item(1_000)])
            .await
            .unwrap(),
        (1, 0)
    );
    // The same claim again (a retry after a timeout) claims nothing twice.
    assert_eq!(
        store
            .leader()
            .claim(p, 1, &nodes, &[item(1_000)])
            .await
            .unwrap(),
        (0, 1)
    );

    // A new leader raises the term; the old one is refused everywhere.
    assert_eq!(store.leader().raise_term(p, 2).await.unwrap(), 2);
    assert_eq!(
        store.leader().raise_term(p, 1).await.unwrap(),
        2,
        "a term never goes down"
    );
    let before_due: Vec<(u64, f64)> = conn.zrange_withscores(names.due(p), 0, -1).await.unwrap();
    let before_ring: Vec<String> = conn.zrange(names.ring(p, "a"), 0, -1).await.unwrap();
    let err = store
        .leader()
        .claim(p, 1, &nodes, &[item(2_000)])
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::StaleTerm, "{err}");
    let moves = [Move {
        member: "7:1000".into(),
        target: Some(1),
        score: 1_000,
        rename: None,
        missed: None,
    }];
    let err = store
        .leader()
        .reassign(p, 1, "a", &nodes, &moves)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::StaleTerm, "{err}");
    let after_due: Vec<(u64, f64)> = conn.zrange_withscores(names.due(p), 0, -1).await.unwrap();
    let after_ring: Vec<String> = conn.zrange(names.ring(p, "a"), 0, -1).await.unwrap();
    assert_eq!((before_due, before_ring.clone()), (after_due, after_ring));
    assert_eq!(before_ring, vec!["7:1000".to_owned()]);

    // The current term moves it: the member lands on node b, and a ring
    // emptied this way leaves the owners set.
    assert_eq!(
        store
            .leader()
            .reassign(p, 2, "a", &nodes, &moves)
            .await
            .unwrap(),
        (1, 0)
    );
    let moved: Vec<String> = conn.zrange(names.ring(p, "b"), 0, -1).await.unwrap();
    assert_eq!(moved, vec!["7:1000".to_owned()]);
    let owners: Vec<String> = conn.smembers(names.ring_owners(p)).await.unwrap();
    assert_eq!(owners, vec!["b".to_owned()]);
}

/// Retries and the reaper act under the same term as the claim: once a
/// newer leader raised the partition's term, the old leader can neither
/// read nor take a due retry, nor read or take an old in-flight trigger.
#[tokio::test]
async fn a_stale_term_cannot_dispatch_retries_or_reap_triggers() {
    let namespace = testkit::Namespace::new("fence-duties");
    let config = namespace.config.clone();
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let store = Store::new(pool.clone(), names.clone());
    let triggers = TriggerStore::new(pool.clone(), names.clone(), config.monitor.handled_ttl_s);
    let job = testkit::fixtures::job(7);
    let p = names.partition_of(job.id);
    let retry = RetryItem {
        job_id: job.id,
        trigger_id: "7-1000-0-retry1".into(),
        fire_ms: 1_000,
        retry_count: 1,
        shard_index: 0,
        shard_total: 1,
        params: String::new(),
    };
    triggers.push_retry(&retry, 1_000).await.unwrap();
    let mut conn = pool.get().await.unwrap();
    let _: () = conn
        .zadd(names.inflight(p), "7-1000-0", 1_000)
        .await
        .unwrap();
    assert_eq!(store.leader().raise_term(p, 1).await.unwrap(), 1);

    let due = triggers.due_retries(p, 1, 2_000, 10).await.unwrap();
    assert_eq!(due.len(), 1, "the current term reads the due retry");
    let lost = triggers.stale_inflight(p, 1, 2_000, 10).await.unwrap();
    assert_eq!(lost, vec!["7-1000-0".to_owned()]);
    triggers.check_term(p, 1).await.unwrap();

    // A newer leader: every duty of the old term is refused, nothing moves.
    assert_eq!(store.leader().raise_term(p, 2).await.unwrap(), 2);
    let refused = [
        triggers.due_retries(p, 1, 2_000, 10).await.unwrap_err(),
        triggers.take_retry(p, 1, &due[0]).await.unwrap_err(),
        triggers.stale_inflight(p, 1, 2_000, 10).await.unwrap_err(),
        triggers.unlist(p, 1, "7-1000-0").await.unwrap_err(),
        triggers.check_term(p, 1).await.unwrap_err(),
    ];
    for err in refused {
        assert_eq!(err.kind, ErrorKind::StaleTerm, "{err}");
    }
    let retries: u64 = conn.zcard(names.retry(p)).await.unwrap();
    let inflight: u64 = conn.zcard(names.inflight(p)).await.unwrap();
    assert_eq!(
        (retries, inflight),
        (1, 1),
        "the stale term changed nothing"
    );

    // The new term takes both, once.
    assert!(triggers.take_retry(p, 2, &due[0]).await.unwrap());
    assert!(
        !triggers.take_retry(p, 2, &due[0]).await.unwrap(),
        "taken once"
    );
    assert!(triggers.unlist(p, 2, "7-1000-0").await.unwrap());
}

/// The claim script applies a partition's plan all or nothing: a job whose
/// due score moved since it was read (updated, stopped, claimed) is left
/// out and the others are claimed, each write once: the due scores, the
/// ring members (a misfire's too), the missed record and a fixed delay's
/// awaited fire.
#[tokio::test]
async fn a_claim_with_a_moved_job_claims_the_others_once() {
    let namespace = testkit::Namespace::new("claim-moved");
    let config = namespace.config.clone();
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let store = Store::new(pool.clone(), names.clone());
    let parts = u64::from(names.partitions());
    // Three jobs of one partition.
    let (a, b, c) = (parts + 1, 2 * parts + 1, 3 * parts + 1);
    let p = names.partition_of(a);
    let mut conn = pool.get().await.unwrap();
    let _: () = redis::pipe()
        .zadd(names.due(p), a, 1_000)
        .zadd(names.due(p), b, 1_000)
        .zadd(names.due(p), c, 1_000)
        .query_async(&mut conn)
        .await
        .unwrap();
    assert_eq!(store.leader().raise_term(p, 1).await.unwrap(), 1);
    let nodes = vec!["a".to_owned(), "b".to_owned()];
    let items = [
        // Read at 1 000, fires twice, stays due.
        ClaimItem {
            job_id: a,
            expected_score: 1_000,
            next: Some(3_000),
            node: 0,
            fires: vec![1_000, 2_000],
            misfire_fire: None,
            missed: None,
            awaited: None,
        },
        // Read before an update moved it: left alone.
        ClaimItem {
            job_id: b,
            expected_score: 500,
            next: Some(9_000),
            node: 1,
            fires: vec![500],
            misfire_fire: None,
            missed: None,
            awaited: None,
        },
        // A misfire fired now, its last fire: it leaves the due set; a
        // fixed delay awaiting that fire.
        ClaimItem {
            job_id: c,
            expected_score: 1_000,
            next: None,
            node: 1,
            fires: vec![1_500],
            misfire_fire: Some(1_500),
            missed: Some((4, r#"{"count":5}"#.to_owned())),
            awaited: Some(1_500),
        },
    ];
    assert_eq!(
        store.leader().claim(p, 1, &nodes, &items).await.unwrap(),
        (2, 1)
    );
    // Again (a retry after a timeout): nothing claimed twice.
    assert_eq!(
        store.leader().claim(p, 1, &nodes, &items).await.unwrap(),
        (0, 3)
    );

    let due: Vec<(u64, f64)> = conn.zrange_withscores(names.due(p), 0, -1).await.unwrap();
    assert_eq!(due, vec![(b, 1_000.0), (a, 3_000.0)]);
    let ring_a: Vec<(String, f64)> = conn
        .zrange_withscores(names.ring(p, "a"), 0, -1)
        .await
        .unwrap();
    assert_eq!(
        ring_a,
        vec![
            (format!("{a}:1000"), 1_000.0),
            (format!("{a}:2000"), 2_000.0)
        ]
    );
    let ring_b: Vec<(String, f64)> = conn
        .zrange_withscores(names.ring(p, "b"), 0, -1)
        .await
        .unwrap();
    assert_eq!(ring_b, vec![(format!("{c}:1500:m"), 1_500.0)]);
    let missed: String = conn.hget(names.misfires(p), c).await.unwrap();
    let missed: serde_json::Value = serde_json::from_str(&missed).unwrap();
    assert_eq!(missed["skipped"], 4, "{missed}");
    assert_eq!(missed["recent"][0]["count"], 5, "{missed}");
    let awaited: i64 = conn.hget(names.delays(p), c).await.unwrap();
    assert_eq!(awaited, 1_500);
    let owners: Vec<String> = conn.smembers(names.ring_owners(p)).await.unwrap();
    assert_eq!(owners.len(), 2, "{owners:?}");
}
