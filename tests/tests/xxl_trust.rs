//! The XXL-JOB gateway keeps each group to itself: every attack a review
//! made through it (issue 47, attacks 1 to 5), written as the attack (the
//! attacker's requests, then what they got), against a real scheduler
//! node, the persistence worker, a `rondo-xxl-gateway` process and
//! stand-in XXL-JOB executors. The attacker holds one group's access
//! token (they run an executor of it) or is an operator of some groups.

use std::sync::{Arc, Mutex};

use redis::AsyncCommands;
use rondo_core::auth::Role;
use rondo_testkit::xxl::{Gateway, Standin, StandinSpec, serve_group};
use rondo_testkit::{Api, Cluster, PATIENCE, World, eventually};
use serde_json::{Value, json};
use sqlx::Row;

const BILLING_TOKEN: &str = "billing-team-token";
const REPORT_TOKEN: &str = "report-team-token";

/// A node, the persistence worker and one gateway, the world's config
/// tuned by `tune` first.
async fn cluster(tag: &str, tune: impl FnOnce(&mut World)) -> (Cluster, Api, Gateway) {
    let (c, api, mut gateways) = rondo_testkit::xxl::cluster(tag, 1, tune).await;
    let gw = gateways.pop().expect("a gateway");
    (c, api, gw)
}

/// Groups `billing` and `report`, each served with a token of its own,
/// taken by `gw`.
async fn two_teams(admin: &Api, gw: &Gateway) {
    for (app, token) in [("billing", BILLING_TOKEN), ("report", REPORT_TOKEN)] {
        serve_group(admin, app, token).await;
        gw.until_token_taken(token).await;
    }
}

/// A stand-in executor of `report`, with its token, live.
async fn report_standin(c: &Cluster, admin: &Api, gw: &Gateway) -> Standin {
    let mut spec = StandinSpec::new("2", "report", vec![gw.admin_url()]);
    spec.token = REPORT_TOKEN.into();
    let standin = Standin::spawn(spec, "standin-report", &c.log_dir);
    c.world.executor_queue("report", &standin.executor_id);
    admin
        .until_executors("report", &[&standin.executor_id])
        .await;
    standin
}

/// What an attacker's listener was sent: each call's path and token.
#[derive(Clone, Default)]
struct Heard(Arc<Mutex<Vec<(String, String)>>>);

impl Heard {
    fn calls(&self) -> Vec<(String, String)> {
        self.0.lock().unwrap().clone()
    }

    fn count(&self, path: &str) -> usize {
        self.calls().iter().filter(|(p, _)| p == path).count()
    }
}

/// A listener that answers every call as an XXL-JOB executor would
/// (`{"code":200}`) and records it; its address ends in `/`.
async fn listener() -> (String, Heard) {
    let heard = Heard::default();
    let record = heard.clone();
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap| {
            let record = record.clone();
            async move {
                let token = headers
                    .get("XXL-JOB-ACCESS-TOKEN")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                record
                    .0
                    .lock()
                    .unwrap()
                    .push((uri.path().to_owned(), token));
                "{\"code\":200}"
            }
        },
    );
    let socket = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let address = format!("http://{}/", socket.local_addr().expect("addr"));
    tokio::spawn(async move { axum::serve(socket, app).await });
    (address, heard)
}

/// Posts `body` to the gateway's `<context>/api/<call>` with `token`.
async fn gateway_call(gw: &Gateway, call: &str, token: &str, body: Value) -> Value {
    let r = reqwest::Client::new()
        .post(format!("{}/api/{call}", gw.admin_url()))
        .header("XXL-JOB-ACCESS-TOKEN", token)
        .json(&body)
        .send()
        .await
        .expect("the gateway answers");
    assert_eq!(r.status(), 200, "XXL-JOB answers 200 with its code inside");
    r.json().await.expect("json")
}

fn registration(app: &str, address: &str) -> Value {
    json!({ "registryGroup": "EXECUTOR", "registryKey": app, "registryValue": address })
}

/// What the API answers a `PUT` of `body` to `path` that it refuses:
/// the status and the field named.
async fn refused(api: &Api, path: &str, body: Value) -> (u16, String) {
    let (status, out) = api.put(path, body).await;
    let field = out["error"]["field"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    (status, field)
}

/// The message of a refusal (code 500).
fn refusal(answer: &Value) -> &str {
    assert_eq!(answer["code"], 500, "{answer}");
    answer["msg"].as_str().unwrap_or_default()
}

/// Writes group `app`'s stored JSON with `change` applied, straight into
/// Redis (as an earlier build or a tampered store would have it).
async fn tamper_group(c: &Cluster, app: &str, change: Value) {
    let client = redis::Client::open(c.world.redis_admin_url()).expect("redis url");
    let mut conn = client
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let key = c.config().names().groups();
    let json: String = conn.hget(&key, app).await.expect("the group");
    let mut group: Value = serde_json::from_str(&json).expect("group json");
    for (k, v) in change.as_object().expect("an object") {
        group[k] = v.clone();
    }
    let () = conn
        .hset(&key, app, group.to_string())
        .await
        .expect("write the group");
}

/// A sample of `series` in the gateway's metrics.
async fn sample(gw: &Gateway, series: &str) -> f64 {
    let text = gw.scrape().await;
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            l.strip_prefix(series)?
                .strip_prefix(' ')?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0.0)
}

/// Attack 1: an operator of a native group put a listener in its
/// `xxl_addresses` and received `/beat` with the gateway's one token, the
/// credential of every XXL-JOB executor of every group. Now a native group
/// has no address list (and one stored anyway is not called), only an
/// admin makes a group the gateway's, and a listener an operator lists in
/// a group of theirs that is the gateway's is sent that group's token only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_operator_cannot_get_another_groups_token_through_an_address_list() {
    let (c, admin, gw) = cluster("xxl_trust_list", |_| {}).await;
    two_teams(&admin, &gw).await;
    assert_eq!(
        admin
            .post("/api/v1/groups", json!({ "app": "web" }))
            .await
            .0,
        201
    );
    let mallory = c
        .world
        .user("mallory", Role::Operator, &["web", "report"], false)
        .await;
    let mallory = admin.clone().with_token(&mallory);
    let (on_web, web_heard) = listener().await;
    let (on_report, report_heard) = listener().await;

    // The attack, on the native group.
    assert_eq!(
        refused(
            &mallory,
            "/api/v1/groups/web",
            json!({ "xxl_addresses": [on_web] })
        )
        .await,
        (400, "xxl_addresses".to_owned())
    );
    assert_eq!(
        refused(
            &mallory,
            "/api/v1/groups/web",
            json!({ "xxl_gateway": true, "xxl_addresses": [on_web] })
        )
        .await,
        (403, "xxl_gateway".to_owned())
    );
    // A list stored on a native group anyway (an earlier build let it).
    tamper_group(&c, "web", json!({ "xxl_addresses": [on_web] })).await;

    // In a group of hers the gateway serves, her listener is an executor
    // of that group: it gets that group's token, nothing else.
    let (status, out) = mallory
        .put(
            "/api/v1/groups/report",
            json!({ "xxl_addresses": [on_report] }),
        )
        .await;
    assert_eq!(status, 200, "{out}");
    assert_eq!(out["xxl_access"]["token"], "***", "no answer shows a token");
    eventually(
        "five beats of the listed report address",
        PATIENCE,
        || async { (report_heard.count("/beat") >= 5).then_some(()) },
    )
    .await;
    assert!(
        report_heard.calls().iter().all(|(_, t)| t == REPORT_TOKEN),
        "{:?}",
        report_heard.calls()
    );
    assert!(
        web_heard.calls().is_empty(),
        "the native group's listener was called: {:?}",
        web_heard.calls()
    );
    drop(gw);
    c.stop().await;
}

/// Attack 2: with the one token, a fake executor registered under another
/// team's native group, joined its routing, and received two of four
/// triggers with that group's `${secret.…}` values in `executorParams`.
/// Now a token registers only under its own group, and a native group
/// takes no registration at all.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_registers_only_under_its_own_served_group() {
    let (mut c, admin, gw) = cluster("xxl_trust_register", |w| {
        w.config.executor.app = "web".into();
    })
    .await;
    two_teams(&admin, &gw).await;
    assert_eq!(
        admin
            .post("/api/v1/groups", json!({ "app": "web" }))
            .await
            .0,
        201
    );
    let recorder = rondo_testkit::recorder::Recorder::default();
    c.start_recording_executor("web-1", &recorder);
    admin.until_executors("web", &["web-1"]).await;
    let job = admin
        .create_job(json!({
            "group": "web", "handler": "record", "routing": "ROUND",
            "params": "key=${secret.API_KEY}", "secrets": { "API_KEY": "s3cr3t-of-web" },
        }))
        .await;

    // The attack: billing's executor registers a listener elsewhere.
    let (fake, heard) = listener().await;
    let a = gateway_call(&gw, "registry", BILLING_TOKEN, registration("web", &fake)).await;
    assert!(
        refusal(&a).contains("is not served by the XXL-JOB gateway"),
        "{a}"
    );
    let a = gateway_call(
        &gw,
        "registry",
        BILLING_TOKEN,
        registration("report", &fake),
    )
    .await;
    assert!(refusal(&a).contains("not group \"report\"'s"), "{a}");

    // What it would have got: none of web's triggers.
    for _ in 0..4 {
        admin.trigger_now(job).await;
    }
    eventually(
        "four runs of web's job on web's own executor",
        PATIENCE,
        || async {
            (recorder.runs().iter().filter(|r| r.job_id == job).count() >= 4).then_some(())
        },
    )
    .await;
    let (_, report) = admin.get("/api/v1/groups/report/executors").await;
    assert_eq!(report, json!([]), "no executor joined report");
    assert!(heard.calls().is_empty(), "{:?}", heard.calls());
    drop(gw);
    c.stop().await;
}

/// Attack 3: with the one token, a POST of log ids 1..299 to
/// `/api/callback` turned another group's pending run into a result and
/// fired its child job. Now log ids are 62 random bits, and a callback's
/// entry is taken only for a run of a group its token opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_callback_is_taken_only_for_a_run_of_its_own_group() {
    let (c, admin, gw) = cluster("xxl_trust_callback", |_| {}).await;
    two_teams(&admin, &gw).await;
    let standin = report_standin(&c, &admin, &gw).await;
    let child = admin
        .create_job(json!({ "group": "report", "handler": "demoJobHandler" }))
        .await;
    let parent = admin
        .create_job(json!({
            "group": "report", "handler": "sleepJobHandler", "params": "3000",
            "child_jobs": [child],
        }))
        .await;
    let tid = admin.trigger_now(parent).await;
    let started = eventually("report's run started", PATIENCE, || async {
        standin
            .starts()
            .into_iter()
            .find(|r| r.job_id == parent as i64)
    })
    .await;
    assert!(
        started.log_id > 1 << 32,
        "a log id no one counts to: {}",
        started.log_id
    );

    // The attack: billing's executor reports a failure for report's run,
    // among every small log id.
    let mut forged: Vec<Value> = (1..300)
        .map(|id| json!({ "logId": id, "logDateTim": 0, "handleCode": 500, "handleMsg": "forged" }))
        .collect();
    forged.push(json!({
        "logId": started.log_id, "logDateTim": started.log_date_time,
        "handleCode": 500, "handleMsg": "forged",
    }));
    let a = gateway_call(&gw, "callback", BILLING_TOKEN, Value::Array(forged)).await;
    assert_eq!(a, json!({ "code": 200 }), "acknowledged, as an unknown id");
    assert!(sample(&gw, "rondo_xxl_callbacks_total{outcome=\"forbidden\"}").await >= 1.0);

    // The run's result is the executor's own, and the child fires once.
    let row = eventually("the parent's result stored", PATIENCE, || async {
        let row = sqlx::query(
            "SELECT handle_code, handle_msg FROM job_log WHERE trigger_id = ? AND handle_code <> 0",
        )
        .bind(&tid)
        .fetch_optional(c.db())
        .await
        .ok()??;
        Some((
            row.get::<i32, _>("handle_code"),
            row.get::<Option<String>, _>("handle_msg"),
        ))
    })
    .await;
    assert_eq!(row.0, 200, "{row:?}");
    assert!(!row.1.unwrap_or_default().contains("forged"));
    eventually("the child ran", PATIENCE, || async {
        let n: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM job_log WHERE job_id = ?")
            .bind(child)
            .fetch_one(c.db())
            .await
            .ok()?;
        (n == 1).then_some(())
    })
    .await;
    drop(gw);
    c.stop().await;
}

/// Attack 4: with the one token, `registryRemove` removed any executor,
/// and registering `http://127-0-0-1:8771/` took the executor id of
/// `http://127.0.0.1:8771/`, so the real executor's registrations were
/// refused. Now a removal needs the executor's group's token, ids never
/// fold two addresses together, and an id held by an executor of the other
/// kind (a rondo executor, or the gateway's) is refused naming both.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_token_cannot_remove_or_take_the_id_of_another_executor() {
    let (mut c, admin, gw) = cluster("xxl_trust_ids", |_| {}).await;
    two_teams(&admin, &gw).await;
    let standin = report_standin(&c, &admin, &gw).await;

    // Removal with another group's token: refused, still routed to.
    let own = registration("report", &standin.address);
    let a = gateway_call(&gw, "registryRemove", BILLING_TOKEN, own.clone()).await;
    assert!(refusal(&a).contains("not group \"report\"'s"), "{a}");
    let (_, live) = admin.get("/api/v1/groups/report/executors").await;
    assert_eq!(live, json!([standin.executor_id]), "still live");

    // The squat, even with report's own token: another id, and the real
    // executor's registrations are still taken.
    let squat = standin.address.replace("127.0.0.1", "127-0-0-1");
    let squat_id = rondo_xxl_gateway::executor_id("report", &squat);
    assert_ne!(squat_id, standin.executor_id);
    let a = gateway_call(
        &gw,
        "registry",
        REPORT_TOKEN,
        registration("report", &squat),
    )
    .await;
    assert_eq!(a["code"], 200, "{a}");
    let a = gateway_call(&gw, "registry", REPORT_TOKEN, own.clone()).await;
    assert_eq!(a, json!({ "code": 200 }), "the real one is taken");
    let job = admin
        .create_job(json!({ "group": "report", "handler": "demoJobHandler" }))
        .await;
    admin.trigger_now(job).await;
    eventually("report's job ran on its executor", PATIENCE, || async {
        standin
            .starts()
            .iter()
            .any(|r| r.job_id == job as i64)
            .then_some(())
    })
    .await;

    // A rondo executor holding the id the gateway would give an address.
    serve_group(&admin, "mixed", "mixed-team-token").await;
    gw.until_token_taken("mixed-team-token").await;
    let (fake, heard) = listener().await;
    let taken = rondo_xxl_gateway::executor_id("mixed", &fake);
    c.world.config.executor.app = "mixed".into();
    let recorder = rondo_testkit::recorder::Recorder::default();
    c.start_recording_executor(&taken, &recorder);
    admin.until_executors("mixed", &[&taken]).await;
    let a = gateway_call(
        &gw,
        "registry",
        "mixed-team-token",
        registration("mixed", &fake),
    )
    .await;
    let msg = refusal(&a);
    assert!(
        msg.contains(&taken) && msg.contains("live rondo executor of group \"mixed\""),
        "{a}"
    );
    assert!(heard.calls().is_empty(), "{:?}", heard.calls());

    // And the other way: a rondo executor may not start with the id of
    // an XXL-JOB executor the gateway serves.
    let mut config = c.config().clone();
    config.executor.app = "report".into();
    config.executor.id = standin.executor_id.clone();
    let id = standin.executor_id.clone();
    c.world.as_redis_user(
        &mut config,
        rondo_testkit::redis_acl::Role::Executor {
            app: "report",
            id: &id,
        },
    );
    let executor = rondo_testkit::recorder::Recorder::default()
        .register(rondo_executor::Executor::builder(config))
        .build()
        .expect("the executor builds");
    let stop = tokio_util::sync::CancellationToken::new();
    let refused = tokio::time::timeout(PATIENCE, executor.run(stop.clone()))
        .await
        .expect("it refuses at once");
    stop.cancel();
    let e = refused.expect_err("an XXL-JOB executor's id is not a rondo executor's");
    assert!(e.to_string().contains("XXL-JOB executor"), "{e}");
    drop(gw);
    c.stop().await;
}

/// Attack 5: the gateway called any address, with its token, every 500 ms
/// from every instance: loopback, metadata services, internal hosts. Now
/// the destination rule (`xxl.address_allow`, empty here: nothing
/// internal) is judged on the resolved address before every call, and a
/// registration or an address list outside it is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_gateway_calls_no_address_outside_its_rule() {
    let (c, admin, gw) = cluster("xxl_trust_rule", |w| {
        w.config.xxl.address_allow = Vec::new();
    })
    .await;
    serve_group(&admin, "report", REPORT_TOKEN).await;
    gw.until_token_taken(REPORT_TOKEN).await;
    let (inside, heard) = listener().await;
    let by_name = inside.replace("127.0.0.1", "localhost");
    for address in [&inside, &by_name] {
        let a = gateway_call(
            &gw,
            "registry",
            REPORT_TOKEN,
            registration("report", address),
        )
        .await;
        assert!(refusal(&a).contains("xxl.address_allow"), "{address}: {a}");
    }
    assert_eq!(
        refused(
            &admin,
            "/api/v1/groups/report",
            json!({ "xxl_addresses": [inside] })
        )
        .await,
        (400, "xxl_addresses[0]".to_owned())
    );
    // Listed anyway (before the rule, or by hand in Redis): never called.
    tamper_group(&c, "report", json!({ "xxl_addresses": [inside] })).await;
    eventually("the gateway refused to call it", PATIENCE, || async {
        (sample(&gw, "rondo_xxl_calls_refused_total").await >= 3.0).then_some(())
    })
    .await;
    assert!(heard.calls().is_empty(), "{:?}", heard.calls());
    drop(gw);
    c.stop().await;
}
