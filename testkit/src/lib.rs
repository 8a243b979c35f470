//! rondo-testkit: the one harness of rondo's integration tests.
//!
//! Each test gets its own [`World`]: a namespace (Redis keys, AMQP names,
//! the ZooKeeper chroot) and a MySQL database, removed when the world is
//! dropped, also when the test panics, so tests run in parallel and twice
//! in a row. A [`Cluster`] runs in a world whatever the test needs, against
//! the real services: scheduler nodes, executors and the persistence
//! worker, each in-process or as the real binary's process, and stops them
//! when dropped.
//!
//! # Layout
//!
//! * [`World`] (here): a test's config, database and cleanup.
//! * [`Api`] (here): a JSON client of the admin API, over TCP or on the
//!   router in-process (no node started).
//! * [`cluster`]: [`Cluster`], what runs in a world.
//! * [`procs`]: the real binaries as processes (kill, stop, restart).
//! * [`recorder`]: an executor handler that records every run;
//!   [`receiver`]: an HTTP receiver that records every run of the built-in
//!   `http` handler, for executors that run as processes.
//! * [`fake_executors`]: executors registered in Redis without a process,
//!   for routing tests.
//! * [`stats`]: percentiles for lateness reports.
//! * [`witness`]: a broker-side count of the triggers sent to executors.
//! * [`topology`]: the cluster topology (`scripts/services-cluster.sh`):
//!   a ZooKeeper ensemble and its members killed and restarted.
//! * [`xxl`]: the XXL-JOB gateway and stand-in XXL-JOB executors as
//!   processes.
//! * [`watchdog`]: a child that dies with its driver even when the driver
//!   is killed -9 (the benchmark's clusters, which are built on this
//!   crate).
//!
//! Also re-exported from `rondo_core::testkit`: [`eventually`] (wait for a
//! positive signal, never sleep-then-assert), [`fixtures`], [`queue_depth`],
//! [`take_dead`].

pub mod browser;
pub mod cluster;
pub mod fake_executors;
pub mod procs;
pub mod python;
pub mod receiver;
pub mod recorder;
pub mod redis_acl;
pub mod stats;
pub mod topology;
pub mod watchdog;
pub mod witness;
pub mod xxl;

use axum::body::Body;
use reqwest::Method;
use rondo_core::Config;
use rondo_core::auth::Role;
use rondo_core::testkit::Namespace;
use rondo_history::testing::TestDatabase;
use rondo_history::testing::users;
use serde_json::Value;
use sqlx::MySqlPool;
use tower::ServiceExt;

pub use cluster::Cluster;

/// The text of `doc` between its `<!-- name:begin -->` and
/// `<!-- name:end -->` markers: the tables and command lines the tests
/// read from the docs, so the docs say what the code does.
pub fn doc_block<'a>(doc: &'a str, name: &str) -> &'a str {
    let begin = format!("<!-- {name}:begin -->");
    let start = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("no {begin} marker"));
    let end = doc[start..]
        .find(&format!("<!-- {name}:end -->"))
        .unwrap_or_else(|| panic!("no {name}:end marker after {begin}"));
    &doc[start..start + end]
}
pub use rondo_core::testkit::{PATIENCE, eventually, fixtures, queue_depth, take_dead};

/// One test's isolated world: its config (a fresh namespace, short
/// timings, its own database), removed when dropped.
pub struct World {
    pub config: Config,
    pub db: MySqlPool,
    /// An admin of this world's database, with an API token every
    /// [`Api`] of the world's nodes sends.
    pub admin: Admin,
    /// The Redis ACL users of the world's processes (`docs/security.md`),
    /// when it runs on one Redis: the scheduler's, whose URL is
    /// `config.redis.url`, and one per executor and gateway started.
    redis_users: std::sync::Mutex<Vec<redis_acl::RedisUser>>,
    // Dropped last, in this order: the keys, queues and chroot, then the
    // database.
    namespace: Namespace,
    _database: TestDatabase,
}

impl World {
    pub async fn new(tag: &str) -> World {
        init_tracing();
        let namespace = Namespace::new(tag);
        let mut config = namespace.config.clone();
        let database = TestDatabase::migrated(&config.mysql.url).await;
        config.mysql.url = database.url.clone();
        let admin = Admin {
            username: "admin".into(),
            password: users::TEST_PASSWORD.into(),
            token: users::admin_token(&database.pool, "admin").await,
        };
        // Every process runs as the Redis user its role is documented with.
        let mut redis_users = Vec::new();
        if let Some((user, url)) = redis_acl::for_world(&config.redis.url, &config.namespace) {
            config.redis.url = url;
            redis_users.push(user);
        }
        World {
            config,
            db: database.pool.clone(),
            admin,
            redis_users: std::sync::Mutex::new(redis_users),
            namespace,
            _database: database,
        }
    }

    /// A user of this world with `role` and `groups`, and an API token of
    /// theirs (`read_only` as asked).
    pub async fn user(&self, name: &str, role: Role, groups: &[&str], read_only: bool) -> String {
        users::create_user(&self.db, name, role, groups).await;
        users::create_token(&self.db, name, read_only).await
    }

    /// The Redis URL of the tests' admin user
    /// ([`rondo_core::testkit::redis_admin_url`]), which may do what no
    /// process's user may (`KEYS`, `SCAN`, `ACL`): for a test's own look at
    /// Redis, never for a process under test.
    pub fn redis_admin_url(&self) -> String {
        self.namespace.config.redis.url.clone()
    }

    /// `config` signed in to Redis as a user of `role` of its own, when
    /// the world runs under Redis ACL users (the user lives as long as the
    /// world).
    pub fn as_redis_user(&self, config: &mut Config, role: redis_acl::Role<'_>) {
        if let Some((user, url)) =
            redis_acl::for_process(&config.redis.url, &config.namespace, role)
        {
            config.redis.url = url;
            self.redis_users
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(user);
        }
    }

    /// The admin API's router over this world's services, called
    /// in-process (no node runs), without credentials: add the admin's
    /// with `.with_token(&world.admin.token)`.
    pub async fn in_process_api(&self, node_id: &str) -> Api {
        let parts =
            rondo_scheduler::Parts::connect(self.config.clone(), node_id.into(), "-".into())
                .await
                .expect("the node's parts connect");
        Api::in_process(rondo_scheduler::api::router(parts.app_state()))
    }

    /// Moves this world onto the ZooKeeper ensemble of the cluster topology
    /// (started if it is not up): its nodes connect to the three members,
    /// and its chroot is removed there.
    pub fn on_zk_ensemble(&mut self) {
        topology::up();
        self.config.zookeeper.connect = topology::ZK_ENSEMBLE.to_owned();
        self.namespace.config.zookeeper.connect = topology::ZK_ENSEMBLE.to_owned();
    }

    /// Gives the world's nodes a ZooKeeper digest identity
    /// (`zookeeper.auth`); its chroot is then removed signed in as it.
    pub fn with_zookeeper_auth(&mut self, auth: &str) {
        self.config.zookeeper.auth = auth.to_owned();
        self.namespace.config.zookeeper.auth = auth.to_owned();
    }

    /// Moves this world onto the Redis Cluster of the cluster topology
    /// (started if it is not up): every process gets its seed nodes, and
    /// the world's keys are removed there.
    pub fn on_redis_cluster(&mut self) {
        topology::up();
        self.config.redis.url = topology::redis_cluster();
        self.namespace.config.redis.url = topology::redis_cluster();
    }

    /// Moves this world onto the RabbitMQ cluster of the cluster topology
    /// (started if it is not up), with quorum queues: every process gets
    /// the three nodes' addresses, and the world's queues are removed there.
    pub fn on_rabbit_cluster(&mut self) {
        topology::up();
        for config in [&mut self.config, &mut self.namespace.config] {
            config.amqp.url = topology::RABBIT_CLUSTER.to_owned();
            config.amqp.queue_type = "quorum".to_owned();
        }
    }

    /// The durable queue of executor `id` of `app`, deleted with the world.
    pub fn executor_queue(&self, app: &str, id: &str) -> String {
        self.namespace.executor_queue(app, id)
    }

    /// Another queue the test declares (say, bound to an exchange to watch
    /// it), deleted with the world.
    pub fn track_queue(&self, queue: &str) {
        self.namespace.track_queue(queue.to_owned());
    }
}

/// The admin of a world.
#[derive(Debug, Clone)]
pub struct Admin {
    pub username: String,
    pub password: String,
    pub token: String,
}

/// `(trigger_code, handle_code)` of every stored trigger log of job `id`
/// (None: that side has not been stored yet).
pub async fn stored_codes(db: &MySqlPool, id: u64) -> Vec<(Option<i32>, Option<i32>)> {
    sqlx::query_as("SELECT trigger_code, handle_code FROM job_log WHERE job_id = ?")
        .bind(id)
        .fetch_all(db)
        .await
        .expect("read job_log")
}

/// Publishes `body` as it is to the events exchange with `routing_key`
/// (say, a malformed event for the persistence worker to dead-letter),
/// as the broker user of `amqp_url`, and waits for the confirm.
pub async fn publish_raw_event(amqp_url: &str, config: &Config, routing_key: &str, body: &[u8]) {
    let exchange = config.names().events_exchange();
    publish_raw(amqp_url, &exchange, routing_key, false, body).await;
}

/// Publishes `body` as it is to the trigger exchange for executor `id` of
/// group `app` (say, a malformed batch for the executor to dead-letter),
/// mandatory: it must reach the executor's queue.
pub async fn publish_raw_trigger(config: &Config, app: &str, id: &str, body: &[u8]) {
    let names = config.names();
    let key = names.trigger_key(app, id);
    publish_raw(
        &config.amqp.url,
        &names.trigger_exchange(),
        &key,
        true,
        body,
    )
    .await;
}

async fn publish_raw(
    amqp_url: &str,
    exchange: &str,
    routing_key: &str,
    mandatory: bool,
    body: &[u8],
) {
    let conn = rondo_core::amqp::connect(amqp_url, "testkit")
        .await
        .expect("connect to the broker");
    let ch = rondo_core::amqp::confirm_channel(&conn)
        .await
        .expect("a confirm channel");
    // As every publisher does: signed with the connection's user.
    let user = rondo_core::amqp::user_of(amqp_url);
    let publish = rondo_core::amqp::Publish {
        exchange,
        routing_key,
        mandatory,
        user_id: Some(&user),
        ..rondo_core::amqp::Publish::default()
    };
    let confirmed = rondo_core::amqp::publish_confirmed(&ch, publish, body)
        .await
        .expect("publish");
    assert!(confirmed, "the broker took the event");
    let _ = conn.close(200, "done".into()).await;
}

fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,rondo=info".into()),
        )
        .with_test_writer()
        .try_init();
}

/// A JSON client of the admin API: over TCP to a node, or in-process on a
/// router (the API's handlers without a node around them).
#[derive(Clone)]
pub struct Api {
    target: Target,
    /// Sent as `Authorization: Bearer …`.
    token: Option<String>,
}

#[derive(Clone)]
enum Target {
    Http { base: String, http: reqwest::Client },
    Router(axum::Router),
}

impl Api {
    /// A node's API at `addr`, without credentials.
    pub fn new(addr: std::net::SocketAddr) -> Api {
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            // The benchmark creates jobs many at a time.
            .pool_max_idle_per_host(256)
            .build()
            .expect("an http client without TLS builds");
        Api {
            target: Target::Http {
                base: format!("http://{addr}"),
                http,
            },
            token: None,
        }
    }

    /// The API's router, called in-process, without credentials.
    pub fn in_process(router: axum::Router) -> Api {
        Api {
            target: Target::Router(router),
            token: None,
        }
    }

    /// The same API, sending `token`.
    pub fn with_token(mut self, token: &str) -> Api {
        self.token = Some(token.to_owned());
        self
    }

    /// [`Api::post`] for a driver that reports a failed call instead of
    /// panicking (the benchmark): an error if the API cannot be reached.
    pub async fn try_post(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        self.try_send(Method::POST, path, Some(body.to_string()))
            .await
    }

    /// GETs a JSON document; an error unless the API answers 2xx within
    /// 5 s.
    pub async fn try_get(&self, path: &str) -> anyhow::Result<Value> {
        let get = self.try_send(Method::GET, path, None);
        let (status, body) = tokio::time::timeout(std::time::Duration::from_secs(5), get)
            .await
            .map_err(|_| anyhow::anyhow!("GET {path}: no answer within 5 s"))??;
        anyhow::ensure!((200..300).contains(&status), "GET {path}: {status} {body}");
        Ok(body)
    }

    /// The node's `GET /api/v1/cluster`, if it answers.
    pub async fn cluster(&self) -> Option<Value> {
        self.try_get("/api/v1/cluster").await.ok()
    }

    /// `POST /api/v1/cluster/stats/reset`: whether the node reset its
    /// latency histograms.
    pub async fn reset_stats(&self) -> bool {
        self.try_post("/api/v1/cluster/stats/reset", &Value::Null)
            .await
            .is_ok_and(|(status, _)| (200..300).contains(&status))
    }

    /// Sends a request; returns the status and the JSON body (Null if empty).
    pub async fn call(&self, method: Method, path: &str, body: Option<Value>) -> (u16, Value) {
        let body = body.map(|b| b.to_string());
        self.send(method, path, body).await
    }

    /// Sends a raw body (for malformed JSON).
    pub async fn call_raw(&self, method: Method, path: &str, body: &str) -> (u16, Value) {
        self.send(method, path, Some(body.to_owned())).await
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(Method::GET, path, None).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(Method::PUT, path, Some(body)).await
    }

    /// Creates a job (asserting 201) and returns its id.
    pub async fn create_job(&self, spec: Value) -> u64 {
        let (status, job) = self.post("/api/v1/jobs", spec).await;
        assert_eq!(status, 201, "{job}");
        job["id"].as_u64().expect("the job's id")
    }

    /// Creates group `app`, waits for an executor of it, and creates `n`
    /// jobs firing every second with handler `record`; returns the latest
    /// first fire (from then on every job fires each second).
    pub async fn every_second_jobs(&self, app: &str, n: u64) -> i64 {
        let (status, group) = self
            .post("/api/v1/groups", serde_json::json!({ "app": app }))
            .await;
        assert_eq!(status, 201, "{group}");
        let path = format!("/api/v1/groups/{app}/executors");
        eventually(&format!("an executor of {app}"), PATIENCE, || async {
            let (_, live) = self.get(&path).await;
            (!live.as_array()?.is_empty()).then_some(())
        })
        .await;
        let mut first = 0;
        for _ in 0..n {
            let spec = serde_json::json!({ "group": app, "handler": "record",
                "schedule_type": "CRON", "schedule_conf": "* * * * * ?" });
            let (status, job) = self.post("/api/v1/jobs", spec).await;
            assert_eq!(status, 201, "{job}");
            first = first.max(job["next_fire_ms"].as_i64().expect("a next fire"));
        }
        first
    }

    /// Waits until the live executors of group `app` are exactly `ids`.
    pub async fn until_executors(&self, app: &str, ids: &[&str]) {
        let path = format!("/api/v1/groups/{app}/executors");
        let want = serde_json::json!(ids);
        eventually(&format!("executors {ids:?} of {app}"), PATIENCE, || async {
            let (_, live) = self.get(&path).await;
            (live == want).then_some(())
        })
        .await;
    }

    /// Fires a job once now (asserting 200) and returns its trigger id.
    pub async fn trigger_now(&self, job_id: u64) -> String {
        self.trigger_with(job_id, serde_json::json!({})).await
    }

    /// Fires a job once now with other `params` (asserting 200) and
    /// returns its trigger id.
    pub async fn trigger_with_params(&self, job_id: u64, params: &str) -> String {
        self.trigger_with(job_id, serde_json::json!({ "params": params }))
            .await
    }

    async fn trigger_with(&self, job_id: u64, body: Value) -> String {
        let (status, out) = self
            .post(&format!("/api/v1/jobs/{job_id}/trigger"), body)
            .await;
        assert_eq!(status, 200, "{out}");
        out["triggers"][0]["trigger"]["trigger_id"]
            .as_str()
            .expect("the trigger id")
            .to_owned()
    }

    async fn send(&self, method: Method, path: &str, body: Option<String>) -> (u16, Value) {
        self.try_send(method, path, body)
            .await
            .expect("api reachable")
    }

    async fn try_send(
        &self,
        method: Method,
        path: &str,
        body: Option<String>,
    ) -> anyhow::Result<(u16, Value)> {
        use anyhow::Context as _;
        let (status, text) = match &self.target {
            Target::Http { base, http } => {
                let what = || format!("{method} {base}{path}");
                let mut req = http.request(method.clone(), format!("{base}{path}"));
                if let Some(token) = &self.token {
                    req = req.bearer_auth(token);
                }
                if let Some(body) = body {
                    req = req.header("content-type", "application/json").body(body);
                }
                let resp = req.send().await.with_context(what)?;
                let status = resp.status().as_u16();
                (status, resp.text().await.with_context(what)?)
            }
            Target::Router(router) => {
                let mut req = axum::http::Request::builder()
                    .method(method.as_str())
                    .uri(path)
                    .header("content-type", "application/json");
                if let Some(token) = &self.token {
                    req = req.header("authorization", format!("Bearer {token}"));
                }
                let req = req
                    .body(body.map_or_else(Body::empty, Body::from))
                    .expect("a valid request");
                let resp = router.clone().oneshot(req).await.expect("infallible");
                let status = resp.status().as_u16();
                let bytes = axum::body::to_bytes(resp.into_body(), usize::MAX)
                    .await
                    .context("api body")?;
                (status, String::from_utf8_lossy(&bytes).into_owned())
            }
        };
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, json))
    }
}
