//! Nothing reaches Redis without a user (issue 47, attack 6).
//!
//! * The attack: an operator's `shell` job, run as `nobody` on an
//!   executor's host, writes an admin session into Redis on loopback
//!   without a user (Redis's `default`), then signs in with its cookie.
//!   On the tests' Redis (set up by `scripts/services.sh`, `default` off)
//!   Redis answers `NOAUTH`, nothing is written, the cookie is nobody's.
//! * A scheduler node, an executor or an XXL-JOB gateway started against a
//!   Redis whose `default` is open (a `redis-server` of the test's own, as
//!   it ships) refuses to start with the bad-config code, naming the
//!   problem and `redis.allow_open_default`, which lets it start.

use rondo_core::auth::Role;
use rondo_core::daemon::EXIT_CONFIG;
use rondo_core::testkit::ThrowawayRedis;
use rondo_core::testkit::daemon::run_binary;
use rondo_core::testkit::try_eventually;
use rondo_testkit::{Api, Cluster, PATIENCE, World, eventually, procs};
use serde_json::json;

/// The port of the Redis at `url` (`redis://[user:password@]host:port/…`).
fn port_of(url: &str) -> u16 {
    let authority = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = authority.split('/').next().unwrap_or(authority);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    host.rsplit_once(':')
        .and_then(|(_, p)| p.parse().ok())
        .unwrap_or(6379)
}

/// The job's log lines once its outcome is stored.
async fn lines_of(api: &Api, tid: &str) -> Vec<String> {
    eventually(&format!("the outcome of {tid}"), PATIENCE, || async {
        let (status, out) = api.get(&format!("/api/v1/logs/{tid}")).await;
        let done = out["log"]["handle_code"].as_i64().is_some_and(|c| c != 0);
        (status == 200 && done).then_some(())?;
        let lines = out["lines"].as_array()?.iter();
        Some(
            lines
                .filter_map(|l| l["line"].as_str().map(str::to_owned))
                .collect(),
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operators_shell_job_cannot_make_itself_admin_through_redis() {
    let mut world = World::new("open_default").await;
    let admin_url = world.redis_admin_url();
    assert!(
        rondo_core::testkit::redis_userinfo(&admin_url).is_some(),
        "the tests' Redis lets them in as `default`: this test needs it closed, as scripts/services.sh leaves it (run scripts/test.sh)"
    );
    world.config.executor.app = "od".into();
    world.config.executor.command_handlers = true;
    world.config.executor.run_as = "nobody".into();
    let mut cluster = Cluster::new(world);
    cluster.spawn_executor("od-1");
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let admin = cluster.api(node);
    assert_eq!(
        admin.post("/api/v1/groups", json!({ "app": "od" })).await.0,
        201
    );
    admin.until_executors("od", &["od-1"]).await;
    let token = cluster
        .world
        .user("olga", Role::Operator, &["od"], false)
        .await;
    let operator = Api::new(cluster.addr(node)).with_token(&token);

    // The attacker picks a session id and writes its session, as the
    // scheduler would, straight into Redis on loopback, without a user.
    let session_id = rondo_core::auth::new_secret();
    let names = cluster.config().names();
    let key = names.session(&rondo_core::auth::token_hash(&session_id));
    let attack = format!(
        "exec bash -c 'exec 3<>/dev/tcp/127.0.0.1/{port} || exit 3; \
         printf \"HSET %s user admin csrf forged created_ms %s\\r\\n\" {key} \"$(date +%s%3N)\" >&3; \
         IFS= read -r -t 5 reply <&3; echo \"redis answered: $reply\" | tr -d \"\\r\"'",
        port = port_of(&admin_url),
    );
    let job = operator
        .create_job(json!({ "group": "od", "handler": "shell", "params": attack }))
        .await;
    let tid = operator.trigger_now(job).await;

    // What they got.
    let lines = lines_of(&operator, &tid).await;
    let answer = lines
        .iter()
        .find_map(|l| l.strip_prefix("redis answered: "))
        .unwrap_or_else(|| panic!("the job reached no Redis: {lines:?}"));
    assert!(
        answer.starts_with("-NOAUTH"),
        "Redis answered {answer:?} to a connection without a user: its `default` user is open"
    );
    let mut conn = redis::Client::open(admin_url.as_str())
        .expect("the admin's url")
        .get_multiplexed_async_connection()
        .await
        .expect("the tests' admin signs in");
    let written: bool = redis::cmd("EXISTS")
        .arg(&key)
        .query_async(&mut conn)
        .await
        .expect("EXISTS");
    assert!(!written, "the forged session {key} was written");
    let users = reqwest::Client::new()
        .get(format!("http://{}/api/v1/users", cluster.addr(node)))
        .header("cookie", format!("rondo_session={session_id}"))
        .send()
        .await
        .expect("the node answers");
    assert_eq!(users.status().as_u16(), 401, "the forged cookie is nobody");
    cluster.stop().await;
}

/// Every process that talks to Redis refuses an open `default`, before it
/// connects to anything else.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_process_refuses_to_start_against_a_redis_whose_default_user_is_open() {
    let open = ThrowawayRedis::start();
    let url = open.url();
    for binary in ["rondo-scheduler", "rondo-executor", "rondo-xxl-gateway"] {
        let path = procs::binary(binary);
        let url = url.clone();
        let out = tokio::task::spawn_blocking(move || {
            let env = [("RONDO_REDIS_URL", url.as_str())];
            run_binary(path.to_str().expect("a path"), &[], &env, PATIENCE)
        })
        .await
        .expect("the run");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(i32::from(EXIT_CONFIG)),
            "{binary}: {stderr}"
        );
        for named in [
            format!("127.0.0.1:{}", open.port),
            "`default` user".to_owned(),
            "redis.allow_open_default".to_owned(),
        ] {
            assert!(stderr.contains(&named), "{binary} names {named}: {stderr}");
        }
    }
}

/// `redis.allow_open_default = true` (a throwaway demo's Redis) lets it
/// start: the executor registers in that Redis, then stops cleanly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_open_default_user_is_allowed_when_config_says_so() {
    let open = ThrowawayRedis::start();
    let world = World::new("open_allowed").await;
    let mut config = world.config.clone();
    config.redis.url = open.url();
    config.redis.allow_open_default = true;
    let (app, id) = (config.executor.app.clone(), "allowed-1".to_owned());
    world.executor_queue(&app, &id);
    let log = std::env::temp_dir().join(format!("{}-executor.log", config.namespace));
    let file = std::fs::File::create(&log).expect("a log file");
    let env = [
        ("RONDO_EXECUTOR_APP", app.clone()),
        ("RONDO_EXECUTOR_ID", id.clone()),
    ];
    let mut child = procs::rondo_child("rondo-executor", &config, env, file);
    let registry = config.names().registry(&app);
    let mut redis = open.connect();
    let registered = try_eventually("the executor's registration", PATIENCE, || {
        let score: redis::RedisResult<Option<f64>> = redis::cmd("ZSCORE")
            .arg(&registry)
            .arg(&id)
            .query(&mut redis);
        let done = matches!(score, Ok(Some(_)));
        async move { done }
    })
    .await;
    if let Err(timed_out) = registered {
        let log = std::fs::read_to_string(&log).unwrap_or_default();
        panic!("{timed_out}; its log:\n{log}");
    }
    let status = procs::terminate(&mut child, PATIENCE).await;
    assert!(
        status.is_some_and(|s| s.success()),
        "{status:?}: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    let _ = std::fs::remove_file(&log);
}
