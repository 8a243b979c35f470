//! The definitions version of a partition (`{pK}:defs-ver`) against the
//! real Redis: the leader's claim reuses a parsed definition unread while
//! the token it read before the definition's bytes is still there, so
//! every write to a partition's definitions must set a new token.

use rondo_core::testkit;
use rondo_scheduler::store::{Due, Store};

#[tokio::test]
async fn every_write_to_a_partitions_definitions_sets_a_new_version() {
    let namespace = testkit::Namespace::new("defs-ver");
    let config = namespace.config.clone();
    let names = config.names();
    let pool = rondo_core::redis::pool(&config.redis).unwrap();
    let store = Store::new(pool, names.clone());
    let job = rondo_core::testkit::fixtures::job(7);
    let p = names.partition_of(job.id);
    let version = || async { store.leader().read_due(p, i64::MAX, 10).await.unwrap().1 };
    assert_eq!(version().await, None, "no write yet");

    store
        .api()
        .save_job(&job, Due::At(1_000), None)
        .await
        .unwrap();
    let created = version().await;
    assert!(created.is_some());
    // An edit that does not reschedule (the claim plans with what it
    // parsed, so it must see this one too).
    let mut edited = job.clone();
    edited.schedule_conf = "0 0 * * * ?".into();
    store
        .api()
        .save_job(&edited, Due::Keep, None)
        .await
        .unwrap();
    let after_edit = version().await;
    assert_ne!(after_edit, created);
    store.api().delete_job(&edited).await.unwrap();
    let after_delete = version().await;
    assert!(after_delete.is_some());
    assert_ne!(after_delete, after_edit);
    // Another partition's version did not move.
    let other = (p + 1) % names.partitions();
    assert_eq!(
        store
            .leader()
            .read_due(other, i64::MAX, 10)
            .await
            .unwrap()
            .1,
        None
    );
}
