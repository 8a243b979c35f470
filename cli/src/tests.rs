//! The CLI against the API's spec: every field and every call. (Over 500
//! lines: most of it is the one list of every command line the coverage
//! test parses.)

use super::*;

/// Every field of the API's job (the shared model) has a flag: a field
/// added to `JobSpec` fails this test until the CLI can set it.
#[test]
fn job_flags_cover_every_field_of_the_shared_job_model() {
    let all = rondo_model::JobSpec {
        group: Some(String::new()),
        description: Some(String::new()),
        schedule_type: Some(String::new()),
        schedule_conf: Some(String::new()),
        zone: Some(String::new()),
        misfire: Some(String::new()),
        misfire_threshold_ms: Some(0),
        routing: Some(String::new()),
        block: Some(String::new()),
        handler: Some(String::new()),
        params: Some(String::new()),
        timeout_s: Some(0),
        retries: Some(0),
        child_jobs: Some(Vec::new()),
        retry_backoff_s: Some(0),
        alarm_email: Some(String::new()),
        alarm_webhook: Some(String::new()),
        alarm_channels: Some(Vec::new()),
        glue_type: Some(String::new()),
        glue_source: Some(String::new()),
        glue_remark: Some(String::new()),
        glue_saved_ms: Some(0),
        import_ref: Some(String::new()),
        enabled: Some(false),
        secrets: Some(Default::default()),
        owner: Some(String::new()),
    };
    let model: Vec<String> = match serde_json::to_value(all).unwrap() {
        Value::Object(m) => m.keys().cloned().collect(),
        other => panic!("a job spec is an object: {other}"),
    };
    let cli = Cli::try_parse_from([
        "rondo",
        "job",
        "create",
        "--group",
        "g",
        "--handler",
        "h",
        "--cron",
        "0 * * * * ?",
        "--params",
        "p",
        "--description",
        "d",
        "--routing",
        "ROUND",
        "--block",
        "DISCARD_LATER",
        "--zone",
        "Asia/Shanghai",
        "--misfire",
        "FIRE_ONCE_NOW",
        "--misfire-threshold-ms",
        "60000",
        "--glue-type",
        "GLUE_PYTHON",
        "--glue-source",
        "print(1)",
        "--glue-remark",
        "r",
        "--glue-saved-ms",
        "1",
        "--import-ref",
        "xxl-job/db#1",
        "--timeout",
        "5",
        "--retries",
        "2",
        "--retry-backoff",
        "3",
        "--child-job",
        "7",
        "--child-job",
        "8",
        "--alarm-email",
        "a@b.c",
        "--alarm-channel",
        "ding",
        "--alarm-webhook",
        "https://h/x",
        "--owner",
        "o",
        "--secret",
        "TOKEN=t",
        "--stopped",
    ])
    .expect("the flags parse");
    let Command::Job(JobCmd::Create(args)) = cli.command else {
        panic!("job create");
    };
    let body = args.to_json();
    let mut missing: Vec<&String> = model
        .iter()
        .filter(|k| body.get(k.as_str()).is_none())
        .collect();
    missing.sort();
    assert!(missing.is_empty(), "no CLI flag sets {missing:?}");
    assert_eq!(body["child_jobs"], json!([7, 8]));
    assert_eq!(body["retry_backoff_s"], 3);
    let cleared = Cli::try_parse_from(["rondo", "job", "update", "1", "--no-child-jobs"]).unwrap();
    let Command::Job(JobCmd::Update { fields, .. }) = cleared.command else {
        panic!("job update");
    };
    assert_eq!(fields.to_json(), json!({ "child_jobs": [] }));
}

/// One invocation of every command with every flag, and the calls of
/// the conversations (`login`, `logout`, `password`).
fn every_call() -> Vec<(String, String, Option<Value>)> {
    let argvs: &[&[&str]] = &[
        &["cluster"],
        &["cluster", "reset-stats"],
        &["group", "create", "g", "--title", "T"],
        &["group", "list"],
        &["group", "get", "g"],
        &["group", "update", "g", "--title", "T"],
        &[
            "group",
            "update",
            "g",
            "--xxl-address",
            "http://10.0.0.5:9999/",
        ],
        &["group", "update", "g", "--xxl-gateway"],
        &["group", "xxl-token", "g", "--set", "--keep-previous"],
        &["group", "xxl-token", "g", "--end-rotation"],
        &["group", "delete", "g"],
        &["group", "executors", "g"],
        &["channel", "list"],
        &["channel", "get", "ding"],
        &[
            "channel",
            "create",
            "ding",
            "--kind",
            "dingtalk",
            "--url",
            "https://oapi.dingtalk.com/robot/send?access_token=t",
            "--secret",
            "--template",
            "{job} failed",
        ],
        &["channel", "update", "ding", "--no-secret"],
        &[
            "channel",
            "update",
            "ding",
            "--kind",
            "wecom",
            "--url",
            "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k",
            "--template",
            "",
        ],
        &["channel", "delete", "ding"],
        &[
            "job",
            "create",
            "--group",
            "g",
            "--handler",
            "h",
            "--cron",
            "0 * * * * ?",
            "--params",
            "p",
            "--description",
            "d",
            "--routing",
            "ROUND",
            "--block",
            "DISCARD_LATER",
            "--misfire",
            "FIRE_ONCE_NOW",
            "--zone",
            "Europe/Berlin",
            "--misfire-threshold-ms",
            "1000",
            "--glue-type",
            "GLUE_SHELL",
            "--glue-source",
            "echo hi",
            "--glue-remark",
            "first",
            "--glue-saved-ms",
            "1700000000000",
            "--import-ref",
            "x#1",
            "--timeout",
            "5",
            "--retries",
            "2",
            "--retry-backoff",
            "3",
            "--child-job",
            "7",
            "--alarm-email",
            "a@b.c",
            "--alarm-channel",
            "ding",
            "--alarm-webhook",
            "https://h/x",
            "--owner",
            "o",
            "--secret",
            "TOKEN=t",
            "--stopped",
        ],
        &[
            "job",
            "list",
            "--group",
            "g",
            "--search",
            "nightly report",
            "--enabled",
            "true",
            "--schedule-type",
            "CRON",
            "--owner",
            "li.wei",
            "--sort",
            "-updated",
            "--limit",
            "5",
            "--offset",
            "1",
        ],
        &["job", "get", "1"],
        &["job", "kill", "1"],
        &["job", "restore", "1"],
        &["job", "history", "1", "--limit", "5"],
        &["clean-logs", "--job", "1", "--preset", "5"],
        &["clean-logs", "--group", "g", "--older-than-days", "30"],
        &["clean-logs", "--keep-last", "10"],
        &["clean-logs", "--all"],
        &[
            "job",
            "update",
            "1",
            "--group",
            "g",
            "--handler",
            "h",
            "--fix-rate",
            "5",
            "--params",
            "p",
            "--description",
            "d",
            "--routing",
            "ROUND",
            "--block",
            "DISCARD_LATER",
            "--misfire",
            "FIRE_ONCE_NOW",
            "--zone",
            "Europe/Berlin",
            "--misfire-threshold-ms",
            "1000",
            "--glue-type",
            "GLUE_SHELL",
            "--glue-source",
            "echo hi",
            "--glue-remark",
            "first",
            "--glue-saved-ms",
            "1700000000000",
            "--import-ref",
            "x#1",
            "--timeout",
            "5",
            "--retries",
            "2",
            "--retry-backoff",
            "3",
            "--no-child-jobs",
            "--alarm-email",
            "",
            "--no-alarm-channels",
            "--alarm-webhook",
            "",
            "--owner",
            "",
            "--secret",
            "TOKEN=***",
            "--stopped",
        ],
        &["job", "delete", "1"],
        &["job", "start", "1", "--from-ms", "5"],
        &["job", "stop", "1"],
        &["job", "trigger", "1", "--params", "p"],
        &[
            "job",
            "trigger",
            "1",
            "--executor",
            "g-1",
            "--executor",
            "g-2",
        ],
        &["job", "logs", "1", "--limit", "3"],
        &["job", "next", "1", "--count", "3"],
        &["job", "misfires", "1"],
        &["job", "scripts", "1"],
        &["job", "restore-script", "1", "2", "--remark", "back"],
        &[
            "schedule",
            "preview",
            "--cron",
            "0 0 2 * * ?",
            "--zone",
            "Asia/Shanghai",
            "--count",
            "3",
        ],
        &["log", "1-2-3"],
        &["log", "1-2-3", "--after-seq", "4"],
        &["executors"],
        &["executors", "--group", "g"],
        &[
            "logs",
            "--group",
            "g",
            "--job",
            "7",
            "--status",
            "failure",
            "--from-ms",
            "1",
            "--until-ms",
            "2",
            "--before",
            "2:7-1-0",
            "--limit",
            "10",
        ],
        &["kill", "1-2-3"],
        &["report", "--days", "3"],
        &["report", "--from", "2026-11-01", "--to", "2026-11-07"],
        &["retention", "--days", "30"],
        &["retention", "show"],
        &["account", "language", "zh-CN"],
        &["account", "language", "--clear"],
        &["whoami"],
        &["user", "list"],
        &["user", "get", "ann"],
        &[
            "user",
            "create",
            "ann",
            "--role",
            "operator",
            "--group",
            "g",
            "--disabled",
        ],
        &[
            "user",
            "update",
            "ann",
            "--role",
            "viewer",
            "--group",
            "g",
            "--enable",
            "--reset-password",
        ],
        &[
            "user",
            "create",
            "bob",
            "--xxl-password-hash",
            "e10adc3949ba59abbe56e057f20f883e",
        ],
        &["user", "delete", "ann"],
        &["token", "list", "--user", "ann"],
        &["token", "create", "ci", "--days", "7", "--read-only"],
        &["token", "revoke", "3"],
        &[
            "audit",
            "--user",
            "ann",
            "--action",
            "job.create",
            "--target",
            "job:1",
            "--group",
            "g",
            "--since-ms",
            "1",
            "--until-ms",
            "2",
            "--limit",
            "5",
        ],
    ];
    let secret = |_: &str, _: &str| Ok("a password of the test".to_owned());
    let mut calls: Vec<(String, String, Option<Value>)> = argvs
        .iter()
        .map(|argv| {
            let cli = Cli::try_parse_from(std::iter::once("rondo").chain(argv.iter().copied()))
                .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
            let (method, path, body) = request(&cli.command, &secret).expect("one call");
            (method.to_string(), path, body)
        })
        .collect();
    use credentials::*;
    calls.extend([
        ("POST".into(), LOGIN.into(), Some(login_body("ann", "pw"))),
        ("POST".into(), TOKENS.into(), Some(token_body("cli", 90))),
        ("POST".into(), LOGOUT.into(), None),
        ("DELETE".into(), format!("{TOKENS}/3"), None),
        ("PUT".into(), PASSWORD.into(), Some(password_body("a", "b"))),
    ]);
    calls
}

/// Whether `path` (without its query) fills the spec's `template`.
fn fills(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(t, p)| (t.starts_with('{') && !p.is_empty()) || t == p)
}

/// The properties of a request body's schema, following `$ref` and a
/// nullable `oneOf`.
fn body_fields(spec: &Value, schema: &Value) -> Vec<String> {
    if let Some(to) = schema["$ref"].as_str() {
        let name = to.rsplit('/').next().expect("a schema name");
        return body_fields(spec, &spec["components"]["schemas"][name]);
    }
    if let Some(any) = schema["oneOf"].as_array() {
        return any.iter().flat_map(|s| body_fields(spec, s)).collect();
    }
    schema["properties"]
        .as_object()
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The CLI reaches every operation of the admin API (`/api/v1`; the
/// probes and the scrape are for load balancers and Prometheus), sets
/// every field of each request body (a path parameter names the field
/// it fills) and every query parameter. Read from the committed spec,
/// which the scheduler's own test holds to the handlers.
#[test]
fn the_cli_covers_every_route_field_and_query_parameter_of_the_spec() {
    let spec: Value =
        serde_json::from_str(include_str!("../../docs/openapi.json")).expect("the spec");
    let calls = every_call();
    let mut gaps = Vec::new();
    for (template, ops) in spec["paths"].as_object().expect("paths") {
        if !template.starts_with("/api/v1/") {
            continue;
        }
        for (method, op) in ops.as_object().expect("operations") {
            let method = method.to_uppercase();
            let mine: Vec<&(String, String, Option<Value>)> = calls
                .iter()
                .filter(|(m, p, _)| {
                    *m == method && fills(template, p.split('?').next().unwrap_or(p))
                })
                .collect();
            if mine.is_empty() {
                gaps.push(format!("{method} {template}: no command"));
                continue;
            }
            let params = op["parameters"].as_array().cloned().unwrap_or_default();
            let in_path: Vec<&str> = params
                .iter()
                .filter(|p| p["in"] == "path")
                .filter_map(|p| p["name"].as_str())
                .collect();
            for q in params.iter().filter(|p| p["in"] == "query") {
                let name = q["name"].as_str().expect("a name");
                let set = mine.iter().any(|(_, p, _)| {
                    p.split_once('?').is_some_and(|(_, query)| {
                        query
                            .split('&')
                            .any(|kv| kv.split('=').next() == Some(name))
                    })
                });
                if !set {
                    gaps.push(format!("{method} {template}: no flag sets query `{name}`"));
                }
            }
            let schema = &op["requestBody"]["content"]["application/json"]["schema"];
            for field in body_fields(&spec, schema) {
                let set = in_path.contains(&field.as_str())
                    || mine
                        .iter()
                        .any(|(_, _, b)| b.as_ref().is_some_and(|b| b.get(&field).is_some()));
                if !set {
                    gaps.push(format!("{method} {template}: no flag sets `{field}`"));
                }
            }
        }
    }
    assert!(
        gaps.is_empty(),
        "the CLI has fallen behind the API:\n{}",
        gaps.join("\n")
    );
    // The check sees what it should: a known operation and field.
    assert!(fills("/api/v1/jobs/{id}/trigger", "/api/v1/jobs/7/trigger"));
    assert!(!fills("/api/v1/jobs/{id}", "/api/v1/jobs/7/trigger"));
}

/// `account language` sends a language of the list or null, and
/// `retention show` only reads.
#[test]
fn the_language_is_one_of_the_list_or_cleared_and_retention_show_only_reads() {
    let call = |argv: &[&str]| {
        let cli = Cli::try_parse_from(std::iter::once("rondo").chain(argv.iter().copied()))
            .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
        let secret = |_: &str, _: &str| Ok(String::new());
        let (method, path, body) = request(&cli.command, &secret).expect("one call");
        (method.to_string(), path, body)
    };
    let put = |body: Value| -> (String, String, Option<Value>) {
        ("PUT".into(), "/api/v1/auth/language".into(), Some(body))
    };
    for tag in rondo_model::language::Language::NAMES {
        assert_eq!(
            call(&["account", "language", tag]),
            put(json!({ "language": tag }))
        );
    }
    assert_eq!(
        call(&["account", "language", "--clear"]),
        put(json!({ "language": null }))
    );
    for refused in [
        &["account", "language"][..],
        &["account", "language", "fr"],
        &["account", "language", "en", "--clear"],
        &["retention", "--days", "30", "show"],
    ] {
        let parsed = Cli::try_parse_from(std::iter::once("rondo").chain(refused.iter().copied()));
        assert!(parsed.is_err(), "{refused:?} parsed");
    }
    let path = "/api/v1/maintenance/retention".to_owned();
    assert_eq!(
        call(&["retention", "show"]),
        ("GET".into(), path.clone(), None)
    );
    assert_eq!(call(&["retention"]), ("POST".into(), path, None));
}
