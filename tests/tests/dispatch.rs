//! The dispatcher against the real RabbitMQ and Redis: a fire with no live
//! executor, or whose executor has no queue, becomes a failed trigger with a
//! clear message (never a silent drop); ROUND spreads fires evenly over the
//! executors; every published trigger carries its id as the message id.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::StreamExt;
use lapin::options::{
    BasicAckOptions, BasicConsumeOptions, BasicGetOptions, QueueBindOptions, QueueDeclareOptions,
};
use lapin::types::FieldTable;
use redis::AsyncCommands;
use rondo_core::event::decode_events;
use rondo_core::trigger::code;
use rondo_core::{Event, JobSpec, TriggerBatch, amqp, clock};
use rondo_dispatcher::{Dispatcher, Fire};
use rondo_testkit::World;

fn job(id: u64, routing: &str) -> Arc<rondo_core::Job> {
    let spec = JobSpec {
        group: Some("grp".into()),
        handler: Some("demo".into()),
        routing: Some(routing.into()),
        ..JobSpec::default()
    };
    Arc::new(spec.validate(id, clock::now_ms(), None).unwrap())
}

fn fire(job: &Arc<rondo_core::Job>, fire_ms: i64) -> Fire {
    Fire::scheduled(job.clone(), fire_ms)
}

async fn register(world: &World, executor: &str) {
    let pool = rondo_core::redis::pool(&world.config.redis).unwrap();
    let mut conn = pool.get().await.unwrap();
    let _: () = conn
        .zadd(
            world.config.names().registry("grp"),
            executor,
            clock::now_ms(),
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failures_are_recorded_and_round_is_fair() {
    let world = World::new("dispatch").await;
    let names = world.config.names();
    let pool = rondo_core::redis::pool(&world.config.redis).unwrap();
    let dispatcher = Dispatcher::connect(&world.config, pool)
        .await
        .expect("dispatcher");

    // Watch the trigger events.
    let conn = amqp::connect(&world.config.amqp.url, "dispatch-test")
        .await
        .unwrap();
    let ch = conn.create_channel().await.unwrap();
    let events_q = format!("{}.test-trigger-events", names.namespace());
    world.track_queue(&events_q);
    let opts = QueueDeclareOptions {
        auto_delete: true,
        ..QueueDeclareOptions::default()
    };
    ch.queue_declare(events_q.as_str().into(), opts, FieldTable::default())
        .await
        .unwrap();
    ch.queue_bind(
        events_q.as_str().into(),
        names.events_exchange().into(),
        "trigger.*".into(),
        QueueBindOptions::default(),
        FieldTable::default(),
    )
    .await
    .unwrap();

    // 1. No live executor: a failed trigger naming the group.
    let first = job(1, "FIRST");
    let out = dispatcher.dispatch(&fire(&first, 1_000)).await.unwrap();
    assert_eq!(out.records.len(), 1);
    assert_eq!(out.records[0].code, code::FAIL);
    assert_eq!(out.records[0].msg, "no live executor in group grp");

    // 2. A registered executor whose queue does not exist: the mandatory
    // message comes back and the trigger fails, naming the executor.
    register(&world, "ghost").await;
    let out = dispatcher.dispatch(&fire(&first, 2_000)).await.unwrap();
    assert_eq!(out.records[0].code, code::FAIL, "{:?}", out.records);
    assert!(
        out.records[0].msg.contains("ghost") && out.records[0].msg.contains("no queue"),
        "{}",
        out.records[0].msg
    );
    let _: () = pool_conn(&world)
        .await
        .zrem(names.registry("grp"), "ghost")
        .await
        .unwrap();

    // Both failures were recorded as trigger.failed events.
    for want in [1_000, 2_000] {
        let got = ch
            .basic_get(events_q.as_str().into(), BasicGetOptions::default())
            .await
            .unwrap()
            .expect("a trigger event");
        let events = decode_events(&got.data).unwrap();
        let Event::Triggered(rec) = &events[0] else {
            panic!("not a trigger event: {events:?}")
        };
        assert_eq!((rec.trigger.fire_ms, rec.code), (want, code::FAIL));
        assert_eq!(got.routing_key.as_str(), "trigger.failed");
        got.ack(BasicAckOptions::default()).await.unwrap();
    }

    // 3. ROUND over three executors with queues: 30 fires, 10 each.
    let publisher = amqp::confirm_channel(&conn).await.unwrap();
    let mut queues = Vec::new();
    for e in ["ex-a", "ex-b", "ex-c"] {
        world.executor_queue("grp", e);
        queues.push(
            amqp::declare_executor_queue(&publisher, &names, "grp", e)
                .await
                .unwrap(),
        );
        register(&world, e).await;
    }
    let round = job(2, "ROUND");
    for i in 0..30 {
        let out = dispatcher
            .dispatch(&fire(&round, 10_000 + i * 1000))
            .await
            .unwrap();
        assert!(out.all_sent(), "{:?}", out.records);
    }
    let mut per_executor: HashMap<String, usize> = HashMap::new();
    for q in &queues {
        let mut consumer = ch
            .basic_consume(
                q.as_str().into(),
                q.as_str().into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await
            .unwrap();
        for _ in 0..10 {
            let d = tokio::time::timeout(std::time::Duration::from_secs(5), consumer.next())
                .await
                .expect("a trigger")
                .unwrap()
                .unwrap();
            let batch: TriggerBatch = serde_json::from_slice(&d.data).unwrap();
            let t = &batch.triggers[0];
            assert_eq!(
                d.properties.message_id().as_ref().map(|m| m.as_str()),
                Some(t.trigger_id.as_str())
            );
            assert_eq!(t.trigger_id, format!("2-{}-0", t.fire_ms));
            assert_eq!(d.properties.delivery_mode(), &Some(amqp::PERSISTENT));
            *per_executor.entry(t.executor_id.clone()).or_default() += 1;
            d.ack(BasicAckOptions::default()).await.unwrap();
        }
    }
    assert_eq!(
        per_executor.values().copied().collect::<Vec<_>>(),
        vec![10, 10, 10],
        "{per_executor:?}"
    );

    dispatcher.close().await;
    let _ = conn.close(200, "bye".into()).await;
}

async fn pool_conn(world: &World) -> rondo_core::redis::Connection {
    rondo_core::redis::pool(&world.config.redis)
        .unwrap()
        .get()
        .await
        .unwrap()
}
