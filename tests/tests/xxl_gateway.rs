//! XXL-JOB's own executors under rondo, through the XXL-JOB gateway
//! (`rondo-xxl-gateway`), against stand-in XXL-JOB executors (`xxl-standin`,
//! written from XXL-JOB's protocol: its embedded server, registry loop,
//! callback thread and log files, one process per executor) of each
//! protocol generation: 2 (`/run`, `ReturnT`), 3 (3.3–3.4: `/run`,
//! `Response`) and 3.5 (`/trigger`, the appname header, `callbackList`).
//! Everything else is real: a scheduler node, the persistence worker,
//! Redis, RabbitMQ, MySQL. Outcomes are read back from MySQL, and runs are
//! counted by the stand-ins themselves.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use redis::AsyncCommands;
use rondo_testkit::procs::{free_addr, rondo_cli};
use rondo_testkit::xxl::{
    Gateway, Standin, StandinRun, StandinSpec, TOKEN, cluster, serve_group, xxl_database,
};
use rondo_testkit::{Api, Cluster, PATIENCE, eventually, publish_raw_trigger, take_dead};
use serde_json::{Value, json};
use sqlx::{MySqlPool, Row};

/// Creates group `app`, served by the gateway, with access token [`TOKEN`].
async fn group(api: &Api, app: &str) {
    serve_group(api, app, TOKEN).await;
}

/// Starts a stand-in of `generation` in group `app`, registered with
/// `gateways` (in that order), and waits until rondo routes to it.
async fn standin(
    c: &Cluster,
    api: &Api,
    generation: &'static str,
    app: &str,
    gateways: &[&Gateway],
) -> Standin {
    let admins = gateways.iter().map(|g| g.admin_url()).collect();
    let spec = StandinSpec::new(generation, app, admins);
    let name = format!("standin-{app}-{}", generation.replace('.', "_"));
    let s = Standin::spawn(spec, &name, &c.log_dir);
    c.world.executor_queue(app, &s.executor_id);
    until_live(api, app, &s.executor_id).await;
    s
}

/// Waits until `id` is among the live executors of `app`.
async fn until_live(api: &Api, app: &str, id: &str) {
    let path = format!("/api/v1/groups/{app}/executors");
    eventually(&format!("{id} live in {app}"), PATIENCE, || async {
        let (_, live) = api.get(&path).await;
        live.as_array()?.iter().any(|e| e == id).then_some(())
    })
    .await;
}

/// A trigger's stored outcome.
#[derive(Debug, Clone)]
struct Stored {
    executor_id: String,
    code: i32,
    msg: String,
    retry_count: u32,
}

/// The stored, answered triggers of job `job_id`.
async fn results(db: &MySqlPool, job_id: u64) -> Vec<Stored> {
    let rows = sqlx::query(
        "SELECT trigger_id, executor_id, handle_code, handle_msg, retry_count FROM job_log \
         WHERE job_id = ? AND handle_code IS NOT NULL AND handle_code <> 0 ORDER BY fire_ms, trigger_id",
    )
    .bind(job_id)
    .fetch_all(db)
    .await
    .expect("read job_log");
    rows.iter()
        .map(|r| Stored {
            executor_id: r.get("executor_id"),
            code: r.get("handle_code"),
            msg: r.get::<Option<String>, _>("handle_msg").unwrap_or_default(),
            retry_count: r.get("retry_count"),
        })
        .collect()
}

/// Waits until job `job_id` has `n` answered triggers in MySQL.
async fn until_results(db: &MySqlPool, job_id: u64, n: usize) -> Vec<Stored> {
    eventually(
        &format!("{n} results of job {job_id}"),
        PATIENCE,
        || async {
            let r = results(db, job_id).await;
            (r.len() >= n).then_some(r)
        },
    )
    .await
}

/// The stored result of one trigger.
async fn result_of(db: &MySqlPool, trigger_id: &str) -> Stored {
    eventually(&format!("the result of {trigger_id}"), PATIENCE, || async {
        let row = sqlx::query(
            "SELECT trigger_id, executor_id, handle_code, handle_msg, retry_count FROM job_log \
             WHERE trigger_id = ? AND handle_code IS NOT NULL AND handle_code <> 0",
        )
        .bind(trigger_id)
        .fetch_optional(db)
        .await
        .ok()??;
        Some(Stored {
            executor_id: row.get("executor_id"),
            code: row.get("handle_code"),
            msg: row
                .get::<Option<String>, _>("handle_msg")
                .unwrap_or_default(),
            retry_count: row.get("retry_count"),
        })
    })
    .await
}

/// The stored log lines of a trigger.
async fn lines(db: &MySqlPool, trigger_id: &str) -> Vec<String> {
    sqlx::query_scalar("SELECT line FROM job_log_line WHERE trigger_id = ? ORDER BY seq")
        .bind(trigger_id)
        .fetch_all(db)
        .await
        .expect("read job_log_line")
}

/// Waits until a trigger's stored log has a line containing `text`.
async fn until_line(db: &MySqlPool, trigger_id: &str, text: &str) -> Vec<String> {
    eventually(
        &format!("a line {text:?} of {trigger_id}"),
        PATIENCE,
        || async {
            let l = lines(db, trigger_id).await;
            l.iter().any(|line| line.contains(text)).then_some(l)
        },
    )
    .await
}

/// A job of `app` running `handler` of the XXL-JOB executors.
async fn job(api: &Api, app: &str, handler: &str, extra: Value) -> u64 {
    let mut spec = json!({ "group": app, "handler": handler, "routing": "FIRST" });
    for (k, v) in extra.as_object().expect("an object") {
        spec[k] = v.clone();
    }
    api.create_job(spec).await
}

/// Runs of the stand-ins that started, by log id.
fn starts(standins: &[&Standin]) -> Vec<StandinRun> {
    standins.iter().flat_map(|s| s.starts()).collect()
}

/// Imported from XXL-JOB's tables (`rondo import xxl-job`): a BEAN job and a
/// GLUE_GROOVY job in a group of each generation's stand-in, and a group
/// XXL-JOB fed from a manual address list. Every job fires through the
/// gateway on its executor, with its result and log lines in MySQL.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn imported_bean_and_groovy_jobs_run_on_every_generation_with_results_and_logs() {
    let (c, api, gateways) = cluster("xxl_gen", 1, |_| {}).await;
    let gw = &gateways[0];
    let db = c.db().clone();
    let xxl = xxl_database(&c.world.config).await;
    let manual_port = free_addr().port();
    let manual_address = format!("http://127.0.0.1:{manual_port}/");
    let groups = [(1, "gen2", "2"), (2, "gen3", "3"), (3, "gen35", "3.5")];
    for (id, app, _) in groups {
        sqlx::query(
            "INSERT INTO xxl_job_group (id, app_name, title, address_type) VALUES (?, ?, ?, 0)",
        )
        .bind(id)
        .bind(app)
        .bind(app)
        .execute(&xxl.pool)
        .await
        .expect("a group");
    }
    sqlx::query("INSERT INTO xxl_job_group (id, app_name, title, address_type, address_list) VALUES (4, 'manual', 'manual', 1, ?)")
        .bind(&manual_address)
        .execute(&xxl.pool)
        .await
        .expect("a manual group");
    let groovy = "class DemoGlueJobHandler extends IJobHandler {\n  void execute() {\n    XxlJobHelper.log(\"hello from groovy\");\n  }\n}";
    for group in 1..=4 {
        for (id, handler, glue, source) in [
            (10 + group, "demoJobHandler", "BEAN", ""),
            (20 + group, "", "GLUE_GROOVY", groovy),
        ] {
            sqlx::query(
                "INSERT INTO xxl_job_info (id, job_group, job_desc, executor_route_strategy, executor_handler, \
                 executor_param, executor_block_strategy, glue_type, glue_source, glue_remark) \
                 VALUES (?, ?, 'imported', 'FIRST', ?, 'p1', 'SERIAL_EXECUTION', ?, ?, 'v1')",
            )
            .bind(id)
            .bind(group)
            .bind(handler)
            .bind(glue)
            .bind(source)
            .execute(&xxl.pool)
            .await
            .expect("a job");
        }
    }
    let url = format!("http://{}", c.addr(0));
    let out = rondo_cli(
        &url,
        &c.world.admin.token,
        &[
            "import",
            "xxl-job",
            "--mysql",
            &xxl.url,
            "--access-token",
            TOKEN,
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let jobs = imported(&api).await;
    let id_of = |xxl_id: i64| jobs[&format!("xxl-job/{}#{xxl_id}", xxl.name)];

    // The manual group's executor registers under an appname rondo has no
    // group of: refused, yet served from the group's list.
    let mut manual_spec = StandinSpec::new("2", "unlisted", vec![gw.admin_url()]);
    manual_spec.registry_interval_ms = 500;
    let manual = Standin::spawn_on(manual_spec, "standin-manual", &c.log_dir, manual_port);
    c.world.executor_queue("manual", &manual.executor_id);
    let mut standins = vec![(4, "manual", manual)];
    for (id, app, generation) in groups {
        standins.push((id, app, standin(&c, &api, generation, app, &[gw]).await));
    }
    let manual_id = rondo_xxl_gateway_id("manual", &manual_address);
    until_live(&api, "manual", &manual_id).await;

    for (group, app, s) in &standins {
        let expected = if *app == "manual" {
            &manual_id
        } else {
            &s.executor_id
        };
        let tid = api.trigger_now(id_of(10 + group)).await;
        let r = result_of(&db, &tid).await;
        assert_eq!((r.code, &r.executor_id), (200, expected), "{app}: {r:?}");
        let l = until_line(&db, &tid, "XXL-JOB, Hello World.").await;
        assert!(
            l.iter().any(|line| line.contains("----------- Param:p1")),
            "{app}: {l:?}"
        );
        assert!(
            l.iter().all(|line| !line.contains("<br>")),
            "plain lines: {l:?}"
        );

        let tid = api.trigger_now(id_of(20 + group)).await;
        let r = result_of(&db, &tid).await;
        assert_eq!(r.code, 200, "{app}: {r:?}");
        until_line(&db, &tid, "hello from groovy").await;
        let glue_runs = s
            .starts()
            .into_iter()
            .filter(|run| run.glue_type.as_deref() == Some("GLUE_GROOVY"))
            .count();
        assert_eq!(glue_runs, 1, "{app}: the executor ran the Groovy job once");
    }
    let metrics = gw.scrape().await;
    assert!(
        sample(&metrics, "rondo_xxl_registrations_refused_total").is_some_and(|n| n >= 1.0),
        "the unlisted appname was refused: {metrics}"
    );
    drop(standins);
    drop(gateways);
    c.stop().await;
}

/// The rondo executor id the gateway gives an address of an app.
fn rondo_xxl_gateway_id(app: &str, address: &str) -> String {
    rondo_xxl_gateway::executor_id(app, address)
}

/// Every job the node has, by `import_ref`, to its id.
async fn imported(api: &Api) -> HashMap<String, u64> {
    let (status, page) = api.get("/api/v1/jobs?limit=1000").await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .expect("items")
        .iter()
        .map(|j| {
            (
                j["import_ref"].as_str().unwrap_or_default().to_owned(),
                j["id"].as_u64().expect("an id"),
            )
        })
        .collect()
}

/// The value of the sample `series` in a scrape, if it has it.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|l| {
        l.strip_prefix(series)?
            .strip_prefix(' ')?
            .trim()
            .parse()
            .ok()
    })
}

/// The sum of the samples of counter `metric` with the given `outcome`s.
fn outcomes(text: &str, metric: &str, outs: &[&str]) -> f64 {
    outs.iter()
        .filter_map(|o| sample(text, &format!("{metric}{{outcome=\"{o}\"}}")))
        .sum()
}

/// Waits until a stand-in started a run of job `job_id` with `params`.
async fn until_started(s: &Standin, job_id: u64, params: &str) -> StandinRun {
    eventually(
        &format!("job {job_id} ({params}) started"),
        PATIENCE,
        || async {
            s.starts()
                .into_iter()
                .find(|r| r.job_id == job_id as i64 && r.params.as_deref() == Some(params))
        },
    )
    .await
}

/// The three block strategies as the executor applies them, a timeout and
/// a kill through rondo's API.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn block_strategies_timeout_and_kill_are_the_executors() {
    let (c, api, gateways) = cluster("xxl_block", 1, |_| {}).await;
    let db = c.db().clone();
    group(&api, "blk").await;
    let s = standin(&c, &api, "2", "blk", &[&gateways[0]]).await;

    // SERIAL_EXECUTION: the second waits in the executor's queue and runs
    // after the first.
    let serial = job(
        &api,
        "blk",
        "sleepJobHandler",
        json!({ "block": "SERIAL_EXECUTION" }),
    )
    .await;
    let a = api.trigger_with_params(serial, "600").await;
    let b = api.trigger_with_params(serial, "601").await;
    for tid in [&a, &b] {
        assert_eq!(result_of(&db, tid).await.code, 200);
    }
    let runs = s.runs();
    let span = |params: &str| {
        let start = runs
            .iter()
            .find(|r| r.event == "start" && r.params.as_deref() == Some(params))
            .expect("a start");
        let end = runs
            .iter()
            .find(|r| r.event == "end" && r.log_id == start.log_id)
            .expect("an end");
        (start.ms, end.ms)
    };
    let (x, y) = (span("600"), span("601"));
    assert!(
        x.1 <= y.0 || y.1 <= x.0,
        "serial runs never overlap: {x:?} {y:?}"
    );

    // DISCARD_LATER: refused by the executor while the first runs; final.
    let discard = job(
        &api,
        "blk",
        "sleepJobHandler",
        json!({ "block": "DISCARD_LATER", "retries": 1, "retry_backoff_s": 3600 }),
    )
    .await;
    let first = api.trigger_with_params(discard, "1500").await;
    until_started(&s, discard, "1500").await;
    let later = api.trigger_with_params(discard, "1501").await;
    let r = result_of(&db, &later).await;
    assert_eq!(r.code, 500, "{r:?}");
    assert!(
        r.msg.contains("Discard Later"),
        "the executor's own message: {r:?}"
    );
    assert_eq!(result_of(&db, &first).await.code, 200);
    assert!(
        s.starts()
            .iter()
            .all(|run| run.params.as_deref() != Some("1501")),
        "the discarded one never ran"
    );
    assert!(!retried(&c, &later, discard).await, "a refusal is final");

    // COVER_EARLY: the running one is stopped, final, naming its successor.
    let cover = job(
        &api,
        "blk",
        "sleepJobHandler",
        json!({ "block": "COVER_EARLY", "retries": 1, "retry_backoff_s": 3600 }),
    )
    .await;
    let early = api.trigger_with_params(cover, "20000").await;
    until_started(&s, cover, "20000").await;
    let late = api.trigger_with_params(cover, "100").await;
    let r = result_of(&db, &early).await;
    assert_eq!(r.code, 500, "{r:?}");
    assert!(
        r.msg.contains(&format!("replaced by trigger {late}")),
        "{r:?}"
    );
    assert_eq!(result_of(&db, &late).await.code, 200);
    assert!(!retried(&c, &early, cover).await, "a replaced run is final");

    // A timeout is the executor's: 502.
    let slow = job(&api, "blk", "sleepJobHandler", json!({ "timeout_s": 1 })).await;
    let tid = api.trigger_with_params(slow, "5000").await;
    let r = result_of(&db, &tid).await;
    assert_eq!(r.code, 502, "{r:?}");
    assert!(r.msg.contains("timeout"), "{r:?}");

    // A kill through rondo's API stops the run on the executor.
    let long = job(
        &api,
        "blk",
        "sleepJobHandler",
        json!({ "retries": 1, "retry_backoff_s": 3600 }),
    )
    .await;
    let tid = api.trigger_with_params(long, "30000").await;
    until_started(&s, long, "30000").await;
    let (status, out) = api
        .post(&format!("/api/v1/logs/{tid}/kill"), json!({}))
        .await;
    assert_eq!((status, out["kill"].as_str()), (202, Some("sent")), "{out}");
    let r = result_of(&db, &tid).await;
    assert_eq!(r.code, 500, "{r:?}");
    assert!(
        r.msg.starts_with("killed: ") && r.msg.contains("kill job"),
        "{r:?}"
    );
    let ended = s
        .runs()
        .into_iter()
        .find(|run| run.event == "end" && run.job_id == long as i64)
        .expect("the executor ended the killed run");
    assert_eq!(ended.code, Some(500));
    assert!(!retried(&c, &tid, long).await, "a killed run is final");
    drop(gateways);
    c.stop().await;
}

/// Once the monitor handled the failure of trigger `tid` (its alarm status
/// is written, which comes after any retry it schedules), whether a retry
/// of job `job_id` waits (the jobs here back off for an hour).
async fn retried(c: &Cluster, tid: &str, job_id: u64) -> bool {
    eventually("the failure handled", PATIENCE, || async {
        let row: Option<(i32,)> =
            sqlx::query_as("SELECT alarm_status FROM job_log WHERE trigger_id = ?")
                .bind(tid)
                .fetch_optional(c.db())
                .await
                .ok()?;
        (row?.0 != 0).then_some(())
    })
    .await;
    let names = c.config().names();
    let waiting: Vec<String> = redis_conn(c)
        .await
        .zrange(names.retry(names.partition_of(job_id)), 0, -1)
        .await
        .expect("the retries");
    waiting
        .iter()
        .filter_map(|m| serde_json::from_str::<Value>(m).ok())
        .any(|m| m["job_id"].as_u64() == Some(job_id))
}

/// Two executors of different generations in one group: a sharding
/// broadcast, BUSYOVER and FAILOVER routing; then one killed -9 while it
/// runs a trigger: it leaves routing (its lease is renewed no more) and the
/// run is failed as lost and retried on the other.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn routing_over_two_executors_and_one_killed() {
    let (c, api, gateways) = cluster("xxl_route", 1, |w| w.config.xxl.lost_after_ms = 3_000).await;
    let db = c.db().clone();
    group(&api, "route").await;
    let one = standin(&c, &api, "2", "route", &[&gateways[0]]).await;
    let two = standin(&c, &api, "3", "route", &[&gateways[0]]).await;

    // SHARDING_BROADCAST: one shard each.
    let shard = job(
        &api,
        "route",
        "shardingJobHandler",
        json!({ "routing": "SHARDING_BROADCAST" }),
    )
    .await;
    api.trigger_now(shard).await;
    let r = until_results(&db, shard, 2).await;
    assert!(r.iter().all(|x| x.code == 200), "{r:?}");
    let shards = |s: &Standin| -> Vec<(i32, i32)> {
        s.starts()
            .iter()
            .filter(|run| run.job_id == shard as i64)
            .map(|run| (run.broadcast_index, run.broadcast_total))
            .collect()
    };
    let mut both: Vec<(i32, i32)> = shards(&one).into_iter().chain(shards(&two)).collect();
    both.sort_unstable();
    assert_eq!(both, [(0, 2), (1, 2)]);
    assert_eq!((shards(&one).len(), shards(&two).len()), (1, 1));

    // BUSYOVER: the executor running the job is busy; the next goes to the
    // other.
    let busy = job(
        &api,
        "route",
        "sleepJobHandler",
        json!({ "routing": "BUSYOVER" }),
    )
    .await;
    let first = api.trigger_with_params(busy, "3000").await;
    let on = eventually("the first BUSYOVER run started", PATIENCE, || async {
        [&one, &two]
            .into_iter()
            .find(|s| s.starts().iter().any(|r| r.job_id == busy as i64))
            .map(|s| s.executor_id.clone())
    })
    .await;
    // Its registry entry says so (what BUSYOVER reads).
    let key = c.config().names().executor(&on);
    eventually(
        "the job in the executor's running_jobs",
        PATIENCE,
        || async {
            let jobs: Option<String> =
                redis_conn(&c).await.hget(&key, "running_jobs").await.ok()?;
            jobs?
                .split(',')
                .any(|j| j == busy.to_string())
                .then_some(())
        },
    )
    .await;
    let second = api.trigger_with_params(busy, "10").await;
    let r = result_of(&db, &second).await;
    assert_eq!(r.code, 200, "{r:?}");
    assert_ne!(
        r.executor_id, on,
        "BUSYOVER skips the executor running the job"
    );
    assert_eq!(result_of(&db, &first).await.executor_id, on);

    // One runs a long trigger (FIRST: the first by id) and is killed -9.
    let mut both = [one, two];
    both.sort_by(|x, y| x.executor_id.cmp(&y.executor_id));
    let [victim, survivor] = &mut both;
    let long = job(
        &api,
        "route",
        "sleepJobHandler",
        json!({ "routing": "FIRST", "retries": 1 }),
    )
    .await;
    let doomed = api.trigger_with_params(long, "2000").await;
    until_started(victim, long, "2000").await;
    let victim_id = victim.executor_id.clone();
    victim.kill9().await;
    // Taken once the process is reaped: a beat sent as the signal landed
    // may carry a later instant than one taken before the kill.
    let killed_ms = rondo_core::clock::now_ms();
    api.until_executors("route", &[&survivor.executor_id]).await;
    let registry = c.config().names().registry("route");
    let score = || async {
        let s: Option<i64> = redis_conn(&c)
            .await
            .zscore(&registry, &victim_id)
            .await
            .expect("its registry score");
        s
    };
    let at_drop = score().await;
    assert!(
        at_drop.is_some_and(|s| s <= killed_ms),
        "no lease renewal after the kill: score {at_drop:?}, killed at {killed_ms}"
    );
    // FAILOVER goes to the one that answers.
    let failover = job(
        &api,
        "route",
        "demoJobHandler",
        json!({ "routing": "FAILOVER" }),
    )
    .await;
    for _ in 0..3 {
        let tid = api.trigger_now(failover).await;
        assert_eq!(result_of(&db, &tid).await.executor_id, survivor.executor_id);
    }
    // The killed run is lost, and retried on the survivor.
    let lost = result_of(&db, &doomed).await;
    assert_eq!(lost.code, 500, "{lost:?}");
    assert!(lost.msg.starts_with("lost: "), "{lost:?}");
    let retried = eventually("the retry of the lost run", PATIENCE, || async {
        results(&db, long)
            .await
            .into_iter()
            .find(|r| r.retry_count == 1)
    })
    .await;
    assert_eq!(
        (retried.code, &retried.executor_id),
        (200, &survivor.executor_id),
        "{retried:?}"
    );
    // Seconds later, the dead executor's lease is where the kill left it,
    // or gone with the executor (the gateway forgets a departed one).
    let later = score().await;
    assert!(
        later.is_none() || later == at_drop,
        "a renewal after the kill: {at_drop:?} then {later:?}"
    );
    drop(gateways);
    c.stop().await;
}

async fn redis_conn(c: &Cluster) -> rondo_core::redis::Connection {
    rondo_core::redis::pool(&c.config().redis)
        .expect("a pool")
        .get()
        .await
        .expect("a connection")
}

/// Two gateways, two executors that list both (each a different one
/// first), 200 jobs firing every second. One gateway is frozen (SIGSTOP)
/// until the broker gave up on it and the other took its deliveries over,
/// then thawed (its hand-offs in progress go on, stale), then killed -9.
/// Every fire the schedule made in the window ran exactly once, counted by
/// the executors themselves, and the other gateway took over what the
/// frozen one held.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_gateway_killed_under_load_loses_no_fire_and_runs_none_twice() {
    const JOBS: u64 = 200;
    const WINDOW_S: i64 = 8;
    // The broker gives up on a frozen connection within seconds.
    let (c, api, mut gateways) = cluster("xxl_kill", 2, |w| {
        w.config.amqp.url = w
            .config
            .amqp
            .url
            .split(',')
            .map(|a| format!("{a}?heartbeat=2"))
            .collect::<Vec<_>>()
            .join(",");
    })
    .await;
    group(&api, "load").await;
    let a = standin(&c, &api, "2", "load", &[&gateways[0], &gateways[1]]).await;
    let b = standin(&c, &api, "3.5", "load", &[&gateways[1], &gateways[0]]).await;
    let mut ids = Vec::new();
    let mut first_fire = 0;
    for _ in 0..JOBS {
        let spec = json!({ "group": "load", "handler": "demoJobHandler", "routing": "ROUND",
            "schedule_type": "CRON", "schedule_conf": "* * * * * ?" });
        let (status, job) = api.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        ids.push(job["id"].as_u64().expect("an id"));
        first_fire = first_fire.max(job["next_fire_ms"].as_i64().expect("a next fire"));
    }
    // The window: every job fires each second from `from` to `to`.
    let from = first_fire + 1_000;
    let to = from + (WINDOW_S - 1) * 1_000;
    let kill_at = from + 3_000;
    tokio::time::sleep(Duration::from_millis(
        (kill_at - rondo_core::clock::now_ms()).max(0) as u64,
    ))
    .await;
    let handed = |scrape: &str| {
        outcomes(
            scrape,
            "rondo_xxl_handoffs_total",
            &["sent", "settled", "back"],
        )
    };
    let before = handed(&gateways[0].scrape().await);
    gateways[0].signal("STOP");
    eventually(
        "the other gateway took the frozen one's deliveries over",
        PATIENCE,
        || async {
            let scrape = gateways[1].scrape().await;
            let taken = outcomes(
                &scrape,
                "rondo_xxl_redelivered_total",
                &["sent", "settled", "back"],
            );
            (taken > 0.0).then_some(())
        },
    )
    .await;
    gateways[0].signal("CONT");
    eventually("the thawed gateway hands off again", PATIENCE, || async {
        (handed(&gateways[0].scrape().await) > before).then_some(())
    })
    .await;
    gateways[0].kill9().await;

    let expected: usize = JOBS as usize * WINDOW_S as usize;
    let counts = eventually(
        "every fire of the window ran",
        Duration::from_secs(60),
        || async {
            let mut counts: BTreeMap<(i64, i64), usize> = BTreeMap::new();
            for run in starts(&[&a, &b]) {
                if (from..=to).contains(&run.log_date_time) {
                    *counts.entry((run.job_id, run.log_date_time)).or_default() += 1;
                }
            }
            (counts.len() >= expected).then_some(counts)
        },
    )
    .await;
    let twice: Vec<_> = counts.iter().filter(|(_, n)| **n > 1).collect();
    assert!(twice.is_empty(), "fires run twice: {twice:?}");
    for id in &ids {
        for s in 0..WINDOW_S {
            let fire = from + s * 1_000;
            assert_eq!(
                counts.get(&(*id as i64, fire)),
                Some(&1),
                "job {id} fire {fire}"
            );
        }
    }
    // And none ran twice at all, in or out of the window.
    let mut all: HashMap<(i64, i64), usize> = HashMap::new();
    for run in starts(&[&a, &b]) {
        *all.entry((run.job_id, run.log_date_time)).or_default() += 1;
    }
    assert!(all.values().all(|n| *n == 1), "a fire ran twice");
    let scrape = gateways[1].scrape().await;
    let taken_over = outcomes(&scrape, "rondo_xxl_redelivered_total", &["sent", "settled"]);
    assert!(
        taken_over >= 1.0,
        "the living gateway took over the dead one's deliveries: {scrape}"
    );
    drop(gateways);
    c.stop().await;
}

/// Bad input, each with a clear answer and nothing lost: a wrong token, an
/// unknown appname, a callback for an unknown log id, a malformed callback,
/// an executor answering garbage or nothing, a malformed queue message, and
/// a gateway without a token refusing to start off loopback.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_input_gets_a_clear_answer_and_takes_nothing_down() {
    let (c, api, gateways) =
        cluster("xxl_bad", 1, |w| w.config.xxl.request_timeout_ms = 1_000).await;
    let gw = &gateways[0];
    let db = c.db().clone();
    let http = reqwest::Client::new();
    let call = |path: &str, token: &str, body: &str| {
        http.post(format!("{}/api/{path}", gw.admin_url()))
            .header("XXL-JOB-ACCESS-TOKEN", token)
            .header("content-type", "application/json")
            .body(body.to_owned())
            .send()
    };
    let answer = |r: reqwest::Response| async move {
        assert_eq!(r.status(), 200, "XXL-JOB answers 200 with its code inside");
        r.json::<Value>().await.expect("json")
    };
    let registration =
        r#"{"registryGroup":"EXECUTOR","registryKey":"bad","registryValue":"http://127.0.0.1:1/"}"#;

    let a = answer(call("registry", "wrong", registration).await.expect("sent")).await;
    assert_eq!(
        a,
        json!({ "code": 500, "msg": "The access token is wrong." })
    );
    let a = answer(call("callback", "", "[]").await.expect("sent")).await;
    assert_eq!(a["code"], 500);
    let metrics = gw.scrape().await;
    assert_eq!(
        sample(
            &metrics,
            "rondo_xxl_token_refusals_total{call=\"registry\"}"
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &metrics,
            "rondo_xxl_token_refusals_total{call=\"callback\"}"
        ),
        Some(1.0)
    );

    // With a token some group takes, the refusals say why.
    group(&api, "known").await;
    let a = eventually("the token of group known taken", PATIENCE, || async {
        let a = answer(call("registry", TOKEN, registration).await.expect("sent")).await;
        (a["msg"] != "The access token is wrong.").then_some(a)
    })
    .await;
    assert_eq!(a["code"], 500);
    assert!(
        a["msg"]
            .as_str()
            .unwrap()
            .contains("no executor group \"bad\""),
        "{a}"
    );
    let (status, _) = api.post("/api/v1/groups", json!({ "app": "native" })).await;
    assert_eq!(status, 201);
    let native = registration.replace("\"bad\"", "\"native\"");
    let a = answer(call("registry", TOKEN, &native).await.expect("sent")).await;
    assert!(
        a["msg"]
            .as_str()
            .unwrap()
            .contains("is not served by the XXL-JOB gateway"),
        "{a}"
    );
    let a = answer(
        call(
            "registry",
            TOKEN,
            r#"{"registryGroup":"EXECUTOR","registryKey":"bad","registryValue":"nope"}"#,
        )
        .await
        .expect("sent"),
    )
    .await;
    assert!(
        a["msg"].as_str().unwrap().starts_with("registryValue"),
        "{a}"
    );

    let a = answer(
        call(
            "callback",
            TOKEN,
            r#"[{"logId":987654321,"logDateTim":1,"handleCode":200}]"#,
        )
        .await
        .expect("sent"),
    )
    .await;
    assert_eq!(
        a,
        json!({ "code": 200 }),
        "an unknown log id is acknowledged"
    );
    assert_eq!(
        sample(
            &gw.scrape().await,
            "rondo_xxl_callbacks_total{outcome=\"unknown\"}"
        ),
        Some(1.0)
    );
    let a = answer(
        call("callback", TOKEN, r#"{"not":"a callback"}"#)
            .await
            .expect("sent"),
    )
    .await;
    assert!(a["msg"].as_str().unwrap().starts_with("callback:"), "{a}");

    // Executors that answer garbage, or nothing (each alone in its group):
    // the trigger fails with what came, sent once.
    let garbage = fake_executor("<html>busy</html>", Duration::ZERO).await;
    let silent = fake_executor("{\"code\":200}", Duration::from_secs(30)).await;
    for (app, fake, said) in [
        ("bad", &garbage, "<html>busy</html>"),
        ("quiet", &silent, "no answer"),
    ] {
        let address = &fake.address;
        group(&api, app).await;
        let body = format!(
            r#"{{"registryGroup":"EXECUTOR","registryKey":"{app}","registryValue":"{address}"}}"#
        );
        let a = answer(call("registry", TOKEN, &body).await.expect("sent")).await;
        assert_eq!(a["code"], 200, "{a}");
        let id = rondo_xxl_gateway_id(app, address);
        c.world.executor_queue(app, &id);
        until_live(&api, app, &id).await;
        let j = job(&api, app, "demoJobHandler", json!({})).await;
        let tid = api.trigger_now(j).await;
        let r = result_of(&db, &tid).await;
        assert_eq!(r.code, 500, "{r:?}");
        assert!(r.msg.contains(said), "{app}: {r:?}");
        assert_eq!(
            fake.runs.load(std::sync::atomic::Ordering::SeqCst),
            1,
            "{app}: sent once"
        );
    }
    let j = job(&api, "bad", "demoJobHandler", json!({})).await;

    // A malformed message on an executor's queue is dead-lettered with its
    // reason; the gateway goes on.
    let queue_owner = rondo_xxl_gateway_id("bad", &garbage.address);
    publish_raw_trigger(c.config(), "bad", &queue_owner, b"not a trigger batch").await;
    let dead = eventually("the malformed message dead-lettered", PATIENCE, || async {
        let dead = take_dead(c.config()).await;
        (!dead.is_empty()).then_some(dead)
    })
    .await;
    assert!(dead[0].1.starts_with("malformed trigger batch"), "{dead:?}");
    let tid = api.trigger_now(j).await;
    assert_eq!(result_of(&db, &tid).await.code, 500, "still serving");

    // Calls without a token, not on loopback; or one token for all without
    // saying so: the gateway refuses to start (exit 64).
    let mut open = c.config().clone();
    open.xxl.allow_no_token = true;
    let mut shared = c.config().clone();
    shared.xxl.access_token = TOKEN.into();
    for (name, config, listen) in [
        ("gateway-open", open, "0.0.0.0:0"),
        ("gateway-shared", shared, "127.0.0.1:0"),
    ] {
        let mut refused = Gateway::spawn_listening(&config, name, &c.log_dir, listen);
        let status = refused
            .exit(Duration::from_secs(30))
            .await
            .expect("it exits");
        assert_eq!(status.code(), Some(64), "{name}");
    }
    drop(gateways);
    c.stop().await;
}

/// An executor that leaves the fleet (`/api/registryRemove`) while a run
/// of it waits for its callback, and never sends one (a fake that takes
/// `/run` and says nothing more): the run is failed as lost once
/// `xxl.lost_after_ms` passed, and the executor is forgotten after.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_of_an_executor_that_left_without_its_callback_is_lost() {
    let (c, api, gateways) = cluster("xxl_left", 1, |w| w.config.xxl.lost_after_ms = 2_000).await;
    let db = c.db().clone();
    group(&api, "left").await;
    let fake = fake_executor("{\"code\":200}", Duration::ZERO).await;
    let id = rondo_xxl_gateway_id("left", &fake.address);
    let body = format!(
        r#"{{"registryGroup":"EXECUTOR","registryKey":"left","registryValue":"{}"}}"#,
        fake.address
    );
    let admin = |call: &str| {
        reqwest::Client::new()
            .post(format!("{}/api/{call}", gateways[0].admin_url()))
            .header("XXL-JOB-ACCESS-TOKEN", TOKEN)
            .header("content-type", "application/json")
            .body(body.clone())
            .send()
    };
    let a: Value = admin("registry")
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(a["code"], 200, "{a}");
    c.world.executor_queue("left", &id);
    until_live(&api, "left", &id).await;
    let j = job(&api, "left", "demoJobHandler", json!({})).await;
    let tid = api.trigger_now(j).await;
    eventually("the trigger sent", PATIENCE, || async {
        (fake.runs.load(std::sync::atomic::Ordering::SeqCst) == 1).then_some(())
    })
    .await;
    let a: Value = admin("registryRemove")
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(a["code"], 200, "{a}");
    let r = result_of(&db, &tid).await;
    assert_eq!(r.code, 500, "{r:?}");
    assert!(
        r.msg.starts_with("lost: ") && r.msg.contains("left the fleet"),
        "{r:?}"
    );
    let names = c.config().names();
    eventually("the departed executor forgotten", PATIENCE, || async {
        let score: Option<i64> = redis_conn(&c)
            .await
            .zscore(names.xxl_departed(), &id)
            .await
            .ok()?;
        score.is_none().then_some(())
    })
    .await;
    drop(gateways);
    c.stop().await;
}

/// An executor is routed to only once its queue exists: a gateway that
/// cannot reach the broker takes the registration and beats the executor,
/// but leaves it out of routing (a trigger routed there would come back
/// unroutable); a gateway that reaches the broker makes it live.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_executor_is_routed_to_only_once_its_queue_exists() {
    let (c, api, _) = cluster("xxl_queue_first", 0, |_| {}).await;
    group(&api, "first").await;
    let fake = fake_executor("{\"code\":200}", Duration::ZERO).await;
    let id = rondo_xxl_gateway_id("first", &fake.address);
    c.world.executor_queue("first", &id);
    let mut cut = c.config().clone();
    cut.amqp.url = "amqp://guest:guest@127.0.0.1:1/%2f".into();
    let blind = Gateway::spawn(&cut, "gateway-blind", &c.log_dir);
    blind.until_ready().await;
    let body = format!(
        r#"{{"registryGroup":"EXECUTOR","registryKey":"first","registryValue":"{}"}}"#,
        fake.address
    );
    let a: Value = reqwest::Client::new()
        .post(format!("{}/api/registry", blind.admin_url()))
        .header("XXL-JOB-ACCESS-TOKEN", TOKEN)
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("json");
    assert_eq!(a["code"], 200, "{a}");
    let beats = || fake.beats.load(std::sync::atomic::Ordering::SeqCst);
    eventually("the blind gateway beats the executor", PATIENCE, || async {
        (beats() >= 3).then_some(())
    })
    .await;
    let names = c.config().names();
    let lease: Option<i64> = redis_conn(&c)
        .await
        .zscore(names.registry("first"), &id)
        .await
        .expect("zscore");
    assert_eq!(lease, None, "no lease before the queue exists");
    let (_, live) = api.get("/api/v1/groups/first/executors").await;
    assert_eq!(live, json!([]), "not routed to");
    let seeing = Gateway::spawn(c.config(), "gateway-0", &c.log_dir);
    seeing.until_ready().await;
    until_live(&api, "first", &id).await;
    drop((blind, seeing));
    c.stop().await;
}

/// A fake XXL-JOB executor's address and what it was sent.
struct Fake {
    address: String,
    /// `/run`s received.
    runs: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    /// `/beat`s received.
    beats: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

/// A fake executor: `/beat` succeeds, `/run` answers `body` after `delay`.
async fn fake_executor(body: &'static str, delay: Duration) -> Fake {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let runs = Arc::new(AtomicUsize::new(0));
    let beats = Arc::new(AtomicUsize::new(0));
    let (ran, beaten) = (runs.clone(), beats.clone());
    let app = axum::Router::new()
        .route(
            "/beat",
            axum::routing::post(move || {
                beaten.fetch_add(1, Ordering::SeqCst);
                async { "{\"code\":200}" }
            }),
        )
        .route(
            "/run",
            axum::routing::post(move || {
                let ran = ran.clone();
                async move {
                    ran.fetch_add(1, Ordering::SeqCst);
                    tokio::time::sleep(delay).await;
                    body
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}/", listener.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    Fake {
        address,
        runs,
        beats,
    }
}

/// How far a hand-off got before its gateway died.
#[derive(Clone, Copy, PartialEq)]
enum Cut {
    /// A `running` mark without a claim (an older build, or the claim
    /// expired).
    MarkOnly,
    /// The mark and the claim of instance `by` under `log_id`, no run.
    Claimed { log_id: i64 },
    /// Claimed and its run recorded (and then maybe sent).
    Recorded { log_id: i64 },
    /// Recorded under an earlier incarnation of the executor (it left the
    /// fleet and came back since).
    Restarted { log_id: i64 },
}

/// The state a gateway killed at one step of a hand-off leaves, as Redis
/// holds it, written as instance `by`.
async fn leave_cut_short(
    c: &Cluster,
    s: &Standin,
    trigger: &rondo_core::Trigger,
    cut: Cut,
    by: &str,
) {
    let names = c.config().names();
    let mut conn = redis_conn(c).await;
    let incarnation: String = match cut {
        Cut::Restarted { .. } => "an-earlier-incarnation".into(),
        _ => conn
            .hget(names.xxl_executor(&s.executor_id), "incarnation")
            .await
            .expect("the executor's record"),
    };
    let since = rondo_core::clock::now_ms();
    let mark = rondo_core::dedupe::Mark::Running {
        executor: s.executor_id.clone(),
        incarnation,
        since_ms: since,
    };
    let _: () = conn
        .set(
            names.dedupe(&trigger.group, &trigger.trigger_id),
            serde_json::to_string(&mark).unwrap(),
        )
        .await
        .expect("the mark");
    let log_id = match cut {
        Cut::MarkOnly => return,
        Cut::Claimed { log_id } | Cut::Recorded { log_id } | Cut::Restarted { log_id } => log_id,
    };
    let _: () = conn
        .set(
            names.xxl_claim(&trigger.group, &trigger.trigger_id),
            format!("{log_id} {by}"),
        )
        .await
        .expect("the claim");
    if matches!(cut, Cut::Claimed { .. }) {
        return;
    }
    let run = json!({
        "trigger_id": trigger.trigger_id, "group": trigger.group, "job_id": trigger.job_id, "fire_ms": trigger.fire_ms,
        "executor_id": s.executor_id, "log_id": log_id, "log_date_ms": trigger.fire_ms,
        "since_ms": since,
    });
    let _: () = redis::pipe()
        .set(names.xxl_run(log_id), run.to_string())
        .zadd(
            names.xxl_inflight(&s.executor_id),
            format!("{log_id}:{}", trigger.job_id),
            since,
        )
        .query_async(&mut conn)
        .await
        .expect("the records");
}

/// Sends a trigger to a stand-in as a gateway would have (`/run`).
async fn send_directly(s: &Standin, trigger: &rondo_core::Trigger, log_id: i64) {
    let body = json!({
        "jobId": trigger.job_id, "executorHandler": trigger.handler, "executorParams": trigger.params,
        "executorBlockStrategy": "SERIAL_EXECUTION", "executorTimeout": 0, "logId": log_id,
        "logDateTime": trigger.fire_ms, "glueType": "BEAN", "glueSource": "", "glueUpdatetime": 0,
        "broadcastIndex": 0, "broadcastTotal": 1,
    });
    let reply: Value = reqwest::Client::new()
        .post(format!("{}run", s.address))
        .header("XXL-JOB-ACCESS-TOKEN", TOKEN)
        .json(&body)
        .send()
        .await
        .expect("sent")
        .json()
        .await
        .expect("an answer");
    assert_eq!(reply["code"], 200, "{reply}");
}

/// A trigger of job `job_id` on the stand-in, as the dispatcher makes it.
fn trigger_for(s: &Standin, job_id: u64, params: &str) -> rondo_core::Trigger {
    let now = rondo_core::clock::now_ms();
    rondo_core::Trigger {
        trigger_id: format!("{job_id}-{now}-0-cut{params}"),
        job_id,
        group: s.spec.app.clone(),
        executor_id: s.executor_id.clone(),
        handler: "sleepJobHandler".into(),
        params: params.into(),
        trigger_type: rondo_core::TriggerType::Manual,
        fire_ms: now,
        sent_ms: now,
        shard_index: 0,
        shard_total: 1,
        timeout_s: 0,
        block: rondo_core::BlockStrategy::SerialExecution,
        retry_count: 0,
        script: None,
        secrets: Default::default(),
    }
}

/// Hand-offs left cut short at each step by a gateway that died, delivered
/// again to the living one: each trigger runs exactly once on the executor
/// (counted by it), and its result comes back.
/// * a mark without a claim: taken over and sent;
/// * claimed, no run recorded: sent;
/// * claimed and recorded, not sent: the executor has no log of it: sent;
/// * sent and running there: it has a log: not sent again;
/// * sent and waiting in the job's queue there (behind another run): sent
///   again, refused as a repeat: runs once;
/// * recorded under an earlier incarnation of the executor: answered as a
///   restarted run, not sent;
/// * recorded by an instance still alive, which sent it: left to it until
///   it outlived any send it could have had in progress; by then the run's
///   callback settled it: not sent again.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn hand_offs_cut_short_by_a_dead_gateway_run_once() {
    let (c, api, gateways) = cluster("xxl_cut", 1, |_| {}).await;
    let db = c.db().clone();
    group(&api, "cut").await;
    let s = standin(&c, &api, "2", "cut", &[&gateways[0]]).await;
    let dead = "xxl-gateway-dead-00000000";
    let mut cases = Vec::new();

    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let marked = trigger_for(&s, j, "9");
    leave_cut_short(&c, &s, &marked, Cut::MarkOnly, dead).await;
    cases.push(marked);

    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let claimed = trigger_for(&s, j, "10");
    leave_cut_short(&c, &s, &claimed, Cut::Claimed { log_id: 9_000_001 }, dead).await;
    cases.push(claimed);

    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let recorded = trigger_for(&s, j, "11");
    leave_cut_short(&c, &s, &recorded, Cut::Recorded { log_id: 9_000_002 }, dead).await;
    cases.push(recorded);

    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let running = trigger_for(&s, j, "3000");
    leave_cut_short(&c, &s, &running, Cut::Recorded { log_id: 9_000_003 }, dead).await;
    send_directly(&s, &running, 9_000_003).await;
    until_started(&s, j, "3000").await;
    cases.push(running);

    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let ahead = trigger_for(&s, j, "3001");
    send_directly(&s, &ahead, 9_000_004).await;
    until_started(&s, j, "3001").await;
    let queued = trigger_for(&s, j, "12");
    leave_cut_short(&c, &s, &queued, Cut::Recorded { log_id: 9_000_005 }, dead).await;
    send_directly(&s, &queued, 9_000_005).await;
    cases.push(queued);

    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let restarted = trigger_for(&s, j, "14");
    leave_cut_short(
        &c,
        &s,
        &restarted,
        Cut::Restarted { log_id: 9_000_007 },
        dead,
    )
    .await;

    // An instance that lives on (its lease renewed) and sent it.
    let alive = "xxl-gateway-alive-00000000";
    let lease = {
        let c_names = c.config().names();
        let mut conn = redis_conn(&c).await;
        tokio::spawn(async move {
            loop {
                let now = rondo_core::clock::now_ms();
                let _: Result<(), _> = conn.zadd(c_names.xxl_gateways(), alive, now).await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    let j = job(&api, "cut", "sleepJobHandler", json!({})).await;
    let theirs = trigger_for(&s, j, "13");
    leave_cut_short(&c, &s, &theirs, Cut::Recorded { log_id: 9_000_006 }, alive).await;
    send_directly(&s, &theirs, 9_000_006).await;
    cases.push(theirs);

    for t in cases.iter().chain([&restarted]) {
        let body = serde_json::to_vec(&rondo_core::TriggerBatch::new(vec![t.clone()])).unwrap();
        publish_raw_trigger(c.config(), "cut", &s.executor_id, &body).await;
    }
    // The gateway settled each delivery: three sent now, four not.
    let scrape = eventually("every delivery settled", PATIENCE, || async {
        let scrape = gateways[0].scrape().await;
        let count = |o: &str| {
            sample(
                &scrape,
                &format!("rondo_xxl_handoffs_total{{outcome=\"{o}\"}}"),
            )
        };
        (count("sent") == Some(3.0) && count("settled") == Some(4.0)).then_some(scrape)
    })
    .await;
    assert_eq!(
        sample(&scrape, "rondo_xxl_probes_total{outcome=\"there\"}"),
        Some(1.0),
        "{scrape}"
    );
    assert_eq!(
        sample(&scrape, "rondo_xxl_probes_total{outcome=\"resent\"}"),
        Some(2.0),
        "{scrape}"
    );
    // Each one's result comes back (from its callback), and it ran once.
    for t in &cases {
        let r = result_of(&db, &t.trigger_id).await;
        assert_eq!(r.code, 200, "{}: {r:?}", t.trigger_id);
    }
    let runs = s.runs();
    for t in &cases {
        let starts = runs
            .iter()
            .filter(|r| {
                r.event == "start"
                    && r.job_id == t.job_id as i64
                    && r.params.as_deref() == Some(t.params.as_str())
            })
            .count();
        assert_eq!(starts, 1, "{} (params {}) ran once", t.trigger_id, t.params);
    }
    let r = result_of(&db, &restarted.trigger_id).await;
    assert_eq!(r.code, 500, "{r:?}");
    assert!(r.msg.contains("restarted"), "{r:?}");
    assert!(
        !runs.iter().any(|r| r.job_id == restarted.job_id as i64),
        "a run of an earlier incarnation is not sent"
    );
    lease.abort();
    drop(gateways);
    c.stop().await;
}
