//! Script jobs (XXL-JOB's GLUE) on a real cluster: a scheduler node, a
//! `rondo-executor` process that enables `sh` and `python3`, the
//! persistence worker and MySQL.
//!
//! * `GLUE_SHELL` and `GLUE_PYTHON` scripts run with the params and shards
//!   as XXL-JOB passes them, their output is the job log, their exit code
//!   the result;
//! * every save of a changed script is a version with its remark; an old
//!   version restored runs again (as a new version);
//! * a kill ends a running script;
//! * a script type the executor does not enable is refused, not retried;
//! * bad scripts are refused by the API naming the field.

use std::time::Duration;

use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::{Value, json};

async fn cluster(tag: &str) -> (Cluster, Api) {
    cluster_with(tag, |_| {}).await
}

/// [`cluster`] with the world's config as `tune` changes it.
async fn cluster_with(tag: &str, tune: impl FnOnce(&mut World)) -> (Cluster, Api) {
    let mut world = World::new(tag).await;
    world.config.executor.app = "sc".into();
    world.config.executor.script_handlers = vec!["sh".into(), "python3".into()];
    tune(&mut world);
    let mut cluster = Cluster::new(world);
    cluster.spawn_executor("sc-1");
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "sc" })).await.0,
        201
    );
    api.until_executors("sc", &["sc-1"]).await;
    (cluster, api)
}

/// Waits for trigger `tid`'s stored outcome; returns (handle code, handle
/// message, log lines).
async fn outcome(api: &Api, tid: &str) -> (i64, String, Vec<String>) {
    eventually(
        &format!("the outcome of {tid}"),
        Duration::from_secs(30),
        || async {
            let (status, out) = api.get(&format!("/api/v1/logs/{tid}")).await;
            let code = out["log"]["handle_code"].as_i64().filter(|c| *c != 0);
            (status == 200).then_some(())?;
            let code = code?;
            let lines: Vec<String> = out["lines"]
                .as_array()?
                .iter()
                .filter_map(|l| l["line"].as_str().map(str::to_owned))
                .collect();
            Some((
                code,
                out["log"]["handle_msg"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                lines,
            ))
        },
    )
    .await
}

fn has_line(lines: &[String], want: &str) -> bool {
    lines.iter().any(|l| l == want)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn shell_and_python_scripts_run_and_old_versions_are_restored() {
    let (c, api) = cluster("scripts_run").await;

    let (status, job) = api
        .post(
            "/api/v1/jobs",
            json!({ "group": "sc", "glue_type": "GLUE_SHELL", "params": "hello",
                "glue_source": "echo \"sh v1 $1 $2/$3\"", "glue_remark": "first" }),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    assert_eq!(
        (job["handler"].as_str(), job["glue_version"].as_u64()),
        (Some("script:sh"), Some(1)),
        "{job}"
    );
    let id = job["id"].as_u64().unwrap();
    let tid = api.trigger_now(id).await;
    let (code, _, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{lines:?}");
    assert!(has_line(&lines, "sh v1 hello 0/1"), "{lines:?}");

    let (status, job) = api
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{id}"),
            Some(json!({ "glue_source": "echo sh v2; exit 4", "glue_remark": "second" })),
        )
        .await;
    assert_eq!(
        (status, job["glue_version"].as_u64()),
        (200, Some(2)),
        "{job}"
    );
    // A change that leaves the script alone is no new version.
    let (_, job) = api
        .call(
            reqwest::Method::PUT,
            &format!("/api/v1/jobs/{id}"),
            Some(json!({ "description": "nightly" })),
        )
        .await;
    assert_eq!(job["glue_version"].as_u64(), Some(2), "{job}");
    let tid = api.trigger_now(id).await;
    let (code, msg, lines) = outcome(&api, &tid).await;
    assert_eq!((code, msg.as_str()), (500, "exit code 4"), "{lines:?}");
    assert!(has_line(&lines, "sh v2"), "{lines:?}");

    let versions = eventually("both versions kept", Duration::from_secs(20), || async {
        let (_, out) = api.get(&format!("/api/v1/jobs/{id}/scripts")).await;
        (out["items"].as_array().map(Vec::len) == Some(2)).then_some(out)
    })
    .await;
    assert_eq!(versions["current"], 2);
    let kept: Vec<(u64, &str)> = versions["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["version"].as_u64().unwrap(),
                v["glue_remark"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(kept, [(2, "second"), (1, "first")], "{versions}");

    let (status, job) = api
        .post(&format!("/api/v1/jobs/{id}/scripts/1/restore"), json!({}))
        .await;
    assert_eq!(status, 200, "{job}");
    assert_eq!(
        (
            job["glue_version"].as_u64(),
            job["glue_source"].as_str(),
            job["glue_remark"].as_str()
        ),
        (
            Some(3),
            Some("echo \"sh v1 $1 $2/$3\""),
            Some("restored from version 1")
        ),
        "{job}"
    );
    let tid = api.trigger_now(id).await;
    let (code, _, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{lines:?}");
    assert!(
        has_line(&lines, "sh v1 hello 0/1"),
        "the restored script ran: {lines:?}"
    );
    let (status, out) = api
        .post(&format!("/api/v1/jobs/{id}/scripts/9/restore"), json!({}))
        .await;
    assert_eq!(status, 404, "{out}");

    // Python, with a shard broadcast of one.
    let py = api
        .create_job(
            json!({ "group": "sc", "glue_type": "GLUE_PYTHON", "params": "p q",
            "routing": "SHARDING_BROADCAST",
            "glue_source": "import sys\nprint('py', sys.argv[1:])\n" }),
        )
        .await;
    let tid = api.trigger_now(py).await;
    let (code, _, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{lines:?}");
    assert!(has_line(&lines, "py ['p q', '0', '1']"), "{lines:?}");

    // Not enabled on this executor: refused, not retried.
    let node = api
        .create_job(
            json!({ "group": "sc", "glue_type": "GLUE_NODEJS", "retries": 3,
            "glue_source": "console.log('js')" }),
        )
        .await;
    let tid = api.trigger_now(node).await;
    let (code, msg, _) = outcome(&api, &tid).await;
    assert_eq!(code, 500);
    assert!(msg.contains("executor.script_handlers"), "{msg}");
    // The monitor has decided (its alarm is stored, after the retry it
    // would have scheduled): one run, no retry.
    let logs = eventually(
        "the monitor's decision",
        Duration::from_secs(20),
        || async {
            let (_, logs) = api.get(&format!("/api/v1/jobs/{node}/logs")).await;
            logs.as_array()?
                .iter()
                .any(|l| l["alarm_status"].as_i64().is_some_and(|a| a > 0))
                .then_some(logs)
        },
    )
    .await;
    assert_eq!(
        logs.as_array().map(Vec::len),
        Some(1),
        "not retried: {logs}"
    );

    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_kill_ends_a_running_script() {
    let (c, api) = cluster("scripts_kill").await;
    let id = api
        .create_job(json!({ "group": "sc", "glue_type": "GLUE_SHELL",
            "glue_source": "echo started; sleep 60; echo never" }))
        .await;
    let tid = api.trigger_now(id).await;
    eventually("the script to start", Duration::from_secs(20), || async {
        let (_, out) = api.get(&format!("/api/v1/logs/{tid}")).await;
        out["lines"]
            .as_array()?
            .iter()
            .any(|l| l["line"] == "started")
            .then_some(())
    })
    .await;
    let (status, out) = api
        .post(&format!("/api/v1/logs/{tid}/kill"), json!({}))
        .await;
    assert_eq!((status, out["kill"].as_str()), (202, Some("sent")), "{out}");
    let (code, msg, lines) = outcome(&api, &tid).await;
    assert_eq!((code, msg.as_str()), (500, "killed"), "{lines:?}");
    assert!(!has_line(&lines, "never"), "{lines:?}");
    c.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_scripts_are_refused_naming_the_field() {
    let (c, api) = cluster("scripts_bad").await;
    let big = "x".repeat(64 * 1024 + 1);
    for (body, field) in [
        (
            json!({ "group": "sc", "glue_type": "GLUE_PYTHON2", "glue_source": "x" }),
            "glue_type",
        ),
        (
            json!({ "group": "sc", "glue_type": "GLUE_RUBY", "glue_source": "x" }),
            "glue_type",
        ),
        (
            json!({ "group": "sc", "glue_type": "GLUE_SHELL" }),
            "glue_source",
        ),
        (
            json!({ "group": "sc", "glue_type": "GLUE_SHELL", "glue_source": big }),
            "glue_source",
        ),
        (
            json!({ "group": "sc", "glue_type": "GLUE_SHELL", "glue_source": "x", "handler": "demo" }),
            "handler",
        ),
        (json!({ "group": "sc", "handler": "script:sh" }), "handler"),
        (
            json!({ "group": "sc", "handler": "demo", "glue_remark": "r".repeat(256) }),
            "glue_remark",
        ),
    ] {
        let (status, out) = api.post("/api/v1/jobs", body.clone()).await;
        let shown: Value = body.get("glue_type").cloned().unwrap_or(Value::Null);
        assert_eq!(
            (status, out["error"]["field"].as_str()),
            (400, Some(field)),
            "{shown}: {out}"
        );
    }
    c.stop().await;
}

/// The `rondo-executor` process holds the Redis, broker and MySQL URLs
/// with their passwords in its environment (`RONDO_*`); a script job run
/// by it sees none of them, only `PATH`, `HOME`, `LANG` and the trigger's
/// values.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_script_sees_none_of_the_executors_credentials() {
    let (c, api) = cluster("scripts_env").await;
    let job = api
        .create_job(json!({ "group": "sc", "glue_type": "GLUE_SHELL",
            "glue_source": "env; echo end-of-env" }))
        .await;
    let tid = api.trigger_now(job).await;
    let (code, _, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{lines:?}");
    assert!(
        has_line(&lines, "end-of-env"),
        "the whole output: {lines:?}"
    );
    let config = c.config();
    for secret in [&config.redis.url, &config.amqp.url, &config.mysql.url] {
        assert!(
            !lines.iter().any(|l| l.contains(secret.as_str())),
            "{secret} leaked: {lines:?}"
        );
    }
    let names: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.split_once('='))
        .map(|(n, _)| n)
        .collect();
    assert!(names.contains(&"PATH"), "{names:?}");
    let mut rondo: Vec<&str> = names
        .into_iter()
        .filter(|n| n.starts_with("RONDO_"))
        .collect();
    rondo.sort_unstable();
    assert_eq!(
        rondo,
        [
            "RONDO_JOB_ID",
            "RONDO_PARAMS",
            "RONDO_SCRIPT_VERSION",
            "RONDO_SHARD_INDEX",
            "RONDO_SHARD_TOTAL",
            "RONDO_TRIGGER_ID"
        ],
        "{lines:?}"
    );
}

/// A job's named secrets reach its script (as variables, and filled into
/// its params) and show nowhere: every answer reads `***` for them, the
/// job log masks a value the script prints, the log row keeps the
/// placeholder, and `***` sent back keeps the stored value.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jobs_secrets_reach_its_script_and_show_nowhere() {
    let (c, api) = cluster("scripts_secrets").await;
    let (db, token) = ("hunter2-db-pw", "tok-9f8e7d");
    // The script names the values upper-cased, so no answer that shows
    // the script holds them.
    let script = "test \"$(printf %s \"$DB_PASSWORD\" | tr a-z A-Z)\" = HUNTER2-DB-PW && echo env-ok\n\
        case \"$(printf %s \"$RONDO_PARAMS\" | tr a-z A-Z)\" in *TOK-9F8E7D*) echo param-ok;; esac\n\
        echo \"saw $DB_PASSWORD\"; echo \"$RONDO_PARAMS\" >&2";
    let (status, created) = api
        .post(
            "/api/v1/jobs",
            json!({ "group": "sc", "glue_type": "GLUE_SHELL", "glue_source": script,
                "params": "--token=${secret.API_TOKEN}",
                "secrets": { "DB_PASSWORD": db, "API_TOKEN": token } }),
        )
        .await;
    assert_eq!(status, 201, "{created}");
    let masked = json!({ "API_TOKEN": "***", "DB_PASSWORD": "***" });
    assert_eq!(created["secrets"], masked, "{created}");
    let job = created["id"].as_u64().expect("an id");
    let tid = api.trigger_now(job).await;
    let (code, msg, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{msg}: {lines:?}");
    for want in ["env-ok", "param-ok", "saw ***", "[stderr] --token=***"] {
        assert!(has_line(&lines, want), "{want}: {lines:?}");
    }
    // No answer holds a value: the job, the list, the log row and its
    // lines, the audit.
    for path in [
        format!("/api/v1/jobs/{job}"),
        "/api/v1/jobs?group=sc".to_owned(),
        format!("/api/v1/logs?job_id={job}"),
        format!("/api/v1/logs/{tid}"),
        "/api/v1/audit".to_owned(),
    ] {
        let (status, body) = api.get(&path).await;
        assert_eq!(status, 200, "{path}: {body}");
        let text = body.to_string();
        assert!(
            !text.contains(db) && !text.contains(token),
            "{path} shows a secret: {text}"
        );
    }
    // Nor does the answer to a manual trigger, which lists what was sent.
    let (status, sent) = api
        .post(&format!("/api/v1/jobs/{job}/trigger"), json!({}))
        .await;
    assert_eq!(status, 200, "{sent}");
    let text = sent.to_string();
    assert!(
        !text.contains(db) && !text.contains(token),
        "the trigger answer shows a secret: {text}"
    );
    let (_, row) = api.get(&format!("/api/v1/logs/{tid}")).await;
    assert_eq!(row["log"]["params"], "--token=${secret.API_TOKEN}");
    // The job read back and sent back as it is keeps its secrets; a mask
    // for a secret the job does not have is refused, naming it.
    let (_, read) = api.get(&format!("/api/v1/jobs/{job}")).await;
    let (status, _) = api
        .put(
            &format!("/api/v1/jobs/{job}"),
            json!({ "description": "edited", "secrets": read["secrets"] }),
        )
        .await;
    assert_eq!(status, 200);
    let (status, refused) = api
        .put(
            &format!("/api/v1/jobs/{job}"),
            json!({ "secrets": { "DB_PASSWORD": "***", "NOPE": "***" } }),
        )
        .await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["error"]["field"], "secrets.NOPE");
    let tid = api.trigger_now(job).await;
    let (code, msg, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{msg}: {lines:?}");
    assert!(
        has_line(&lines, "env-ok") && has_line(&lines, "param-ok"),
        "{lines:?}"
    );
    // MySQL keeps them, for a rebuilt Redis.
    let stored: Option<String> = eventually("the job row", Duration::from_secs(30), || async {
        sqlx::query_scalar::<_, Option<String>>(
            "SELECT secrets FROM job WHERE id = ? AND description = 'edited'",
        )
        .bind(job)
        .fetch_optional(c.db())
        .await
        .ok()
        .flatten()
    })
    .await;
    assert!(stored.is_some_and(|s| s.contains(db) && s.contains(token)));
}

/// With `executor.run_as`, script jobs run as that OS user (its uid and
/// groups, its `HOME`, from `/`): one cannot read the executor's own
/// environment, which holds the services' credentials.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn script_jobs_run_as_the_configured_user() {
    let nobody = std::process::Command::new("getent")
        .args(["passwd", "nobody"])
        .output()
        .expect("getent runs");
    let fields: Vec<String> = String::from_utf8_lossy(&nobody.stdout)
        .trim()
        .split(':')
        .map(str::to_owned)
        .collect();
    let (uid, gid, home) = (&fields[2], &fields[3], &fields[5]);
    let (cluster, api) = cluster_with("scripts_run_as", |w| {
        w.config.executor.run_as = "nobody".into();
    })
    .await;
    let script = "id -u; id -g; echo \"home=$HOME\"; pwd\n\
        if cat /proc/$PPID/environ >/dev/null 2>&1; then echo read; else echo denied; fi\n\
        grep -E '^(CapEff|CapAmb|NoNewPrivs):' /proc/self/status | tr -d '\\t'";
    let (status, job) = api
        .post(
            "/api/v1/jobs",
            json!({ "group": "sc", "glue_type": "GLUE_SHELL", "glue_source": script }),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    let tid = api.trigger_now(job["id"].as_u64().expect("an id")).await;
    let (code, msg, lines) = outcome(&api, &tid).await;
    assert_eq!(code, 200, "{msg}: {lines:?}");
    for want in [
        uid.clone(),
        gid.clone(),
        format!("home={home}"),
        "/".into(),
        "denied".into(),
        // No capability kept or to inherit, none to gain from a setuid
        // program.
        "CapEff:0000000000000000".into(),
        "CapAmb:0000000000000000".into(),
        "NoNewPrivs:1".into(),
    ] {
        assert!(has_line(&lines, &want), "{want} in {lines:?}");
    }
    cluster.stop().await;
}
