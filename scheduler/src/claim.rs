//! The leader's claim loop: once per interval (aligned to the clock), for
//! each partition, read the jobs due before now + pre-read, plan each one
//! (misfire rule, every fire in the window, the following fire), pick a node
//! for each, and apply the plan with the fenced claim script.
//!
//! Before it claims, each tick rebuilds Redis from MySQL if the namespace
//! has no job ([`crate::bootstrap`]), so a new or emptied Redis is filled
//! before anything is claimed from it.
//!
//! Node choice is rendezvous hashing of the job id over the live nodes: a
//! job stays on one node while the node set is stable, and when a node joins
//! or leaves only the jobs that hash to it move.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rondo_core::config::SchedulerConfig;
use rondo_core::histogram::Histogram;
use rondo_core::schedule::{ClaimWindow, plan_claim};
use rondo_core::{Error, ErrorKind, Job, clock};
use rondo_history::History;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::bootstrap;
use crate::cluster::{ClusterView, Role};
use crate::failover::{FailoverReport, failover_pass};
use crate::store::{ClaimItem, Store};

/// Outcome of one claim tick, for logs and the status API.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct TickReport {
    pub jobs: u64,
    pub fires: u64,
    pub misfires: u64,
    pub skipped: u64,
}

pub struct Claimer {
    store: Store,
    config: SchedulerConfig,
    view: ClusterView,
    node: String,
    /// MySQL, read only to rebuild an empty Redis.
    history: History,
    /// When the last successful claim ended (ms), for the status API.
    pub last_claim_ms: watch::Sender<i64>,
    /// Duration of each successful tick (ms) and what the last one did.
    pub tick_ms: Histogram,
    pub last_tick: std::sync::Mutex<TickReport>,
}

impl Claimer {
    pub fn new(
        store: Store,
        config: SchedulerConfig,
        view: ClusterView,
        node: String,
        history: History,
    ) -> Arc<Self> {
        Arc::new(Claimer {
            store,
            config,
            view,
            node,
            history,
            last_claim_ms: watch::channel(0).0,
            tick_ms: Histogram::default(),
            last_tick: std::sync::Mutex::new(TickReport::default()),
        })
    }

    /// Claims while this node leads, until `shutdown`. When the live node
    /// set changes, dead nodes' rings are reassigned at once, not at the
    /// next tick.
    pub async fn run(self: Arc<Self>, shutdown: CancellationToken) {
        let mut role = self.view.role.clone();
        let mut nodes = self.view.nodes.clone();
        let mut refused_term = None;
        let mut claimed_term = None;
        loop {
            let current = *role.borrow_and_update();
            let Role::Leader { term } = current else {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = role.changed() => continue,
                }
            };
            if refused_term == Some(term) {
                // Redis refused this term: a newer leader exists. The node
                // resigns; wait until the role changes.
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = role.changed() => continue,
                }
            }
            // A new leader claims at once (fires due now must not wait for
            // the next aligned tick); afterwards once per aligned interval.
            if claimed_term == Some(term) {
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = role.changed() => continue,
                    _ = nodes.changed() => {
                        let outcome = self.failover(term).await.map(|_| ());
                        if self.refused(term, outcome) {
                            refused_term = Some(term);
                        }
                        continue;
                    }
                    _ = tokio::time::sleep(until_next_tick(self.config.claim_interval_ms)) => {}
                }
            }
            claimed_term = Some(term);
            nodes.borrow_and_update();
            let started = clock::now_ms();
            let outcome = self.tick(term).await;
            if let Ok(report) = &outcome {
                let ended = clock::now_ms();
                self.last_claim_ms.send_replace(ended);
                self.tick_ms.record(ended - started);
                *self.last_tick.lock().expect("last tick lock") = *report;
                if report.fires > 0 || report.misfires > 0 {
                    tracing::debug!(
                        term,
                        jobs = report.jobs,
                        fires = report.fires,
                        misfires = report.misfires,
                        "claimed"
                    );
                }
            }
            if self.refused(term, outcome.map(|_| ())) {
                refused_term = Some(term);
            }
        }
    }

    /// Logs a failed pass; true when Redis refused the term (fenced).
    fn refused(&self, term: u64, outcome: Result<(), Error>) -> bool {
        match outcome {
            Ok(()) => false,
            Err(e) if e.kind == ErrorKind::StaleTerm => {
                tracing::error!(node = %self.node, term, error = %e, "claim refused: a newer leader fenced this term; stepping down");
                self.view.refused_term.send_replace(term);
                true
            }
            Err(e) => {
                tracing::warn!(term, error = %e, "claim failed; next tick retries");
                false
            }
        }
    }

    async fn failover(&self, term: u64) -> Result<FailoverReport, Error> {
        self.ensure_leading(term)?;
        failover_pass(
            &self.store,
            term,
            &self.live_nodes(),
            self.config.misfire_threshold_ms,
        )
        .await
    }

    fn ensure_leading(&self, term: u64) -> Result<(), Error> {
        if *self.view.role.borrow() != (Role::Leader { term }) {
            return Err(Error::new(ErrorKind::Conflict, "no longer leading"));
        }
        Ok(())
    }

    /// One claim over every partition, after moving dead nodes' rings and
    /// rebuilding an empty Redis from MySQL.
    pub async fn tick(&self, term: u64) -> Result<TickReport, Error> {
        self.failover(term).await?;
        self.bootstrap(term).await?;
        let nodes = self.live_nodes();
        let mut report = TickReport::default();
        for p in 0..self.store.names().partitions() {
            self.ensure_leading(term)?;
            self.claim_partition(p, term, &nodes, &mut report).await?;
        }
        Ok(report)
    }

    /// Rebuilds Redis from MySQL when it has no job. Only a fencing error
    /// fails the tick: with MySQL away the claim goes on with what Redis
    /// has (nothing, or what the API added since), and the next tick tries
    /// the rebuild again for as long as Redis stays empty.
    async fn bootstrap(&self, term: u64) -> Result<(), Error> {
        self.ensure_leading(term)?;
        match bootstrap::rebuild_if_empty(&self.store, &self.history, term).await {
            Ok(_) => Ok(()),
            Err(e) if e.kind == ErrorKind::StaleTerm => Err(e),
            Err(e) => {
                tracing::warn!(term, error = %e, "rebuilding the empty redis from mysql failed; retrying next tick");
                Ok(())
            }
        }
    }

    fn live_nodes(&self) -> Vec<String> {
        let nodes = self.view.nodes.borrow().clone();
        if nodes.is_empty() {
            vec![self.node.clone()]
        } else {
            nodes
        }
    }

    async fn claim_partition(
        &self,
        p: u32,
        term: u64,
        nodes: &[String],
        report: &mut TickReport,
    ) -> Result<(), Error> {
        loop {
            let now = clock::now_ms();
            let window = ClaimWindow {
                now_ms: now,
                horizon_ms: now + self.config.preread_ms,
                misfire_threshold_ms: self.config.misfire_threshold_ms,
                max_fires: self.config.max_fires_per_claim,
            };
            let due = self
                .store
                .read_due(p, window.horizon_ms, self.config.claim_batch)
                .await?;
            if due.is_empty() {
                return Ok(());
            }
            let ids: Vec<u64> = due.iter().map(|(id, _)| *id).collect();
            let jobs = self.store.get_jobs(&ids).await?;
            let items: Vec<ClaimItem> = due
                .iter()
                .map(|(id, score)| plan_item(*id, *score, jobs.get(id), window, nodes, report))
                .collect();
            let (claimed, skipped) = self.store.claim(p, term, nodes, &items).await?;
            report.jobs += claimed;
            report.skipped += skipped;
            if due.len() < self.config.claim_batch || claimed == 0 {
                return Ok(());
            }
        }
    }
}

/// Plans one due job. A job whose definition is gone or invalid leaves the
/// due set (no fire) with a log line.
fn plan_item(
    id: u64,
    score: i64,
    job: Option<&Arc<Job>>,
    window: ClaimWindow,
    nodes: &[String],
    report: &mut TickReport,
) -> ClaimItem {
    let node = pick_node(id, nodes);
    let empty = ClaimItem {
        job_id: id,
        expected_score: score,
        next: None,
        node,
        fires: Vec::new(),
    };
    let Some(job) = job.filter(|j| j.enabled) else {
        tracing::warn!(
            job_id = id,
            "due job has no definition or is stopped; removed from the due set"
        );
        return empty;
    };
    let schedule = match job.schedule() {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(job_id = id, error = %e, "stored schedule does not parse; removed from the due set");
            return empty;
        }
    };
    let plan = plan_claim(&schedule, job.misfire.rule(), score, window);
    if let Some(late) = plan.misfired {
        report.misfires += 1;
        tracing::warn!(job_id = id, fire_ms = late, late_ms = window.now_ms - late, strategy = %job.misfire, "misfire");
    }
    report.fires += plan.fires.len() as u64;
    ClaimItem {
        job_id: id,
        expected_score: score,
        next: plan.next,
        node,
        fires: plan.fires,
    }
}

/// Rendezvous (highest random weight) hashing of a job over nodes.
pub fn pick_node(job_id: u64, nodes: &[String]) -> usize {
    debug_assert!(!nodes.is_empty());
    let weight = |node: &str| fnv1a(node.as_bytes(), job_id);
    (0..nodes.len())
        .max_by_key(|&i| weight(&nodes[i]))
        .unwrap_or(0)
}

/// FNV-1a over the node name then the job id: stable across processes and
/// Rust versions, unlike `DefaultHasher`.
fn fnv1a(bytes: &[u8], job_id: u64) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes.iter().chain(job_id.to_le_bytes().iter()) {
        hash ^= u64::from(*b);
        hash = hash.wrapping_mul(0x0000_0100_0000_01b3);
    }
    // Final avalanche so near ids spread well.
    hash ^= hash >> 33;
    hash = hash.wrapping_mul(0xff51_afd7_ed55_8ccd);
    hash ^ (hash >> 33)
}

/// Time until the next multiple of the interval on the wall clock.
fn until_next_tick(interval_ms: u64) -> Duration {
    let interval = interval_ms.max(1) as i64;
    let now = clock::now_ms();
    Duration::from_millis((interval - now.rem_euclid(interval)) as u64)
}

/// Nodes' share of jobs, for tests and the status API.
pub fn spread(job_ids: impl Iterator<Item = u64>, nodes: &[String]) -> HashMap<String, usize> {
    let mut counts = HashMap::new();
    for id in job_ids {
        *counts
            .entry(nodes[pick_node(id, nodes)].clone())
            .or_insert(0) += 1;
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(n: usize) -> Vec<String> {
        (0..n).map(|i| format!("node-{i}")).collect()
    }

    #[test]
    fn jobs_spread_evenly_over_nodes() {
        let counts = spread(0..30_000, &nodes(3));
        for (node, c) in &counts {
            assert!((9_000..=11_000).contains(c), "{node} got {c}");
        }
    }

    #[test]
    fn a_leaving_node_moves_only_its_own_jobs() {
        let three = nodes(3);
        let two: Vec<String> = three[..2].to_vec();
        for id in 0..10_000u64 {
            let before = &three[pick_node(id, &three)];
            let after = &two[pick_node(id, &two)];
            if before != "node-2" {
                assert_eq!(before, after, "job {id} moved although its node stayed");
            }
        }
    }

    #[test]
    fn one_node_takes_everything() {
        assert_eq!(pick_node(42, &nodes(1)), 0);
    }
}
