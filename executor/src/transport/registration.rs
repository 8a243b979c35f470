//! The executor's entry in the Redis registry: `ZADD registry:<app>` with the
//! heartbeat time and the `executor:<id>` hash, rewritten every
//! `registry.heartbeat_ms`; in between, the score alone is renewed every
//! `registry.lease_ms / 4`, so routing stops within `registry.lease_ms` of
//! a crash. On a graceful stop the executor retires at once (routing stops,
//! the leader moves its queued triggers) and leaves once its broker link is
//! closed (see `rondo_core::registry`).
//!
//! The hash's fields are `rondo_core::registry::Entry`'s; `running_jobs`
//! lists the jobs with a trigger running or waiting (SERIAL_EXECUTION) on
//! this executor. The dispatcher's BUSYOVER routing reads it, so it is
//! written not only at each heartbeat but within [`CHANGE_COALESCE`] (plus
//! a Redis round trip) of every run's start and end; changes inside that
//! window are written together, and a set equal to the last one written is
//! not written again. Such a write is a whole beat (it also renews the
//! registration).
//!
//! Redis errors are logged and retried with backoff, never fatal: a missed
//! beat only makes the dispatcher skip this executor for a while.

use std::time::Duration;

use rondo_core::redis::Pool;
use rondo_core::{Error, Names, registry};
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use rondo_core::backoff::Backoff;

/// Changes of `running_jobs` within this window are written together.
pub(crate) const CHANGE_COALESCE: Duration = Duration::from_millis(50);

#[derive(Clone)]
pub(crate) struct Registration {
    pub(crate) pool: Pool,
    pub(crate) names: Names,
    pub(crate) app: String,
    pub(crate) executor_id: String,
    pub(crate) host: String,
    /// The handler names, sorted.
    pub(crate) handlers: Vec<String>,
    pub(crate) started_ms: i64,
    pub(crate) incarnation: String,
    pub(crate) heartbeat: Duration,
    /// How often the score alone is renewed.
    pub(crate) lease_renew: Duration,
    /// The hash outlives a crashed executor by this much at most.
    pub(crate) hash_ttl: Duration,
}

impl Registration {
    /// Writes the registration (idempotent; also restores it after a Redis
    /// restart).
    pub(crate) async fn beat(&self, running_jobs: &[u64]) -> Result<(), Error> {
        let entry = registry::Entry {
            app: self.app.clone(),
            host: self.host.clone(),
            handlers: self.handlers.clone(),
            started_ms: self.started_ms,
            pid: std::process::id(),
            incarnation: self.incarnation.clone(),
            heartbeat_ms: rondo_core::clock::now_ms(),
            running_jobs: running_jobs.to_vec(),
            via: String::new(),
        };
        let mut pipe = redis::pipe();
        registry::beat(
            &mut pipe,
            &self.names,
            &self.executor_id,
            &entry,
            self.hash_ttl,
        );
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    async fn renew(&self) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        let now = rondo_core::clock::now_ms();
        registry::renew(&mut pipe, &self.names, &self.app, &self.executor_id, now);
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// Stops routing to this executor, at once; its hash (which tells the
    /// leader the process may still hold messages) is kept for `drain`
    /// more, however long the drain takes.
    pub(crate) async fn retire(&self, drain: Duration) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        registry::retire(&mut pipe, &self.names, &self.app, &self.executor_id);
        let hold = (self.hash_ttl + drain).as_millis() as i64;
        pipe.pexpire(self.names.executor(&self.executor_id), hold)
            .ignore();
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// Says this executor holds no message any more (its link closed).
    pub(crate) async fn leave(&self) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        registry::leave(&mut pipe, &self.names, &self.executor_id);
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// Who else uses this executor's id, if anyone: a live executor of
    /// another group, or an XXL-JOB executor the gateway serves (of any
    /// group: its id is the gateway's). Triggers and kills are routed by the
    /// bare id, so two executors of one id would each get the other's
    /// triggers. An entry not renewed within `lease_ms` (a crashed
    /// executor) does not count.
    pub(crate) async fn id_taken_by(&self, lease_ms: u64) -> Result<Option<String>, Error> {
        let mut conn = self.pool.get().await?;
        // HGETs (the executor's Redis user may not HMGET).
        let hash = self.names.executor(&self.executor_id);
        let mut pipe = redis::pipe();
        for field in [
            registry::field::APP,
            registry::field::HOST,
            registry::field::VIA,
        ] {
            pipe.cmd("HGET").arg(&hash).arg(field);
        }
        let (app, host, via): (Option<String>, Option<String>, Option<String>) =
            pipe.query_async(&mut conn).await?;
        let Some(app) = app else {
            return Ok(None);
        };
        if via.is_some_and(|v| !v.is_empty()) {
            return Ok(Some(format!(
                "the XXL-JOB executor {} of group {app:?} (served by the gateway)",
                host.unwrap_or_default()
            )));
        }
        if app == self.app {
            return Ok(None);
        }
        let taken = || Some(format!("a live executor of group {app:?}"));
        let score: Option<i64> = match redis::cmd("ZSCORE")
            .arg(self.names.registry(&app))
            .arg(&self.executor_id)
            .query_async(&mut conn)
            .await
        {
            Ok(score) => score,
            // This executor's Redis user may not read another group's
            // registry (least privilege): the hash, which expires
            // twice `registry.dead_after_ms` after the other's last beat, is taken
            // as the sign of a live executor.
            Err(e) if e.code() == Some("NOPERM") => return Ok(taken()),
            Err(e) => return Err(e.into()),
        };
        let live = score.is_some_and(|s| s >= rondo_core::clock::now_ms() - lease_ms as i64);
        Ok(if live { taken() } else { None })
    }

    /// Registers once `ready` fires, then beats until `shutdown`: every
    /// heartbeat, and soon after `changes` is notified when `running_jobs`
    /// then differs from what was last written; the lease is renewed in
    /// between.
    pub(crate) async fn run(
        &self,
        running_jobs: impl Fn() -> Vec<u64>,
        changes: &Notify,
        ready: CancellationToken,
        shutdown: CancellationToken,
    ) {
        tokio::select! {
            () = ready.cancelled() => {}
            () = shutdown.cancelled() => return,
        }
        let mut backoff = Backoff::jittered(Duration::from_millis(250), Duration::from_secs(5));
        let mut registered = false;
        let mut written: Option<Vec<u64>> = None;
        let mut next_beat = Instant::now();
        let mut next_renew = Instant::now() + self.lease_renew;
        let mut renew_failing = false;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep_until(next_beat) => {}
                () = tokio::time::sleep_until(next_renew), if registered => {
                    next_renew = Instant::now() + self.lease_renew;
                    match self.renew().await {
                        Ok(()) => renew_failing = false,
                        Err(e) if !renew_failing => {
                            renew_failing = true;
                            tracing::warn!(error = %e, "lease renewal failed; routing skips this executor until it works again");
                        }
                        Err(_) => {}
                    }
                    continue;
                }
                () = changes.notified() => {
                    tokio::select! {
                        () = shutdown.cancelled() => return,
                        () = tokio::time::sleep(CHANGE_COALESCE) => {}
                    }
                    if written.as_ref() == Some(&running_jobs()) {
                        continue;
                    }
                }
            }
            let jobs = running_jobs();
            next_beat = match self.beat(&jobs).await {
                Ok(()) => {
                    if !registered {
                        registered = true;
                        tracing::info!(app = %self.app, "registered");
                    }
                    written = Some(jobs);
                    backoff.reset();
                    next_renew = Instant::now() + self.lease_renew;
                    Instant::now() + self.heartbeat
                }
                Err(e) => {
                    tracing::warn!(error = %e, "heartbeat failed; retrying");
                    written = None;
                    Instant::now() + backoff.next_delay().min(self.heartbeat)
                }
            };
        }
    }
}
