//! The harness of rondo's integration tests: each test gets its own
//! namespace (Redis keys, AMQP names, ZooKeeper chroot) and its own MySQL
//! database, starts the processes it needs in-process against the real
//! services, and removes everything it made at the end.
//!
//! # Layout
//!
//! * [`Env`]: config, database and cleanup of one test.
//! * [`Api`]: a small JSON client of the admin API.
//! * [`fake_executors`]: executors registered in Redis without a process,
//!   for routing tests.
//! * [`procs`]: scheduler nodes as OS processes (kill, stop, restart).
//! * [`recorder`]: an executor handler that records every run.
//! * [`stats`]: percentiles for lateness reports.

use std::time::Duration;

use rondo_core::{Config, testkit};
use serde_json::Value;
use sqlx::MySqlPool;

pub mod fake_executors;
pub mod procs;
pub mod recorder;
pub mod stats;

/// One test's isolated world.
pub struct Env {
    pub config: Config,
    pub db: MySqlPool,
    db_name: String,
    base_mysql_url: String,
}

impl Env {
    pub async fn new(tag: &str) -> Env {
        init_tracing();
        let mut config = testkit::config(tag);
        let base_mysql_url = config.mysql.url.clone();
        let (db, url, db_name) = rondo_history::testing::fresh_database(&base_mysql_url).await;
        config.mysql.url = url;
        Env {
            config,
            db,
            db_name,
            base_mysql_url,
        }
    }

    /// Removes the namespace's Redis keys, AMQP queues and exchanges,
    /// ZooKeeper nodes and the database. `queues`: executor queues.
    pub async fn cleanup(self, queues: &[String]) {
        testkit::cleanup_redis(&self.config).await;
        testkit::cleanup_amqp(&self.config, queues).await;
        cleanup_zk(&self.config).await;
        self.db.close().await;
        rondo_history::testing::drop_database(&self.base_mysql_url, &self.db_name).await;
    }
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

/// Deletes the namespace's chroot in ZooKeeper, children first.
async fn cleanup_zk(config: &Config) {
    let Ok(client) = zookeeper_client::Client::connect(&config.zookeeper.connect).await else {
        return;
    };
    let root = config.names().zk_root();
    let _ = delete_tree(&client, &root).await;
}

async fn delete_tree(
    client: &zookeeper_client::Client,
    path: &str,
) -> Result<(), zookeeper_client::Error> {
    let mut stack = vec![path.to_owned()];
    let mut order = Vec::new();
    while let Some(p) = stack.pop() {
        let children = client.list_children(&p).await.unwrap_or_default();
        stack.extend(children.iter().map(|c| format!("{p}/{c}")));
        order.push(p);
    }
    for p in order.iter().rev() {
        let _ = client.delete(p, None).await;
    }
    Ok(())
}

/// A JSON client of the admin API.
#[derive(Clone)]
pub struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    pub fn new(addr: std::net::SocketAddr) -> Api {
        Api {
            base: format!("http://{addr}"),
            http: reqwest::Client::new(),
        }
    }

    /// Sends a request; returns the status and the JSON body (Null if empty).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.expect("api reachable");
        let status = resp.status().as_u16();
        let text = resp.text().await.expect("api body");
        (
            status,
            if text.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(&text).unwrap_or(Value::String(text))
            },
        )
    }

    /// Sends a raw body (for malformed JSON).
    pub async fn call_raw(&self, method: reqwest::Method, path: &str, body: &str) -> (u16, Value) {
        let req = self
            .http
            .request(method, format!("{}{path}", self.base))
            .header("content-type", "application/json");
        let resp = req
            .body(body.to_owned())
            .send()
            .await
            .expect("api reachable");
        let status = resp.status().as_u16();
        (status, resp.json().await.unwrap_or(Value::Null))
    }

    pub async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn get(&self, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, path, None).await
    }
}

/// Polls `f` every 100 ms until it returns `Some`, or panics after `timeout`.
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
