//! Cluster status: the leader and term, live nodes, ring and due-set
//! sizes, and this node's firing, lanes and claim figures.

use std::sync::atomic::Ordering::Relaxed;

use axum::extract::State;
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use serde_json::{Value, json};

use super::auth::Caller;
use super::state::{ApiResult, AppState};
use crate::cluster::Role;

pub(super) async fn cluster_status(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    let nodes = s.view.nodes.borrow().clone();
    let leader = s.view.leader.borrow().clone();
    let role = match *s.view.role.borrow() {
        Role::Leader { term } => json!({ "leader": true, "term": term }),
        Role::Follower => json!({ "leader": false }),
    };
    let mut rings = serde_json::Map::new();
    for node in &nodes {
        rings.insert(node.clone(), json!(s.store.ring_size(node).await?));
    }
    Ok(Json(json!({
        "node": s.node,
        "role": role,
        "leader": leader,
        "nodes": nodes,
        "ring_sizes": rings,
        "due_sizes": s.store.due_sizes().await?,
        "wheel_len": s.firing.wheel_len(),
        "firing": {
            "fired": s.firing.stats.fired.load(Relaxed),
            "retried": s.firing.stats.retried.load(Relaxed),
            "publish_lateness_ms": s.firing.stats.publish_lateness.summary(),
        },
        "last_claim_ms": *s.claimer.last_claim_ms.borrow(),
        "lanes": s.dispatcher.lane_stats(),
        "claim": {
            "last_tick": *s.claimer.last_tick.lock().expect("last tick lock"),
            "tick_ms": s.claimer.tick_ms.summary(),
        },
    })))
}

/// Starts this node's publish-lateness and claim-tick histograms afresh (the benchmark
/// measures a steady window, not the warm-up). Admins only.
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
