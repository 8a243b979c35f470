fn seeds(url: &str) -> Result<Option<Vec<String>>, crate::error::Error> {
    RedisConfig {
        url: url.into(),
        ..RedisConfig::default()
    }
    .cluster_seeds()
}

#[test]
fn one_url_is_one_redis_and_a_cluster_url_or_a_list_are_seeds() {
    assert_eq!(seeds("redis://127.0.0.1:6379").unwrap(), None);
    assert_eq!(
        seeds("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001").unwrap(),
        Some(vec![
            "redis://u:p@10.0.0.1:7000".to_owned(),
            "redis://u:p@10.0.0.2:7001".to_owned()
        ])
    );
    assert_eq!(
        seeds("redis://a:7000, redis://b:7001").unwrap(),
        Some(vec![
            "redis://a:7000".to_owned(),
            "redis://b:7001".to_owned()
        ])
    );
    assert!(seeds("redis+cluster://").is_err());
    assert!(seeds("redis://a:7000,,redis://b:1").is_err());
}

use super::*;

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn empty_text_gives_working_defaults() {
    let c = Config::load("", env(&[])).unwrap();
    assert_eq!(c.namespace, "rondo");
    assert_eq!(c.partitions, 16);
    assert_eq!(c.scheduler.preread_ms, 5000);
    assert_eq!(c.registry.dead_after_ms, 90_000);
}

#[test]
fn file_then_env_overrides() {
    let text = "namespace = \"a\"\n[redis]\nurl = \"redis://u:p@x\"\n[scheduler]\napi_addr = \"0.0.0.0:1\"\n";
    let c = Config::load(
        text,
        env(&[
            ("RONDO_NAMESPACE", "b"),
            ("RONDO_SCHEDULER_API_ADDR", "127.0.0.1:9"),
            ("RONDO_PARTITIONS", "8"),
            ("RONDO_PERSIST_BATCH_SIZE", "10"),
            ("RONDO_MONITOR_PREFETCH", "32"),
            ("RONDO_CONFIG", "/etc/rondo.toml"),
            ("RONDO_LOG_FILTER", "debug"),
            ("RONDO_API", "http://127.0.0.1:8600"),
            ("HOME", "/root"),
        ]),
    )
    .unwrap();
    assert_eq!(c.namespace, "b");
    assert_eq!(c.redis.url, "redis://u:p@x");
    assert_eq!(c.scheduler.api_addr, "127.0.0.1:9");
    assert_eq!(c.partitions, 8);
    assert_eq!(c.persist.batch_size, 10);
    assert_eq!(c.monitor.prefetch, 32);
    assert_eq!(c.log.filter, "debug");
}

#[test]
fn a_variable_naming_a_whole_section_is_an_error_that_says_so() {
    let e = Config::load("", env(&[("RONDO_LOG", "debug")])).unwrap_err();
    assert!(e.to_string().contains("RONDO_LOG_<KEY>"), "{e}");
}

#[test]
fn unknown_keys_and_bad_values_are_errors() {
    assert!(Config::load("nope = 1", env(&[])).is_err());
    assert!(Config::load("[redis]\nurll = \"x\"", env(&[])).is_err());
    assert!(Config::load("", env(&[("RONDO_PARTITIONS", "zero")])).is_err());
    assert!(Config::load("partitions = 0", env(&[])).is_err());
    assert!(Config::load("[registry]\nlease_ms = 100", env(&[])).is_err());
    assert!(Config::load("[registry]\nlease_ms = 90000", env(&[])).is_err());
    assert!(Config::load("namespace = \"a b\"", env(&[])).is_err());
    assert!(Config::load("[log]\nformat = \"xml\"", env(&[])).is_err());
    assert!(Config::load("[scheduler]\nmax_fires_loaded = 0", env(&[])).is_err());
    let huge = "[scheduler]\nmax_fires_loaded = 2000000000";
    let e = Config::load(huge, env(&[])).unwrap_err();
    assert!(e.to_string().contains("scheduler.max_fires_loaded"), "{e}");
    assert!(Config::load("[scheduler]\nmax_fires_in_flight = 0", env(&[])).is_err());
    let brief = env(&[("RONDO_MONITOR_HANDLED_TTL_S", "60")]);
    let e = Config::load("", brief).unwrap_err();
    assert!(e.to_string().contains("monitor.handled_ttl_s"), "{e}");
    let day = env(&[("RONDO_MONITOR_HANDLED_TTL_S", "86400")]);
    assert_eq!(Config::load("", day).unwrap().monitor.handled_ttl_s, 86_400);
    let shorter_than_lost = env(&[
        ("RONDO_MONITOR_HANDLED_TTL_S", "7200"),
        ("RONDO_MONITOR_LOST_AFTER_MS", "7200000"),
    ]);
    let e = Config::load("", shorter_than_lost).unwrap_err();
    assert!(e.to_string().contains("monitor.lost_after_ms"), "{e}");
    let lost_for_a_year = env(&[("RONDO_MONITOR_LOST_AFTER_MS", "31536000000")]);
    let e = Config::load("", lost_for_a_year).unwrap_err();
    assert!(
        e.to_string().contains("monitor.lost_after_ms must be"),
        "{e}"
    );
    assert!(Config::load("[auth]\nadmin_user = \"root\"", env(&[])).is_err());
    let short = "[auth]\nadmin_user = \"root\"\nadmin_password = \"short\"";
    assert!(Config::load(short, env(&[])).is_err());
    let good = "[auth]\nadmin_user = \"root\"\nadmin_password = \"long enough pass\"";
    assert!(Config::load(good, env(&[])).is_ok());
}

#[test]
fn shipped_credentials_work_on_loopback_only() {
    assert!(Config::load("", env(&[])).is_ok());
    let remote = env(&[("RONDO_AMQP_URL", "amqp://guest:guest@mq.prod:5672/%2f")]);
    let e = Config::load("", remote).unwrap_err();
    assert!(e.to_string().contains("amqp.url"), "{e}");
    let remote_db = env(&[("RONDO_MYSQL_URL", "mysql://rondo:rondo@10.0.0.5/rondo")]);
    assert!(Config::load("", remote_db).is_err());
    let own = env(&[("RONDO_AMQP_URL", "amqp://sched:x7Gq@mq.prod:5672/%2f")]);
    assert!(Config::load("", own).is_ok());
    let local = env(&[("RONDO_MYSQL_URL", "mysql://rondo:rondo@localhost:3306/x")]);
    assert!(Config::load("", local).is_ok());
    let v6 = env(&[("RONDO_AMQP_URL", "amqp://guest:guest@[::1]:5672/%2f")]);
    assert!(Config::load("", v6).is_ok());
}

#[test]
fn secrets_never_show_in_the_debug_form() {
    let text = "[alarm]\nsmtp_password = \"smtp-secret\"\n[auth]\nadmin_user = \"root\"\nadmin_password = \"admin-secret-123\"";
    let vars = env(&[
        ("RONDO_AMQP_URL", "amqp://u:amqp-secret@127.0.0.1/%2f"),
        ("RONDO_REDIS_URL", "redis://:redis-secret@127.0.0.1:6379"),
        ("RONDO_MYSQL_URL", "mysql://u:mysql-secret@127.0.0.1/r"),
        ("RONDO_ZOOKEEPER_AUTH", "rondo:zk-secret"),
    ]);
    let config = Config::load(text, vars).unwrap();
    assert_eq!(config.zookeeper.auth, "rondo:zk-secret");
    let shown = format!("{config:?}");
    for secret in [
        "zk-secret",
        "smtp-secret",
        "admin-secret",
        "amqp-secret",
        "redis-secret",
        "mysql-secret",
    ] {
        assert!(!shown.contains(secret), "{secret} in {shown}");
    }
    assert!(shown.contains("127.0.0.1"));
}

#[test]
fn allow_lists_and_job_env_are_checked_naming_the_key() {
    let c = Config::load(
        "[alarm]\nwebhook_allow = [\"192.168.0.0/16\"]",
        env(&[
            ("RONDO_EXECUTOR_HTTP_ALLOW", "10.0.0.0/8, 127.0.0.1"),
            ("RONDO_EXECUTOR_JOB_ENV", "TZ,JAVA_HOME"),
        ]),
    )
    .unwrap();
    assert_eq!(c.executor.http_allow, ["10.0.0.0/8", "127.0.0.1"]);
    assert_eq!(c.alarm.webhook_allow, ["192.168.0.0/16"]);
    assert_eq!(c.executor.job_env, ["TZ", "JAVA_HOME"]);
    for (var, value, key) in [
        (
            "RONDO_EXECUTOR_HTTP_ALLOW",
            "internal.example",
            "executor.http_allow",
        ),
        (
            "RONDO_ALARM_WEBHOOK_ALLOW",
            "10.0.0.0/40",
            "alarm.webhook_allow",
        ),
        (
            "RONDO_EXECUTOR_JOB_ENV",
            "RONDO_REDIS_URL",
            "executor.job_env",
        ),
        ("RONDO_EXECUTOR_JOB_ENV", "NOT-A-NAME", "executor.job_env"),
    ] {
        let e = Config::load("", env(&[(var, value)])).unwrap_err();
        assert!(e.to_string().contains(key), "{value}: {e}");
    }
}

#[test]
fn redis_without_a_password_is_refused_off_loopback() {
    let load = |url: &str| Config::load("", env(&[("RONDO_REDIS_URL", url)]));
    for fine in [
        "redis://127.0.0.1:6379",
        "redis://localhost:6379/0",
        "redis://[::1]:6379",
        "redis://:secret@10.0.0.5:6379",
        "redis://rondo-scheduler:secret@redis.internal:6379",
        "redis+cluster://sched:secret@10.0.0.5:7000,10.0.0.6:7000",
        "redis+cluster://127.0.0.1:7000,127.0.0.1:7001",
    ] {
        assert!(load(fine).is_ok(), "{fine}: {:?}", load(fine).err());
    }
    for refused in [
        "redis://10.0.0.5:6379",
        "redis://redis.internal:6379",
        "redis://rondo-scheduler@10.0.0.5:6379",
        "redis+cluster://127.0.0.1:7000,10.0.0.6:7000",
        "redis://127.0.0.1:6379,redis://10.0.0.6:6379",
    ] {
        let e = load(refused).unwrap_err().to_string();
        assert!(
            e.contains("redis.url") && e.contains("without a password"),
            "{refused}: {e}"
        );
    }
}

#[test]
fn zookeeper_off_loopback_needs_an_identity() {
    let mut zk = crate::config::ZkConfig::default();
    assert!(zk.check().is_ok(), "loopback without an identity");
    zk.connect = "127.0.0.1:2181,localhost:2182/chroot".into();
    assert!(zk.check().is_ok());
    zk.connect = "127.0.0.1:2181,zk2.internal:2181".into();
    assert!(zk.check().unwrap_err().contains("zk2.internal"));
    zk.auth = "rondo:secret".into();
    assert!(zk.check().is_ok());
    for bad in ["rondo", "rondo:", ":secret"] {
        zk.auth = bad.into();
        assert!(zk.check().unwrap_err().contains("user:password"), "{bad}");
    }
}

#[test]
fn a_lease_is_off_or_at_least_three_renewals_long() {
    let load = |lease: &str, renew: &str| {
        Config::load(
            &format!("[scheduler]\nlease_ms = {lease}\nlease_renew_ms = {renew}\n"),
            env(&[]),
        )
    };
    let c = load("500", "100").unwrap();
    assert_eq!(
        (c.scheduler.lease_ms, c.scheduler.lease_renew_ms),
        (500, 100)
    );
    assert_eq!(load("0", "100").unwrap().scheduler.lease_ms, 0, "off");
    for (lease, renew) in [("200", "100"), ("500", "0"), ("70000", "100")] {
        let e = load(lease, renew).unwrap_err().to_string();
        assert!(e.contains("scheduler.lease_ms"), "{lease}/{renew}: {e}");
    }
}

#[test]
fn the_claim_runs_at_least_a_session_and_a_margin_ahead() {
    let load = |text: &str| Config::load(text, env(&[])).unwrap().claim_ahead_ms();
    // The defaults: a 6 s session outlasts the 5 s pre-read.
    assert_eq!(load(""), 9_000);
    assert_eq!(load("[zookeeper]\nsession_timeout_ms = 2000\n"), 5_000);
    assert_eq!(
        load("[zookeeper]\nsession_timeout_ms = 2000\n[scheduler]\npreread_ms = 15000\n"),
        15_000
    );
    // The margin: three claim intervals, at least 3 s.
    assert_eq!(
        load("[zookeeper]\nsession_timeout_ms = 4000\n[scheduler]\nclaim_interval_ms = 500\n"),
        7_000
    );
    assert_eq!(
        load("[zookeeper]\nsession_timeout_ms = 4000\n[scheduler]\nclaim_interval_ms = 2000\n"),
        10_000
    );
    // A session ZooKeeper granted longer than the one asked for.
    let c = Config::load("", env(&[])).unwrap();
    assert_eq!(c.scheduler.claim_ahead_ms(12_000), 15_000);
}
