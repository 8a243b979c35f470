//! `/metrics` (Prometheus text, every process's counters and histograms
//! plus this node's gauges, read at scrape) and `/readyz`.

use axum::extract::State;
use axum::http::StatusCode;

use super::doc::ApiErrors;
use super::state::{ApiResult, AppState};
use crate::cluster::Role;

/// Prometheus metrics of this node, in the text exposition format. Open
/// without credentials when `scheduler.metrics_public` is set.
#[utoipa::path(get, path = "/metrics", tag = "cluster",
    responses((status = 200, description = "Prometheus text format 0.0.4.", content_type = "text/plain", body = String), ApiErrors))]
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
    metrics::gauge!("rondo_fires_in_flight").set(s.firing.in_flight() as f64);
    metrics::gauge!("rondo_fires_loaded").set(s.firing.loaded() as f64);
    metrics::gauge!("rondo_cluster_nodes").set(s.view.nodes.borrow().len() as f64);
    for (partition, size) in s.store.api().due_sizes().await?.into_iter().enumerate() {
        metrics::gauge!("rondo_due_jobs", "partition" => partition.to_string()).set(size as f64);
    }
    let nodes = s.view.nodes.borrow().clone();
    for node in nodes {
        let size = s.store.api().ring_size(&node).await?;
        metrics::gauge!("rondo_ring_fires", "node" => node).set(size as f64);
    }
    Ok(rondo_core::metrics::render())
}

/// Ready: Redis answers and this node is a member of the cluster.
/// Alive: the process answers. Open.
#[utoipa::path(get, path = "/healthz", tag = "cluster", security(()),
    responses((status = 200, description = "`ok`.", content_type = "text/plain", body = String)))]
pub(super) async fn healthz() -> &'static str {
    "ok"
}

/// Ready: this node is a member of the cluster and reaches Redis. Open.
#[utoipa::path(get, path = "/readyz", tag = "cluster", security(()),
    responses(
        (status = 200, description = "`ready`.", content_type = "text/plain", body = String),
        (status = 503, description = "`not ready`.", content_type = "text/plain", body = String)))]
pub(super) async fn ready(State(s): State<AppState>) -> (StatusCode, &'static str) {
    let member = s.view.nodes.borrow().contains(&s.node);
    if member && s.store.ping().await.is_ok() {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}
