//! What every part of a gateway instance shares: its links to Redis, the
//! broker and the executors, and the fleet it serves.

use std::sync::Arc;
use std::time::Duration;

use rondo_core::config::{RegistryConfig, XxlConfig};
use rondo_core::redis::Pool;
use rondo_core::{Config, Names};
use rondo_dispatcher::{EventPublisher, Link};

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
}

impl Ctx {
    pub(crate) fn new(config: &Config, pool: Pool, client: Client, instance: String) -> Arc<Ctx> {
        let names = config.names();
        let link = Arc::new(Link::new(&config.amqp.url, names.clone()));
        Arc::new(Ctx {
            runs: Runs::new(pool.clone(), names.clone(), config.executor.dedupe_ttl_s),
            executors: Executors::new(pool.clone(), names.clone()),
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

    pub(crate) fn lease(&self) -> Duration {
        Duration::from_millis(self.registry.lease_ms)
    }
}
