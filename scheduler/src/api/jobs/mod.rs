//! Jobs: create, read, update, delete, start and stop here, with the
//! checks every route shares; the list ([`list`]), script versions
//! ([`scripts`]), trigger once and kill all ([`trigger`]) and the history
//! and restore ([`history`]) beside. (Over 500 lines: the routes here share
//! `save_and_announce`, the access checks and the view, and splitting them
//! would pass those across files.) Every change is
//! written to Redis (definition and due entry in one step) and announced as
//! a `job.*` event.

pub(super) mod history;
pub(super) mod list;
pub(super) mod scripts;
pub(super) mod trigger;

use std::collections::HashMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::{Error, Event, Job, JobSpec, clock};
use serde::{Deserialize, Serialize};

use rondo_core::schedule::MissedFires;

use crate::store::Due;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::{parse_body, parse_id};
use super::schedules::{NextFires, count_param};
use super::state::{ApiResult, AppState};
use rondo_core::model::secrets;

/// A job with its next fire, as the API returns it.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct JobView {
    #[serde(flatten)]
    job: Job,
    /// The job's first fire not claimed yet (ms since the epoch, UTC), as
    /// XXL-JOB's `trigger_next_time`: the fires the leader claimed ahead
    /// (up to its claim horizon, 9 s at the defaults) run before it. Null
    /// when the job is stopped or its schedule has no more fires.
    next_fire_ms: Option<i64>,
    /// In the answer to a stop: the job's first scheduled fire this stop
    /// leaves unmade (every earlier one runs, none from it on), where
    /// another scheduler taking the job over begins.
    #[serde(skip_serializing_if = "Option::is_none")]
    handover_ms: Option<i64>,
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

impl JobView {
    /// The answer for `job`: its secrets' values read `***`, for everyone.
    pub(super) fn new(mut job: Job, next_fire_ms: Option<i64>) -> JobView {
        job.secrets = secrets::masked(&job.secrets);
        JobView {
            job,
            next_fire_ms,
            handover_ms: None,
        }
    }
}

async fn view(s: &AppState, job: Job) -> Result<JobView, Error> {
    let next_fire_ms = s.store.api().next_fire(job.id).await?;
    Ok(JobView::new(job, next_fire_ms))
}

/// Checks the group exists, for a job that names it.
async fn check_group(s: &AppState, job: &Job) -> Result<(), Error> {
    match s.store.api().get_group(&job.group).await {
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

/// The first fire a stop leaves unmade. `due_before` is the job's first
/// unclaimed fire; the claimed ones before it run up to
/// [`Job::run_until_ms`]. A cron job's first unmade fire is the earlier of
/// the two; a `FIX_RATE` job's is the first of its chain (`due_before`
/// less whole rates) after `run_until_ms`; a `FIX_DELAY` job between runs
/// has none (its next fire waits for a result).
fn handover(job: &Job, due_before: Option<i64>) -> Option<i64> {
    use rondo_core::schedule::Schedule;
    let until = job.run_until_ms;
    match (job.schedule().ok()?, due_before) {
        (_, Some(due)) if due <= until => Some(due),
        (Schedule::FixRate(rate), Some(due)) if rate > 0 => {
            Some(due - (due - until - 1) / rate * rate)
        }
        (schedule, due) => match (due, schedule.next_after(until)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
    }
}

#[cfg(test)]
mod handover_tests {
    use super::*;
    use rondo_core::schedule::ScheduleType;

    fn job(kind: ScheduleType, conf: &str, until: i64) -> Job {
        Job {
            schedule_type: kind,
            schedule_conf: conf.into(),
            enabled: false,
            run_until_ms: until,
            ..Job::new(1, "g", "h")
        }
    }

    #[test]
    fn a_fix_rate_job_hands_over_the_first_of_its_chain_after_the_stop() {
        // Every 3 s from 1_000; claimed through 10_000 (due 13_000); the
        // stop lets fires up to 5_500 run: 7_000 is the first unmade.
        let j = job(ScheduleType::FixRate, "3", 5_500);
        assert_eq!(handover(&j, Some(13_000)), Some(7_000));
        // Nothing claimed past the stop: the due fire itself.
        assert_eq!(handover(&j, Some(7_000)), Some(7_000));
        // A claim that fell behind: the first unclaimed fire.
        assert_eq!(handover(&j, Some(4_000)), Some(4_000));
    }

    #[test]
    fn a_cron_job_hands_over_its_first_instant_after_the_stop() {
        let j = job(ScheduleType::Cron, "0/10 * * * * ?", 25_000);
        assert_eq!(handover(&j, Some(40_000)), Some(30_000));
        assert_eq!(handover(&j, Some(20_000)), Some(20_000));
    }
}

/// The first fire of a job started from `from_ms` (see [`StartFrom`]).
fn first_fire_from(job: &Job, from_ms: i64) -> Result<Option<i64>, Error> {
    use rondo_core::schedule::Schedule;
    Ok(match job.schedule()? {
        Schedule::FixRate(_) | Schedule::FixDelay(_) => Some(from_ms),
        schedule => schedule.next_after(from_ms - 1),
    })
}

/// Saves a job and announces it, with the audit record of `action`.
/// Returns the job's due score before the save.
async fn save_and_announce(
    s: &AppState,
    caller: &Caller,
    action: &str,
    job: &Job,
    next: impl Into<Due>,
    old: Option<&Job>,
) -> Result<Option<i64>, Error> {
    let old_group = old.map(|o| o.group.as_str());
    let before = s.store.api().save_job(job, next, old_group).await?;
    // The audit keeps what changed, field by field (the job's history).
    let diff = rondo_core::model::job_diff(old, job).map(|d| d.to_string());
    let audit = caller.audit(action, format!("job:{}", job.id), Some(&job.group), diff);
    s.events
        .publish(&[Event::JobUpserted { job: job.clone() }, audit])
        .await?;
    Ok(before)
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

/// `glue_saved_ms` dates a version of a script written before (an
/// import's): an admin's only, and never in the future.
fn check_glue_saved(caller: &Caller, spec: &JobSpec, now: i64) -> Result<(), Error> {
    let Some(saved) = spec.glue_saved_ms else {
        return Ok(());
    };
    caller.require(Access::Admin, "glue_saved_ms")?;
    if saved > now {
        return Err(Error::invalid(
            "glue_saved_ms",
            format!("{saved} is in the future: it dates a version already written"),
        ));
    }
    Ok(())
}

/// Every recipient of the job's `alarm_email` is in a domain of
/// `alarm.email_allow` (a 400 naming `alarm_email` and the domain).
fn check_alarm_email(s: &AppState, job: &Job) -> Result<(), Error> {
    let recipients = job.alarm_email.split(',').map(str::trim);
    for address in recipients.filter(|a| !a.is_empty()) {
        s.mail_domains
            .check(address)
            .map_err(|why| Error::invalid("alarm_email", why))?;
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
    check_glue_saved(&caller, &spec, clock::now_ms())?;
    // Validate before taking an id, so bad input consumes nothing.
    let probe = spec.clone().validate(0, 0, None)?;
    caller.require(Access::OperateGroup(&probe.group), "group")?;
    check_group(&s, &probe).await?;
    super::channels::check_job_channels(&s, &probe.alarm_channels).await?;
    check_alarm_email(&s, &probe)?;
    // A new job has no parents yet, so it cannot close a cycle; its
    // children must exist.
    check_children(&s, &caller, &probe).await?;
    let id = s.store.api().next_job_id().await?;
    let job = spec.validate(id, clock::now_ms(), None)?;
    let next = first_fire(&job)?;
    save_and_announce(&s, &caller, "job.create", &job, next, None).await?;
    tracing::info!(job_id = id, group = %job.group, "job created");
    Ok((StatusCode::CREATED, Json(JobView::new(job, next))))
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
    Ok(Json(view(&s, shown_to(&caller, job)).await?))
}

/// `job` as `caller` may see it: no one sees its secrets' values, and one
/// who may read the group but not operate it sees where its alarm webhook
/// goes, not the token in the webhook's path or query.
pub(super) fn shown_to(caller: &Caller, mut job: Job) -> Job {
    job.secrets = secrets::masked(&job.secrets);
    if !caller.principal.may(Access::OperateGroup(&job.group)) {
        job.alarm_webhook = rondo_core::redact::url_path(&job.alarm_webhook);
    }
    job
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
    let now = clock::now_ms();
    check_glue_saved(&caller, &patch, now)?;
    let dated = patch.glue_saved_ms.is_some();
    if let Some(names) = &patch.alarm_channels {
        super::channels::check_job_channels(&s, names).await?;
    }
    let mut base = old.to_spec();
    if patch.glue_type.is_some() && patch.handler.is_none() {
        // A change of what the job runs: the old handler (a script's, or
        // the one a script replaces) is not carried over.
        base.handler = None;
    }
    let job = base
        .overlay(patch)
        .validate(id, now, Some(old.created_ms))?
        .versioned_after(Some(&old));
    if dated && job.glue_version == old.glue_version {
        return Err(Error::invalid(
            "glue_saved_ms",
            "dates a new version of the script: give the changed glue_source with it",
        )
        .into());
    }
    if dated && job.glue_updated_ms <= old.glue_updated_ms {
        // Executors of xxl-job-core cache a script by its job and this
        // time: a new version must have a later one.
        return Err(Error::invalid(
            "glue_saved_ms",
            format!(
                "must be later than the current version's time ({})",
                old.glue_updated_ms
            ),
        )
        .into());
    }
    caller.require(Access::OperateGroup(&job.group), "group")?;
    check_group(&s, &job).await?;
    check_children(&s, &caller, &job).await?;
    if job.alarm_email != old.alarm_email {
        check_alarm_email(&s, &job)?;
    }
    let reschedule = job.schedule_type != old.schedule_type
        || job.schedule_conf != old.schedule_conf
        || job.zone != old.zone
        || job.enabled != old.enabled;
    let (due, next) = if reschedule {
        let next = first_fire(&job)?;
        (Due::from(next), next)
    } else {
        (Due::Keep, s.store.api().next_fire(id).await?)
    };
    save_and_announce(&s, &caller, "job.update", &job, due, Some(&old)).await?;
    Ok(Json(JobView::new(job, next)))
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
    let conf = (job.schedule_type.as_str(), job.schedule_conf.as_str());
    Ok(Json(NextFires::of(schedule, zone, conf, count).await?))
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
    Ok(Json(s.store.api().missed_fires(job.id).await?))
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
    s.store.api().delete_job(&job).await?;
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
                last: Some(Box::new(job.clone())),
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
    from_ms: Option<i64>,
) -> Result<JobView, Error> {
    let mut job = operable_job(s, caller, id).await?;
    if job.enabled == enabled {
        if from_ms.is_some() {
            return Err(Error {
                kind: rondo_core::ErrorKind::Conflict,
                field: Some("from_ms".into()),
                message: format!("job {} is running already; stop it first", job.id),
            });
        }
        return view(s, job).await;
    }
    if enabled {
        may_run_children(s, caller, &job).await?;
    }
    let old = job.clone();
    job.enabled = enabled;
    job.updated_ms = clock::now_ms();
    // A stop lets the fires a node may hold already run (they are due by
    // the stop plus the load-ahead), and no later one.
    job.run_until_ms = if enabled {
        0
    } else {
        job.updated_ms + s.load_ahead_ms
    };
    let next = match from_ms {
        Some(from) => first_fire_from(&job, from)?,
        None => first_fire(&job)?,
    };
    let action = if enabled { "job.start" } else { "job.stop" };
    let due_before = save_and_announce(s, caller, action, &job, next, Some(&old)).await?;
    let mut view = JobView::new(job, next);
    if !enabled {
        view.handover_ms = handover(&view.job, due_before);
    }
    Ok(view)
}

/// Where a started job's schedule begins.
#[derive(Debug, Default, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct StartFrom {
    /// The first fire (ms since the epoch): a `FIX_RATE` or `FIX_DELAY`
    /// job fires first at this instant exactly (keeping another
    /// scheduler's phase), a `CRON` job at its first instant at or after
    /// it. One in the past is late when claimed, so the job's misfire rule
    /// decides it. Default: the schedule from now. At most 30 days back
    /// or a year ahead.
    from_ms: Option<i64>,
}

/// How far back a start may begin (a misfire older than this would only
/// be skipped or folded anyway).
const START_FROM_PAST_MS: i64 = 30 * 24 * 3600 * 1000;
/// How far ahead a start may begin.
const START_FROM_AHEAD_MS: i64 = 366 * 24 * 3600 * 1000;

/// Starts a job: it fires on its schedule from now, or from `from_ms`.
#[utoipa::path(post, path = "/api/v1/jobs/{id}/start", tag = "jobs",
    params(JobIdParam),
    request_body(content = Option<StartFrom>, description = "Where the schedule begins; no body: from now."),
    responses((status = 200, description = "The job, started.", body = JobView), ApiErrors))]
pub(super) async fn start_job(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<JobView>> {
    let from = parse_body::<StartFrom>(&body)?.from_ms;
    if let Some(ms) = from {
        let now = clock::now_ms();
        if ms < now - START_FROM_PAST_MS || ms > now + START_FROM_AHEAD_MS {
            return Err(
                Error::invalid("from_ms", "must be at most 30 days back and a year ahead").into(),
            );
        }
    }
    Ok(Json(set_enabled(&s, &caller, &id, true, from).await?))
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
    Ok(Json(set_enabled(&s, &caller, &id, false, None).await?))
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
