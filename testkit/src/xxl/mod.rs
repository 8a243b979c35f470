//! XXL-JOB's side, as processes of a test's world: the gateway
//! (`rondo-xxl-gateway`) and stand-in XXL-JOB executors (`xxl-standin`,
//! written from XXL-JOB's protocol: its embedded server, registry loop,
//! callback thread and log files, for each protocol generation). Each is
//! killed when its handle drops, also when the test panics.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use rondo_core::Config;
use serde::Deserialize;
use tokio::process::{Child, Command};

use crate::procs::{self, binary, free_addr};
use crate::{PATIENCE, eventually};

mod ddl;

pub use ddl::XxlRelease;

/// A database of its own with XXL-JOB 2.4's tables (see
/// [`xxl_database_of`]), dropped with the guard.
pub async fn xxl_database(config: &Config) -> rondo_history::testing::TestDatabase {
    xxl_database_of(config, XxlRelease::V2_4).await
}

/// A database of its own with `release`'s `xxl_job_group`, `xxl_job_info`,
/// `xxl_job_logglue`, `xxl_job_user` and `xxl_job_lock` (with its
/// `schedule_lock` row), dropped with the guard.
pub async fn xxl_database_of(
    config: &Config,
    release: XxlRelease,
) -> rondo_history::testing::TestDatabase {
    let db = rondo_history::testing::TestDatabase::empty(&config.mysql.url).await;
    for ddl in release.ddl() {
        sqlx::query(sqlx::AssertSqlSafe(ddl))
            .execute(&db.pool)
            .await
            .expect("XXL-JOB's table");
    }
    db
}

/// The access token the tests give their XXL-JOB groups (each its own
/// copy: [`serve_group`]) and stand-ins.
pub const TOKEN: &str = "xxl-test-token";

/// A cluster of one scheduler node and the persistence worker, with
/// `gateways` gateway processes (ready), the world's config tuned by
/// `tune` first; and the node's admin API.
pub async fn cluster(
    tag: &str,
    gateways: usize,
    tune: impl FnOnce(&mut crate::World),
) -> (crate::Cluster, crate::Api, Vec<Gateway>) {
    let mut world = crate::World::new(tag).await;
    tune(&mut world);
    let mut cluster = crate::Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let gateways: Vec<Gateway> = (0..gateways)
        .map(|i| Gateway::spawn(cluster.config(), &format!("gateway-{i}"), &cluster.log_dir))
        .collect();
    for g in &gateways {
        g.until_ready().await;
    }
    (cluster, api, gateways)
}

/// Creates group `app` served by the XXL-JOB gateway, with access token
/// `token`, through `api` (an admin's).
pub async fn serve_group(api: &crate::Api, app: &str, token: &str) {
    let (status, out) = api
        .post(
            "/api/v1/groups",
            serde_json::json!({ "app": app, "xxl_gateway": true }),
        )
        .await;
    assert_eq!(status, 201, "{out}");
    let (status, out) = api
        .post(
            &format!("/api/v1/groups/{app}/xxl-token"),
            serde_json::json!({ "token": token }),
        )
        .await;
    assert_eq!(status, 200, "{out}");
}

/// A gateway process.
pub struct Gateway {
    pub name: String,
    /// Its admin API (what executors call).
    pub listen: SocketAddr,
    /// Its `/metrics`.
    pub metrics: SocketAddr,
    pub log: PathBuf,
    child: Child,
    /// Dropped after the process (fields drop in order).
    _redis_user: Option<crate::redis_acl::RedisUser>,
}

impl Gateway {
    /// Starts a gateway of the world's `config` (its `xxl.*` keys too, but
    /// the listen and metrics addresses, which it gets fresh), its stderr
    /// in `log_dir/<name>.log`.
    pub fn spawn(config: &Config, name: &str, log_dir: &Path) -> Gateway {
        Self::spawn_listening(config, name, log_dir, &free_addr().to_string())
    }

    /// [`Gateway::spawn`] listening on `listen` (`0.0.0.0:0` to see it
    /// refuse to listen off loopback without a token).
    pub fn spawn_listening(config: &Config, name: &str, log_dir: &Path, listen: &str) -> Gateway {
        let listen_addr: SocketAddr = listen.parse().expect("a socket address");
        let metrics = free_addr();
        let log = log_dir.join(format!("{name}.log"));
        let file = std::fs::File::create(&log).expect("gateway log file");
        let x = &config.xxl;
        let env = [
            ("RONDO_XXL_LISTEN_ADDR", listen.to_owned()),
            ("RONDO_XXL_METRICS_ADDR", metrics.to_string()),
            ("RONDO_XXL_ACCESS_TOKEN", x.access_token.clone()),
            ("RONDO_XXL_SHARED_TOKEN", x.shared_token.to_string()),
            ("RONDO_XXL_ALLOW_NO_TOKEN", x.allow_no_token.to_string()),
            (
                "RONDO_XXL_REQUEST_TIMEOUT_MS",
                x.request_timeout_ms.to_string(),
            ),
            ("RONDO_XXL_LOST_AFTER_MS", x.lost_after_ms.to_string()),
            (
                "RONDO_XXL_REGISTRATION_TTL_MS",
                x.registration_ttl_ms.to_string(),
            ),
            ("RONDO_XXL_LOG_POLL_MS", x.log_poll_ms.to_string()),
        ];
        // Its own Redis user, when the world runs under ACL users.
        let mut config = config.clone();
        let redis_user = crate::redis_acl::for_process(
            &config.redis.url,
            &config.namespace,
            crate::redis_acl::Role::Gateway,
        )
        .map(|(user, url)| {
            config.redis.url = url;
            user
        });
        let child = procs::rondo_child("rondo-xxl-gateway", &config, env, file);
        Gateway {
            name: name.to_owned(),
            listen: listen_addr,
            metrics,
            log,
            child,
            _redis_user: redis_user,
        }
    }

    /// The admin address executors name (`xxl.job.admin.addresses`), with
    /// XXL-JOB's usual context path.
    pub fn admin_url(&self) -> String {
        format!("http://{}/xxl-job-admin", self.listen)
    }

    /// Waits until it serves (`/readyz`).
    pub async fn until_ready(&self) {
        let url = format!("http://{}/readyz", self.metrics);
        eventually(
            &format!("gateway {} ready", self.name),
            PATIENCE,
            || async {
                let resp = reqwest::get(&url).await.ok()?;
                resp.status().is_success().then_some(())
            },
        )
        .await;
    }

    /// Waits until it takes `token` (it reads the groups' tokens every
    /// 500 ms): an empty callback with it is answered 200.
    pub async fn until_token_taken(&self, token: &str) {
        let url = format!("{}/api/callback", self.admin_url());
        eventually("the gateway takes the token", PATIENCE, || async {
            let answer: serde_json::Value = reqwest::Client::new()
                .post(&url)
                .header("XXL-JOB-ACCESS-TOKEN", token)
                .json(&serde_json::json!([]))
                .send()
                .await
                .ok()?
                .json()
                .await
                .ok()?;
            (answer["code"] == 200).then_some(())
        })
        .await;
    }

    /// Its metrics, scraped.
    pub async fn scrape(&self) -> String {
        let url = format!("http://{}/metrics", self.metrics);
        reqwest::get(&url)
            .await
            .expect("scrape the gateway")
            .text()
            .await
            .expect("metrics text")
    }

    /// `kill -9` and reap.
    pub async fn kill9(&mut self) {
        procs::signal(&self.child, "KILL");
        let _ = self.child.wait().await;
    }

    /// Sends a signal by name (`STOP`, `CONT`, `TERM`).
    pub fn signal(&self, name: &str) {
        procs::signal(&self.child, name);
    }

    /// Waits for its exit (it was started to fail).
    pub async fn exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        tokio::time::timeout(timeout, self.child.wait())
            .await
            .ok()
            .and_then(Result::ok)
    }
}

/// What a stand-in executor is started with.
#[derive(Debug, Clone)]
pub struct StandinSpec {
    /// `2` (xxl-job-core 2.3–3.2), `3` (3.3–3.4) or `3.5`.
    pub generation: &'static str,
    pub app: String,
    /// The gateways' admin URLs, in the order it tries them.
    pub admins: Vec<String>,
    pub token: String,
    /// XXL-JOB's 30 s; tests register faster.
    pub registry_interval_ms: u64,
    pub callback_retry_interval_ms: u64,
}

impl StandinSpec {
    pub fn new(generation: &'static str, app: &str, admins: Vec<String>) -> StandinSpec {
        StandinSpec {
            generation,
            app: app.to_owned(),
            admins,
            token: TOKEN.to_owned(),
            registry_interval_ms: 1_000,
            callback_retry_interval_ms: 1_000,
        }
    }
}

/// One line of a stand-in's runs file: a handler started or ended.
#[derive(Debug, Clone, Deserialize)]
pub struct StandinRun {
    pub event: String,
    pub log_id: i64,
    #[serde(default)]
    pub log_date_time: i64,
    pub job_id: i64,
    #[serde(default)]
    pub handler: Option<String>,
    #[serde(default)]
    pub params: Option<String>,
    #[serde(default)]
    pub glue_type: Option<String>,
    #[serde(default)]
    pub broadcast_index: i32,
    #[serde(default)]
    pub broadcast_total: i32,
    #[serde(default)]
    pub code: Option<i32>,
    #[serde(default)]
    pub msg: Option<String>,
    pub ms: i64,
}

/// A stand-in XXL-JOB executor process.
pub struct Standin {
    pub spec: StandinSpec,
    pub port: u16,
    /// The address it registers (`http://127.0.0.1:<port>/`).
    pub address: String,
    /// Its rondo executor id (as the gateway names it).
    pub executor_id: String,
    pub runs_file: PathBuf,
    pub log_path: PathBuf,
    child: Child,
}

impl Standin {
    /// Starts one in `log_dir/<name>/`.
    pub fn spawn(spec: StandinSpec, name: &str, log_dir: &Path) -> Standin {
        let port = free_addr().port();
        Self::spawn_on(spec, name, log_dir, port)
    }

    /// Starts one on `port` (a restart keeps its address).
    pub fn spawn_on(spec: StandinSpec, name: &str, log_dir: &Path, port: u16) -> Standin {
        let dir = log_dir.join(name);
        std::fs::create_dir_all(&dir).expect("stand-in dir");
        let runs_file = dir.join("runs.jsonl");
        let log_path = dir.join("joblogs");
        let address = format!("http://127.0.0.1:{port}/");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("standin.log"))
            .expect("stand-in log file");
        let child = Command::new(binary("xxl-standin"))
            .args(["--generation", spec.generation])
            .args(["--port", &port.to_string()])
            .args(["--address", &address])
            .args(["--admin-addresses", &spec.admins.join(",")])
            .args(["--access-token", &spec.token])
            .args(["--appname", &spec.app])
            .arg("--log-path")
            .arg(&log_path)
            .arg("--runs-file")
            .arg(&runs_file)
            .args([
                "--registry-interval-ms",
                &spec.registry_interval_ms.to_string(),
            ])
            .args([
                "--callback-retry-interval-ms",
                &spec.callback_retry_interval_ms.to_string(),
            ])
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("spawn xxl-standin");
        let executor_id = rondo_xxl_gateway::executor_id(&spec.app, &address);
        Standin {
            spec,
            port,
            address,
            executor_id,
            runs_file,
            log_path,
            child,
        }
    }

    /// Every line of its runs file so far.
    pub fn runs(&self) -> Vec<StandinRun> {
        std::fs::read_to_string(&self.runs_file)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The handler starts so far.
    pub fn starts(&self) -> Vec<StandinRun> {
        self.runs()
            .into_iter()
            .filter(|r| r.event == "start")
            .collect()
    }

    /// `kill -9` and reap.
    pub async fn kill9(&mut self) {
        procs::signal(&self.child, "KILL");
        let _ = self.child.wait().await;
    }

    /// SIGTERM (it removes its registration, as XXL-JOB's) and wait.
    pub async fn terminate(&mut self, timeout: Duration) -> Option<ExitStatus> {
        procs::terminate(&mut self.child, timeout).await
    }
}
