//! `GET /api/v1/executors` against real executor processes: what each says
//! about itself (host, pid, handlers, the jobs it runs), its heartbeat
//! age, and its state as the dispatcher sees it — live, offline once its
//! lease lapses after a kill -9, retired after a graceful stop — and only
//! for the groups the caller may read. Also `GET /api/v1/logs/{id}` with
//! `after_seq`, which a page following a run uses.

use std::time::Duration;

use rondo_core::auth::Role;
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::{Value, json};

/// The executor `id` of the list, once `pred` holds for it.
async fn executor_where(api: &Api, what: &str, id: &str, pred: impl Fn(&Value) -> bool) -> Value {
    eventually(what, Duration::from_secs(30), || async {
        let (status, list) = api.get("/api/v1/executors?group=fleet").await;
        assert_eq!(status, 200, "{list}");
        let e = list.as_array()?.iter().find(|e| e["id"] == id)?.clone();
        pred(&e).then_some(e)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn executors_show_heartbeat_handlers_running_jobs_and_state() {
    let mut world = World::new("executors").await;
    world.config.executor.app = "fleet".into();
    world.config.executor.script_handlers = vec!["sh".into()];
    let outsider = world.user("otto", Role::Viewer, &["other"], false).await;
    let reader = world.user("rita", Role::Viewer, &["fleet"], false).await;
    let mut cluster = Cluster::new(world);
    cluster.spawn_executor("fleet-1");
    cluster.spawn_executor("fleet-2");
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    for app in ["fleet", "other"] {
        assert_eq!(
            api.post("/api/v1/groups", json!({ "app": app })).await.0,
            201
        );
    }

    // Both live, each with what it said at its first heartbeat.
    for id in ["fleet-1", "fleet-2"] {
        let e = executor_where(&api, "the executor live", id, |e| e["state"] == "live").await;
        assert_eq!(e["group"], "fleet");
        let handlers: Vec<&str> = e["handlers"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(handlers.contains(&"demo"), "{e}");
        assert!(handlers.contains(&"script:sh"), "{e}");
        assert!(e["pid"].as_u64().is_some_and(|p| p > 0), "{e}");
        assert!(e["host"].as_str().is_some_and(|h| !h.is_empty()), "{e}");
        let age = e["age_ms"].as_i64().expect("an age");
        let lease = cluster.config().registry.lease_ms as i64;
        assert!(
            (0..=lease).contains(&age),
            "a live executor's age is within its lease: {e}"
        );
        assert_eq!(e["running_jobs"], json!([]), "{e}");
    }

    // A running script shows as a running job on the executor that runs it.
    let job = api
        .create_job(json!({ "group": "fleet", "schedule_type": "NONE", "routing": "FIRST",
            "glue_type": "GLUE_SHELL", "glue_source": "echo one; echo two; echo three; sleep 30\n" }))
        .await;
    let (status, fired) = api
        .post(&format!("/api/v1/jobs/{job}/trigger"), json!({}))
        .await;
    assert_eq!(status, 200, "{fired}");
    let trigger_id = fired["triggers"][0]["trigger"]["trigger_id"]
        .as_str()
        .expect("a trigger id")
        .to_owned();
    executor_where(&api, "the job running on fleet-1", "fleet-1", |e| {
        e["running_jobs"] == json!([job])
    })
    .await;

    // Its log in pieces: after a line's seq, only the lines after it.
    let lines = eventually(
        "three log lines stored",
        Duration::from_secs(30),
        || async {
            let (_, log) = api.get(&format!("/api/v1/logs/{trigger_id}")).await;
            let lines = log["lines"].as_array()?.clone();
            (lines.len() >= 3).then_some(lines)
        },
    )
    .await;
    let first_seq = lines[0]["seq"].as_i64().expect("a seq");
    let (status, rest) = api
        .get(&format!("/api/v1/logs/{trigger_id}?after_seq={first_seq}"))
        .await;
    assert_eq!(status, 200, "{rest}");
    assert_eq!(
        rest["lines"].as_array().map(Vec::len),
        Some(lines.len() - 1),
        "{rest}"
    );
    assert_eq!(rest["lines"][0], lines[1], "{rest}");
    assert!(
        rest["log"]["trigger_id"].is_string(),
        "the row comes along: {rest}"
    );
    let last_seq = lines.last().unwrap()["seq"].as_i64().unwrap();
    let (status, none) = api
        .get(&format!("/api/v1/logs/{trigger_id}?after_seq={last_seq}"))
        .await;
    assert_eq!((status, none["lines"].clone()), (200, json!([])), "{none}");
    for bad in ["-1", "x", "4294967296"] {
        let (status, answer) = api
            .get(&format!("/api/v1/logs/{trigger_id}?after_seq={bad}"))
            .await;
        assert_eq!(status, 400, "after_seq={bad}: {answer}");
        assert_eq!(answer["error"]["field"], "after_seq", "{answer}");
    }
    api.post(&format!("/api/v1/logs/{trigger_id}/kill"), json!({}))
        .await;

    // Only the groups a caller may read.
    let rita = Api::new(cluster.addr(node)).with_token(&reader);
    let (status, list) = rita.get("/api/v1/executors").await;
    assert_eq!(status, 200, "{list}");
    assert_eq!(list.as_array().map(Vec::len), Some(2), "{list}");
    let otto = Api::new(cluster.addr(node)).with_token(&outsider);
    let (status, list) = otto.get("/api/v1/executors").await;
    assert_eq!((status, list), (200, json!([])));
    let (status, refused) = otto.get("/api/v1/executors?group=fleet").await;
    assert_eq!(status, 403, "{refused}");
    let (status, bad) = api.get("/api/v1/executors?group=no%20such").await;
    assert_eq!(
        (status, bad["error"]["field"].clone()),
        (400, json!("group"))
    );

    // kill -9: offline once its lease lapses, still listed with its age.
    cluster.kill_executor("fleet-2").await;
    let e = executor_where(&api, "fleet-2 offline", "fleet-2", |e| {
        e["state"] == "offline"
    })
    .await;
    assert!(e["age_ms"].as_i64().is_some_and(|a| a > 0), "{e}");
    // A graceful stop: retired at once.
    cluster
        .terminate_executor("fleet-1", Duration::from_secs(30))
        .await;
    let e = executor_where(&api, "fleet-1 retired", "fleet-1", |e| {
        e["state"] == "retired"
    })
    .await;
    assert_eq!(e["last_seen_ms"], Value::Null, "{e}");
    cluster.stop().await;
}
