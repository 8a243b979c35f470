//! Sign-in, roles, tokens, sessions, throttling and the audit log, against
//! the real services.
//!
//! The role test reads the table (in `docs/security.md`) of route family × role and
//! checks every cell, so the table and the API cannot drift apart.

use std::collections::{BTreeSet, HashMap};
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use reqwest::Method;
use rondo_core::auth::Role;
use rondo_core::event::TriggerRecord;
use rondo_core::{Event, TriggerType, clock, trigger_id};
use rondo_history::History;
use rondo_history::testing::users::TEST_PASSWORD;
use rondo_testkit::browser::Browser;
use rondo_testkit::{Api, Cluster, PATIENCE, World, eventually};
use serde_json::{Value, json};

const SECURITY: &str = include_str!("../../docs/security.md");

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cell {
    /// Open without credentials.
    Public,
    /// Allowed on any group.
    Yes,
    /// Allowed on the groups granted, 403 on the others.
    Granted,
    /// 403 on every group.
    No,
}

/// The rows of `docs/security.md` between the `roles` markers: family → [viewer,
/// operator, admin].
fn role_table() -> Vec<(String, [Cell; 3])> {
    let cell = |text: &str| match text.trim() {
        "public" => Cell::Public,
        "yes" => Cell::Yes,
        "granted" => Cell::Granted,
        "no" => Cell::No,
        other => panic!("unknown cell {other:?} in the role table of docs/security.md"),
    };
    rondo_testkit::doc_block(SECURITY, "roles")
        .lines()
        .filter(|l| l.starts_with('|'))
        .skip(2) // the header and its separator
        .map(|line| {
            let cols: Vec<&str> = line.trim_matches('|').split(" | ").collect();
            assert_eq!(cols.len(), 5, "a role table row has 5 columns: {line}");
            (
                cols[0].trim().to_owned(),
                [cell(cols[2]), cell(cols[3]), cell(cols[4])],
            )
        })
        .collect()
}

/// Which of the two groups a probe acts on.
#[derive(Debug, Clone, Copy)]
enum Side {
    Granted,
    Other,
}

/// Two groups, `ga` (granted to the viewer and the operator) and `gb`,
/// each with a stopped job, on the API in-process.
struct Fixture {
    admin: Api,
    db: sqlx::MySqlPool,
    /// The job of `ga` and of `gb`.
    jobs: [u64; 2],
    /// A stored trigger log of each job.
    logs: [String; 2],
}

impl Fixture {
    fn group(&self, side: Side) -> &'static str {
        match side {
            Side::Granted => "ga",
            Side::Other => "gb",
        }
    }

    fn job(&self, side: Side) -> u64 {
        self.jobs[side as usize]
    }

    /// A job of the side's group made by the admin (to delete).
    async fn spare_job(&self, side: Side) -> u64 {
        let spec = json!({ "group": self.group(side), "handler": "demo", "enabled": false });
        self.admin.create_job(spec).await
    }

    /// The statuses a family's representative requests get from `api`
    /// (acting as `user`; `read_only`: through a read-only token, which
    /// may not change a password or a language, checked elsewhere).
    async fn probe(
        &self,
        family: &str,
        api: &Api,
        side: Side,
        user: &str,
        read_only: bool,
    ) -> Vec<u16> {
        let (g, j) = (self.group(side), self.job(side));
        let mut out = Vec::new();
        let mut send = async |method: Method, path: String, body: Option<Value>| {
            let (status, answer) = api.call(method, &path, body).await;
            assert!(status < 500, "{path}: {status} {answer}");
            out.push(status);
        };
        match family {
            "health" => send(Method::GET, "/healthz".into(), None).await,
            "sign-in" => {
                let login = json!({ "username": user, "password": TEST_PASSWORD });
                send(Method::POST, "/api/v1/auth/login".into(), Some(login)).await;
            }
            "own account" => {
                send(Method::GET, "/api/v1/auth/me".into(), None).await;
                // A token has no session to end: 204 all the same.
                send(Method::POST, "/api/v1/auth/logout".into(), None).await;
                if !read_only {
                    // A wrong current password: allowed answers 400.
                    let change = json!({ "current_password": "not it at all", "new_password": "whatever is long" });
                    send(Method::PUT, "/api/v1/auth/password".into(), Some(change)).await;
                    let language = json!({ "language": "en" });
                    send(Method::PUT, "/api/v1/auth/language".into(), Some(language)).await;
                }
            }
            "own tokens" => {
                send(Method::GET, "/api/v1/tokens".into(), None).await;
                let spec = json!({ "name": "probe", "read_only": true });
                let (status, made) = api.post("/api/v1/tokens", spec).await;
                out.push(status);
                if let Some(id) = made["id"].as_u64() {
                    let (status, _) = api
                        .call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None)
                        .await;
                    out.push(status);
                }
            }
            "cluster and report" => {
                send(Method::GET, "/api/v1/cluster".into(), None).await;
                send(Method::GET, "/api/v1/reports?days=1".into(), None).await;
                send(Method::GET, "/metrics".into(), None).await;
            }
            "group read" => {
                send(Method::GET, format!("/api/v1/groups/{g}"), None).await;
                send(Method::GET, format!("/api/v1/groups/{g}/executors"), None).await;
            }
            "group edit" => {
                let body = json!({ "title": format!("edited by {user}") });
                send(Method::PUT, format!("/api/v1/groups/{g}"), Some(body)).await;
            }
            "gateway access token" => {
                // A native group: allowed answers 400 (not the gateway's).
                let path = format!("/api/v1/groups/{g}/xxl-token");
                send(Method::POST, path.clone(), Some(json!({}))).await;
                send(Method::DELETE, format!("{path}/previous"), None).await;
            }
            "group create and delete" => {
                let app = format!("new-{user}-{}", rand_suffix());
                let body = json!({ "app": app });
                send(Method::POST, "/api/v1/groups".into(), Some(body)).await;
                // Its group has a job: allowed answers 409, and nothing goes.
                send(Method::DELETE, format!("/api/v1/groups/{g}"), None).await;
            }
            "job read" => {
                send(Method::GET, format!("/api/v1/jobs/{j}"), None).await;
                send(Method::GET, format!("/api/v1/jobs/{j}/history"), None).await;
                send(Method::GET, format!("/api/v1/jobs?group={g}"), None).await;
            }
            "job write" => {
                let new = json!({ "group": g, "handler": "demo", "enabled": false });
                send(Method::POST, "/api/v1/jobs".into(), Some(new)).await;
                let edit = json!({ "description": format!("edited by {user}") });
                send(Method::PUT, format!("/api/v1/jobs/{j}"), Some(edit)).await;
                send(Method::POST, format!("/api/v1/jobs/{j}/stop"), None).await;
                send(Method::POST, format!("/api/v1/jobs/{j}/start"), None).await;
                send(Method::POST, format!("/api/v1/jobs/{j}/stop"), None).await;
                let spare = self.spare_job(side).await;
                send(Method::DELETE, format!("/api/v1/jobs/{spare}"), None).await;
            }
            "job trigger" => {
                send(Method::POST, format!("/api/v1/jobs/{j}/trigger"), None).await;
            }
            "log read" => {
                send(Method::GET, format!("/api/v1/jobs/{j}/logs"), None).await;
                let log = &self.logs[side as usize];
                send(Method::GET, format!("/api/v1/logs/{log}"), None).await;
            }
            "kill" => {
                // Not running: allowed answers 409, refused 403.
                let t = trigger_id::adhoc(j, clock::now_ms(), TriggerType::Manual, 0);
                send(Method::POST, format!("/api/v1/logs/{t}/kill"), None).await;
                // Nothing runs: allowed answers 202 with nothing killed.
                send(Method::POST, format!("/api/v1/jobs/{j}/kill"), None).await;
            }
            "job restore" => {
                // The job exists: allowed answers 409, refused 403.
                send(Method::POST, format!("/api/v1/jobs/{j}/restore"), None).await;
            }
            "log clean" => {
                // Nothing that old: allowed answers 200, deleting nothing.
                let body = json!({ "group": g, "older_than_days": 3650 });
                send(Method::POST, "/api/v1/logs/clean".into(), Some(body)).await;
            }
            "maintenance" => {
                let body = json!({ "days": 30 });
                let path = "/api/v1/maintenance/retention";
                send(Method::GET, path.into(), None).await;
                send(Method::POST, path.into(), Some(body)).await;
                send(Method::POST, "/api/v1/cluster/stats/reset".into(), None).await;
            }
            "users" => {
                send(Method::GET, "/api/v1/users".into(), None).await;
                send(Method::GET, "/api/v1/users/admin".into(), None).await;
                let name = format!("probe-{user}-{}", rand_suffix());
                let new = json!({ "username": name, "password": TEST_PASSWORD, "role": "viewer" });
                send(Method::POST, "/api/v1/users".into(), Some(new)).await;
                let change = json!({ "groups": [g] });
                send(Method::PUT, format!("/api/v1/users/{name}"), Some(change)).await;
                send(Method::DELETE, format!("/api/v1/users/{name}"), None).await;
            }
            "audit" => send(Method::GET, "/api/v1/audit?limit=5".into(), None).await,
            "alarm channel read" => {
                send(Method::GET, "/api/v1/alarm-channels".into(), None).await;
                send(Method::GET, "/api/v1/alarm-channels/ch".into(), None).await;
            }
            "alarm channel edit" => {
                let name = format!("probe-{user}-{}", rand_suffix());
                let new =
                    json!({ "name": name, "kind": "slack", "url": "https://hooks.example.com/x" });
                send(Method::POST, "/api/v1/alarm-channels".into(), Some(new)).await;
                let change = json!({ "template": format!("{{job}} by {user}") });
                send(
                    Method::PUT,
                    "/api/v1/alarm-channels/ch".into(),
                    Some(change),
                )
                .await;
                send(
                    Method::DELETE,
                    format!("/api/v1/alarm-channels/{name}"),
                    None,
                )
                .await;
            }
            other => {
                panic!("the role table of docs/security.md has a family no test probes: {other:?}")
            }
        }
        out
    }
}

/// A suffix no earlier probe used.
fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed).to_string()
}

fn allowed(statuses: &[u16]) -> bool {
    statuses.iter().all(|s| *s != 401 && *s != 403)
}

async fn fixture(world: &World, api: Api) -> Fixture {
    let channel = json!({ "name": "ch", "kind": "wecom", "url": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=k" });
    let (status, body) = api.post("/api/v1/alarm-channels", channel).await;
    assert_eq!(status, 201, "{body}");
    let mut jobs = [0; 2];
    let mut logs = [String::new(), String::new()];
    for (i, g) in ["ga", "gb"].into_iter().enumerate() {
        let (status, body) = api.post("/api/v1/groups", json!({ "app": g })).await;
        assert_eq!(status, 201, "{body}");
        jobs[i] = api
            .create_job(json!({ "group": g, "handler": "demo", "enabled": false }))
            .await;
        // No executor: the trigger fails at once; its record becomes the
        // stored log the log probes read.
        let (status, out) = api
            .post(&format!("/api/v1/jobs/{}/trigger", jobs[i]), json!({}))
            .await;
        assert_eq!(status, 200, "{out}");
        let record: TriggerRecord =
            serde_json::from_value(out["triggers"][0].clone()).expect("a trigger record");
        logs[i] = record.trigger.trigger_id.clone();
        rondo_history::write_events(&world.db, &[Event::Triggered(record)])
            .await
            .expect("store the trigger log");
    }
    Fixture {
        admin: api,
        db: world.db.clone(),
        jobs,
        logs,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_role_gets_exactly_what_the_readme_table_says() {
    let world = World::new("roles").await;
    let anonymous = world.in_process_api("roles-test").await;
    let admin = anonymous.clone().with_token(&world.admin.token);
    let f = fixture(&world, admin.clone()).await;
    let viewer = world.user("vic", Role::Viewer, &["ga"], false).await;
    let operator = world.user("olga", Role::Operator, &["ga"], false).await;
    let operator_ro = rondo_history::testing::users::create_token(&f.db, "olga", true).await;
    let callers = [
        ("vic", anonymous.clone().with_token(&viewer)),
        ("olga", anonymous.clone().with_token(&operator)),
        ("admin", admin.clone()),
    ];

    let table = role_table();
    let families: BTreeSet<&str> = table.iter().map(|(f, _)| f.as_str()).collect();
    assert_eq!(families.len(), table.len(), "a family is listed twice");
    assert!(table.len() >= 16, "the table lost rows: {families:?}");
    for (family, cells) in &table {
        for ((user, api), cell) in callers.iter().zip(cells) {
            let what = format!("{user} on {family:?}");
            let mine = f.probe(family, api, Side::Granted, user, false).await;
            let other = f.probe(family, api, Side::Other, user, false).await;
            match cell {
                Cell::Public | Cell::Yes => {
                    assert!(allowed(&mine), "{what}, granted group: {mine:?}");
                    assert!(allowed(&other), "{what}, other group: {other:?}");
                }
                Cell::Granted => {
                    assert!(allowed(&mine), "{what}, granted group: {mine:?}");
                    assert!(other.iter().all(|s| *s == 403), "{what}: {other:?}");
                }
                Cell::No => {
                    assert!(mine.iter().all(|s| *s == 403), "{what}: {mine:?}");
                    assert!(other.iter().all(|s| *s == 403), "{what}: {other:?}");
                }
            }
        }
        // Without credentials: open only where the table says public.
        let anon = f
            .probe(family, &anonymous, Side::Granted, "admin", false)
            .await;
        if cells.iter().all(|c| *c == Cell::Public) {
            assert!(allowed(&anon), "anonymous on {family:?}: {anon:?}");
        } else {
            assert!(
                anon.iter().all(|s| *s == 401),
                "anonymous on {family:?}: {anon:?}"
            );
        }
        // An operator's read-only token has the viewer's rights.
        let ro = anonymous.clone().with_token(&operator_ro);
        let mine = f.probe(family, &ro, Side::Granted, "olga", true).await;
        if cells[0] == Cell::No {
            assert!(
                mine.iter().all(|s| *s == 403),
                "olga's read-only token on {family:?}: {mine:?}"
            );
        } else {
            assert!(
                allowed(&mine),
                "olga's read-only token on {family:?}: {mine:?}"
            );
        }
    }

    // Lists show only what the caller may read.
    let viewer_api = &callers[0].1;
    let (_, groups) = viewer_api.get("/api/v1/groups").await;
    let names: Vec<&str> = groups
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|g| g["app"].as_str())
        .collect();
    assert_eq!(names, ["ga"], "{groups}");
    let (_, jobs) = viewer_api.get("/api/v1/jobs").await;
    assert!(
        jobs["items"]
            .as_array()
            .unwrap()
            .iter()
            .all(|j| j["group"] == "ga"),
        "{jobs}"
    );
    let (_, all) = admin.get("/api/v1/jobs").await;
    assert!(all["total"].as_u64().unwrap() > jobs["total"].as_u64().unwrap());

    // A refused write changes nothing.
    let (_, before) = admin.get(&format!("/api/v1/jobs/{}", f.jobs[1])).await;
    let (status, answer) = callers[1]
        .1
        .call(
            Method::PUT,
            &format!("/api/v1/jobs/{}", f.jobs[1]),
            Some(json!({ "description": "not yours" })),
        )
        .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["kind"], "forbidden", "{answer}");
    assert_eq!(answer["error"]["field"], "id", "{answer}");
    let (_, after) = admin.get(&format!("/api/v1/jobs/{}", f.jobs[1])).await;
    assert_eq!(before, after);
    // Moving a job into a group the operator has not got is refused too.
    let (status, answer) = callers[1]
        .1
        .call(
            Method::PUT,
            &format!("/api/v1/jobs/{}", f.jobs[0]),
            Some(json!({ "group": "gb" })),
        )
        .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["field"], "group", "{answer}");
    // As is naming another group's job as a child (it would trigger it).
    let (status, answer) = callers[1]
        .1
        .post(
            "/api/v1/jobs",
            json!({ "group": "ga", "handler": "demo", "child_jobs": [f.jobs[1]] }),
        )
        .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["field"], "child_jobs", "{answer}");
    // A job of hers whose (admin-set) child is in another group: running it
    // would run the child, so she may neither trigger nor start it.
    let parent = admin
        .create_job(json!({ "group": "ga", "handler": "demo", "enabled": false, "child_jobs": [f.jobs[1]] }))
        .await;
    for action in ["trigger", "start"] {
        let (status, answer) = callers[1]
            .1
            .post(&format!("/api/v1/jobs/{parent}/{action}"), json!({}))
            .await;
        assert_eq!(status, 403, "{action}: {answer}");
        assert_eq!(answer["error"]["field"], "child_jobs", "{answer}");
    }
    let (_, stored) = admin.get(&format!("/api/v1/jobs/{parent}")).await;
    assert_eq!(stored["enabled"], false);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_work_until_revoked_or_expired_and_never_exceed_their_user() {
    let world = World::new("tokens").await;
    let anonymous = world.in_process_api("tokens-test").await;
    let admin = anonymous.clone().with_token(&world.admin.token);
    assert_eq!(
        admin.post("/api/v1/groups", json!({ "app": "ga" })).await.0,
        201
    );

    // Users: checked input, no duplicates, a password policy.
    let (status, answer) = admin
        .post(
            "/api/v1/users",
            json!({ "username": "tom", "password": "short", "role": "operator" }),
        )
        .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("password"))
    );
    let (status, answer) = admin
        .post(
            "/api/v1/users",
            json!({ "username": "tom", "password": TEST_PASSWORD, "role": "chief" }),
        )
        .await;
    assert_eq!((status, &answer["error"]["field"]), (400, &json!("role")));
    let tom = json!({ "username": "tom", "password": TEST_PASSWORD, "role": "operator", "groups": ["ga"] });
    let (status, created) = admin.post("/api/v1/users", tom.clone()).await;
    assert_eq!(status, 201, "{created}");
    assert!(created.get("password").is_none() && created.get("password_hash").is_none());
    assert_eq!(admin.post("/api/v1/users", tom).await.0, 409);
    let tom_first = rondo_history::testing::users::create_token(&world.db, "tom", false).await;
    let tom_api = anonymous.clone().with_token(&tom_first);

    // A token made through the API: shown once, listed without secret.
    let (status, made) = tom_api
        .post(
            "/api/v1/tokens",
            json!({ "name": "ci", "expires_in_days": 30 }),
        )
        .await;
    assert_eq!(status, 201, "{made}");
    let token = made["token"].as_str().unwrap().to_owned();
    assert!(token.starts_with("rondo_pat_"), "{made}");
    let expires = made["expires_ms"].as_i64().unwrap();
    let in_30_days = clock::now_ms() + 30 * 86_400_000;
    assert!((in_30_days - expires).abs() < 60_000, "{made}");
    let (_, list) = tom_api.get("/api/v1/tokens").await;
    let listed = list.to_string();
    assert!(
        !listed.contains(&token[10..]),
        "a listed token shows its secret"
    );
    assert!(!listed.contains("hash"), "{listed}");
    assert_eq!(list["items"].as_array().unwrap().len(), 2, "{list}");
    let ci = anonymous.clone().with_token(&token);
    let (status, me) = ci.get("/api/v1/auth/me").await;
    assert_eq!((status, &me["username"]), (200, &json!("tom")));
    let job = ci
        .create_job(json!({ "group": "ga", "handler": "demo", "enabled": false }))
        .await;
    for (field, bad) in [
        (
            "expires_in_days",
            json!({ "name": "x", "expires_in_days": 0 }),
        ),
        (
            "expires_in_days",
            json!({ "name": "x", "expires_in_days": 366 }),
        ),
        ("name", json!({ "name": "" })),
    ] {
        let (status, answer) = tom_api.post("/api/v1/tokens", bad).await;
        assert_eq!((status, &answer["error"]["field"]), (400, &json!(field)));
    }

    // A read-only token reads, and cannot write or mint a writing token.
    let (_, ro) = tom_api
        .post("/api/v1/tokens", json!({ "name": "ro", "read_only": true }))
        .await;
    let ro_api = anonymous.clone().with_token(ro["token"].as_str().unwrap());
    assert_eq!(ro_api.get(&format!("/api/v1/jobs/{job}")).await.0, 200);
    assert_eq!(
        ro_api
            .post(&format!("/api/v1/jobs/{job}/stop"), json!({}))
            .await
            .0,
        403
    );
    let (status, answer) = ro_api
        .post("/api/v1/tokens", json!({ "name": "escalate" }))
        .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (403, &json!("read_only"))
    );

    // A token made with a token ends no later, and goes with it.
    let (status, child) = ci
        .post(
            "/api/v1/tokens",
            json!({ "name": "child", "expires_in_days": 365 }),
        )
        .await;
    assert_eq!(status, 201, "{child}");
    assert_eq!(
        child["expires_ms"], made["expires_ms"],
        "capped at its parent's end"
    );
    let child_api = anonymous
        .clone()
        .with_token(child["token"].as_str().unwrap());
    assert_eq!(child_api.get("/api/v1/auth/me").await.0, 200);
    // A read-only token may not change a password.
    let change =
        json!({ "current_password": TEST_PASSWORD, "new_password": "an entirely new one" });
    let (status, _) = ro_api
        .call(Method::PUT, "/api/v1/auth/password", Some(change))
        .await;
    assert_eq!(status, 403);

    // Revoked: refused at once, and only the owner (or an admin) revokes.
    let id = made["id"].as_u64().unwrap();
    let (status, _) = anonymous
        .clone()
        .with_token(&tom_first)
        .call(Method::DELETE, "/api/v1/tokens/1", None)
        .await;
    assert_eq!(status, 404, "tom cannot revoke the admin's token");
    let (status, _) = tom_api
        .call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None)
        .await;
    assert_eq!(status, 204);
    let (status, answer) = ci.get("/api/v1/auth/me").await;
    assert_eq!(status, 401, "{answer}");
    assert_eq!(answer["error"]["kind"], "unauthenticated");
    assert_eq!(
        child_api.get("/api/v1/auth/me").await.0,
        401,
        "revoked with its parent"
    );
    let (status, _) = tom_api
        .call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None)
        .await;
    assert_eq!(status, 404, "revoked once");

    // Expired: refused once its time is up.
    let (short, hash) = rondo_core::auth::new_token();
    History::from_pool(world.db.clone())
        .create_token(&rondo_history::auth::NewToken {
            username: "tom",
            name: "short",
            hash: &hash,
            prefix: &short[..16],
            read_only: false,
            parent_id: None,
            created_ms: clock::now_ms(),
            expires_ms: Some(clock::now_ms() + 1_500),
        })
        .await
        .unwrap();
    let short_api = anonymous.clone().with_token(&short);
    assert_eq!(short_api.get("/api/v1/auth/me").await.0, 200);
    eventually(
        "the short token to expire",
        Duration::from_secs(10),
        || async { (short_api.get("/api/v1/auth/me").await.0 == 401).then_some(()) },
    )
    .await;
    assert_eq!(anonymous.get("/api/v1/auth/me").await.0, 401);
    let forged = anonymous.clone().with_token("rondo_pat_forged");
    assert_eq!(forged.get("/api/v1/auth/me").await.0, 401);

    // A demotion ends the user's tokens (what ends them is
    // `tokens_end_when_their_user_changes`).
    let (status, _) = admin
        .call(
            Method::PUT,
            "/api/v1/users/tom",
            Some(json!({ "role": "viewer" })),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(tom_api.get(&format!("/api/v1/jobs/{job}")).await.0, 401);
    // Deleting a user revokes its tokens.
    let (status, _) = admin.call(Method::DELETE, "/api/v1/users/tom", None).await;
    assert_eq!(status, 204);
    let tokens = History::from_pool(world.db.clone())
        .tokens(Some("tom"))
        .await
        .unwrap();
    assert!(tokens.iter().all(|t| t.revoked_ms.is_some()), "{tokens:?}");

    // An admin's read-only token reads users and the audit log, and
    // changes nothing.
    let admin_ro = rondo_history::testing::users::create_token(&world.db, "admin", true).await;
    let admin_ro = anonymous.clone().with_token(&admin_ro);
    assert_eq!(admin_ro.get("/api/v1/users").await.0, 200);
    assert_eq!(admin_ro.get("/api/v1/audit").await.0, 200);
    let zed = json!({ "username": "zed", "password": TEST_PASSWORD });
    assert_eq!(admin_ro.post("/api/v1/users", zed).await.0, 403);

    // The last admin stays one.
    for change in [json!({ "role": "operator" }), json!({ "enabled": false })] {
        let (status, answer) = admin
            .call(Method::PUT, "/api/v1/users/admin", Some(change))
            .await;
        assert_eq!(status, 409, "{answer}");
    }
    assert_eq!(
        admin
            .call(Method::DELETE, "/api/v1/users/admin", None)
            .await
            .0,
        409
    );
    assert_eq!(admin.get("/api/v1/auth/me").await.0, 200);
}

/// A password change or reset, a disable and a demotion (a lower role, or
/// a group taken away) revoke every API token of the user at the change;
/// a promotion and an unrelated user's change do not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn tokens_end_when_their_user_changes() {
    let world = World::new("token_ends").await;
    let anonymous = world.in_process_api("token-ends").await;
    let admin = anonymous.clone().with_token(&world.admin.token);
    for app in ["ga", "gb"] {
        let (status, _) = admin.post("/api/v1/groups", json!({ "app": app })).await;
        assert_eq!(status, 201);
    }
    let users = rondo_history::testing::users::create_user;
    let put = |user: &str, change: Value| {
        let admin = admin.clone();
        let path = format!("/api/v1/users/{user}");
        async move {
            let (status, answer) = admin.call(Method::PUT, &path, Some(change)).await;
            assert_eq!(status, 200, "{answer}");
        }
    };
    let works = |token: &str| {
        let api = anonymous.clone().with_token(token);
        async move { api.get("/api/v1/auth/me").await.0 == 200 }
    };
    let token =
        |user: &'static str| rondo_history::testing::users::create_token(&world.db, user, false);

    // A bystander whose token must survive every change below.
    users(&world.db, "bea", Role::Operator, &["ga"]).await;
    let bea = token("bea").await;

    // A promotion keeps the tokens; a group taken away ends them.
    users(&world.db, "gus", Role::Operator, &["ga"]).await;
    let gus = token("gus").await;
    put("gus", json!({ "groups": ["ga", "gb"] })).await;
    assert!(works(&gus).await, "a group granted keeps the token");
    put("gus", json!({ "role": "admin" })).await;
    assert!(works(&gus).await, "a promotion keeps the token");
    put("gus", json!({ "role": "operator", "groups": ["gb"] })).await;
    assert!(!works(&gus).await, "a demotion ends it");

    // A lower role.
    users(&world.db, "ola", Role::Operator, &["ga"]).await;
    let ola = token("ola").await;
    put("ola", json!({ "role": "viewer" })).await;
    assert!(!works(&ola).await);

    // A reset by an admin, and a disable.
    users(&world.db, "ray", Role::Viewer, &[]).await;
    let ray = token("ray").await;
    put("ray", json!({ "password": "a brand new password" })).await;
    assert!(!works(&ray).await, "a reset ends it");
    users(&world.db, "dee", Role::Viewer, &[]).await;
    let dee = token("dee").await;
    put("dee", json!({ "enabled": false })).await;
    put("dee", json!({ "enabled": true })).await;
    assert!(!works(&dee).await, "a disable ended it for good");

    // The user's own change, made with one of their tokens: all end.
    users(&world.db, "cy", Role::Viewer, &[]).await;
    let (cy_a, cy_b) = (token("cy").await, token("cy").await);
    let change =
        json!({ "current_password": TEST_PASSWORD, "new_password": "a brand new password" });
    let (status, answer) = anonymous
        .clone()
        .with_token(&cy_a)
        .call(Method::PUT, "/api/v1/auth/password", Some(change))
        .await;
    assert_eq!(status, 204, "{answer}");
    assert!(!works(&cy_a).await && !works(&cy_b).await);

    assert!(works(&bea).await, "another user's token is untouched");
}

/// Revoking a token revokes the tokens made with it, and theirs, however
/// deep the chain.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn revocation_follows_a_tokens_whole_descent() {
    let world = World::new("token_chain").await;
    let anonymous = world.in_process_api("token-chain").await;
    let root = rondo_history::testing::users::create_token(&world.db, "admin", false).await;
    // Deeper than the 64 levels revocation used to stop at.
    let mut chain = vec![root];
    for i in 0..70 {
        let parent = anonymous.clone().with_token(chain.last().unwrap());
        let (status, made) = parent
            .post("/api/v1/tokens", json!({ "name": format!("level {i}") }))
            .await;
        assert_eq!(status, 201, "{made}");
        chain.push(made["token"].as_str().unwrap().to_owned());
    }
    let first_child = anonymous.clone().with_token(&chain[1]);
    let (_, me) = first_child.get("/api/v1/tokens").await;
    let id = me["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "level 0")
        .and_then(|t| t["id"].as_u64())
        .expect("the first child's id");
    let admin = anonymous.clone().with_token(&world.admin.token);
    let (status, _) = admin
        .call(Method::DELETE, &format!("/api/v1/tokens/{id}"), None)
        .await;
    assert_eq!(status, 204);
    for (depth, token) in chain.iter().enumerate().skip(1) {
        let api = anonymous.clone().with_token(token);
        assert_eq!(api.get("/api/v1/auth/me").await.0, 401, "level {depth}");
    }
    let api = anonymous.clone().with_token(&chain[0]);
    assert_eq!(api.get("/api/v1/auth/me").await.0, 200, "the root stays");
}

/// A 5xx answer names an incident only; its own text (a backend's error,
/// which names tables and hosts) is for admins.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_server_errors_own_text_reaches_admins_only() {
    let world = World::new("error_text").await;
    let anonymous = world.in_process_api("error-text").await;
    let admin = anonymous.clone().with_token(&world.admin.token);
    assert_eq!(
        admin.post("/api/v1/groups", json!({ "app": "et" })).await.0,
        201
    );
    let viewer = anonymous
        .clone()
        .with_token(&world.user("vee", Role::Viewer, &["et"], false).await);
    // The log list reads MySQL's job_log: without it, the backend fails.
    sqlx::query("DROP TABLE job_log")
        .execute(&world.db)
        .await
        .unwrap();
    let (status, answer) = viewer.get("/api/v1/logs?group=et").await;
    assert!(status >= 500, "{status} {answer}");
    let shown = answer["error"]["message"].as_str().unwrap();
    assert!(shown.contains("incident"), "{answer}");
    assert!(
        !shown.contains("job_log"),
        "the backend's text leaked: {answer}"
    );
    let (status, answer) = admin.get("/api/v1/logs?group=et").await;
    assert!(status >= 500, "{status} {answer}");
    let detail = answer["error"]["message"].as_str().unwrap();
    assert!(
        detail.contains("job_log") && detail.contains("incident"),
        "{answer}"
    );
}

/// Every answer is `nosniff`; every HTML page is never framed and sends no
/// referrer; with `auth.cookie_secure` the session cookie is a `__Host-`
/// cookie (https only, this host only), the plain name is refused, and
/// browsers are told to keep to https.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn pages_get_security_headers_and_a_secure_cookie_is_a_host_cookie() {
    let mut world = World::new("headers").await;
    world.config.auth.cookie_secure = true;
    rondo_history::testing::users::create_user(&world.db, "ann", Role::Viewer, &[]).await;
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    let http = reqwest::Client::new();
    for (path, html) in [
        ("/api/v1/docs/", true),
        ("/login", true),
        ("/healthz", false),
        ("/api/v1/jobs", false),
    ] {
        let resp = http
            .get(format!("http://{addr}{path}"))
            .send()
            .await
            .unwrap();
        let h = resp.headers();
        let get = |name: &str| h.get(name).and_then(|v| v.to_str().ok()).unwrap_or("");
        assert_eq!(get("x-content-type-options"), "nosniff", "{path}");
        assert_eq!(
            get("strict-transport-security"),
            "max-age=31536000",
            "{path}"
        );
        if html {
            assert_eq!(get("x-frame-options"), "DENY", "{path}");
            assert_eq!(get("referrer-policy"), "no-referrer", "{path}");
            assert!(
                get("content-security-policy").contains("frame-ancestors 'none'"),
                "{path}"
            );
        }
    }
    let mut b = Browser::new(addr);
    let (status, answer, headers) = b
        .send_full(
            Method::POST,
            "/api/v1/auth/login",
            Some(json!({ "username": "ann", "password": TEST_PASSWORD })),
            false,
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    let set = headers
        .get("set-cookie")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    assert!(set.starts_with("__Host-rondo_session="), "{set}");
    assert!(
        set.contains("; Secure") && set.contains("Path=/") && !set.contains("Domain"),
        "{set}"
    );
    let value = set
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned();
    b.cookie = Some(format!("__Host-rondo_session={value}"));
    assert_eq!(b.me().await, 200);
    // The same session under the plain name is not a session here.
    b.cookie = Some(format!("rondo_session={value}"));
    assert_eq!(b.me().await, 401);
    cluster.stop().await;
}

/// A session polled in the background (the console's refreshes) still
/// ends when idle; one in use does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn background_polling_does_not_keep_an_idle_session_alive() {
    let mut world = World::new("idle_poll").await;
    world.config.auth.session_idle_s = 2;
    for user in ["ann", "bob"] {
        rondo_history::testing::users::create_user(&world.db, user, Role::Viewer, &[]).await;
    }
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    let (mut polled, mut used) = (Browser::new(addr), Browser::new(addr));
    assert_eq!(polled.login("ann", TEST_PASSWORD).await.0, 200);
    assert_eq!(used.login("bob", TEST_PASSWORD).await.0, 200);
    polled.background = true;
    // Both ask every half second for 3 s, past the 2 s idle time.
    let started = Instant::now();
    let mut polled_ended = false;
    while started.elapsed() < Duration::from_secs(3) {
        polled_ended |= polled.me().await == 401;
        assert_eq!(used.me().await, 200, "a session in use stays");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(
        polled_ended || polled.me().await == 401,
        "the polled session ended"
    );
    cluster.stop().await;
}

/// A viewer sees where a job's alarm webhook goes, never the token in its
/// path or query; an operator of the group sees it whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_viewer_never_sees_a_webhooks_token() {
    let world = World::new("webhook_view").await;
    let anonymous = world.in_process_api("webhook-view").await;
    let admin = anonymous.clone().with_token(&world.admin.token);
    assert_eq!(
        admin.post("/api/v1/groups", json!({ "app": "wv" })).await.0,
        201
    );
    let hook = "https://oapi.dingtalk.com/robot/send?access_token=s3cr3t-t0ken";
    let job = admin
        .create_job(json!({ "group": "wv", "handler": "demo", "alarm_webhook": hook }))
        .await;
    let viewer = anonymous
        .clone()
        .with_token(&world.user("vi", Role::Viewer, &["wv"], false).await);
    let operator = anonymous
        .clone()
        .with_token(&world.user("op", Role::Operator, &["wv"], false).await);
    for path in [
        format!("/api/v1/jobs/{job}"),
        "/api/v1/jobs?group=wv".to_owned(),
    ] {
        let (status, answer) = viewer.get(&path).await;
        assert_eq!(status, 200, "{answer}");
        assert!(!answer.to_string().contains("s3cr3t"), "{path}: {answer}");
        assert!(
            answer.to_string().contains("https://oapi.dingtalk.com/***"),
            "{answer}"
        );
        let (_, answer) = operator.get(&path).await;
        assert!(answer.to_string().contains(hook), "{path}: {answer}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sessions_need_their_csrf_token_to_write_and_end_idle_old_or_signed_out() {
    let mut world = World::new("sessions").await;
    world.config.auth.session_idle_s = 2;
    world.config.auth.session_max_s = 5;
    let (redis_url, ns) = (world.config.redis.url.clone(), world.config.names());
    rondo_history::testing::users::create_user(&world.db, "ann", Role::Operator, &["ga"]).await;
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    let admin = cluster.api(node);
    assert_eq!(
        admin.post("/api/v1/groups", json!({ "app": "ga" })).await.0,
        201
    );

    let mut browser = Browser::new(addr);
    let (status, _) = browser.login("admin", "wrong password!").await;
    assert_eq!(status, 401);
    let (status, who) = browser.login("admin", TEST_PASSWORD).await;
    assert_eq!(status, 200, "{who}");
    assert_eq!(who["role"], "admin");
    let (status, me) = browser
        .send(Method::GET, "/api/v1/auth/me", None, false)
        .await;
    assert_eq!((status, &me["via"]), (200, &json!("session")));
    assert_eq!(me["csrf_token"], who["csrf_token"]);

    // A write with the cookie and no (or a wrong) CSRF token changes nothing.
    let group = json!({ "app": "csrf" });
    let (status, answer) = browser
        .send(Method::POST, "/api/v1/groups", Some(group.clone()), false)
        .await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(answer["error"]["field"], "x-csrf-token");
    let mut wrong = Browser::new(addr);
    wrong.cookie = browser.cookie.clone();
    wrong.csrf = Some("not-the-token".into());
    let (status, _) = wrong
        .send(Method::POST, "/api/v1/groups", Some(group.clone()), true)
        .await;
    assert_eq!(status, 403);
    assert_eq!(admin.get("/api/v1/groups/csrf").await.0, 404);
    let (status, _) = browser
        .send(Method::POST, "/api/v1/groups", Some(group), true)
        .await;
    assert_eq!(status, 201);

    // A forged cookie is nobody.
    let mut forged = Browser::new(addr);
    forged.cookie = Some(format!("rondo_session={}", rondo_core::auth::new_secret()));
    let (status, answer) = forged
        .send(Method::GET, "/api/v1/auth/me", None, false)
        .await;
    assert_eq!((status, &answer["error"]["field"]), (401, &json!("cookie")));

    // Idle: the session's key expires in Redis, and the cookie is refused.
    let value = browser
        .cookie
        .as_deref()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1;
    let key = ns.session(&rondo_core::auth::token_hash(value));
    let redis = redis::Client::open(redis_url).unwrap();
    let mut conn = redis.get_multiplexed_async_connection().await.unwrap();
    let ttl: i64 = conn.ttl(&key).await.unwrap();
    assert!((1..=2).contains(&ttl), "idle ttl {ttl}");
    eventually(
        "the idle session to expire",
        Duration::from_secs(10),
        || {
            let mut conn = conn.clone();
            let key = key.clone();
            async move { (!conn.exists::<_, bool>(&key).await.unwrap()).then_some(()) }
        },
    )
    .await;
    assert_eq!(browser.me().await, 401);

    // Old: a session in use still ends `session_max_s` after sign-in.
    let (status, _) = browser.login("admin", TEST_PASSWORD).await;
    assert_eq!(status, 200);
    let signed_in = Instant::now();
    let ended = eventually(
        "the session to reach its end",
        Duration::from_secs(15),
        || async {
            let status = browser.me().await;
            if status == 200 {
                tokio::time::sleep(Duration::from_millis(300)).await;
                return None;
            }
            Some(status)
        },
    )
    .await;
    assert_eq!(ended, 401);
    assert!(
        signed_in.elapsed() >= Duration::from_millis(4_500),
        "ended after {:?}, before its 5 s",
        signed_in.elapsed()
    );

    // Sign-out ends it and clears the cookie.
    browser.login("admin", TEST_PASSWORD).await;
    let (status, _, headers) = browser
        .send_full(Method::POST, "/api/v1/auth/logout", None, true)
        .await;
    assert_eq!(status, 204);
    let cleared = headers.get("set-cookie").unwrap().to_str().unwrap();
    assert!(cleared.contains("Max-Age=0"), "{cleared}");
    assert_eq!(browser.me().await, 401);

    // A new password ends the user's other sessions.
    let mut ann = Browser::new(addr);
    let mut ann_elsewhere = Browser::new(addr);
    assert_eq!(ann.login("ann", TEST_PASSWORD).await.0, 200);
    assert_eq!(ann_elsewhere.login("ann", TEST_PASSWORD).await.0, 200);
    let new = "a brand new passphrase";
    let change = |current: &str| json!({ "current_password": current, "new_password": new });
    let (status, answer) = ann
        .send(
            Method::PUT,
            "/api/v1/auth/password",
            Some(change("wrong!")),
            true,
        )
        .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("current_password"))
    );
    let weak = json!({ "current_password": TEST_PASSWORD, "new_password": "short" });
    let (status, answer) = ann
        .send(Method::PUT, "/api/v1/auth/password", Some(weak), true)
        .await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (400, &json!("new_password"))
    );
    let (status, _) = ann
        .send(
            Method::PUT,
            "/api/v1/auth/password",
            Some(change(TEST_PASSWORD)),
            true,
        )
        .await;
    assert_eq!(status, 204);
    assert_eq!(ann.me().await, 200, "the session it was changed from stays");
    assert_eq!(ann_elsewhere.me().await, 401);
    assert_eq!(Browser::new(addr).login("ann", TEST_PASSWORD).await.0, 401);
    assert_eq!(Browser::new(addr).login("ann", new).await.0, 200);

    // A disabled user's session ends.
    let (status, _) = admin
        .call(
            Method::PUT,
            "/api/v1/users/ann",
            Some(json!({ "enabled": false })),
        )
        .await;
    assert_eq!(status, 200);
    assert_eq!(ann.me().await, 401);
    cluster.stop().await;
}

/// `PUT /api/v1/auth/language` as `user` through `api`: its status and answer.
async fn set_language(api: &Api, language: Value) -> (u16, Value) {
    api.put("/api/v1/auth/language", language).await
}

/// The `language` of `GET /api/v1/auth/me` and of a new sign-in of `user`.
async fn languages(api: &Api, anonymous: &Api, user: &str) -> (Value, Value) {
    let (status, me) = api.get("/api/v1/auth/me").await;
    assert_eq!(status, 200, "{me}");
    let login = json!({ "username": user, "password": TEST_PASSWORD });
    let (status, session) = anonymous.post("/api/v1/auth/login", login).await;
    assert_eq!(status, 200, "{session}");
    (me["language"].clone(), session["language"].clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_sets_their_console_language_and_reads_it_back_at_once() {
    let world = World::new("language").await;
    let anonymous = world.in_process_api("language-test").await;
    let vic = anonymous
        .clone()
        .with_token(&world.user("vic", Role::Viewer, &[], false).await);
    let none = (Value::Null, Value::Null);
    assert_eq!(languages(&vic, &anonymous, "vic").await, none, "none yet");

    // A viewer sets their own; /me (just read, so cached on this node)
    // and the next sign-in both show it at once.
    for tag in ["zh-TW", "zh-CN", "en"] {
        let (status, answer) = set_language(&vic, json!({ "language": tag })).await;
        assert_eq!(status, 204, "{tag}: {answer}");
        let tag = json!(tag);
        assert_eq!(languages(&vic, &anonymous, "vic").await, (tag.clone(), tag));
    }
    // Another user's is their own.
    let olga = anonymous
        .clone()
        .with_token(&world.user("olga", Role::Operator, &[], false).await);
    assert_eq!(languages(&olga, &anonymous, "olga").await, none);

    // Unknown, missing or extra: 400 naming the field, nothing changed.
    for (body, field) in [
        (json!({ "language": "fr" }), "language"),
        (json!({ "language": "zh" }), "language"),
        (json!({ "language": 7 }), "language"),
        (json!({}), "language"),
        (json!({ "language": "en", "theme": "dark" }), "theme"),
    ] {
        let (status, answer) = set_language(&vic, body.clone()).await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!(field)),
            "{body}: {answer}"
        );
    }
    let en = (json!("en"), json!("en"));
    assert_eq!(languages(&vic, &anonymous, "vic").await, en);

    // A read-only token may not, and changes nothing.
    let read_only = rondo_history::testing::users::create_token(&world.db, "vic", true).await;
    let vic_ro = anonymous.clone().with_token(&read_only);
    let (status, answer) = set_language(&vic_ro, json!({ "language": "zh-CN" })).await;
    assert_eq!(
        (status, &answer["error"]["field"]),
        (403, &json!("authorization")),
        "{answer}"
    );
    assert_eq!(languages(&vic_ro, &anonymous, "vic").await, en);
    // Without credentials: 401.
    let (status, _) = set_language(&anonymous, json!({ "language": "en" })).await;
    assert_eq!(status, 401);

    // null clears it.
    let (status, answer) = set_language(&vic, json!({ "language": null })).await;
    assert_eq!(status, 204, "{answer}");
    assert_eq!(languages(&vic, &anonymous, "vic").await, none, "cleared");
    let stored: Option<String> =
        sqlx::query_scalar("SELECT language FROM `user` WHERE username = 'vic'")
            .fetch_one(&world.db)
            .await
            .unwrap();
    assert_eq!(stored, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sign_in_is_throttled_without_locking_the_right_password_out() {
    let mut world = World::new("throttle").await;
    world.config.auth.login_max_per_user = 3;
    world.config.auth.login_max_per_address = 5;
    // The test's loopback stands for the proxy: X-Forwarded-For names
    // the client.
    world.config.auth.trusted_proxies = vec!["127.0.0.1".into(), "::1".into()];
    for user in ["ann", "bob", "cid", "dan"] {
        rondo_history::testing::users::create_user(&world.db, user, Role::Viewer, &[]).await;
    }
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    let from = |ip: &str| {
        let mut b = Browser::new(addr);
        b.from = Some(ip.to_owned());
        b
    };

    // Per username and address: three wrong passwords from one address,
    // then even the right one waits there.
    let mut a = from("10.0.0.1");
    for _ in 0..3 {
        assert_eq!(a.login("ann", "wrong password").await.0, 401);
    }
    let (status, answer) = a.login("ann", TEST_PASSWORD).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"]["field"], "username");
    // The username is over its count, and still its user signs in from
    // an address that has not failed: a guesser cannot lock anyone out.
    assert_eq!(from("10.0.0.9").login("ann", TEST_PASSWORD).await.0, 200);
    // Over the count, each address gets one guess: after a failure, it
    // waits even with the right password.
    for _ in 0..3 {
        assert_eq!(from("10.0.0.7").login("ann", "wrong password").await.0, 401);
    }
    let mut e = from("10.0.0.8");
    assert_eq!(e.login("ann", "wrong password").await.0, 401);
    let (status, answer) = e.login("ann", TEST_PASSWORD).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"]["field"], "username");

    // Per address: five failures over any usernames block the address.
    let mut b = from("10.0.0.2");
    for user in ["bob", "bob", "cid", "cid", "nobody"] {
        assert_eq!(b.login(user, "wrong password").await.0, 401);
    }
    let (status, answer) = b.login("cid", TEST_PASSWORD).await;
    assert_eq!(status, 429, "{answer}");
    assert_eq!(answer["error"]["field"], "address");
    // A burst from one address in parallel gets no more than the limit.
    let guesses = (0..10).map(|_| {
        let mut b = from("10.0.1.1");
        async move { b.login("dan", "wrong password").await.0 }
    });
    let mut answers = futures_util::future::join_all(guesses).await;
    answers.sort_unstable();
    assert_eq!(answers, [401, 401, 401, 429, 429, 429, 429, 429, 429, 429]);
    // A burst over many addresses: one guess each, on as many addresses
    // as `login_max_addresses_per_user` (5; 10.0.1.1 was the first), then
    // each waits.
    let round = || async {
        let mut answers = futures_util::future::join_all((0..10).map(|i| {
            let mut b = from(&format!("10.0.2.{i}"));
            async move { b.login("dan", "wrong password").await.0 }
        }))
        .await;
        answers.sort_unstable();
        answers
    };
    assert_eq!(
        round().await,
        [401, 401, 401, 401, 429, 429, 429, 429, 429, 429]
    );
    assert_eq!(round().await, [429; 10]);
    // Sign-in takes JSON only (no cross-site form can send it).
    let form = reqwest::Client::new()
        .post(format!("http://{addr}/api/v1/auth/login"))
        .header("content-type", "text/plain")
        .body(json!({ "username": "cid", "password": TEST_PASSWORD }).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(form.status().as_u16(), 400);
    let answer: Value = form.json().await.unwrap();
    assert_eq!(answer["error"]["field"], "content-type");

    // Another address signs cid in, which clears cid's count.
    let mut c = from("10.0.0.3");
    assert_eq!(c.login("cid", TEST_PASSWORD).await.0, 200);
    for _ in 0..2 {
        assert_eq!(c.login("cid", "wrong password").await.0, 401);
    }
    assert_eq!(
        c.login("cid", TEST_PASSWORD).await.0,
        200,
        "two fresh failures are under the limit"
    );

    // Each throttled attempt is audited, with its address.
    let db = cluster.db().clone();
    eventually("the throttled sign-ins audited", PATIENCE, || async {
        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT username, address FROM audit_log WHERE action = 'session.login_throttled'",
        )
        .fetch_all(&db)
        .await
        .unwrap();
        let from_e = rows.iter().any(|(u, a)| u == "ann" && a == "10.0.0.8");
        // 7 of the burst from one address, 6 + 10 of the rounds.
        (from_e && rows.iter().filter(|(u, _)| u == "dan").count() == 23).then_some(())
    })
    .await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_change_is_in_the_audit_log_with_who_and_where() {
    let world = World::new("audit").await;
    rondo_history::testing::users::create_user(&world.db, "vic", Role::Viewer, &["au"]).await;
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    let api = cluster.api(node);

    let expect = |s: (u16, Value), want: u16| assert_eq!(s.0, want, "{}", s.1);
    expect(
        api.post("/api/v1/groups", json!({ "app": "au" })).await,
        201,
    );
    expect(
        api.call(
            Method::PUT,
            "/api/v1/groups/au",
            Some(json!({ "title": "t" })),
        )
        .await,
        200,
    );
    let job = api
        .create_job(json!({ "group": "au", "handler": "demo", "schedule_type": "NONE" }))
        .await;
    let path = format!("/api/v1/jobs/{job}");
    expect(
        api.call(Method::PUT, &path, Some(json!({ "description": "d" })))
            .await,
        200,
    );
    expect(api.post(&format!("{path}/stop"), json!({})).await, 200);
    expect(api.post(&format!("{path}/start"), json!({})).await, 200);
    expect(
        api.post(&format!("{path}/trigger"), json!({ "params": "p" }))
            .await,
        200,
    );
    expect(api.call(Method::DELETE, &path, None).await, 204);
    expect(
        api.call(Method::DELETE, "/api/v1/groups/au", None).await,
        204,
    );
    let user = json!({ "username": "zed", "password": TEST_PASSWORD, "role": "viewer" });
    expect(api.post("/api/v1/users", user).await, 201);
    expect(
        api.call(
            Method::PUT,
            "/api/v1/users/zed",
            Some(json!({ "groups": ["au"] })),
        )
        .await,
        200,
    );
    let (_, token) = api.post("/api/v1/tokens", json!({ "name": "audit" })).await;
    let token_id = token["id"].as_u64().unwrap();
    expect(
        api.call(Method::DELETE, &format!("/api/v1/tokens/{token_id}"), None)
            .await,
        204,
    );
    expect(
        api.call(Method::DELETE, "/api/v1/users/zed", None).await,
        204,
    );
    expect(
        api.post("/api/v1/maintenance/retention", json!({})).await,
        200,
    );
    expect(
        api.post("/api/v1/cluster/stats/reset", json!({})).await,
        204,
    );
    let mut vic = Browser::new(addr);
    assert_eq!(vic.login("vic", "not the password").await.0, 401);
    assert_eq!(vic.login("vic", TEST_PASSWORD).await.0, 200);
    // Refused: no change, no row.
    let (status, _) = vic
        .send(
            Method::POST,
            "/api/v1/groups",
            Some(json!({ "app": "no" })),
            true,
        )
        .await;
    assert_eq!(status, 403);
    let change =
        json!({ "current_password": TEST_PASSWORD, "new_password": "vic's new passphrase" });
    let (status, _) = vic
        .send(Method::PUT, "/api/v1/auth/password", Some(change), true)
        .await;
    assert_eq!(status, 204);
    let language = json!({ "language": "zh-CN" });
    let (status, _) = vic
        .send(Method::PUT, "/api/v1/auth/language", Some(language), true)
        .await;
    assert_eq!(status, 204);
    let (status, _) = vic
        .send(Method::POST, "/api/v1/auth/logout", None, true)
        .await;
    assert_eq!(status, 204);

    let wanted: HashMap<&str, (&str, String)> = HashMap::from([
        ("group.create", ("admin", "group:au".to_owned())),
        ("group.update", ("admin", "group:au".into())),
        ("job.create", ("admin", format!("job:{job}"))),
        ("job.update", ("admin", format!("job:{job}"))),
        ("job.stop", ("admin", format!("job:{job}"))),
        ("job.start", ("admin", format!("job:{job}"))),
        ("job.trigger", ("admin", format!("job:{job}"))),
        ("job.delete", ("admin", format!("job:{job}"))),
        ("group.delete", ("admin", "group:au".into())),
        ("user.create", ("admin", "user:zed".into())),
        ("user.update", ("admin", "user:zed".into())),
        ("token.create", ("admin", format!("token:{token_id}"))),
        ("token.revoke", ("admin", format!("token:{token_id}"))),
        ("user.delete", ("admin", "user:zed".into())),
        ("retention.apply", ("admin", "job_log".into())),
        (
            "stats.reset",
            ("admin", format!("node:{}", cluster.nodes[node].id())),
        ),
        ("session.login_failed", ("vic", "user:vic".into())),
        ("session.login", ("vic", "user:vic".into())),
        ("user.password", ("vic", "user:vic".into())),
        ("user.language", ("vic", "user:vic".into())),
        ("session.logout", ("vic", "user:vic".into())),
    ]);
    let rows = eventually(
        "every change in the audit log",
        Duration::from_secs(20),
        || async {
            let (status, log) = api.get("/api/v1/audit?limit=1000").await;
            assert_eq!(status, 200, "{log}");
            let rows = log["items"].as_array().cloned().unwrap_or_default();
            (rows.len() >= wanted.len()).then_some(rows)
        },
    )
    .await;
    assert_eq!(
        rows.len(),
        wanted.len(),
        "one row per change, none for the refused: {rows:#?}"
    );
    for row in &rows {
        let action = row["action"].as_str().unwrap();
        let (who, target) = wanted
            .get(action)
            .unwrap_or_else(|| panic!("unexpected {row}"));
        assert_eq!(row["username"], *who, "{row}");
        assert_eq!(row["target"], *target, "{row}");
        assert_eq!(row["address"], "127.0.0.1", "{row}");
        assert!(row["at_ms"].as_i64().unwrap() > 0);
    }
    let job_rows: Vec<&Value> = rows
        .iter()
        .filter(|r| r["target"] == format!("job:{job}"))
        .collect();
    assert!(job_rows.iter().all(|r| r["group"] == "au"), "{job_rows:?}");
    // Newest first, and the filters narrow it.
    let times: Vec<i64> = rows.iter().map(|r| r["at_ms"].as_i64().unwrap()).collect();
    assert!(times.windows(2).all(|w| w[0] >= w[1]), "{times:?}");
    let (_, vics) = api.get("/api/v1/audit?user=vic").await;
    assert_eq!(vics["items"].as_array().unwrap().len(), 5, "{vics}");
    let (_, one) = api.get("/api/v1/audit?action=job.trigger").await;
    assert_eq!(one["items"][0]["detail"], "params 1 bytes");
    let (_, one) = api.get("/api/v1/audit?action=user.language").await;
    assert_eq!(one["items"][0]["detail"], "zh-CN", "{one}");
    let (status, bad) = api.get("/api/v1/audit?since_ms=yesterday").await;
    assert_eq!((status, &bad["error"]["field"]), (400, &json!("since_ms")));
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_first_admin_comes_from_config_once_in_a_databases_life() {
    let mut world = World::new("firstadmin").await;
    sqlx::query("DELETE FROM api_token")
        .execute(&world.db)
        .await
        .unwrap();
    sqlx::query("DELETE FROM `user`")
        .execute(&world.db)
        .await
        .unwrap();
    world.config.auth.admin_user = "root".into();
    world.config.auth.admin_password = "the first admin's passphrase".into();
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let addr = cluster.nodes[node].addr();
    eventually(
        "the first admin to be made",
        Duration::from_secs(20),
        || async {
            let mut b = Browser::new(addr);
            (b.login("root", "the first admin's passphrase").await.0 == 200).then_some(())
        },
    )
    .await;
    let mut root = Browser::new(addr);
    let (_, who) = root.login("root", "the first admin's passphrase").await;
    assert_eq!(who["role"], "admin");
    // With a user in the table, another admin in the config makes nobody.
    let history = History::from_pool(cluster.db().clone());
    let mut other = cluster.config().auth.clone();
    other.admin_user = "other".into();
    let made = rondo_scheduler::api::auth::bootstrap_admin(&history, &other)
        .await
        .unwrap();
    assert!(!made);
    assert!(history.user("other").await.unwrap().is_none());
    assert_eq!(history.user_count().await.unwrap(), 1);
    // Only once in the database's life: with the user table emptied, the
    // config's admin (a password someone may know) does not come back.
    for table in ["api_token", "`user`"] {
        sqlx::query(sqlx::AssertSqlSafe(format!("DELETE FROM {table}")))
            .execute(cluster.db())
            .await
            .unwrap();
    }
    let again = rondo_scheduler::api::auth::bootstrap_admin(&history, &cluster.config().auth)
        .await
        .unwrap();
    assert!(!again, "the first admin was made again");
    assert_eq!(history.user_count().await.unwrap(), 0);
    cluster.stop().await;
}
