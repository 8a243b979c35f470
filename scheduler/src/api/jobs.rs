//! Jobs: create, list, read, update, delete, start, stop, and trigger once
//! now. Every change is written to Redis (definition and due entry in one
//! step) and announced as a `job.*` event.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use rondo_core::model::validate_app_name;
use rondo_core::{Error, Event, Job, JobSpec, TriggerType, clock};
use rondo_dispatcher::Fire;
use serde::Serialize;
use serde_json::{Value, json};

use super::input::{parse_body, parse_id, query_usize};
use super::state::{ApiResult, AppState};

/// A job with its next fire, as the API returns it.
#[derive(Serialize)]
pub(super) struct JobView {
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

/// Checks the job's `child_jobs`: every child exists, and the job does not
/// reach itself through child jobs (A → B → A would trigger forever). The
/// graph is walked breadth-first, one `get_jobs` per level.
async fn check_children(s: &AppState, job: &Job) -> Result<(), Error> {
    if job.child_jobs.is_empty() {
        return Ok(());
    }
    let children = s.store.get_jobs(&job.child_jobs).await?;
    if let Some(missing) = job.child_jobs.iter().find(|c| !children.contains_key(c)) {
        return Err(Error::invalid(
            "child_jobs",
            format!("no job {missing}; create it first"),
        ));
    }
    // How each job was first reached, to name the cycle.
    let mut reached_from: HashMap<u64, u64> = job.child_jobs.iter().map(|c| (*c, job.id)).collect();
    let mut level: Vec<Arc<Job>> = children.into_values().collect();
    while !level.is_empty() {
        let mut next = Vec::new();
        for parent in &level {
            for &child in &parent.child_jobs {
                if child == job.id {
                    let path = cycle_path(job.id, parent.id, &reached_from);
                    return Err(Error::invalid(
                        "child_jobs",
                        format!("would make a cycle of child jobs: {path}"),
                    ));
                }
                if let std::collections::hash_map::Entry::Vacant(v) = reached_from.entry(child) {
                    v.insert(parent.id);
                    next.push(child);
                }
            }
        }
        level = s.store.get_jobs(&next).await?.into_values().collect();
    }
    Ok(())
}

/// `root → … → last → root`, following `reached_from` back from `last`.
fn cycle_path(root: u64, last: u64, reached_from: &HashMap<u64, u64>) -> String {
    let mut path = vec![root, last];
    let mut at = last;
    while let Some(&from) = reached_from.get(&at) {
        if from == root {
            break;
        }
        path.push(from);
        at = from;
    }
    path.push(root);
    let last = path.len() - 1;
    path[1..last].reverse();
    let ids: Vec<String> = path.iter().map(u64::to_string).collect();
    ids.join(" → ")
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
    s.events
        .publish(&[Event::JobUpserted { job: job.clone() }])
        .await
}

pub(super) async fn create_job(
    State(s): State<AppState>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let spec = parse_body::<JobSpec>(&body)?;
    // Validate before taking an id, so bad input consumes nothing.
    let probe = spec.clone().validate(0, 0, None)?;
    check_group(&s, &probe).await?;
    // A new job has no parents yet, so it cannot close a cycle; its
    // children must exist.
    check_children(&s, &probe).await?;
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

pub(super) async fn list_jobs(
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

pub(super) async fn get_job(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    let job = s.store.get_job(parse_id(&id)?).await?;
    Ok(Json(view(&s, job).await?))
}

pub(super) async fn update_job(
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
    check_children(&s, &job).await?;
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

pub(super) async fn delete_job(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let job = s.store.get_job(parse_id(&id)?).await?;
    s.store.delete_job(&job).await?;
    s.events
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

pub(super) async fn start_job(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    Ok(Json(set_enabled(&s, &id, true).await?))
}

pub(super) async fn stop_job(
    State(s): State<AppState>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    Ok(Json(set_enabled(&s, &id, false).await?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cycle_is_named_from_the_job_back_to_it() {
        // 1 → 2 → 3 → 1: reached 2 from 1, 3 from 2.
        let reached = HashMap::from([(2, 1), (3, 2)]);
        assert_eq!(cycle_path(1, 3, &reached), "1 → 2 → 3 → 1");
        assert_eq!(cycle_path(1, 2, &reached), "1 → 2 → 1");
    }
}

#[derive(serde::Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct TriggerSpec {
    params: Option<String>,
}

/// Fires a job once, now, whatever its schedule or status (XXL-JOB's
/// "execute once"), optionally with other params.
pub(super) async fn trigger_job(
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
