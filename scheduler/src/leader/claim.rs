//! The claim: once per interval (aligned to the clock), for each partition,
//! read the jobs due before now + pre-read, plan each one (misfire rule,
//! every fire in the window, the following fire), assign each to a live
//! node ([`super::assign`]), and apply the plan with the fenced claim
//! script.
//!
//! Before it claims, each tick moves dead nodes' rings to live nodes
//! ([`super::failover`]) and rebuilds Redis from MySQL if the namespace has
//! no job ([`super::bootstrap`]), so a new or emptied Redis is filled before
//! anything is claimed from it. When the live node set changes, dead nodes'
//! rings are moved at once, not at the next tick.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use rondo_core::config::SchedulerConfig;
use rondo_core::histogram::Histogram;
use rondo_core::schedule::{
    ClaimPlan, ClaimWindow, MisfireRule, MissedRecord, Schedule, plan_claim,
};
use rondo_core::{Error, ErrorKind, clock};
use rondo_history::History;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::definitions::{Definitions, Parsed};
use super::failover::{FailoverReport, failover_pass};
use super::fence::carry_on;
use super::{assign, bootstrap};
use crate::cluster::ClusterView;
use crate::store::{ClaimItem, Store};

/// Outcome of one claim tick, for logs and the status API.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, utoipa::ToSchema)]
pub struct TickReport {
    pub jobs: u64,
    pub fires: u64,
    pub misfires: u64,
    pub skipped: u64,
}

impl std::ops::AddAssign for TickReport {
    fn add_assign(&mut self, other: TickReport) {
        self.jobs += other.jobs;
        self.fires += other.fires;
        self.misfires += other.misfires;
        self.skipped += other.skipped;
    }
}

/// Partitions claimed at once in a tick. Each partition's claim is a few
/// round trips (read the due jobs, their definitions, the claim script);
/// one after the other, a tick over 64 partitions took 0.3 s on one busy
/// Redis and 0.6–1.5 s on a Redis Cluster of three (the scaling bench).
/// Concurrently, the round trips overlap, and on a cluster the masters
/// work in parallel; each partition's claim stays fenced and independent.
const CLAIM_CONCURRENCY: usize = 8;

pub struct Claimer {
    store: Store,
    config: SchedulerConfig,
    /// The ZooKeeper session asked for (ms): the claim runs ahead of it,
    /// or of the one granted if longer
    /// ([`SchedulerConfig::claim_ahead_ms`]).
    session_ms: u64,
    view: ClusterView,
    node: String,
    /// MySQL, read only to rebuild an empty Redis.
    history: History,
    /// When the last successful claim ended (ms), for the status API.
    pub last_claim_ms: watch::Sender<i64>,
    /// Duration of each successful tick (ms) and what the last one did.
    pub tick_ms: Histogram,
    pub last_tick: std::sync::Mutex<TickReport>,
    /// The term whose leader checked the namespace's key layout (once per
    /// term, not every tick).
    layout_checked_term: std::sync::atomic::AtomicU64,
    /// Definitions parsed in this tick and the last.
    definitions: Definitions,
}

impl Claimer {
    pub fn new(
        store: Store,
        config: SchedulerConfig,
        session_ms: u64,
        view: ClusterView,
        node: String,
        history: History,
    ) -> Arc<Self> {
        Arc::new(Claimer {
            store,
            config,
            session_ms,
            view,
            node,
            history,
            last_claim_ms: watch::channel(0).0,
            tick_ms: Histogram::default(),
            last_tick: std::sync::Mutex::new(TickReport::default()),
            layout_checked_term: std::sync::atomic::AtomicU64::new(0),
            definitions: Definitions::default(),
        })
    }

    /// Claims for `term` until `stop`: at once (fires due now must not wait
    /// for the next aligned tick), then once per aligned interval, moving
    /// dead nodes' rings whenever the live node set changes. Other errors
    /// are logged and retried at the next tick; `Err` only for `StaleTerm`.
    pub async fn run(self: Arc<Self>, term: u64, stop: CancellationToken) -> Result<(), Error> {
        let mut nodes = self.view.nodes.clone();
        loop {
            nodes.borrow_and_update();
            self.timed_tick(term, &stop).await?;
            let next_tick = tokio::time::sleep(until_next_tick(self.config.claim_interval_ms));
            tokio::pin!(next_tick);
            loop {
                tokio::select! {
                    () = stop.cancelled() => return Ok(()),
                    () = &mut next_tick => break,
                    changed = nodes.changed() => {
                        if changed.is_err() {
                            // The membership task is gone: the node is stopping.
                            stop.cancelled().await;
                            return Ok(());
                        }
                        carry_on("moving dead nodes' rings", term, self.failover(term).await)?;
                    }
                }
            }
        }
    }

    /// One tick, recorded for the status API when it succeeds.
    async fn timed_tick(
        self: &Arc<Self>,
        term: u64,
        stop: &CancellationToken,
    ) -> Result<(), Error> {
        let started = clock::now_ms();
        let Some(report) = carry_on("claiming", term, self.tick(term, stop).await)? else {
            return Ok(());
        };
        let ended = clock::now_ms();
        self.last_claim_ms.send_replace(ended);
        self.tick_ms.record(ended - started);
        metrics::histogram!("rondo_claim_tick_seconds").record((ended - started) as f64 / 1000.0);
        metrics::counter!("rondo_claimed_fires_total").increment(report.fires);
        metrics::counter!("rondo_misfires_total").increment(report.misfires);
        *self.last_tick.lock().expect("last tick lock") = report;
        if report.fires > 0 || report.misfires > 0 {
            tracing::debug!(
                term,
                jobs = report.jobs,
                fires = report.fires,
                misfires = report.misfires,
                "claimed"
            );
        }
        Ok(())
    }

    async fn failover(&self, term: u64) -> Result<FailoverReport, Error> {
        let live = self.live_nodes();
        failover_pass(&self.store, term, &live, self.config.misfire_threshold_ms).await
    }

    /// One claim over every partition, [`CLAIM_CONCURRENCY`] at a time,
    /// after moving dead nodes' rings and rebuilding an empty Redis from
    /// MySQL. Each partition's claim is a task of its own, so decoding and
    /// planning use every core while other partitions wait on Redis.
    /// Starts no partition once `stop` fires (the term's duties are
    /// ending). A failed partition fails the tick once the others under
    /// way have finished (none is cut off half-way).
    pub async fn tick(
        self: &Arc<Self>,
        term: u64,
        stop: &CancellationToken,
    ) -> Result<TickReport, Error> {
        use futures_util::StreamExt as _;
        use tracing::Instrument as _;
        self.failover(term).await?;
        self.bootstrap(term).await?;
        let nodes: Arc<[String]> = self.live_nodes().into();
        let outcomes: Vec<Result<TickReport, Error>> =
            futures_util::stream::iter(0..self.store.names().partitions())
                .take_while(|_| std::future::ready(!stop.is_cancelled()))
                .map(|p| {
                    let (claimer, nodes) = (Arc::clone(self), Arc::clone(&nodes));
                    // In the tick's span (the leader's duty, the node); a
                    // panic goes on up, as it did inside the tick's task.
                    let claim = async move { claimer.claim_partition(p, term, &nodes).await }
                        .in_current_span();
                    async move {
                        match tokio::spawn(claim).await {
                            Ok(outcome) => outcome,
                            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                            Err(e) => Err(Error::internal(format!("claiming partition {p}: {e}"))),
                        }
                    }
                })
                .buffer_unordered(CLAIM_CONCURRENCY)
                .collect()
                .await;
        self.definitions.end_tick();
        let mut report = TickReport::default();
        for outcome in outcomes {
            report += outcome?;
        }
        Ok(report)
    }

    /// Rebuilds Redis from MySQL when it has no job. Only a fencing error
    /// fails the tick: with MySQL away the claim goes on with what Redis
    /// has (nothing, or what the API added since), and the next tick tries
    /// the rebuild again for as long as Redis stays empty.
    async fn bootstrap(&self, term: u64) -> Result<(), Error> {
        use std::sync::atomic::Ordering;
        if self.layout_checked_term.load(Ordering::Relaxed) != term {
            bootstrap::check_layout(&self.store).await?;
            self.layout_checked_term.store(term, Ordering::Relaxed);
        }
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
    ) -> Result<TickReport, Error> {
        let mut report = TickReport::default();
        let session = self.session_ms.max(*self.view.session_ms.borrow());
        let ahead_ms = self.config.claim_ahead_ms(session);
        loop {
            let now = clock::now_ms();
            let window = ClaimWindow {
                now_ms: now,
                horizon_ms: now + ahead_ms,
                misfire_threshold_ms: self.config.misfire_threshold_ms,
                max_fires: self.config.max_fires_per_claim,
            };
            let (due, version) = self
                .store
                .leader()
                .read_due(p, window.horizon_ms, self.config.claim_batch)
                .await?;
            if due.is_empty() {
                return Ok(report);
            }
            let ids: Vec<u64> = due.iter().map(|(id, _)| *id).collect();
            // Definitions read since the partition's version was last
            // changed are reused; only the others are read.
            let mut parsed = self.definitions.unchanged(version, &ids);
            let stale: Vec<usize> = (0..ids.len()).filter(|&i| parsed[i].is_none()).collect();
            if !stale.is_empty() {
                let stale_ids: Vec<u64> = stale.iter().map(|&i| ids[i]).collect();
                let defs = self.store.leader().get_job_defs(&stale_ids).await?;
                for (i, def) in stale
                    .into_iter()
                    .zip(self.definitions.parse(version, &stale_ids, defs))
                {
                    parsed[i] = def;
                }
            }
            let mut plans = Plans::default();
            let items: Vec<ClaimItem> = due
                .iter()
                .zip(&parsed)
                .map(|((id, score), def)| {
                    plan_item(
                        *id,
                        *score,
                        def.as_deref(),
                        window,
                        nodes,
                        &mut plans,
                        &mut report,
                    )
                })
                .collect();
            let (claimed, skipped) = self.store.leader().claim(p, term, nodes, &items).await?;
            report.jobs += claimed;
            report.skipped += skipped;
            if due.len() < self.config.claim_batch || claimed == 0 {
                return Ok(report);
            }
        }
    }
}

/// The plans of one claim batch (one window), by what [`plan_claim`]
/// depends on: the parsed schedule (shared by every job with the same
/// expression and zone, so its address names it while the batch holds it),
/// the misfire rule and threshold, and the due score. Jobs that share all
/// four (thousands of jobs due at midnight on one expression) are planned
/// once: a cron expression's next fires cost microseconds each.
type Plans = HashMap<(usize, MisfireRule, Option<i64>, i64), ClaimPlan>;

/// Plans one due job. A job whose definition is gone, stopped, not even
/// readable as the claim's view ([`rondo_core::model::JobSchedule`]) or
/// whose schedule does not parse leaves the due set (no fire) with a log
/// line.
fn plan_item(
    id: u64,
    score: i64,
    def: Option<&Parsed>,
    window: ClaimWindow,
    nodes: &[String],
    plans: &mut Plans,
    report: &mut TickReport,
) -> ClaimItem {
    let node = assign::pick_node(id, nodes);
    let empty = ClaimItem {
        job_id: id,
        expected_score: score,
        next: None,
        node,
        fires: Vec::new(),
        misfire_fire: None,
        missed: None,
        awaited: None,
    };
    let Some(def) = def.filter(|d| d.enabled) else {
        tracing::warn!(
            job_id = id,
            "due job has no definition or is stopped; removed from the due set"
        );
        return empty;
    };
    let schedule = match &def.schedule {
        Ok(s) => s,
        Err(e) => {
            tracing::error!(job_id = id, error = %e, "stored schedule does not parse; removed from the due set");
            return empty;
        }
    };
    let threshold = def.misfire_threshold;
    let rule = def.misfire_rule();
    let plan = plans
        .entry((Arc::as_ptr(schedule) as usize, rule, threshold, score))
        .or_insert_with(|| plan_claim(schedule, rule, threshold, score, window))
        .clone();
    let missed = plan.missed.as_ref().map(|m| {
        if m.misfire {
            report.misfires += 1;
        }
        tracing::warn!(
            job_id = id,
            first_ms = m.first_ms,
            late_ms = window.now_ms - m.first_ms,
            missed = m.count,
            skipped = m.skipped,
            misfire = m.misfire,
            strategy = %def.misfire,
            "job found late"
        );
        let record = MissedRecord {
            detected_ms: window.now_ms,
            first_ms: m.first_ms,
            last_ms: m.last_ms,
            count: m.count,
            skipped: m.skipped,
            cause: if m.misfire { "MISFIRE" } else { "LATE" }.to_owned(),
            strategy: def.misfire.as_str().to_owned(),
            threshold_ms: threshold.unwrap_or(window.misfire_threshold_ms),
            fired_ms: if m.misfire {
                plan.misfire_fire
            } else {
                Some(m.first_ms)
            },
        };
        let json = serde_json::to_string(&record).expect("a record serializes");
        (m.skipped, json)
    });
    report.fires += plan.fires.len() as u64;
    // A fixed delay's one fire: its final result arms the next.
    let awaited = matches!(schedule.as_ref(), Schedule::FixDelay(_))
        .then(|| plan.fires.last().copied())
        .flatten();
    ClaimItem {
        job_id: id,
        expected_score: score,
        next: plan.next,
        node,
        fires: plan.fires,
        misfire_fire: plan.misfire_fire,
        missed,
        awaited,
    }
}

/// Time until the next multiple of the interval on the wall clock.
fn until_next_tick(interval_ms: u64) -> Duration {
    let interval = interval_ms.max(1) as i64;
    let now = clock::now_ms();
    Duration::from_millis((interval - now.rem_euclid(interval)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_core::Job;

    fn def(id: u64, conf: &str, misfire: &str) -> String {
        let job = Job {
            schedule_type: rondo_core::model::ScheduleType::parse("schedule_type", "CRON").unwrap(),
            schedule_conf: conf.into(),
            misfire: rondo_core::Misfire::parse("misfire", misfire).unwrap(),
            ..rondo_core::testkit::fixtures::job(id)
        };
        serde_json::to_string(&job).unwrap()
    }

    /// Jobs planned once per batch share a plan only when everything the
    /// plan depends on is the same: a job due at another instant, or with
    /// another misfire rule, gets its own.
    #[test]
    fn a_batch_plans_jobs_alike_once_and_the_others_each() {
        const MINUTE: i64 = 60_000;
        let now = 1_800_000_000_000 - 1_800_000_000_000 % MINUTE;
        let window = ClaimWindow {
            now_ms: now,
            horizon_ms: now + 5_000,
            misfire_threshold_ms: 5_000,
            max_fires: 100,
        };
        let every_minute = "0 * * * * ?";
        let defs = Definitions::default();
        let ids = [1, 2, 3, 4];
        let parsed = defs.parse(
            None,
            &ids,
            vec![
                Some(def(1, every_minute, "DO_NOTHING")),
                Some(def(2, every_minute, "DO_NOTHING")),
                Some(def(3, every_minute, "FIRE_ONCE_NOW")),
                Some(def(4, every_minute, "DO_NOTHING")),
            ],
        );
        let nodes = ["n".to_owned()];
        let mut plans = Plans::default();
        let mut report = TickReport::default();
        // 1 and 2 due now; 3 and 4 an hour late, with different rules.
        let scores = [now, now, now - 3_600_000, now - 3_600_000];
        let items: Vec<ClaimItem> = ids
            .iter()
            .zip(scores)
            .zip(&parsed)
            .map(|((id, score), p)| {
                plan_item(
                    *id,
                    score,
                    p.as_deref(),
                    window,
                    &nodes,
                    &mut plans,
                    &mut report,
                )
            })
            .collect();
        assert_eq!(plans.len(), 3, "jobs 1 and 2 share a plan");
        let fires: Vec<&[i64]> = items.iter().map(|i| i.fires.as_slice()).collect();
        assert_eq!(fires, [&[now][..], &[now], &[now], &[]]);
        let next: Vec<Option<i64>> = items.iter().map(|i| i.next).collect();
        assert_eq!(next, vec![Some(now + MINUTE); 4]);
        assert_eq!(items[2].misfire_fire, Some(now), "FIRE_ONCE_NOW fires now");
        assert_eq!(items[3].misfire_fire, None, "DO_NOTHING skips");
        assert!(items[2].missed.is_some() && items[3].missed.is_some());
    }
}
