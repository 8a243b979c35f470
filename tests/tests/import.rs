//! `rondo import xxl-job` against XXL-JOB's own tables: a database of its
//! own with `xxl_job_group` and `xxl_job_info` as XXL-JOB 2.4 creates them,
//! filled with representative rows (each script type, every routing, block
//! and misfire strategy, each schedule type, a chain of child jobs, a
//! stopped job), imported into a real node through the `rondo` binary.
//!
//! * a row that does not map (a Python 2 job) is listed by `--dry-run`
//!   with its reason and stops the real import before anything is written;
//! * a Groovy job and a group fed by hand (`address_type = 1`) map: the
//!   one runs on XXL-JOB's own executors behind the gateway, the other
//!   keeps its addresses for it;
//! * the import creates every group and job, and every field is checked;
//! * the dry run's next fire matches XXL-JOB's `trigger_next_time`;
//! * a second import changes nothing.

use std::process::Output;

use chrono::TimeZone;
use rondo_history::testing::TestDatabase;
use rondo_testkit::procs::cli_report as report;
use rondo_testkit::{Api, Cluster, World};
use serde_json::{Value, json};

/// One `xxl_job_info` row, in the columns the test fills.
struct Row {
    id: i64,
    group: i64,
    desc: &'static str,
    schedule: (&'static str, &'static str),
    misfire: &'static str,
    routing: &'static str,
    block: &'static str,
    handler: &'static str,
    params: &'static str,
    timeout: i64,
    retries: i64,
    glue: (&'static str, &'static str, &'static str),
    children: &'static str,
    running: bool,
    alarm: &'static str,
}

fn rows() -> Vec<Row> {
    let base = |id: i64| Row {
        id,
        group: 1,
        desc: "",
        schedule: ("NONE", ""),
        misfire: "DO_NOTHING",
        routing: "FIRST",
        block: "SERIAL_EXECUTION",
        handler: "demoJobHandler",
        params: "",
        timeout: 0,
        retries: 0,
        glue: ("BEAN", "", ""),
        children: "",
        running: false,
        alarm: "",
    };
    vec![
        Row {
            desc: "nightly report",
            schedule: ("CRON", "0 0 2 * * ?"),
            routing: "FIRST",
            timeout: 30,
            retries: 2,
            params: "--day=yesterday",
            children: "2",
            running: true,
            alarm: "ops@example.com",
            ..base(1)
        },
        Row {
            desc: "sync every 30 s",
            schedule: ("FIX_RATE", "30"),
            misfire: "FIRE_ONCE_NOW",
            routing: "ROUND",
            block: "DISCARD_LATER",
            children: "3",
            running: true,
            ..base(2)
        },
        Row {
            desc: "shell cleanup",
            routing: "SHARDING_BROADCAST",
            block: "COVER_EARLY",
            handler: "",
            glue: ("GLUE_SHELL", "echo \"clean $1\"", "first cut"),
            ..base(3)
        },
        Row {
            group: 2,
            desc: "python weekdays",
            schedule: ("CRON", "0 30 9 ? * MON-FRI"),
            routing: "LAST",
            handler: "",
            glue: ("GLUE_PYTHON", "print('weekday')", "py"),
            running: true,
            ..base(4)
        },
        Row {
            desc: "node",
            routing: "RANDOM",
            handler: "",
            glue: ("GLUE_NODEJS", "console.log('js')", "js"),
            ..base(5)
        },
        Row {
            desc: "powershell",
            routing: "CONSISTENT_HASH",
            handler: "",
            glue: ("GLUE_POWERSHELL", "Write-Output 'ps'", "ps"),
            ..base(6)
        },
        Row {
            desc: "php",
            routing: "LEAST_FREQUENTLY_USED",
            handler: "",
            glue: ("GLUE_PHP", "<?php echo 'php';", "php"),
            ..base(7)
        },
        Row {
            desc: "lru, stopped",
            schedule: ("CRON", "0 0/15 * * * ?"),
            routing: "LEAST_RECENTLY_USED",
            ..base(8)
        },
        Row {
            desc: "failover",
            routing: "FAILOVER",
            running: true,
            ..base(9)
        },
        Row {
            desc: "busyover",
            routing: "BUSYOVER",
            ..base(10)
        },
        Row {
            desc: "groovy",
            handler: "",
            glue: (
                "GLUE_GROOVY",
                "class DemoGlueJobHandler extends IJobHandler {}",
                "groovy",
            ),
            ..base(11)
        },
    ]
}

async fn insert(db: &TestDatabase, row: &Row, next_ms: i64) {
    sqlx::query(
        "INSERT INTO xxl_job_info (id, job_group, job_desc, add_time, update_time, author, alarm_email, \
         schedule_type, schedule_conf, misfire_strategy, executor_route_strategy, executor_handler, \
         executor_param, executor_block_strategy, executor_timeout, executor_fail_retry_count, \
         glue_type, glue_source, glue_remark, glue_updatetime, child_jobid, trigger_status, \
         trigger_last_time, trigger_next_time) \
         VALUES (?, ?, ?, NOW(), NOW(), 'XXL', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(), ?, ?, 0, ?)",
    )
    .bind(row.id)
    .bind(row.group)
    .bind(row.desc)
    .bind(row.alarm)
    .bind(row.schedule.0)
    .bind(row.schedule.1)
    .bind(row.misfire)
    .bind(row.routing)
    .bind(row.handler)
    .bind(row.params)
    .bind(row.block)
    .bind(row.timeout)
    .bind(row.retries)
    .bind(row.glue.0)
    .bind(row.glue.1)
    .bind(row.glue.2)
    .bind(row.children)
    .bind(i8::from(row.running))
    .bind(next_ms)
    .execute(&db.pool)
    .await
    .expect("insert an xxl_job_info row");
}

fn rondo(api: &str, token: &str, args: &[&str]) -> Output {
    rondo_testkit::procs::rondo_cli(api, token, args)
}

/// `rondo args` with XXL-JOB's database URL in `RONDO_IMPORT_MYSQL`, as
/// the runbook gives it (no password on the command line).
fn rondo_with_mysql_env(api: &str, token: &str, mysql: &str, args: &[&str]) -> Output {
    std::process::Command::new(rondo_testkit::procs::binary("rondo"))
        .env_clear()
        .env("RONDO_API", api)
        .env("RONDO_TOKEN", token)
        .env("RONDO_IMPORT_MYSQL", mysql)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run rondo")
}

/// Every job the node has, by `import_ref`.
async fn imported(api: &Api) -> std::collections::BTreeMap<String, Value> {
    let (status, page) = api.get("/api/v1/jobs?limit=1000").await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| {
            (
                j["import_ref"].as_str().unwrap_or_default().to_owned(),
                j.clone(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn xxl_job_groups_and_jobs_are_imported_field_by_field_once() {
    let mut world = World::new("import").await;
    // XXL-JOB's manual list below names an executor on a private network.
    world.config.xxl.address_allow = vec!["10.0.0.0/8".into()];
    // The XXL-JOB jobs alarm ops@example.com: the deployment's domain.
    world.config.alarm.email_allow = vec!["example.com".into()];
    let token = world.admin.token.clone();
    let xxl = rondo_testkit::xxl::xxl_database(&world.config).await;
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let url = format!("http://{}", cluster.nodes[node].addr());

    sqlx::query(
        "INSERT INTO xxl_job_group (id, app_name, title, address_type, address_list, update_time) VALUES \
         (1, 'xxl-job-executor-sample', '示例执行器', 0, NULL, NOW()), (2, 'billing', 'Billing', 1, '10.0.0.5:9999', NOW())",
    )
    .execute(&xxl.pool)
    .await
    .expect("groups");
    // Job 1's next fire as XXL-JOB stored it: the next 02:00 in Shanghai.
    let shanghai: chrono_tz::Tz = "Asia/Shanghai".parse().unwrap();
    let now = chrono::Utc::now().with_timezone(&shanghai);
    let mut next_2am = shanghai
        .with_ymd_and_hms(
            chrono::Datelike::year(&now),
            chrono::Datelike::month(&now),
            chrono::Datelike::day(&now),
            2,
            0,
            0,
        )
        .single()
        .unwrap();
    if next_2am <= now {
        next_2am += chrono::Duration::days(1);
    }
    let rows = rows();
    for row in &rows {
        let next = if row.id == 1 {
            next_2am.timestamp_millis()
        } else {
            0
        };
        insert(&xxl, row, next).await;
    }
    // A Python 2 job does not map.
    sqlx::query(
        "INSERT INTO xxl_job_info (id, job_group, job_desc, executor_route_strategy, executor_block_strategy, \
         glue_type, glue_source) VALUES (20, 1, 'python 2', 'FIRST', 'SERIAL_EXECUTION', 'GLUE_PYTHON2', 'print 1')",
    )
    .execute(&xxl.pool)
    .await
    .expect("python 2 row");

    let import = [
        "import",
        "xxl-job",
        "--mysql",
        xxl.url.as_str(),
        "--zone",
        "Asia/Shanghai",
    ];
    // The dry run as the runbook has it: the URL, password and all, from
    // the environment.
    let dry = ["import", "xxl-job", "--zone", "Asia/Shanghai", "--dry-run"];
    let out = rondo_with_mysql_env(&url, &token, &xxl.url, &dry);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("warning"), "{stderr}");
    let plan = report(&out);
    let problems = plan["problems"].as_array().expect("problems");
    assert_eq!(problems.len(), 1, "{plan}");
    assert_eq!(
        (problems[0]["id"].as_i64(), problems[0]["column"].as_str()),
        (Some(20), Some("glue_type")),
        "{plan}"
    );
    assert!(
        problems[0]["reason"]
            .as_str()
            .unwrap()
            .contains("GLUE_PYTHON2"),
        "{plan}"
    );
    assert_eq!(plan["summary"]["created"].as_u64(), Some(11), "{plan}");
    let first = plan["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["xxl_id"] == 1)
        .expect("job 1 planned");
    assert_eq!(
        first["next_fires"][0]["at_ms"].as_i64(),
        first["xxl_trigger_next_ms"].as_i64(),
        "the next fire is XXL-JOB's: {first}"
    );
    assert!(
        first["next_fires"][0]["local"]
            .as_str()
            .unwrap()
            .ends_with("T02:00:00+08:00")
    );

    // The real import refuses and writes nothing. Given as the flag, the
    // password earns a warning that does not repeat it.
    let out = rondo(&url, &token, &import);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let password = reqwest::Url::parse(&xxl.url)
        .unwrap()
        .password()
        .unwrap()
        .to_owned();
    assert!(
        stderr.contains("warning: --mysql has a password on the command line")
            && stderr.contains("RONDO_IMPORT_MYSQL")
            && !stderr.contains(&format!(":{password}@")),
        "{stderr}"
    );
    assert!(imported(&api).await.is_empty(), "nothing half-imported");
    assert_eq!(api.get("/api/v1/groups/billing").await.0, 404);

    sqlx::query("DELETE FROM xxl_job_info WHERE id = 20")
        .execute(&xxl.pool)
        .await
        .unwrap();
    let out = rondo(&url, &token, &import);
    assert!(out.status.success(), "{out:?}");
    let done = report(&out);
    assert_eq!(done["summary"]["created"].as_u64(), Some(11), "{done}");

    // Groups.
    let (_, group) = api.get("/api/v1/groups/xxl-job-executor-sample").await;
    assert_eq!(group["title"], "示例执行器");
    let (_, group) = api.get("/api/v1/groups/billing").await;
    assert_eq!(group["title"], "Billing");
    assert_eq!(group["xxl_gateway"], true, "served by the XXL-JOB gateway");
    // XXL-JOB 2.4 keeps no token per group and none was given.
    let billing = done["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["app"] == "billing")
        .unwrap();
    assert!(
        billing["xxl_token"].as_str().unwrap().starts_with("none: "),
        "{billing}"
    );
    assert_eq!(
        group["xxl_addresses"],
        json!(["http://10.0.0.5:9999/"]),
        "a group fed by hand keeps its addresses"
    );

    // Every field of every job.
    let source = xxl.name.clone();
    let jobs = imported(&api).await;
    assert_eq!(jobs.len(), 11);
    let id_of =
        |xxl_id: &str| -> Value { jobs[&format!("xxl-job/{source}#{xxl_id}")]["id"].clone() };
    for row in &rows {
        let job = &jobs[&format!("xxl-job/{source}#{}", row.id)];
        let app = if row.group == 1 {
            "xxl-job-executor-sample"
        } else {
            "billing"
        };
        let children: Vec<Value> = row
            .children
            .split(',')
            .filter(|c| !c.is_empty())
            .map(id_of)
            .collect();
        let (handler, glue_version) = match row.glue.0 {
            "BEAN" => (row.handler.to_owned(), 0),
            glue => (
                format!(
                    "script:{}",
                    rondo_core::model::GlueType::parse("glue_type", glue)
                        .unwrap()
                        .interpreter()
                        .unwrap()
                ),
                1,
            ),
        };
        let want = json!({
            "group": app, "description": row.desc,
            "schedule_type": row.schedule.0, "schedule_conf": row.schedule.1,
            "zone": "Asia/Shanghai", "misfire": row.misfire, "routing": row.routing,
            "block": row.block, "handler": handler, "params": row.params,
            "timeout_s": row.timeout, "retries": row.retries, "child_jobs": children,
            "alarm_email": row.alarm, "glue_type": row.glue.0, "glue_source": row.glue.1,
            "glue_remark": row.glue.2, "glue_version": glue_version, "enabled": row.running,
        });
        for (field, value) in want.as_object().unwrap() {
            assert_eq!(&job[field], value, "job {} field {field}: {job}", row.id);
        }
    }
    // The chain 1 → 2 → 3 by rondo ids.
    assert_eq!(
        jobs[&format!("xxl-job/{source}#1")]["child_jobs"],
        json!([id_of("2")])
    );

    // Again, with a script's remark edited alone in XXL-JOB (a remark
    // belongs to a script version, so it is no change): nothing changes.
    let edited = sqlx::query(
        "UPDATE xxl_job_info SET glue_remark = 'edited alone' WHERE glue_type <> 'BEAN' LIMIT 1",
    )
    .execute(&xxl.pool)
    .await
    .unwrap();
    assert_eq!(edited.rows_affected(), 1);
    let before: Vec<Value> = jobs.values().map(|j| j["updated_ms"].clone()).collect();
    let out = rondo(&url, &token, &import);
    assert!(out.status.success(), "{out:?}");
    let again = report(&out);
    assert_eq!(
        (
            again["summary"]["created"].as_u64(),
            again["summary"]["updated"].as_u64(),
            again["summary"]["unchanged"].as_u64()
        ),
        (Some(0), Some(0), Some(11)),
        "{again}"
    );
    let after: Vec<Value> = imported(&api)
        .await
        .values()
        .map(|j| j["updated_ms"].clone())
        .collect();
    assert_eq!(before, after, "no job was written again");

    cluster.stop().await;
    drop(xxl);
}
