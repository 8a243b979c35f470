//! The shared connections to one Redis, against the real Redis: callers
//! share them without a checkout round trip, and one that breaks is opened
//! anew.

use rondo_core::testkit;

/// The server-side id of the connection `pool` hands out next.
async fn client_id(pool: &rondo_core::redis::Pool) -> redis::RedisResult<i64> {
    let mut conn = pool.get().await?;
    redis::cmd("CLIENT").arg("ID").query_async(&mut conn).await
}

#[tokio::test]
async fn callers_share_a_connection_and_one_that_breaks_is_opened_anew() {
    let mut config = testkit::config("pool");
    config.redis.pool_size = 1;
    let pool = rondo_core::redis::pool(&config.redis).expect("a pool");

    // One connection, shared: every caller is on the same one.
    let first = client_id(&pool).await.expect("CLIENT ID");
    let ids = futures_util::future::join_all((0..20).map(|_| client_id(&pool))).await;
    assert!(
        ids.iter().all(|id| id.as_ref().ok() == Some(&first)),
        "{ids:?}"
    );

    // The server drops it: a request may see that once, then a new one.
    let mut other = redis::Client::open(config.redis.url.as_str())
        .expect("url")
        .get_multiplexed_async_connection()
        .await
        .expect("a connection of its own");
    let killed: i64 = redis::cmd("CLIENT")
        .arg("KILL")
        .arg("ID")
        .arg(first)
        .query_async(&mut other)
        .await
        .expect("CLIENT KILL");
    assert_eq!(killed, 1);
    let mut answers = Vec::new();
    for _ in 0..3 {
        answers.push(client_id(&pool).await);
    }
    let failed = answers.iter().filter(|a| a.is_err()).count();
    assert!(
        failed <= 1,
        "only the request that found it broken fails: {answers:?}"
    );
    let last = answers
        .last()
        .expect("three")
        .as_ref()
        .expect("a new connection answers");
    assert_ne!(*last, first, "a new connection");
}

#[tokio::test]
async fn a_script_redis_does_not_know_yet_is_loaded_and_run() {
    let config = testkit::config("script");
    let pool = rondo_core::redis::pool(&config.redis).expect("a pool");
    let mut conn = pool.get().await.expect("a connection");
    // A source no test has loaded before: Redis answers NOSCRIPT first.
    let script = redis::Script::new(&format!(
        "-- {}\nreturn {{KEYS[1], ARGV[1], ARGV[2]}}",
        config.namespace
    ));
    let mut exists = redis::cmd("SCRIPT");
    exists.arg("EXISTS").arg(script.get_hash());
    let known: Vec<bool> = exists.query_async(&mut conn).await.expect("SCRIPT EXISTS");
    assert_eq!(known, [false]);
    let key = format!("{}:k", config.namespace);
    let mut cmd = rondo_core::redis::script_cmd(&script, 1, (3, 64));
    cmd.arg(&key).arg("a").arg(2);
    let got: Vec<String> = rondo_core::redis::run_script(&mut conn, &script, &cmd)
        .await
        .expect("loaded, then run");
    assert_eq!(got, [key.as_str(), "a", "2"]);
    let known: Vec<bool> = exists.query_async(&mut conn).await.expect("SCRIPT EXISTS");
    assert_eq!(known, [true], "loaded once, run by its hash after");
}
