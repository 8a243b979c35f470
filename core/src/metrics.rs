//! Prometheus metrics of every process: the `metrics` facade with one
//! global `metrics-exporter-prometheus` recorder, rendered in the text
//! format on each scrape, and the small HTTP server the executor and the
//! persistence worker expose it on (`/metrics`, `/healthz`, `/readyz`).
//! The scheduler serves the same three on its API.
//!
//! Names follow Prometheus conventions: the `rondo_` prefix, `_total` for
//! counters, `_seconds` for durations (real histograms with the buckets
//! [`SECONDS_BUCKETS`], so quantiles aggregate across processes). Labels
//! are bounded (a trigger type, an outcome, a partition, a node id), never
//! a trigger or job id. `docs/operations.md` lists every metric.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use axum::Router;
use axum::http::StatusCode;
use axum::routing::get;
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};
use tokio_util::sync::CancellationToken;

/// Buckets of every `_seconds` histogram: dense around the 10 ms lateness
/// goal, up to five minutes for runs.
pub const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// Buckets of the persistence worker's batch size (events).
pub const BATCH_BUCKETS: &[f64] = &[
    1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0, 1000.0, 2000.0, 5000.0,
];

/// Which process records a metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Process {
    Scheduler,
    Executor,
    Persist,
    XxlGateway,
}

/// A metric's kind in the text format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    Histogram,
}

/// Every metric rondo records: name, kind, who records it, labels, help.
/// The metric table of `docs/operations.md` is checked against this list.
pub const METRICS: &[(&str, Kind, Process, &str, &str)] = &[
    (
        "rondo_triggers_sent_total",
        Kind::Counter,
        Process::Scheduler,
        "trigger_type",
        "triggers the broker confirmed to an executor queue",
    ),
    (
        "rondo_dispatch_failures_total",
        Kind::Counter,
        Process::Scheduler,
        "trigger_type",
        "triggers that reached no executor (none live, no queue)",
    ),
    (
        "rondo_fires_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "scheduled fires this node dispatched from its wheel",
    ),
    (
        "rondo_fire_lateness_seconds",
        Kind::Histogram,
        Process::Scheduler,
        "",
        "broker-confirmed publish minus the scheduled instant, per wheel fire",
    ),
    (
        "rondo_fire_double_publishes_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "fires this node published whose ring member was gone at its ack: taken by a standby or moved by the leader, which published them too (each trigger id runs once)",
    ),
    (
        "rondo_lease_lapses_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "times this node found its ring lease lapsed (frozen or cut off past scheduler.lease_ms) and dropped what it had loaded",
    ),
    (
        "rondo_lease_taken_fires_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "fires this node took, as standby, from nodes whose ring lease lapsed",
    ),
    (
        "rondo_claim_tick_seconds",
        Kind::Histogram,
        Process::Scheduler,
        "",
        "one claim tick of the leader",
    ),
    (
        "rondo_claimed_fires_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "fires the leader put on rings",
    ),
    (
        "rondo_misfires_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "fires found later than the misfire threshold",
    ),
    (
        "rondo_due_jobs",
        Kind::Gauge,
        Process::Scheduler,
        "partition",
        "jobs in each due set (read at scrape)",
    ),
    (
        "rondo_ring_fires",
        Kind::Gauge,
        Process::Scheduler,
        "node",
        "fires waiting in each node's ring (read at scrape)",
    ),
    (
        "rondo_wheel_fires",
        Kind::Gauge,
        Process::Scheduler,
        "",
        "fires loaded in this node's wheel",
    ),
    (
        "rondo_fires_in_flight",
        Kind::Gauge,
        Process::Scheduler,
        "",
        "fires handed to the dispatcher and not yet settled (at most scheduler.max_fires_in_flight)",
    ),
    (
        "rondo_fires_loaded",
        Kind::Gauge,
        Process::Scheduler,
        "",
        "fires this node holds, on its wheel or in flight (at most scheduler.max_fires_loaded)",
    ),
    (
        "rondo_cluster_nodes",
        Kind::Gauge,
        Process::Scheduler,
        "",
        "live scheduler nodes this node sees",
    ),
    (
        "rondo_leader",
        Kind::Gauge,
        Process::Scheduler,
        "",
        "1 while this node leads",
    ),
    (
        "rondo_leader_term",
        Kind::Gauge,
        Process::Scheduler,
        "",
        "the fencing term this node leads under",
    ),
    (
        "rondo_retries_scheduled_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "failed triggers given a retry",
    ),
    (
        "rondo_monitor_forbidden_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "monitor messages dead-lettered: a scheduler's event from another broker user",
    ),
    (
        "rondo_alarms_total",
        Kind::Counter,
        Process::Scheduler,
        "outcome",
        "alarms of failed triggers: sent, failed, not_needed",
    ),
    (
        "rondo_child_triggers_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "child jobs triggered after a success",
    ),
    (
        "rondo_lost_triggers_total",
        Kind::Counter,
        Process::Scheduler,
        "",
        "triggers found lost (no answer, executor gone)",
    ),
    (
        "rondo_executor_runs_total",
        Kind::Counter,
        Process::Executor,
        "outcome",
        "handler runs by outcome: success, failure, timeout",
    ),
    (
        "rondo_executor_run_seconds",
        Kind::Histogram,
        Process::Executor,
        "",
        "handler run time",
    ),
    (
        "rondo_executor_queue_wait_seconds",
        Kind::Histogram,
        Process::Executor,
        "",
        "from publish to the handler's start",
    ),
    (
        "rondo_executor_running",
        Kind::Gauge,
        Process::Executor,
        "",
        "handlers running now",
    ),
    (
        "rondo_persist_events_total",
        Kind::Counter,
        Process::Persist,
        "",
        "events stored in MySQL",
    ),
    (
        "rondo_persist_batch_events",
        Kind::Histogram,
        Process::Persist,
        "",
        "events per stored batch",
    ),
    (
        "rondo_persist_batch_seconds",
        Kind::Histogram,
        Process::Persist,
        "",
        "time to store one batch",
    ),
    (
        "rondo_persist_dead_letters_total",
        Kind::Counter,
        Process::Persist,
        "reason",
        "events dead-lettered: undecodable, rejected (by MySQL), forbidden (a scheduler's event from another broker user)",
    ),
    (
        "rondo_persist_backlog",
        Kind::Gauge,
        Process::Persist,
        "",
        "messages waiting in the persist queue (read every 5 s)",
    ),
    (
        "rondo_xxl_executors",
        Kind::Gauge,
        Process::XxlGateway,
        "",
        "XXL-JOB executors in the fleet this gateway serves",
    ),
    (
        "rondo_xxl_triggers_total",
        Kind::Counter,
        Process::XxlGateway,
        "outcome",
        "triggers sent to XXL-JOB executors: sent, refused (by the executor), no_answer (or garbage), handed_back (executor unreachable)",
    ),
    (
        "rondo_xxl_callbacks_total",
        Kind::Counter,
        Process::XxlGateway,
        "outcome",
        "callback entries: handled, late (the gateway had answered the run), unknown (no run has the log id)",
    ),
    (
        "rondo_xxl_handoffs_total",
        Kind::Counter,
        Process::XxlGateway,
        "outcome",
        "triggers of executor queue messages, by how they were settled: sent (to the executor now), settled (sent or answered before, someone else's, or answered by the gateway), back (to the queue)",
    ),
    (
        "rondo_xxl_redelivered_total",
        Kind::Counter,
        Process::XxlGateway,
        "outcome",
        "triggers delivered again (a gateway or its link died while handing them off): sent (by this one), settled (sent or answered before), back (to the queue)",
    ),
    (
        "rondo_xxl_probes_total",
        Kind::Counter,
        Process::XxlGateway,
        "outcome",
        "redelivered triggers whose sender died after recording them, by what the executor showed: there (it has their log), resent (it had not got them), unknown (it did not answer)",
    ),
    (
        "rondo_xxl_lost_triggers_total",
        Kind::Counter,
        Process::XxlGateway,
        "",
        "runs failed as lost: their executor stopped answering, or forgot them",
    ),
    (
        "rondo_xxl_token_refusals_total",
        Kind::Counter,
        Process::XxlGateway,
        "call",
        "calls to the admin API refused for a wrong or missing access token: registry, registry_remove, callback",
    ),
    (
        "rondo_xxl_registrations_refused_total",
        Kind::Counter,
        Process::XxlGateway,
        "",
        "registrations refused because rondo has no group of that appname",
    ),
    (
        "rondo_xxl_call_seconds",
        Kind::Histogram,
        Process::XxlGateway,
        "call",
        "calls to XXL-JOB executors: beat, idle_beat, trigger, kill, log",
    ),
];

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the process's recorder (once; later calls return it). Every
/// process calls it at start: what is recorded before is not kept.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Suffix("_seconds".into()), SECONDS_BUCKETS)
            .and_then(|b| {
                b.set_buckets_for_metric(Matcher::Suffix("_events".into()), BATCH_BUCKETS)
            })
            .expect("non-empty buckets")
            .build_recorder();
        let handle = recorder.handle();
        // Another recorder may be installed already (a test harness): the
        // handle then renders what this one sees, which is nothing.
        if metrics::set_global_recorder(recorder).is_ok() {
            for (name, kind, _, _, help) in METRICS {
                match kind {
                    Kind::Counter => metrics::describe_counter!(*name, *help),
                    Kind::Gauge => metrics::describe_gauge!(*name, *help),
                    Kind::Histogram => metrics::describe_histogram!(*name, *help),
                }
            }
        }
        handle
    })
}

/// The text format of everything recorded so far.
pub fn render() -> String {
    let handle = install();
    handle.run_upkeep();
    handle.render()
}

/// Whether a process is connected to the services it needs (`/readyz`).
#[derive(Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Relaxed);
    }

    pub fn is_ready(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// `/metrics`, `/healthz` (the process runs) and `/readyz` (200 when
/// `ready`, else 503).
pub fn router(ready: Readiness) -> Router {
    Router::new()
        .route("/metrics", get(|| async { render() }))
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(move || {
                let ready = ready.is_ready();
                async move {
                    if ready {
                        (StatusCode::OK, "ready")
                    } else {
                        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                    }
                }
            }),
        )
}

/// Serves [`router`] on `addr` until `shutdown`; returns the bound address.
pub async fn serve(
    addr: &str,
    ready: Readiness,
    shutdown: CancellationToken,
) -> std::io::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let server =
        axum::serve(listener, router(ready)).with_graceful_shutdown(shutdown.cancelled_owned());
    tokio::spawn(async move {
        if let Err(e) = server.await {
            tracing::warn!(error = %e, "the metrics server stopped");
        }
    });
    Ok(bound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_real_histograms_and_counters_render() {
        install();
        metrics::counter!("rondo_unit_test_total", "outcome" => "ok").increment(2);
        metrics::histogram!("rondo_unit_test_seconds").record(0.003);
        let text = render();
        assert!(
            text.contains("rondo_unit_test_total{outcome=\"ok\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("rondo_unit_test_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("rondo_unit_test_seconds_bucket{le=\"0.002\"} 0"),
            "{text}"
        );
    }
}
