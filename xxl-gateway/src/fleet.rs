//! Serving the fleet: every XXL-JOB executor in Redis (registered, or
//! listed in its group's `xxl_addresses`), each served by this instance
//! (`served`'s tasks), and the broker connection their queues are consumed
//! on (the state is `roster`'s).
//!
//! Every [`RECONCILE`] the fleet is read again: the groups the gateway
//! serves and their tokens (`access`), new executors are served, removed
//! ones stop, registrations older than `xxl.registration_ttl_ms` are
//! removed (XXL-JOB's 90 s), executors of a group no longer served leave,
//! and the served groups' address lists are made records (and unmade when
//! an address leaves its list).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use lapin::Connection;
use rondo_core::backoff::Backoff;
use rondo_core::{Error, amqp, clock};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument;

use crate::ctx::Ctx;
use crate::executors::{Record, executor_id};
use crate::roster::Served;

/// How often the fleet is read again (and at once after a local change).
const RECONCILE: Duration = Duration::from_millis(500);
/// How often the consuming connection is checked.
const LIVENESS_CHECK: Duration = Duration::from_secs(1);

/// Serves the fleet until `stop`, then stops serving (without retiring
/// anyone: the other instances go on) and waits for the hand-offs.
pub(crate) async fn run(ctx: Arc<Ctx>, stop: CancellationToken) {
    let tasks = TaskTracker::new();
    tasks.spawn(ctx.guard(
        "broker link",
        connect(ctx.clone(), stop.clone()).in_current_span(),
    ));
    let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(5));
    loop {
        match reconcile(&ctx, &stop, &tasks).await {
            Ok(()) => backoff.reset(),
            Err(e) => tracing::warn!(error = %e, "cannot read the XXL-JOB executors"),
        }
        tokio::select! {
            () = stop.cancelled() => break,
            () = tokio::time::sleep(RECONCILE) => {}
            () = ctx.fleet.changed.notified() => {}
        }
    }
    tasks.close();
    tasks.wait().await;
    let conn = ctx.fleet.connection.send_replace(None);
    if let Some(conn) = conn {
        let _ = conn.close(200, "shutdown".into()).await;
    }
}

/// One pass: the groups and records in Redis made the served set. An
/// executor of a group the gateway no longer serves leaves the fleet.
async fn reconcile(
    ctx: &Arc<Ctx>,
    stop: &CancellationToken,
    tasks: &TaskTracker,
) -> Result<(), Error> {
    ctx.access.replace(ctx.executors.groups().await?);
    sync_manual_lists(ctx).await?;
    let now = clock::now_ms();
    let ttl = ctx.xxl.registration_ttl_ms as i64;
    let mut live = HashMap::new();
    for record in ctx.executors.load().await? {
        if !ctx.access.knows(&record.app) {
            tracing::info!(executor_id = %record.id, app = %record.app, "its group is not served by the gateway: the executor leaves the fleet");
            ctx.executors.remove(&record.id).await?;
            continue;
        }
        if !record.manual && record.registered_ms < now - ttl {
            tracing::info!(executor_id = %record.id, address = %record.address, "no registration for {} s: the executor leaves the fleet", ttl / 1000);
            ctx.executors.remove(&record.id).await?;
            continue;
        }
        live.insert(record.id.clone(), record);
    }
    let mut served = ctx.fleet.served.write().expect("fleet lock");
    served.retain(|id, s| {
        let keep = live.contains_key(id);
        if !keep {
            s.remove();
        }
        keep
    });
    for (id, record) in live {
        let token = ctx.access.token_for(&record.app, &record.token_fp);
        match served.get(&id) {
            Some(s) => s.update(record, token),
            None => {
                tracing::info!(executor_id = %id, address = %record.address, app = %record.app, "serving an XXL-JOB executor");
                let s = Arc::new(Served::new(record, token, stop.child_token()));
                tasks.spawn(ctx.guard("executor", crate::served::run(s.clone(), ctx.clone())));
                served.insert(id, s);
            }
        }
    }
    metrics::gauge!("rondo_xxl_executors").set(served.len() as f64);
    Ok(())
}

/// Makes the served groups' `xxl_addresses` records (renewed at every
/// pass, so they never expire), and removes the manual records no list
/// holds.
async fn sync_manual_lists(ctx: &Ctx) -> Result<(), Error> {
    let now = clock::now_ms();
    let mut listed = HashSet::new();
    for (app, addresses) in ctx.access.manual_lists() {
        for address in addresses {
            listed.insert(executor_id(&app, &address));
            if let Err(refusal) = ctx
                .executors
                .register(&app, &address, true, "", now)
                .await?
            {
                tracing::warn!(
                    app,
                    address,
                    refusal = %refusal.message(&address),
                    "a listed executor address cannot be served"
                );
            }
        }
    }
    for record in ctx.executors.load().await? {
        if record.manual && !listed.contains(&record.id) {
            remove_manual(ctx, &record).await?;
        }
    }
    Ok(())
}

async fn remove_manual(ctx: &Ctx, record: &Record) -> Result<(), Error> {
    tracing::info!(executor_id = %record.id, address = %record.address, "no longer in its group's address list");
    ctx.executors.remove(&record.id).await
}

/// Keeps a broker connection for consuming, reconnecting with backoff,
/// until `stop`.
async fn connect(ctx: Arc<Ctx>, stop: CancellationToken) {
    let mut backoff = Backoff::jittered(Duration::from_millis(200), Duration::from_secs(10));
    let name = format!("rondo-xxl-gateway {}", ctx.me());
    while !stop.is_cancelled() {
        let opened = tokio::select! {
            () = stop.cancelled() => break,
            opened = open(&ctx, &name) => opened,
        };
        match opened {
            Ok(conn) => {
                let conn = Arc::new(conn);
                backoff.reset();
                ctx.fleet.connection.send_replace(Some(conn.clone()));
                while conn.status().connected() && !stop.is_cancelled() {
                    tokio::select! {
                        () = stop.cancelled() => {}
                        () = tokio::time::sleep(LIVENESS_CHECK) => {}
                    }
                }
                if !stop.is_cancelled() {
                    tracing::warn!("the consuming broker connection dropped; reconnecting");
                    ctx.fleet.connection.send_replace(None);
                }
            }
            Err(e) => tracing::warn!(error = %e, "cannot connect to the broker; retrying"),
        }
        if !backoff.wait(&stop).await {
            break;
        }
    }
}

async fn open(ctx: &Ctx, name: &str) -> Result<Connection, Error> {
    let conn = amqp::connect(&ctx.amqp_url, name).await?;
    let channel = conn.create_channel().await?;
    amqp::declare_executor_topology(&channel, &ctx.names).await?;
    let _ = channel.close(200, "declared".into()).await;
    Ok(conn)
}
