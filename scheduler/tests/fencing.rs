//! Fencing against the real Redis: once a newer leader has raised the
//! partitions' term, every script that moves a fire refuses the old term
//! and changes nothing.

use redis::AsyncCommands;
use rondo_core::{ErrorKind, testkit};
use rondo_scheduler::store::{ClaimItem, Move, Store};

#[tokio::test]
async fn a_stale_term_cannot_claim_or_reassign() {
    let config = testkit::config("fence");
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let store = Store::new(pool.clone(), names.clone());
    let p = names.partition_of(7);
    let mut conn = pool.get().await.unwrap();
    let _: () = conn.zadd(names.due(p), 7, 1_000).await.unwrap();

    assert_eq!(store.raise_term(p, 1).await.unwrap(), 1);
    let nodes = vec!["a".to_owned(), "b".to_owned()];
    let item = |expected| ClaimItem {
        job_id: 7,
        expected_score: expected,
        next: Some(2_000),
        node: 0,
        fires: vec![1_000],
    };
    assert_eq!(
        store.claim(p, 1, &nodes, &[item(1_000)]).await.unwrap(),
        (1, 0)
    );
    // The same claim again (a retry after a timeout) claims nothing twice.
    assert_eq!(
        store.claim(p, 1, &nodes, &[item(1_000)]).await.unwrap(),
        (0, 1)
    );

    // A new leader raises the term; the old one is refused everywhere.
    assert_eq!(store.raise_term(p, 2).await.unwrap(), 2);
    assert_eq!(
        store.raise_term(p, 1).await.unwrap(),
        2,
        "a term never goes down"
    );
    let before_due: Vec<(u64, f64)> = conn.zrange_withscores(names.due(p), 0, -1).await.unwrap();
    let before_ring: Vec<String> = conn.zrange(names.ring(p, "a"), 0, -1).await.unwrap();
    let err = store.claim(p, 1, &nodes, &[item(2_000)]).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::StaleTerm, "{err}");
    let moves = [Move {
        member: "7:1000".into(),
        target: Some(1),
        score: 1_000,
    }];
    let err = store.reassign(p, 1, "a", &nodes, &moves).await.unwrap_err();
    assert_eq!(err.kind, ErrorKind::StaleTerm, "{err}");
    let after_due: Vec<(u64, f64)> = conn.zrange_withscores(names.due(p), 0, -1).await.unwrap();
    let after_ring: Vec<String> = conn.zrange(names.ring(p, "a"), 0, -1).await.unwrap();
    assert_eq!((before_due, before_ring.clone()), (after_due, after_ring));
    assert_eq!(before_ring, vec!["7:1000".to_owned()]);

    // The current term moves it: the member lands on node b, and a ring
    // emptied this way leaves the owners set.
    assert_eq!(
        store.reassign(p, 2, "a", &nodes, &moves).await.unwrap(),
        (1, 0)
    );
    let moved: Vec<String> = conn.zrange(names.ring(p, "b"), 0, -1).await.unwrap();
    assert_eq!(moved, vec!["7:1000".to_owned()]);
    let owners: Vec<String> = conn.smembers(names.ring_owners(p)).await.unwrap();
    assert_eq!(owners, vec!["b".to_owned()]);

    testkit::cleanup_redis(&config).await;
}
