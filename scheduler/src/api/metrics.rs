//! `/metrics` (Prometheus text, every process's counters and histograms
//! plus this node's gauges, read at scrape) and `/readyz`.

use axum::extract::State;
use axum::http::StatusCode;

use super::state::{ApiResult, AppState};
use crate::cluster::Role;

/// Sets the gauges from the node's state, then renders everything.
pub(super) async fn metrics(State(s): State<AppState>) -> ApiResult<String> {
    let term = match *s.view.role.borrow() {
        Role::Leader { term } => Some(term),
        Role::Follower => None,
    };
    metrics::gauge!("rondo_leader").set(if term.is_some() { 1.0 } else { 0.0 });
    if let Some(term) = term {
        metrics::gauge!("rondo_leader_term").set(term as f64);
    }
    metrics::gauge!("rondo_wheel_fires").set(s.firing.wheel_len() as f64);
    metrics::gauge!("rondo_cluster_nodes").set(s.view.nodes.borrow().len() as f64);
    for (partition, size) in s.store.due_sizes().await?.into_iter().enumerate() {
        metrics::gauge!("rondo_due_jobs", "partition" => partition.to_string()).set(size as f64);
    }
    let nodes = s.view.nodes.borrow().clone();
    for node in nodes {
        let size = s.store.ring_size(&node).await?;
        metrics::gauge!("rondo_ring_fires", "node" => node).set(size as f64);
    }
    Ok(rondo_core::metrics::render())
}

/// Ready: Redis answers and this node is a member of the cluster.
pub(super) async fn ready(State(s): State<AppState>) -> (StatusCode, &'static str) {
    let member = s.view.nodes.borrow().contains(&s.node);
    if member && s.store.ping().await.is_ok() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}
