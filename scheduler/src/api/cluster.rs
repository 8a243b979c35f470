//! Cluster status: the leader and term, live nodes, ring and due-set
//! sizes, and this node's firing, lanes and claim figures.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering::Relaxed;

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::histogram::Summary;
use rondo_dispatcher::LaneStats;
use serde::Serialize;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::state::{ApiResult, AppState};
use crate::cluster::{LeaderInfo, Role};
use crate::leader::claim::TickReport;

/// This node's view of the cluster, and its own figures.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ClusterStatus {
    /// This node's id.
    node: String,
    role: NodeRole,
    /// The leader and its term, when one is elected.
    leader: Option<LeaderInfo>,
    /// Live scheduler nodes.
    nodes: Vec<String>,
    /// Fires waiting in each node's ring, by node id.
    ring_sizes: BTreeMap<String, u64>,
    /// Jobs in each due partition.
    due_sizes: Vec<u64>,
    /// Fires in this node's wheel.
    wheel_len: usize,
    firing: Firing,
    /// When this node last claimed due jobs (ms; 0 if never).
    last_claim_ms: i64,
    /// The dispatcher's fast and slow lanes.
    #[schema(value_type = Object)]
    lanes: LaneStats,
    claim: Claim,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct NodeRole {
    leader: bool,
    /// The leader's fencing term (leaders only).
    #[serde(skip_serializing_if = "Option::is_none")]
    term: Option<u64>,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Firing {
    fired: u64,
    retried: u64,
    /// Fires this node took from nodes whose ring lease lapsed, as their
    /// standby.
    taken: u64,
    /// Fires this node published whose ring member was gone at its ack
    /// (taken by a standby or moved by the leader, which published them
    /// too; each trigger id runs once).
    double_published: u64,
    publish_lateness_ms: Summary,
}

#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Claim {
    last_tick: TickReport,
    tick_ms: Summary,
}

#[utoipa::path(get, path = "/api/v1/cluster", tag = "cluster",
    responses((status = 200, description = "Cluster status.", body = ClusterStatus), ApiErrors))]
pub(super) async fn cluster_status(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<ClusterStatus>> {
    let nodes = s.view.nodes.borrow().clone();
    let leader = s.view.leader.borrow().clone();
    let role = match *s.view.role.borrow() {
        Role::Leader { term } => NodeRole {
            leader: true,
            term: Some(term),
        },
        Role::Follower => NodeRole {
            leader: false,
            term: None,
        },
    };
    // The slow lane names jobs: a user who may read some groups sees
    // those groups' jobs only (a job since deleted, nobody but admins).
    let mut lanes = s.dispatcher.lane_stats();
    if let Some(groups) = caller.readable_groups() {
        let ids: Vec<u64> = lanes.slow_jobs.iter().map(|j| j.job_id).collect();
        let jobs = s.store.get_jobs(&ids).await?;
        keep_readable(&mut lanes.slow_jobs, &jobs, groups);
    }
    let mut ring_sizes = BTreeMap::new();
    for node in &nodes {
        ring_sizes.insert(node.clone(), s.store.api().ring_size(node).await?);
    }
    Ok(Json(ClusterStatus {
        node: s.node.clone(),
        role,
        leader,
        nodes,
        ring_sizes,
        due_sizes: s.store.api().due_sizes().await?,
        wheel_len: s.firing.wheel_len(),
        firing: Firing {
            fired: s.firing.stats.fired.load(Relaxed),
            retried: s.firing.stats.retried.load(Relaxed),
            taken: s.firing.stats.taken.load(Relaxed),
            double_published: s.firing.stats.double_published.load(Relaxed),
            publish_lateness_ms: s.firing.stats.publish_lateness.summary(),
        },
        last_claim_ms: *s.claimer.last_claim_ms.borrow(),
        lanes,
        claim: Claim {
            last_tick: *s.claimer.last_tick.lock().expect("last tick lock"),
            tick_ms: s.claimer.tick_ms.summary(),
        },
    }))
}

/// Starts this node's publish-lateness and claim-tick histograms afresh (the benchmark
/// measures a steady window, not the warm-up). Admins only.
#[utoipa::path(post, path = "/api/v1/cluster/stats/reset", tag = "cluster",
    responses((status = 204, description = "Reset."), ApiErrors))]
pub(super) async fn reset_stats(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<StatusCode> {
    caller.require(Access::Admin, "stats")?;
    s.firing.stats.publish_lateness.reset();
    s.claimer.tick_ms.reset();
    s.events
        .publish(&[caller.audit("stats.reset", format!("node:{}", s.node), None, None)])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Keeps the slow jobs of `groups` (a job since deleted, of no group, goes).
fn keep_readable(
    slow: &mut Vec<rondo_dispatcher::lanes::SlowJob>,
    jobs: &std::collections::HashMap<u64, std::sync::Arc<rondo_core::Job>>,
    groups: &std::collections::BTreeSet<String>,
) {
    slow.retain(|j| {
        jobs.get(&j.job_id)
            .is_some_and(|job| groups.contains(&job.group))
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeSet, HashMap};
    use std::sync::Arc;

    #[test]
    fn the_slow_lane_shows_a_user_only_their_groups_jobs() {
        let slow = |job_id| rondo_dispatcher::lanes::SlowJob {
            job_id,
            slow_in_window: 3,
        };
        let jobs: HashMap<u64, Arc<rondo_core::Job>> = [(1, "mine"), (2, "theirs")]
            .into_iter()
            .map(|(id, g)| (id, Arc::new(rondo_core::Job::new(id, g, "h"))))
            .collect();
        let mut lane = vec![slow(1), slow(2), slow(3)];
        keep_readable(&mut lane, &jobs, &BTreeSet::from(["mine".to_owned()]));
        assert_eq!(lane.iter().map(|j| j.job_id).collect::<Vec<_>>(), [1]);
    }
}
