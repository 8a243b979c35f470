//! Jobs: create, list, read, update, delete, start, stop, and trigger once
//! now. Every change is written to Redis (definition and due entry in one
//! step) and announced as a `job.*` event.
//!
//! Why one file of ~700 lines: every route of `/api/v1/jobs` with its
//! input checks, so that a route's validation, write and event are read
//! together; the list's query parsing is the largest part and the first to
//! move out.

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::event::TriggerRecord;
use rondo_core::model::{ScheduleType, validate_app_name};
use rondo_core::{Error, Event, Job, JobSpec, TriggerType, clock};
use rondo_dispatcher::Fire;
use rondo_history::{JobQuery, JobSort};
use serde::Serialize;

use rondo_core::schedule::MissedFires;

use crate::store::Due;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::{parse_body, parse_id, query_usize};
use super::schedules::{NextFires, count_param};
use super::state::{ApiResult, AppState};

/// A job with its next fire, as the API returns it.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct JobView {
    #[serde(flatten)]
    job: Job,
    /// The next scheduled fire (ms since the epoch, UTC); null when the
    /// job is stopped or its schedule has no more fires.
    next_fire_ms: Option<i64>,
}

/// A page of jobs.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct JobPage {
    /// Jobs matching, on all pages: exactly, or at least this many when
    /// `total_exact` is false (a count that stopped at 10,000, or a text
    /// search, which counts only the pages so far and one more if there
    /// are more).
    total: usize,
    total_exact: bool,
    offset: usize,
    items: Vec<Job>,
}

/// The `{id}` path parameter of a job.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // only describes the path; handlers read it as text
pub(super) struct JobIdParam {
    /// The job's id.
    #[param(minimum = 0)]
    id: i64,
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
/// graph is walked breadth-first, one `get_jobs` per level. The caller
/// must be allowed to run every child (it triggers them through this job).
async fn check_children(s: &AppState, caller: &Caller, job: &Job) -> Result<(), Error> {
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
    for child in children.values() {
        caller.require(Access::OperateGroup(&child.group), "child_jobs")?;
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
    Ok(job.schedule()?.first_after(clock::now_ms()))
}

/// Saves a job and announces it, with the audit record of `action`.
async fn save_and_announce(
    s: &AppState,
    caller: &Caller,
    action: &str,
    job: &Job,
    next: impl Into<Due>,
    old_group: Option<&str>,
) -> Result<(), Error> {
    s.store.save_job(job, next, old_group).await?;
    let audit = caller.audit(action, format!("job:{}", job.id), Some(&job.group), None);
    s.events
        .publish(&[Event::JobUpserted { job: job.clone() }, audit])
        .await
}

/// The job `raw` names, if the caller may read it.
async fn readable_job(s: &AppState, caller: &Caller, raw: &str) -> Result<Job, Error> {
    let job = s.store.get_job(parse_id(raw)?).await?;
    caller.require(Access::ReadGroup(&job.group), "id")?;
    Ok(job)
}

/// The job `raw` names, if the caller may change and run it.
async fn operable_job(s: &AppState, caller: &Caller, raw: &str) -> Result<Job, Error> {
    let job = s.store.get_job(parse_id(raw)?).await?;
    caller.require(Access::OperateGroup(&job.group), "id")?;
    Ok(job)
}

/// Running `job` runs its child jobs: the caller needs the right on their
/// groups too (children deleted since are not run, and not checked).
async fn may_run_children(s: &AppState, caller: &Caller, job: &Job) -> Result<(), Error> {
    if job.child_jobs.is_empty() {
        return Ok(());
    }
    for child in s.store.get_jobs(&job.child_jobs).await?.values() {
        caller.require(Access::OperateGroup(&child.group), "child_jobs")?;
    }
    Ok(())
}

/// Creates a job (operators of its group, and of its child jobs' groups).
#[utoipa::path(post, path = "/api/v1/jobs", tag = "jobs",
    request_body = JobSpec,
    responses((status = 201, description = "The job, created.", body = JobView), ApiErrors))]
pub(super) async fn create_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<JobView>)> {
    let mut spec = parse_body::<JobSpec>(&body)?;
    if spec.zone.is_none() {
        spec.zone = Some(s.default_zone.name().to_owned());
    }
    // Validate before taking an id, so bad input consumes nothing.
    let probe = spec.clone().validate(0, 0, None)?;
    caller.require(Access::OperateGroup(&probe.group), "group")?;
    check_group(&s, &probe).await?;
    // A new job has no parents yet, so it cannot close a cycle; its
    // children must exist.
    check_children(&s, &caller, &probe).await?;
    let id = s.store.next_job_id().await?;
    let job = spec.validate(id, clock::now_ms(), None)?;
    let next = first_fire(&job)?;
    save_and_announce(&s, &caller, "job.create", &job, next, None).await?;
    tracing::info!(job_id = id, group = %job.group, "job created");
    Ok((
        StatusCode::CREATED,
        Json(JobView {
            job,
            next_fire_ms: next,
        }),
    ))
}

/// A page of jobs: by id from Redis (always current), or, with a search,
/// a filter or another order, ids from the MySQL mirror (a job saved a
/// moment ago shows once the persistence worker has written it, within
/// its linger) and the definitions from Redis.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    params(
        ("group" = Option<String>, Query, description = "Only this group's jobs.", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("q" = Option<String>, Query, description = "A job id (a number), or text found in the description or the handler, in any case (not counted: `total_exact` is false while there are more).", max_length = 255),
        ("enabled" = Option<bool>, Query, description = "Only running (`true`) or stopped (`false`) jobs."),
        ("schedule_type" = Option<String>, Query, description = "Only jobs of this schedule type.", pattern = "^(CRON|FIX_RATE|FIX_DELAY|NONE)$"),
        ("sort" = Option<String>, Query, description = "The order: `id` (default), `description`, `updated`; a leading `-` reverses it.", pattern = "^-?(id|description|updated)$"),
        ("limit" = Option<u32>, Query, description = "Page size (default 100).", maximum = 1000),
        ("offset" = Option<i64>, Query, description = "Jobs to skip (default 0).", minimum = 0),
    ),
    responses((status = 200, description = "A page of jobs.", body = JobPage), ApiErrors))]
pub(super) async fn list_jobs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<JobPage>> {
    let query = JobListQuery::parse(&q)?;
    if let Some(g) = &query.group {
        caller.require(Access::ReadGroup(g), "group")?;
    }
    let groups: Option<Vec<String>> = match (&query.group, caller.readable_groups()) {
        (Some(g), _) => Some(vec![g.clone()]),
        (None, Some(readable)) => Some(readable.iter().cloned().collect()),
        (None, None) => None,
    };
    let (total, total_exact, page) = if query.by_id_only() {
        let (total, ids) = s
            .store
            .job_page(
                groups.as_deref(),
                query.offset,
                query.limit,
                query.descending,
            )
            .await?;
        (total, true, ids)
    } else {
        let found = s
            .history
            .search_jobs(&JobQuery {
                groups,
                text: query.text.clone(),
                enabled: query.enabled,
                schedule_type: query.schedule_type.clone(),
                sort: query.sort,
                descending: query.descending,
                offset: query.offset as u64,
                limit: query.limit as u32,
            })
            .await?;
        (found.total as usize, found.exact, found.ids)
    };
    let jobs = s.store.get_jobs(&page).await?;
    // The page's ids may come from MySQL's mirror, which trails Redis: a
    // job moved to a group the caller may not read is left out here.
    let items = page
        .iter()
        .filter_map(|id| jobs.get(id))
        .filter(|j| caller.principal.may(Access::ReadGroup(&j.group)))
        .map(|j| Job::clone(j))
        .collect();
    Ok(Json(JobPage {
        total,
        total_exact,
        offset: query.offset,
        items,
    }))
}

/// The job list's query, checked: each bad value is a 400 naming its key.
struct JobListQuery {
    group: Option<String>,
    text: Option<String>,
    enabled: Option<bool>,
    schedule_type: Option<String>,
    sort: JobSort,
    descending: bool,
    limit: usize,
    offset: usize,
}

impl JobListQuery {
    fn parse(q: &HashMap<String, String>) -> Result<JobListQuery, Error> {
        let group = q.get("group").cloned();
        if let Some(g) = &group {
            validate_app_name("group", g)?;
        }
        let text = q
            .get("q")
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        if text.as_ref().is_some_and(|t| t.chars().count() > 255) {
            return Err(Error::invalid("q", "must be at most 255 characters"));
        }
        let enabled = match q.get("enabled").map(String::as_str) {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => {
                return Err(Error::invalid(
                    "enabled",
                    format!("must be true or false, got {other:?}"),
                ));
            }
        };
        let schedule_type = match q.get("schedule_type") {
            None => None,
            Some(t) => Some(ScheduleType::parse("schedule_type", t)?.as_str().to_owned()),
        };
        let raw_sort = q.get("sort").map(String::as_str).unwrap_or("id");
        let (descending, key) = match raw_sort.strip_prefix('-') {
            Some(key) => (true, key),
            None => (false, raw_sort),
        };
        let sort = match key {
            "id" => JobSort::Id,
            "description" => JobSort::Description,
            "updated" => JobSort::Updated,
            _ => {
                return Err(Error::invalid(
                    "sort",
                    format!(
                        "must be id, description or updated, optionally with a leading -, got {raw_sort:?}"
                    ),
                ));
            }
        };
        Ok(JobListQuery {
            group,
            text,
            enabled,
            schedule_type,
            sort,
            descending,
            limit: query_usize(q, "limit", 100, 1000)?,
            offset: query_usize(q, "offset", 0, super::input::MAX_ID as usize)?,
        })
    }

    /// Nothing but id order: Redis answers, current to the last save.
    fn by_id_only(&self) -> bool {
        self.text.is_none()
            && self.enabled.is_none()
            && self.schedule_type.is_none()
            && self.sort == JobSort::Id
    }
}

/// One job, with its next fire.
#[utoipa::path(get, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(JobIdParam),
    responses((status = 200, description = "The job.", body = JobView), ApiErrors))]
pub(super) async fn get_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    let job = readable_job(&s, &caller, &id).await?;
    Ok(Json(view(&s, job).await?))
}

/// Changes a job: the fields given replace the job's (a partial update);
/// moving it to another group needs the right on both.
#[utoipa::path(put, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(JobIdParam), request_body(content = Option<JobSpec>, description = "The fields to change; no body changes nothing."),
    responses((status = 200, description = "The job, changed.", body = JobView), ApiErrors))]
pub(super) async fn update_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(raw): Path<String>,
    body: Bytes,
) -> ApiResult<Json<JobView>> {
    let id = parse_id(&raw)?;
    let patch = parse_body::<JobSpec>(&body)?;
    let old = operable_job(&s, &caller, &raw).await?;
    let mut base = old.to_spec();
    if patch.glue_type.is_some() && patch.handler.is_none() {
        // A change of what the job runs: the old handler (a script's, or
        // the one a script replaces) is not carried over.
        base.handler = None;
    }
    let now = clock::now_ms();
    let job = base
        .overlay(patch)
        .validate(id, now, Some(old.created_ms))?
        .versioned_after(Some(&old), now);
    caller.require(Access::OperateGroup(&job.group), "group")?;
    check_group(&s, &job).await?;
    check_children(&s, &caller, &job).await?;
    let reschedule = job.schedule_type != old.schedule_type
        || job.schedule_conf != old.schedule_conf
        || job.zone != old.zone
        || job.enabled != old.enabled;
    let (due, next) = if reschedule {
        let next = first_fire(&job)?;
        (Due::from(next), next)
    } else {
        (Due::Keep, s.store.next_fire(id).await?)
    };
    save_and_announce(&s, &caller, "job.update", &job, due, Some(&old.group)).await?;
    Ok(Json(JobView {
        job,
        next_fire_ms: next,
    }))
}

/// A job's next fires, in UTC and in its zone (from now; a stopped job's
/// are those it would have).
#[utoipa::path(get, path = "/api/v1/jobs/{id}/next", tag = "jobs",
    params(JobIdParam,
        ("count" = Option<u32>, Query, description = "Fires to list (default 5).", minimum = 1, maximum = 100)),
    responses((status = 200, description = "The next fires.", body = NextFires), ApiErrors))]
pub(super) async fn next_fires(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<NextFires>> {
    let count = count_param(&q)?;
    let job = readable_job(&s, &caller, &id).await?;
    let schedule = job.schedule()?;
    let zone = rondo_core::schedule::parse_zone("zone", &job.zone)?;
    Ok(Json(NextFires::of(
        &schedule,
        zone,
        (job.schedule_type.as_str(), &job.schedule_conf),
        clock::now_ms(),
        count,
    )))
}

/// The fires a job missed: claimed late (misfires, late claims) or lost
/// with a dead node, how many never ran, and the last 20 occurrences.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/misfires", tag = "jobs",
    params(JobIdParam),
    responses((status = 200, description = "What the job missed.", body = MissedFires), ApiErrors))]
pub(super) async fn job_misfires(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<MissedFires>> {
    let job = readable_job(&s, &caller, &id).await?;
    Ok(Json(s.store.missed_fires(job.id).await?))
}

/// A script job's kept script versions (the newest 30), newest first.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct ScriptVersions {
    /// The job's current version (0: never a script).
    current: u32,
    /// Versions as the persistence worker stored them (the current one
    /// shows up within moments of its save).
    items: Vec<rondo_history::GlueVersion>,
}

/// The saved versions of a script job's script.
#[utoipa::path(get, path = "/api/v1/jobs/{id}/scripts", tag = "jobs",
    params(JobIdParam),
    responses((status = 200, description = "The versions, newest first.", body = ScriptVersions), ApiErrors))]
pub(super) async fn script_versions(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<ScriptVersions>> {
    let job = readable_job(&s, &caller, &id).await?;
    Ok(Json(ScriptVersions {
        current: job.glue_version,
        items: s.history.glue_versions(job.id).await?,
    }))
}

/// What a restore saves with the restored script.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RestoreSpec {
    /// Default: "restored from version N".
    #[schema(max_length = 255)]
    remark: Option<String>,
}

/// Makes a kept version of the script the job's current script: saved as
/// a new version, so the history only grows.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/scripts/{version}/restore", tag = "jobs",
    params(JobIdParam, ("version" = u32, Path, description = "The version to restore.", minimum = 1)),
    request_body(content = Option<RestoreSpec>, description = "An optional remark."),
    responses((status = 200, description = "The job, with the restored script.", body = JobView), ApiErrors))]
pub(super) async fn restore_script(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path((raw, version)): Path<(String, String)>,
    body: Bytes,
) -> ApiResult<Json<JobView>> {
    let spec = parse_body::<RestoreSpec>(&body)?;
    let old = operable_job(&s, &caller, &raw).await?;
    let number: u32 = version
        .parse()
        .map_err(|_| Error::invalid("version", format!("{version:?} is not a version number")))?;
    let kept = s
        .history
        .glue_version(old.id, number)
        .await?
        .ok_or_else(|| {
            Error::not_found(
                "version",
                format!("job {} has no kept script version {number}", old.id),
            )
        })?;
    let patch = JobSpec {
        glue_type: Some(kept.glue_type),
        glue_source: Some(kept.glue_source),
        glue_remark: Some(
            spec.remark
                .unwrap_or_else(|| format!("restored from version {number}")),
        ),
        ..JobSpec::default()
    };
    let mut base = old.to_spec();
    base.handler = None;
    let now = clock::now_ms();
    let job = base
        .overlay(patch)
        .validate(old.id, now, Some(old.created_ms))?
        .versioned_after(Some(&old), now);
    save_and_announce(
        &s,
        &caller,
        "job.script.restore",
        &job,
        Due::Keep,
        Some(&old.group),
    )
    .await?;
    let next = s.store.next_fire(old.id).await?;
    Ok(Json(JobView {
        job,
        next_fire_ms: next,
    }))
}

/// Deletes a job (its logs stay until retention drops them).
#[utoipa::path(delete, path = "/api/v1/jobs/{id}", tag = "jobs",
    params(JobIdParam),
    responses((status = 204, description = "Deleted."), ApiErrors))]
pub(super) async fn delete_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<StatusCode> {
    let job = operable_job(&s, &caller, &id).await?;
    s.store.delete_job(&job).await?;
    let audit = caller.audit(
        "job.delete",
        format!("job:{}", job.id),
        Some(&job.group),
        None,
    );
    s.events
        .publish(&[
            Event::JobDeleted {
                id: job.id,
                at_ms: clock::now_ms(),
            },
            audit,
        ])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn set_enabled(
    s: &AppState,
    caller: &Caller,
    id: &str,
    enabled: bool,
) -> Result<JobView, Error> {
    let mut job = operable_job(s, caller, id).await?;
    if job.enabled == enabled {
        return view(s, job).await;
    }
    if enabled {
        may_run_children(s, caller, &job).await?;
    }
    job.enabled = enabled;
    job.updated_ms = clock::now_ms();
    let next = first_fire(&job)?;
    let action = if enabled { "job.start" } else { "job.stop" };
    save_and_announce(s, caller, action, &job, next, None).await?;
    Ok(JobView {
        job,
        next_fire_ms: next,
    })
}

/// Starts a job: it fires on its schedule from now.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/start", tag = "jobs",
    params(JobIdParam),
    responses((status = 200, description = "The job, started.", body = JobView), ApiErrors))]
pub(super) async fn start_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    Ok(Json(set_enabled(&s, &caller, &id, true).await?))
}

/// Stops a job: no more scheduled fires (manual triggers still run it).
#[utoipa::path(post, path = "/api/v1/jobs/{id}/stop", tag = "jobs",
    params(JobIdParam),
    responses((status = 200, description = "The job, stopped.", body = JobView), ApiErrors))]
pub(super) async fn stop_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
) -> ApiResult<Json<JobView>> {
    Ok(Json(set_enabled(&s, &caller, &id, false).await?))
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

/// A manual trigger.
#[derive(serde::Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct TriggerSpec {
    /// Params for this run instead of the job's; at most 16 KiB.
    #[schema(max_length = 16384)]
    params: Option<String>,
}

/// The triggers a manual fire sent (one per shard for a broadcast).
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Triggered {
    triggers: Vec<TriggerRecord>,
}

/// Fires a job once, now, whatever its schedule or status (XXL-JOB's
/// "execute once"), optionally with other params.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/trigger", tag = "jobs",
    params(JobIdParam), request_body(content = Option<TriggerSpec>, description = "Optional: no body runs the job's own params."),
    responses((status = 200, description = "What was sent; a trigger the broker did not take has code 500.", body = Triggered), ApiErrors))]
pub(super) async fn trigger_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Triggered>> {
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
    let job = operable_job(&s, &caller, &id).await?;
    may_run_children(&s, &caller, &job).await?;
    let audit = caller.audit(
        "job.trigger",
        format!("job:{}", job.id),
        Some(&job.group),
        spec.params
            .as_ref()
            .map(|p| format!("params {} bytes", p.len())),
    );
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
    s.events.publish(&[audit]).await?;
    Ok(Json(Triggered {
        triggers: dispatched.records,
    }))
}
