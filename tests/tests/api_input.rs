//! Bad input to the admin API gets a 4xx whose JSON body names the field,
//! and changes nothing: no job stored, no id consumed. The API's router is
//! called in-process, without starting a node.

use reqwest::Method;
use rondo_testkit::{Api, World};
use serde_json::{Value, json};

fn good_job() -> Value {
    json!({
        "group": "billing",
        "handler": "demo",
        "schedule_type": "CRON",
        "schedule_conf": "0 0 2 L * ?",
    })
}

fn with(field: &str, value: Value) -> Value {
    let mut job = good_job();
    job[field] = value;
    job
}

async fn expect_field(
    api: &Api,
    what: &str,
    method: Method,
    path: &str,
    body: Value,
    status: u16,
    field: &str,
) {
    let (got, answer) = api.call(method, path, Some(body)).await;
    assert_eq!(got, status, "{what}: {answer}");
    assert_eq!(answer["error"]["field"], field, "{what}: {answer}");
    assert!(
        answer["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{what}: {answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_naming_the_field_and_changes_nothing() {
    let world = World::new("api").await;
    let api = world
        .in_process_api("api-test")
        .await
        .with_token(&world.admin.token);

    let (status, _) = api
        .post("/api/v1/groups", json!({ "app": "billing" }))
        .await;
    assert_eq!(status, 201);

    let cases: Vec<(&str, Value, &str)> = vec![
        (
            "malformed cron",
            with("schedule_conf", json!("0 0 25 * * ?")),
            "schedule_conf",
        ),
        (
            "five-field crontab",
            with("schedule_conf", json!("*/5 * * * *")),
            "schedule_conf",
        ),
        (
            "cron that never fires",
            with("schedule_conf", json!("0 0 0 30 2 ?")),
            "schedule_conf",
        ),
        (
            "malformed fixed rate",
            json!({ "group": "billing", "handler": "demo", "schedule_type": "FIX_RATE", "schedule_conf": "often" }),
            "schedule_conf",
        ),
        (
            "zero fixed rate",
            json!({ "group": "billing", "handler": "demo", "schedule_type": "FIX_RATE", "schedule_conf": "0" }),
            "schedule_conf",
        ),
        (
            "unknown schedule type",
            with("schedule_type", json!("HOURLY")),
            "schedule_type",
        ),
        ("unknown group", with("group", json!("nobody")), "group"),
        ("missing group", json!({ "handler": "demo" }), "group"),
        (
            "unknown routing strategy",
            with("routing", json!("NEAREST")),
            "routing",
        ),
        (
            "unknown block strategy",
            with("block", json!("QUEUE")),
            "block",
        ),
        (
            "unknown misfire strategy",
            with("misfire", json!("LATER")),
            "misfire",
        ),
        ("empty handler", with("handler", json!("")), "handler"),
        ("blank handler", with("handler", json!("   ")), "handler"),
        (
            "oversized params",
            with("params", json!("x".repeat(16 * 1024 + 1))),
            "params",
        ),
        ("wrong type", with("timeout_s", json!("ten")), "timeout_s"),
        ("negative retries", with("retries", json!(-1)), "retries"),
        ("unknown field", with("cron", json!("* * * * * ?")), "cron"),
    ];
    for (what, body, field) in cases {
        expect_field(&api, what, Method::POST, "/api/v1/jobs", body, 400, field).await;
    }

    let (status, answer) = api
        .call_raw(Method::POST, "/api/v1/jobs", "{\"group\": ")
        .await;
    assert_eq!(status, 400, "truncated JSON: {answer}");
    assert_eq!(answer["error"]["kind"], "invalid_input");

    expect_field(
        &api,
        "bad group name",
        Method::POST,
        "/api/v1/groups",
        json!({ "app": "a b" }),
        400,
        "app",
    )
    .await;
    expect_field(
        &api,
        "duplicate group",
        Method::POST,
        "/api/v1/groups",
        json!({ "app": "billing" }),
        409,
        "app",
    )
    .await;
    let (status, answer) = api.get("/api/v1/jobs/abc").await;
    assert_eq!(
        (status, answer["error"]["field"].clone()),
        (400, json!("id")),
        "{answer}"
    );
    let (status, answer) = api.get("/api/v1/jobs/999").await;
    assert_eq!(status, 404, "{answer}");
    let (status, answer) = api.get("/api/v1/jobs?limit=many").await;
    assert_eq!(
        (status, answer["error"]["field"].clone()),
        (400, json!("limit")),
        "{answer}"
    );

    // Nothing was stored and no id was consumed by the refused requests.
    let (_, list) = api.get("/api/v1/jobs").await;
    assert_eq!(list["total"], 0, "{list}");
    let (status, created) = api.post("/api/v1/jobs", good_job()).await;
    assert_eq!(status, 201, "{created}");
    assert_eq!(created["id"], 1, "the first stored job takes the first id");
    assert!(created["next_fire_ms"].as_i64().is_some());

    // A bad update is refused and leaves the job as it was.
    expect_field(
        &api,
        "bad update",
        Method::PUT,
        "/api/v1/jobs/1",
        json!({ "schedule_conf": "nope" }),
        400,
        "schedule_conf",
    )
    .await;
    let (_, stored) = api.get("/api/v1/jobs/1").await;
    assert_eq!(stored["schedule_conf"], "0 0 2 L * ?");
    // Child jobs must exist and must not lead back to the job.
    let child_cases: Vec<(&str, Value)> = vec![
        ("a missing child job", with("child_jobs", json!([999]))),
        ("a child named twice", with("child_jobs", json!([1, 1]))),
        (
            "too many child jobs",
            with("child_jobs", json!((1..=65).collect::<Vec<u64>>())),
        ),
    ];
    for (what, body) in child_cases {
        expect_field(
            &api,
            what,
            Method::POST,
            "/api/v1/jobs",
            body,
            400,
            "child_jobs",
        )
        .await;
    }
    let (status, second) = api
        .post("/api/v1/jobs", with("child_jobs", json!([1])))
        .await;
    assert_eq!((status, second["id"].clone()), (201, json!(2)), "{second}");
    let (status, third) = api
        .post("/api/v1/jobs", with("child_jobs", json!([2])))
        .await;
    assert_eq!((status, third["id"].clone()), (201, json!(3)), "{third}");
    for (what, body) in [
        ("its own child", json!({ "child_jobs": [1] })),
        ("a cycle 1 → 3 → 2 → 1", json!({ "child_jobs": [3] })),
    ] {
        expect_field(
            &api,
            what,
            Method::PUT,
            "/api/v1/jobs/1",
            body,
            400,
            "child_jobs",
        )
        .await;
    }
    let (_, answer) = api
        .call(
            Method::PUT,
            "/api/v1/jobs/1",
            Some(json!({ "child_jobs": [3] })),
        )
        .await;
    assert_eq!(
        answer["error"]["message"], "would make a cycle of child jobs: 1 → 3 → 2 → 1",
        "the cycle is named"
    );
    let (_, stored) = api.get("/api/v1/jobs/1").await;
    assert_eq!(
        stored["child_jobs"],
        json!([]),
        "the refused update changed nothing"
    );

    expect_field(
        &api,
        "oversized trigger params",
        Method::POST,
        "/api/v1/jobs/1/trigger",
        json!({ "params": "x".repeat(16 * 1024 + 1) }),
        400,
        "params",
    )
    .await;
}

/// `glue_saved_ms` dates a version of a script written before (an
/// import's): an admin's only, not in the future, only with a changed
/// script, and later than the version it follows (xxl-job-core executors
/// cache a script by its job and this time).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_versions_date_is_an_admins_and_only_moves_forward() {
    let world = World::new("glue_dated").await;
    let base = world.in_process_api("api-test").await;
    let api = base.clone().with_token(&world.admin.token);
    let (status, _) = api
        .post("/api/v1/groups", json!({ "app": "billing" }))
        .await;
    assert_eq!(status, 201);
    let operator = world
        .user(
            "olga",
            rondo_core::auth::Role::Operator,
            &["billing"],
            false,
        )
        .await;
    let ops = base.with_token(&operator);
    let script = |source: &str, saved: i64| {
        json!({ "group": "billing", "glue_type": "GLUE_SHELL", "glue_source": source,
                "glue_saved_ms": saved, "enabled": false })
    };
    let (status, answer) = ops.post("/api/v1/jobs", script("echo 1", 1_000)).await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (403, &json!("glue_saved_ms")),
        "{answer}"
    );
    let future = rondo_core::clock::now_ms() + 3_600_000;
    expect_field(
        &api,
        "a date to come",
        Method::POST,
        "/api/v1/jobs",
        script("echo 1", future),
        400,
        "glue_saved_ms",
    )
    .await;
    let (status, job) = api.post("/api/v1/jobs", script("echo 1", 1_000)).await;
    assert_eq!(
        (status, &job["glue_updated_ms"]),
        (201, &json!(1_000)),
        "{job}"
    );
    let path = format!("/api/v1/jobs/{}", job["id"]);
    for (what, body) in [
        (
            "the same script",
            json!({ "glue_source": "echo 1", "glue_saved_ms": 2_000 }),
        ),
        (
            "no later than the version before",
            json!({ "glue_source": "echo 2", "glue_saved_ms": 1_000 }),
        ),
    ] {
        expect_field(&api, what, Method::PUT, &path, body, 400, "glue_saved_ms").await;
    }
    let (status, job) = api
        .put(
            &path,
            json!({ "glue_source": "echo 2", "glue_saved_ms": 2_000 }),
        )
        .await;
    assert_eq!(
        (status, &job["glue_version"], &job["glue_updated_ms"]),
        (200, &json!(2), &json!(2_000)),
        "{job}"
    );
}

/// Issue 47: `alarm_email` took any recipient. An operator saving a job
/// whose alarm mails an address outside `alarm.email_allow` is refused,
/// naming the field and the domain, on create and on change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_alarm_email_outside_the_allowed_domains_is_refused() {
    let mut world = World::new("api_mail").await;
    world.config.alarm.email_allow = vec!["example.com".into()];
    let admin = world
        .in_process_api("api-mail")
        .await
        .with_token(&world.admin.token);
    let (status, _) = admin
        .post("/api/v1/groups", json!({ "app": "billing" }))
        .await;
    assert_eq!(status, 201);
    let token = world
        .user(
            "olga",
            rondo_core::auth::Role::Operator,
            &["billing"],
            false,
        )
        .await;
    let operator = admin.clone().with_token(&token);

    let leak = with("alarm_email", json!("ops@example.com, leak@evil.io"));
    let (status, answer) = operator.post("/api/v1/jobs", leak).await;
    assert_eq!(status, 400, "{answer}");
    assert_eq!(answer["error"]["field"], "alarm_email", "{answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("evil.io"), "{answer}");

    let (status, job) = operator
        .post(
            "/api/v1/jobs",
            with("alarm_email", json!("ops@example.com")),
        )
        .await;
    assert_eq!(status, 201, "{job}");
    let path = format!("/api/v1/jobs/{}", job["id"]);
    let (status, answer) = operator
        .put(&path, json!({ "alarm_email": "ops@example.com.evil.io" }))
        .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("alarm_email")),
        "{answer}"
    );
    let (_, stored) = operator.get(&path).await;
    assert_eq!(stored["alarm_email"], "ops@example.com", "nothing changed");
}
