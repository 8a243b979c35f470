//! The admin HTTP API (JSON): executor groups, jobs, manual triggers, trigger
//! logs, the daily report, log retention and cluster status. Built by [`router`], which tests call directly.
//!
//! Every error is `{"error": {"kind", "field", "message"}}` with a 4xx for
//! bad input (naming the field) and 5xx for unavailable services.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use rondo_core::model::{GroupSpec, validate_app_name};
use rondo_core::{Error, Event, Job, JobSpec, TriggerType, clock};
use rondo_dispatcher::{Dispatcher, Fire};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::claim::Claimer;
use crate::cluster::{ClusterView, Role};
use crate::firing::Firing;
use crate::store::Store;
use rondo_history::History;

/// Everything a request handler needs.
#[derive(Clone)]
pub struct AppState {
    pub store: Store,
    pub dispatcher: Arc<Dispatcher>,
    pub view: ClusterView,
    pub node: String,
    pub history: History,
    pub firing: Arc<Firing>,
    pub claimer: Arc<Claimer>,
    pub monitor: Arc<crate::monitor::Monitor>,
}

/// An error as the API answers it.
pub struct ApiError(Error);

impl From<Error> for ApiError {
    fn from(e: Error) -> Self {
        ApiError(e)
    }
}

impl From<rondo_history::Error> for ApiError {
    fn from(e: rondo_history::Error) -> Self {
        ApiError(e.into())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.kind.http_status())
            .unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        if status.is_server_error() {
            tracing::warn!(error = %self.0, "api request failed");
        }
        (status, Json(json!({ "error": self.0 }))).into_response()
    }
}

type ApiResult<T> = Result<T, ApiError>;

pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route("/api/v1/cluster", get(cluster_status))
        .route("/api/v1/cluster/stats/reset", post(reset_stats))
        .route("/api/v1/groups", post(create_group).get(list_groups))
        .route(
            "/api/v1/groups/{app}",
            get(get_group).put(update_group).delete(delete_group),
        )
        .route("/api/v1/groups/{app}/executors", get(group_executors))
        .route("/api/v1/jobs", post(create_job).get(list_jobs))
        .route(
            "/api/v1/jobs/{id}",
            get(get_job).put(update_job).delete(delete_job),
        )
        .route("/api/v1/jobs/{id}/start", post(start_job))
        .route("/api/v1/jobs/{id}/stop", post(stop_job))
        .route("/api/v1/jobs/{id}/trigger", post(trigger_job))
        .route("/api/v1/jobs/{id}/logs", get(job_logs))
        .route("/api/v1/logs/{trigger_id}", get(trigger_log))
        .route("/api/v1/logs/{trigger_id}/kill", post(kill_trigger))
        .route("/api/v1/reports", get(reports))
        .route("/api/v1/maintenance/retention", post(retention))
        .fallback(|| async { ApiError(Error::not_found("path", "no such endpoint")) })
        .with_state(state)
}

/// Parses a JSON body, naming the field at fault.
fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        body
    };
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let message = e.inner().to_string();
        let path = e.path().to_string();
        let field = if path == "." {
            unknown_field(&message).unwrap_or_else(|| "body".into())
        } else {
            path
        };
        Error::invalid(&field, message)
    })
}

/// serde names an unknown field as "unknown field `x`, expected …".
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_owned())
}

fn parse_id(raw: &str) -> Result<u64, Error> {
    raw.parse().map_err(|_| {
        Error::invalid(
            "id",
            format!("job id must be a positive integer, got {raw:?}"),
        )
    })
}

fn query_usize(
    q: &HashMap<String, String>,
    key: &str,
    default: usize,
    max: usize,
) -> Result<usize, Error> {
    let Some(raw) = q.get(key) else {
        return Ok(default);
    };
    let value: usize = raw
        .parse()
        .map_err(|_| Error::invalid(key, format!("must be a whole number, got {raw:?}")))?;
    if value > max {
        return Err(Error::invalid(key, format!("must be at most {max}")));
    }
    Ok(value)
}

// ---- cluster ----

async fn cluster_status(State(s): State<AppState>) -> ApiResult<Json<Value>> {
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
/// measures a steady window, not the warm-up).
async fn reset_stats(State(s): State<AppState>) -> StatusCode {
    s.firing.stats.publish_lateness.reset();
    s.claimer.tick_ms.reset();
    StatusCode::NO_CONTENT
}

// ---- groups ----

async fn create_group(
    State(s): State<AppState>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let group = parse_body::<GroupSpec>(&body)?.validate(clock::now_ms())?;
    s.store.create_group(&group).await?;
    s.dispatcher
        .events()
        .publish(&[Event::GroupUpserted {
            group: group.clone(),
        }])
        .await?;
    Ok((StatusCode::CREATED, Json(json!(group))))
}

async fn list_groups(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.store.list_groups().await?)))
}

async fn get_group(State(s): State<AppState>, Path(app): Path<String>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.store.get_group(&app).await?)))
}

async fn update_group(
    State(s): State<AppState>,
    Path(app): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let mut spec = parse_body::<GroupSpec>(&body)?;
    if spec.app.as_deref().is_some_and(|a| a != app) {
        return Err(Error::invalid("app", "cannot rename a group").into());
    }
    spec.app = Some(app);
    let group = spec.validate(clock::now_ms())?;
    s.store.update_group(&group).await?;
    s.dispatcher
        .events()
        .publish(&[Event::GroupUpserted {
            group: group.clone(),
        }])
        .await?;
    Ok(Json(json!(group)))
}

async fn delete_group(State(s): State<AppState>, Path(app): Path<String>) -> ApiResult<StatusCode> {
    s.store.delete_group(&app).await?;
    s.dispatcher
        .events()
        .publish(&[Event::GroupDeleted {
            app,
            at_ms: clock::now_ms(),
        }])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn group_executors(
    State(s): State<AppState>,
    Path(app): Path<String>,
) -> ApiResult<Json<Value>> {
    validate_app_name("app", &app)?;
    Ok(Json(json!(s.dispatcher.registry().live(&app).await?)))
}

// ---- jobs ----

/// A job with its next fire, as the API returns it.
#[derive(Serialize)]
struct JobView {
    #[serde(flatten)]
    job: Job,
    next_fire_ms: Option<i64>,
}

async fn view(s: &AppState, job: Job) -> Result<JobView, Error> {
    let next_fire_ms = s.store.next_fire(job.id).await?;
    Ok(JobView { job, next_fire_ms })
}

/// Checks the group exists, for a job that names it.
async fn check_group(s: &AppState, job: &Job) -> Result<(), Error> {
    match s.store.get_group(&job.group).await {
        Ok(_) => Ok(()),
        Err(e) if e.kind == rondo_core::ErrorKind::NotFound => Err(Error::invalid(
            "group",
            format!("no executor group {:?}; create it first", job.group),
        )),
        Err(e) => Err(e),
    }
}

/// The first fire of an enabled job, computed from now.
fn first_fire(job: &Job) -> Result<Option<i64>, Error> {
    if !job.enabled {
        return Ok(None);
    }
    Ok(job.schedule()?.next_after(clock::now_ms()))
}

async fn save_and_announce(
    s: &AppState,
    job: &Job,
    next: Option<i64>,
    old_group: Option<&str>,
) -> Result<(), Error> {
    s.store.save_job(job, next, old_group).await?;
    s.dispatcher
        .events()
        .publish(&[Event::JobUpserted { job: job.clone() }])
        .await
}

async fn create_job(
    State(s): State<AppState>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let spec = parse_body::<JobSpec>(&body)?;
    // Validate before taking an id, so bad input consumes nothing.
    let probe = spec.clone().validate(0, 0, None)?;
    check_group(&s, &probe).await?;
    let id = s.store.next_job_id().await?;
    let job = spec.validate(id, clock::now_ms(), None)?;
    let next = first_fire(&job)?;
    save_and_announce(&s, &job, next, None).await?;
    tracing::info!(job_id = id, group = %job.group, "job created");
    Ok((
        StatusCode::CREATED,
        Json(JobView {
            job,
            next_fire_ms: next,
        }),
    ))
}

async fn list_jobs(
    State(s): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let group = q.get("group").map(String::as_str);
    if let Some(g) = group {
        validate_app_name("group", g)?;
    }
    let limit = query_usize(&q, "limit", 100, 1000)?;
    let offset = query_usize(&q, "offset", 0, usize::MAX)?;
    let ids = s.store.job_ids(group).await?;
    let page: Vec<u64> = ids.iter().copied().skip(offset).take(limit).collect();
    let jobs = s.store.get_jobs(&page).await?;
    let items: Vec<&Job> = page
        .iter()
        .filter_map(|id| jobs.get(id).map(|j| j.as_ref()))
        .collect();
    Ok(Json(
        json!({ "total": ids.len(), "offset": offset, "items": items }),
    ))
}

async fn get_job(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<JobView>> {
    let job = s.store.get_job(parse_id(&id)?).await?;
    Ok(Json(view(&s, job).await?))
}

async fn update_job(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<JobView>> {
    let id = parse_id(&id)?;
    let patch = parse_body::<JobSpec>(&body)?;
    let old = s.store.get_job(id).await?;
    let job = old
        .to_spec()
        .overlay(patch)
        .validate(id, clock::now_ms(), Some(old.created_ms))?;
    check_group(&s, &job).await?;
    let reschedule = job.schedule_type != old.schedule_type
        || job.schedule_conf != old.schedule_conf
        || job.enabled != old.enabled;
    let next = if reschedule {
        first_fire(&job)?
    } else {
        s.store.next_fire(id).await?
    };
    save_and_announce(&s, &job, next, Some(&old.group)).await?;
    Ok(Json(JobView {
        job,
        next_fire_ms: next,
    }))
}

async fn delete_job(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let job = s.store.get_job(parse_id(&id)?).await?;
    s.store.delete_job(&job).await?;
    s.dispatcher
        .events()
        .publish(&[Event::JobDeleted {
            id: job.id,
            at_ms: clock::now_ms(),
        }])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_enabled(s: &AppState, id: &str, enabled: bool) -> Result<JobView, Error> {
    let mut job = s.store.get_job(parse_id(id)?).await?;
    if job.enabled == enabled {
        return view(s, job).await;
    }
    job.enabled = enabled;
    job.updated_ms = clock::now_ms();
    let next = first_fire(&job)?;
    save_and_announce(s, &job, next, None).await?;
    Ok(JobView {
        job,
        next_fire_ms: next,
    })
}

async fn start_job(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<JobView>> {
    Ok(Json(set_enabled(&s, &id, true).await?))
}

async fn stop_job(State(s): State<AppState>, Path(id): Path<String>) -> ApiResult<Json<JobView>> {
    Ok(Json(set_enabled(&s, &id, false).await?))
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TriggerSpec {
    params: Option<String>,
}

/// Fires a job once, now, whatever its schedule or status (XXL-JOB's
/// "execute once"), optionally with other params.
async fn trigger_job(
    State(s): State<AppState>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let spec = parse_body::<TriggerSpec>(&body)?;
    if let Some(p) = &spec.params
        && p.len() > rondo_core::model::MAX_PARAMS_BYTES
    {
        return Err(Error::invalid(
            "params",
            format!(
                "is {} bytes, the limit is {}",
                p.len(),
                rondo_core::model::MAX_PARAMS_BYTES
            ),
        )
        .into());
    }
    let job = s.store.get_job(parse_id(&id)?).await?;
    let fire = Fire {
        job: Arc::new(job),
        fire_ms: clock::now_ms(),
        trigger_type: TriggerType::Manual,
        params: spec.params,
        retry_count: 0,
        trigger_id: None,
        shard: None,
    };
    let dispatched = s.dispatcher.dispatch(&fire).await?;
    Ok(Json(json!({ "triggers": dispatched.records })))
}

async fn job_logs(
    State(s): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let id = parse_id(&id)?;
    let limit = query_usize(&q, "limit", 20, 1000)?;
    Ok(Json(json!(s.history.job_logs(id, limit as u32).await?)))
}

async fn trigger_log(
    State(s): State<AppState>,
    Path(trigger_id): Path<String>,
) -> ApiResult<Json<Value>> {
    if trigger_id.len() > rondo_core::trigger_id::MAX_LEN {
        let msg = format!(
            "is longer than {} characters",
            rondo_core::trigger_id::MAX_LEN
        );
        return Err(Error::invalid("trigger_id", msg).into());
    }
    match s.history.trigger_log(&trigger_id).await? {
        Some(log) => Ok(Json(json!(log))),
        None => Err(Error::not_found("trigger_id", format!("no trigger {trigger_id}")).into()),
    }
}

// ---- reports and retention ----

/// The daily report of the last `days` days (default 7, today included),
/// recomputed from the trigger logs first.
async fn reports(
    State(s): State<AppState>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Value>> {
    let max = rondo_history::report::MAX_DAYS as usize;
    let days = query_usize(&q, "days", 7, max)?;
    if days == 0 {
        return Err(Error::invalid("days", format!("must be between 1 and {max}")).into());
    }
    let rows = s.history.report(days as u32).await?;
    Ok(Json(json!({ "days": days, "items": rows })))
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct RetentionSpec {
    days: Option<u32>,
}

/// Applies log retention now: drops the log days older than `days` (default
/// `persist.retention_days`; a given `days` must be at least 7).
async fn retention(State(s): State<AppState>, body: Bytes) -> ApiResult<Json<Value>> {
    use rondo_history::maintenance::MIN_RETENTION_DAYS;
    let spec = parse_body::<RetentionSpec>(&body)?;
    let days = match spec.days {
        Some(days) if days < MIN_RETENTION_DAYS => {
            let msg = format!("must be at least {MIN_RETENTION_DAYS} (got {days})");
            return Err(Error::invalid("days", msg).into());
        }
        Some(days) => days,
        None => s.monitor.config.persist.retention_days,
    };
    let applied = s.history.retention(days).await?;
    tracing::info!(
        days,
        enabled = applied.enabled,
        "retention applied from the api"
    );
    Ok(Json(json!(applied)))
}

/// Kills a running (or queued) trigger on its executor: a `kill` message on
/// the control exchange; the executor cancels the run and answers "killed".
async fn kill_trigger(
    State(s): State<AppState>,
    Path(trigger_id): Path<String>,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let job_id = rondo_core::trigger_id::job_of(&trigger_id)?;
    let Some(trigger) = s.monitor.state.inflight(job_id, &trigger_id).await? else {
        let msg = format!("trigger {trigger_id} is not running (no result is pending)");
        return Err(Error::new(rondo_core::ErrorKind::Conflict, msg).into());
    };
    let control = rondo_core::trigger::Control {
        v: 1,
        action: rondo_core::trigger::ControlAction::Kill,
        trigger_id: trigger_id.clone(),
        job_id,
    };
    if !s
        .dispatcher
        .publish_control(&trigger.executor_id, &control)
        .await?
    {
        let msg = format!(
            "executor {} is not connected; the trigger will be found lost if it never answers",
            trigger.executor_id
        );
        return Err(Error::new(rondo_core::ErrorKind::Conflict, msg).into());
    }
    tracing::info!(trigger_id = %trigger_id, executor_id = %trigger.executor_id, "kill sent");
    Ok((
        StatusCode::ACCEPTED,
        Json(
            json!({ "trigger_id": trigger_id, "executor_id": trigger.executor_id, "kill": "sent" }),
        ),
    ))
}
