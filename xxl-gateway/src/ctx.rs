//! What every part of a gateway instance shares: its links to Redis, the
//! broker and the executors, and the fleet it serves.

use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures_util::FutureExt;
use tokio_util::sync::CancellationToken;

use rondo_core::config::{RegistryConfig, XxlConfig};
use rondo_core::redis::Pool;
use rondo_core::{Config, Names};
use rondo_dispatcher::{EventPublisher, Link};

use crate::access::Access;
use crate::client::Client;
use crate::executors::Executors;
use crate::instances::Instances;
use crate::local::Local;
use crate::roster::Fleet;
use crate::runs::{Claimant, Runs};
use crate::tails::Tails;

pub(crate) struct Ctx {
    pub(crate) names: Names,
    pub(crate) pool: Pool,
    pub(crate) amqp_url: String,
    pub(crate) client: Client,
    pub(crate) runs: Runs,
    pub(crate) executors: Executors,
    /// The groups served and their tokens.
    pub(crate) access: Access,
    pub(crate) instances: Instances,
    /// Results and log lines.
    pub(crate) events: EventPublisher,
    /// Hand-backs and dead letters.
    pub(crate) link: Arc<Link>,
    pub(crate) fleet: Fleet,
    pub(crate) tails: Tails,
    pub(crate) local: Local,
    pub(crate) registry: RegistryConfig,
    pub(crate) xxl: XxlConfig,
    /// The zone the executors' log lines are stamped in (the cluster's).
    pub(crate) zone: chrono_tz::Tz,
    /// A task of this instance panicked: it stops (`failure` says which).
    pub(crate) failed: CancellationToken,
    pub(crate) failure: Mutex<Option<String>>,
}

impl Ctx {
    pub(crate) fn new(config: &Config, pool: Pool, client: Client, instance: String) -> Arc<Ctx> {
        let names = config.names();
        let link = Arc::new(Link::for_executor(&config.amqp.url, names.clone()));
        Arc::new(Ctx {
            runs: Runs::new(pool.clone(), names.clone(), config.executor.dedupe_ttl_s),
            executors: Executors::new(pool.clone(), names.clone()),
            access: Access::new(&config.xxl),
            instances: Instances::new(
                pool.clone(),
                names.clone(),
                instance,
                config.registry.lease_ms,
            ),
            events: EventPublisher::new(link.clone()),
            link,
            fleet: Fleet::default(),
            tails: Tails::default(),
            local: Local::default(),
            names,
            pool,
            amqp_url: config.amqp.url.clone(),
            client,
            registry: config.registry.clone(),
            xxl: config.xxl.clone(),
            zone: config.default_zone(),
            failed: CancellationToken::new(),
            failure: Mutex::new(None),
        })
    }

    pub(crate) fn me(&self) -> &str {
        self.instances.me()
    }

    /// This instance's claim of a trigger under `log_id`.
    pub(crate) fn claimant(&self, log_id: i64) -> Claimant {
        Claimant {
            log_id,
            instance: self.me().to_owned(),
        }
    }

    /// `task`, guarded: a panic in it stops the whole instance (a task
    /// that died alone could leave a delivery unacked, or an executor's
    /// lease renewed while its queue is not consumed).
    pub(crate) fn guard(
        self: &Arc<Self>,
        name: &'static str,
        task: impl Future<Output = ()> + Send + 'static,
    ) -> impl Future<Output = ()> + Send + 'static {
        let ctx = self.clone();
        async move {
            if let Err(panic) = AssertUnwindSafe(task).catch_unwind().await {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_owned())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_default();
                let why = format!("task {name} panicked: {what}");
                tracing::error!(error = %why, "the gateway stops");
                ctx.failure.lock().expect("failure lock").get_or_insert(why);
                ctx.failed.cancel();
            }
        }
    }

    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.registry.lease_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_guarded_task_that_panics_stops_the_instance_and_says_why() {
        let config = Config::default();
        let pool = rondo_core::redis::pool(&config.redis).expect("a pool (not connected)");
        let client = Client::new(Duration::from_secs(1), Default::default()).expect("a client");
        let ctx = Ctx::new(&config, pool, client, "g".into());
        ctx.guard("quiet", async {}).await;
        assert!(!ctx.failed.is_cancelled(), "a task that ends is no failure");
        tokio::spawn(ctx.guard("hand-off", async { panic!("boom") }))
            .await
            .expect("the guard catches the panic");
        assert!(ctx.failed.is_cancelled());
        let why = ctx.failure.lock().unwrap().clone().unwrap_or_default();
        assert!(why.contains("hand-off") && why.contains("boom"), "{why}");
    }
}
