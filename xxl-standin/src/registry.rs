//! The registry thread: registers the executor's address with the admins
//! at start and every `--registry-interval-ms`, and removes it on a
//! graceful stop.

use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::admin::AdminClient;

/// Registers now and every `every`, until `stop`.
pub async fn register_until(
    admin: AdminClient,
    body: String,
    every: Duration,
    stop: CancellationToken,
) {
    let beats = async {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            let delivery = admin.post("registry", &body).await;
            if delivery.ok {
                debug!("registered");
            } else {
                warn!(failures = ?delivery.failures, "registry failed on every admin");
            }
        }
    };
    tokio::select! {
        () = beats => {}
        () = stop.cancelled() => {}
    }
}

/// `/api/registryRemove`, admins in order until one takes it.
pub async fn deregister(admin: &AdminClient, body: &str) {
    let delivery = admin.post("registryRemove", body).await;
    if delivery.ok {
        info!("registry removed");
    } else {
        warn!(failures = ?delivery.failures, "registry remove failed on every admin");
    }
}
