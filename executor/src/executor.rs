//! The executor: built from a config and named handlers, run until its
//! shutdown token fires, then drained in order.

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use rondo_core::Config;
use rondo_core::redis::Pool;
use tokio::sync::Notify;
use tokio::task::{JoinError, JoinHandle};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::admission::dedupe::Dedupe;
use crate::admission::intake::Intake;
use crate::admission::runner::{Runner, RunnerParts};
use crate::error::ExecutorError;
use crate::handler::{Handler, Handlers, HookRegistration, SharedHandler};
use crate::lifecycle::Lifecycle;
use crate::transport::delivery::Deliveries;
use crate::transport::publisher::Publisher;
use crate::transport::registration::Registration;
use crate::transport::session::Session;
use crate::workers::hooks::{HOOK_TIMEOUT, Hook, HookKind};
use crate::workers::jobs::{DEFAULT_IDLE_TIMEOUT, Jobs, JobsParts};
use crate::workers::supervisor::KILL_GRACE;

/// After the kill grace, results still get this long to reach the broker.
const PUBLISH_GRACE: Duration = Duration::from_secs(5);
/// After giving up on publishing, tasks get this long to notice.
const ABANDON_WAIT: Duration = Duration::from_secs(2);

/// Collects handlers and their hooks; [`ExecutorBuilder::build`] validates
/// them.
pub struct ExecutorBuilder {
    config: Config,
    handlers: Vec<(String, SharedHandler)>,
    hooks: Vec<HookRegistration>,
    idle_timeout: Duration,
}

impl ExecutorBuilder {
    /// The config the executor is built from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Registers `handler` under `name` (the job's `handler` field).
    pub fn handler<H: Handler>(mut self, name: impl Into<String>, handler: H) -> Self {
        self.handlers.push((name.into(), Arc::new(handler)));
        self
    }

    /// Gives handler `name` an `init` and a `destroy` hook (XXL-JOB's
    /// `IJobHandler.init()` / `destroy()`): `init` runs when a job's worker
    /// starts, before the first trigger it runs with this handler; `destroy`
    /// when the worker exits (idle, executor shutdown, or the job's handler
    /// changed). A failing `init` fails that trigger with its message. Both
    /// get [`HookContext`](crate::HookContext) and 10 s at most.
    pub fn hooks<I: Hook, D: Hook>(self, name: impl Into<String>, init: I, destroy: D) -> Self {
        let name = name.into();
        self.init_hook(name.clone(), init)
            .destroy_hook(name, destroy)
    }

    /// Gives handler `name` only an `init` hook (see [`hooks`](Self::hooks)).
    pub fn init_hook<I: Hook>(mut self, name: impl Into<String>, init: I) -> Self {
        self.hooks.push(HookRegistration {
            handler: name.into(),
            kind: HookKind::Init,
            hook: Arc::new(init),
        });
        self
    }

    /// Gives handler `name` only a `destroy` hook (see
    /// [`hooks`](Self::hooks)).
    pub fn destroy_hook<D: Hook>(mut self, name: impl Into<String>, destroy: D) -> Self {
        self.hooks.push(HookRegistration {
            handler: name.into(),
            kind: HookKind::Destroy,
            hook: Arc::new(destroy),
        });
        self
    }

    /// How long a job's worker waits for the job's next trigger before it
    /// exits (and calls `destroy`). Default 90 s, XXL-JOB's 30 empty polls
    /// of 3 s.
    pub fn idle_timeout(mut self, idle_timeout: Duration) -> Self {
        self.idle_timeout = idle_timeout;
        self
    }

    /// Checks the handlers (at least one, names non-empty, unique, without
    /// white space or commas), their hooks (for registered handlers, one of
    /// each kind at most) and the config, and resolves the executor id.
    pub fn build(self) -> Result<Executor, ExecutorError> {
        let handlers = Handlers::new(self.handlers, self.hooks)?;
        let config = self.config;
        let id = executor_id(&config)?;
        check_config(&config)?;
        let pool = rondo_core::redis::pool(&config.redis)
            .map_err(|e| ExecutorError::Config(format!("redis: {}", e.message)))?;
        Ok(Executor {
            config,
            id,
            handlers,
            pool,
            idle_timeout: self.idle_timeout,
        })
    }
}

/// A configured executor, ready to [`run`](Executor::run).
pub struct Executor {
    config: Config,
    id: String,
    handlers: Handlers,
    pool: Pool,
    idle_timeout: Duration,
}

impl Executor {
    /// Starts building an executor for `config.executor.app`.
    pub fn builder(config: Config) -> ExecutorBuilder {
        ExecutorBuilder {
            config,
            handlers: Vec::new(),
            hooks: Vec::new(),
            idle_timeout: DEFAULT_IDLE_TIMEOUT,
        }
    }

    /// The executor id: `executor.id`, or `<app>-<hostname>`. It names the
    /// durable queue, so it must stay the same across restarts and differ
    /// between processes.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The executor group this executor serves.
    pub fn app(&self) -> &str {
        &self.config.executor.app
    }

    /// The executor's durable queue.
    pub fn queue(&self) -> String {
        self.config.names().executor_queue(self.app(), &self.id)
    }

    /// Registers, consumes triggers and runs them until `shutdown` fires,
    /// then drains: retires (routing stops), stops consuming and hands back
    /// the triggers that had not started, lets in-flight runs end
    /// within `executor.shutdown_grace_ms` (then cancels them), publishes
    /// their results, acks, runs the `destroy` hooks of the jobs' workers,
    /// and closes the connection. Triggers still waiting for their turn
    /// (SERIAL_EXECUTION) go back to the queue (a message of only such
    /// triggers is requeued; the waiting part of a mixed one is published
    /// back to this executor's queue), for the next start or, once this
    /// executor is offline, the leader to route again.
    ///
    /// Broker and Redis outages are logged and retried, never returned.
    /// `Err` when a core task failed (the broker refuses the executor's
    /// queue as declared, or a task panicked): the executor then drained
    /// and stopped by itself.
    pub async fn run(self, shutdown: CancellationToken) -> Result<(), ExecutorError> {
        let span = tracing::info_span!("executor", executor_id = %self.id);
        self.serve(shutdown).instrument(span).await
    }

    async fn serve(self, shutdown: CancellationToken) -> Result<(), ExecutorError> {
        rondo_core::metrics::install();
        let incarnation = format!("{:016x}", rand::random::<u64>());
        // `/metrics`, `/healthz`, `/readyz` (ready: a link consumes the
        // queue and the executor is not stopping).
        let readiness = rondo_core::metrics::Readiness::default();
        let observe_stop = CancellationToken::new();
        let _observe_stop = observe_stop.clone().drop_guard();
        if !self.config.executor.metrics_addr.is_empty() {
            let addr = &self.config.executor.metrics_addr;
            let bound = rondo_core::metrics::serve(addr, readiness.clone(), observe_stop)
                .await
                .map_err(|e| ExecutorError::Failed(format!("serving metrics on {addr}: {e}")))?;
            tracing::info!(%bound, "metrics served");
        }
        // Before the queue is declared (its binding would already take the
        // other executor's triggers): the id must not be live in another
        // group, nor an XXL-JOB executor's. Redis out of reach: the check is
        // skipped, not the start.
        let registration = self.registration(&incarnation);
        match registration
            .id_taken_by(self.config.registry.lease_ms)
            .await
        {
            Ok(Some(holder)) => {
                return Err(ExecutorError::Config(format!(
                    "executor.id {:?} is in use by {holder}; ids are routing keys and must be unique in the namespace",
                    self.id
                )));
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(error = %e, "could not check that the executor id is free"),
        }
        let lifecycle = Lifecycle::new(shutdown);
        let names = self.config.names();
        let publisher = Publisher::new(names.clone());
        let jobs = Jobs::new(JobsParts {
            executor_id: self.id.clone(),
            handlers: self.handlers.clone(),
            idle_timeout: self.idle_timeout,
            shutdown: lifecycle.shutdown.clone(),
        });
        let changes = Arc::new(Notify::new());
        let runner = Arc::new(Runner::new(RunnerParts {
            executor_id: self.id.clone(),
            incarnation: incarnation.clone(),
            handlers: self.handlers.clone(),
            jobs: jobs.clone(),
            dedupe: Dedupe::new(
                self.pool.clone(),
                names.clone(),
                self.app(),
                self.config.executor.dedupe_ttl_s,
            ),
            publisher: publisher.clone(),
            log_flush: Duration::from_millis(self.config.executor.log_flush_ms),
            // Handlers at once: the same number as the AMQP prefetch, but
            // counted in triggers (the prefetch counts messages, which may
            // each carry hundreds of triggers).
            max_running: usize::from(self.config.executor.prefetch),
            lifecycle: lifecycle.clone(),
            changes: changes.clone(),
        }));
        let intake = Arc::new(Intake::new());
        let ready = CancellationToken::new();
        let session = Session {
            url: self.config.amqp.url.clone(),
            names: names.clone(),
            app: self.app().to_owned(),
            executor_id: self.id.clone(),
            consumer_tag: format!("{}.{incarnation}", self.id),
            prefetch: self.config.executor.prefetch,
            publisher,
            deliveries: Arc::new(Deliveries {
                runner: runner.clone(),
                names: names.clone(),
                queue: self.queue(),
                executor_id: self.id.clone(),
                trigger_key: names.trigger_key(self.app(), &self.id),
                lifecycle: lifecycle.clone(),
            }),
            intake: intake.clone(),
            lifecycle: lifecycle.clone(),
            ready: ready.clone(),
            readiness: readiness.clone(),
        };
        let mut session = Some(tokio::spawn(session.run().in_current_span()));
        let mut heartbeat = Some({
            let (registration, runner) = (registration.clone(), runner.clone());
            let shutdown = lifecycle.shutdown.clone();
            let beat = async move {
                registration
                    .run(|| runner.running_jobs(), &changes, ready, shutdown)
                    .await
            };
            tokio::spawn(beat.in_current_span())
        });
        tracing::info!(app = %self.app(), queue = %self.queue(), handlers = %self.handlers.names().join(","), "executor started");

        // Runs until shutdown, or until a core task ends before it: then the
        // executor drains and stops by itself, with the failure.
        let failure = tokio::select! {
            biased;
            () = lifecycle.shutdown.cancelled() => None,
            ended = until_done(&mut session) => Some(core_task("the broker session", ended)),
            ended = until_done(&mut heartbeat) => Some(core_task("the registry heartbeat", ended.map(Ok))),
        };
        if let Some(why) = &failure {
            tracing::error!(error = %why, "a core task failed; the executor stops");
            lifecycle.shutdown.cancel();
        }
        tracing::info!("shutting down: no new triggers");
        readiness.set(false);
        intake.close();
        if let Some(heartbeat) = heartbeat {
            let _ = heartbeat.await;
        }
        // Routing stops at once, and the leader moves what still waits in
        // the queue (the session has cancelled the consumer) while the
        // running triggers finish.
        let grace = Duration::from_millis(self.config.executor.shutdown_grace_ms);
        let drain = grace + KILL_GRACE + PUBLISH_GRACE + ABANDON_WAIT + HOOK_TIMEOUT;
        if let Err(e) = registration.retire(drain).await {
            tracing::warn!(error = %e, "retiring failed; routing stops when the lease runs out");
        }
        self.drain(&intake, &lifecycle).await;
        if !jobs.drain(HOOK_TIMEOUT + Duration::from_secs(1)).await {
            tracing::warn!("destroy hooks did not finish in time; closing anyway");
        }
        lifecycle.close.cancel();
        if let Some(session) = session {
            let _ = session.await;
        }
        // The link is closed: every message this process held is back in
        // the queue, which the leader may now empty and delete.
        if let Err(e) = registration.leave().await {
            tracing::warn!(error = %e, "leaving the registry failed; the entry will age out");
        }
        tracing::info!("executor stopped");
        failure.map_or(Ok(()), |why| Err(ExecutorError::Failed(why)))
    }

    /// Waits for the in-flight deliveries, escalating at each deadline.
    async fn drain(&self, intake: &Intake, lifecycle: &Lifecycle) {
        let grace = Duration::from_millis(self.config.executor.shutdown_grace_ms);
        if tokio::time::timeout(grace, intake.wait()).await.is_ok() {
            return;
        }
        tracing::warn!("runs outlived the shutdown grace; cancelling them");
        lifecycle.kill.cancel();
        if tokio::time::timeout(KILL_GRACE + PUBLISH_GRACE, intake.wait())
            .await
            .is_ok()
        {
            return;
        }
        tracing::warn!("results not confirmed in time; their deliveries will be redelivered");
        lifecycle.abandon.cancel();
        if tokio::time::timeout(ABANDON_WAIT, intake.wait())
            .await
            .is_err()
        {
            tracing::error!("delivery tasks did not stop; closing anyway");
        }
    }

    fn registration(&self, incarnation: &str) -> Registration {
        let registry = &self.config.registry;
        let heartbeat = Duration::from_millis(registry.heartbeat_ms);
        let dead_after = Duration::from_millis(registry.dead_after_ms);
        Registration {
            pool: self.pool.clone(),
            names: self.config.names(),
            app: self.app().to_owned(),
            executor_id: self.id.clone(),
            host: hostname(),
            handlers: self.handlers.names(),
            started_ms: rondo_core::clock::now_ms(),
            incarnation: incarnation.to_owned(),
            heartbeat,
            lease_renew: registry.lease_renew(),
            hash_ttl: (dead_after.max(heartbeat * 3)) * 2,
        }
    }
}

/// `executor.id`, checked, or `<app>-<hostname>` with the host name reduced
/// to the characters a queue name and routing key take.
fn executor_id(config: &Config) -> Result<String, ExecutorError> {
    let configured = config.executor.id.trim();
    if !configured.is_empty() {
        rondo_core::model::validate_app_name("executor.id", configured)
            .map_err(|e| ExecutorError::Config(format!("executor.id: {}", e.message)))?;
        return Ok(configured.to_owned());
    }
    let host: String = hostname()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    let mut id = format!("{}-{host}", config.executor.app);
    id.truncate(rondo_core::model::MAX_APP_NAME);
    Ok(id)
}

fn hostname() -> String {
    hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into())
}

fn check_config(config: &Config) -> Result<(), ExecutorError> {
    let executor = &config.executor;
    if executor.prefetch == 0 {
        return Err(ExecutorError::Config(
            "executor.prefetch must be at least 1".into(),
        ));
    }
    if executor.dedupe_ttl_s == 0 {
        return Err(ExecutorError::Config(
            "executor.dedupe_ttl_s must be at least 1".into(),
        ));
    }
    if config.registry.heartbeat_ms == 0 {
        return Err(ExecutorError::Config(
            "registry.heartbeat_ms must be at least 1".into(),
        ));
    }
    lapin::uri::AMQPUri::from_str(&config.amqp.url)
        .map_err(|e| ExecutorError::Config(format!("amqp.url: {e}")))?;
    Ok(())
}

/// Waits for a task that has not been awaited yet and takes it: its
/// handle is polled at most to completion, never after.
async fn until_done<T>(task: &mut Option<JoinHandle<T>>) -> Result<T, JoinError> {
    let Some(handle) = task.as_mut() else {
        return std::future::pending().await;
    };
    let ended = handle.await;
    *task = None;
    ended
}

/// Why a core task that ended before shutdown is a failure.
fn core_task(name: &str, ended: Result<Result<(), rondo_core::Error>, JoinError>) -> String {
    match ended {
        Ok(Ok(())) => format!("{name} ended on its own"),
        Ok(Err(e)) => format!("{name} failed: {e}"),
        Err(e) => format!("{name} panicked: {e}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{JobContext, JobError};

    async fn ok(_ctx: JobContext) -> Result<(), JobError> {
        Ok(())
    }

    fn config() -> Config {
        Config::load("", Vec::<(String, String)>::new()).unwrap()
    }

    #[test]
    fn the_default_id_is_app_dash_host() {
        let executor = Executor::builder(config())
            .handler("demo", ok)
            .build()
            .unwrap();
        assert!(executor.id().starts_with("demo-"));
        assert!(executor.id().len() > "demo-".len());
        rondo_core::model::validate_app_name("id", executor.id()).unwrap();
        assert!(
            executor
                .queue()
                .ends_with(&format!(".exec.demo.{}", executor.id()))
        );
    }

    #[test]
    fn a_configured_id_is_used_and_checked() {
        let mut c = config();
        c.executor.id = "exec-1".into();
        assert_eq!(
            Executor::builder(c.clone())
                .handler("d", ok)
                .build()
                .unwrap()
                .id(),
            "exec-1"
        );
        c.executor.id = "exec 1".into();
        let err = Executor::builder(c).handler("d", ok).build().err().unwrap();
        assert!(matches!(err, ExecutorError::Config(m) if m.starts_with("executor.id")));
    }

    #[test]
    fn build_refuses_bad_handlers_and_config() {
        assert_eq!(
            Executor::builder(config()).build().err(),
            Some(ExecutorError::NoHandlers)
        );
        let dup = Executor::builder(config())
            .handler("a", ok)
            .handler("a", ok)
            .build();
        assert_eq!(dup.err(), Some(ExecutorError::DuplicateHandler("a".into())));
        let mut c = config();
        c.executor.prefetch = 0;
        assert!(Executor::builder(c).handler("a", ok).build().is_err());
        let mut c = config();
        c.amqp.url = "http://nope".into();
        assert!(Executor::builder(c).handler("a", ok).build().is_err());
    }
}
