//! Executor groups: create, list, read, update, delete (only without jobs),
//! the live executors of one, and every executor the registry holds with
//! what it says about itself. Creating and deleting a group is an
//! admin's; editing one is an operator's of that group.

use axum::body::Bytes;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::Group;
use rondo_core::model::{GroupSpec, validate_app_name};
use rondo_core::{Error, Event, clock};
use rondo_dispatcher::registry::MemberState;

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

/// Creates an executor group. Admins only.
#[utoipa::path(post, path = "/api/v1/groups", tag = "groups",
    request_body = GroupSpec,
    responses((status = 201, description = "The group, created.", body = Group), ApiErrors))]
pub(super) async fn create_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Group>)> {
    caller.require(Access::Admin, "app")?;
    let group = parse_body::<GroupSpec>(&body)?.validate(clock::now_ms())?;
    s.store.api().create_group(&group).await?;
    announce(&s, &caller, &group, "group.create", None).await?;
    Ok((StatusCode::CREATED, Json(group)))
}

/// The groups the caller may read.
#[utoipa::path(get, path = "/api/v1/groups", tag = "groups",
    responses((status = 200, description = "The groups the caller may read.", body = Vec<Group>), ApiErrors))]
pub(super) async fn list_groups(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Vec<Group>>> {
    let mut groups = s.store.list_groups().await?;
    if let Some(readable) = caller.readable_groups() {
        groups.retain(|g| readable.contains(&g.app));
    }
    Ok(Json(groups))
}

/// One group.
#[utoipa::path(get, path = "/api/v1/groups/{app}", tag = "groups",
    params(AppParam),
    responses((status = 200, description = "The group.", body = Group), ApiErrors))]
pub(super) async fn get_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<Json<Group>> {
    validate_app_name("app", &app)?;
    caller.require(Access::ReadGroup(&app), "app")?;
    Ok(Json(s.store.api().get_group(&app).await?))
}

/// Changes a group's title or XXL-JOB executor addresses; a field left out
/// keeps its value (a group cannot be renamed). Operators of the group.
#[utoipa::path(put, path = "/api/v1/groups/{app}", tag = "groups",
    params(AppParam), request_body(content = Option<GroupSpec>, description = "The fields to change (`app`, if given, must be the group's); no body changes nothing."),
    responses((status = 200, description = "The group, changed.", body = Group), ApiErrors))]
pub(super) async fn update_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Group>> {
    validate_app_name("app", &app)?;
    caller.require(Access::OperateGroup(&app), "app")?;
    let spec = parse_body::<GroupSpec>(&body)?;
    if spec.app.as_deref().is_some_and(|a| a != app) {
        return Err(Error::invalid("app", "cannot rename a group").into());
    }
    let old = s.store.api().get_group(&app).await?;
    let group = spec.validate_update(&old, clock::now_ms())?;
    s.store.api().update_group(&group).await?;
    let detail = format!(
        "title {:?}, xxl_addresses {:?}",
        group.title, group.xxl_addresses
    );
    announce(&s, &caller, &group, "group.update", Some(detail)).await?;
    Ok(Json(group))
}

/// Publishes a saved group for MySQL's mirror, with its audit row.
async fn announce(
    s: &AppState,
    caller: &Caller,
    group: &Group,
    action: &str,
    detail: Option<String>,
) -> Result<(), Error> {
    let target = format!("group:{}", group.app);
    let audit = caller.audit(action, target, Some(&group.app), detail);
    let upserted = Event::GroupUpserted {
        group: group.clone(),
    };
    s.events.publish(&[upserted, audit]).await
}

/// Deletes a group that has no jobs (409 otherwise). Admins only.
#[utoipa::path(delete, path = "/api/v1/groups/{app}", tag = "groups",
    params(AppParam),
    responses((status = 204, description = "Deleted."), ApiErrors))]
pub(super) async fn delete_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<StatusCode> {
    caller.require(Access::Admin, "app")?;
    s.store.api().delete_group(&app).await?;
    let audit = caller.audit("group.delete", format!("group:{app}"), Some(&app), None);
    s.events
        .publish(&[
            Event::GroupDeleted {
                app,
                at_ms: clock::now_ms(),
            },
            audit,
        ])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The ids of the group's live executors (lease not expired, not retired);
/// 404 when there is no such group, even while executors of that name still
/// hold leases.
#[utoipa::path(get, path = "/api/v1/groups/{app}/executors", tag = "groups",
    params(AppParam),
    responses((status = 200, description = "Executor ids.", body = Vec<String>), ApiErrors))]
pub(super) async fn group_executors(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<Json<Vec<String>>> {
    validate_app_name("app", &app)?;
    caller.require(Access::ReadGroup(&app), "app")?;
    s.store.api().get_group(&app).await?;
    Ok(Json(s.dispatcher.registry().live(&app).await?))
}

/// An executor the registry holds and what it last said about itself.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct ExecutorView {
    id: String,
    group: String,
    /// `live` (triggers are routed to it), `offline` (its lease expired;
    /// the leader moves what waits in its queue) or `retired` (it stopped
    /// gracefully).
    #[schema(pattern = "^(live|offline|retired)$")]
    state: &'static str,
    /// Its last heartbeat or lease renewal (ms since the epoch); absent once
    /// retired.
    last_seen_ms: Option<i64>,
    /// How long ago that was, as this node's clock reads it.
    age_ms: Option<i64>,
    /// What its last heartbeat said; absent when its record expired.
    host: Option<String>,
    pid: Option<u32>,
    started_ms: Option<i64>,
    /// The handlers it runs (script interpreters as `script:<interpreter>`).
    handlers: Vec<String>,
    /// Jobs with a trigger running or waiting there.
    running_jobs: Vec<u64>,
}

/// The executors of the groups the caller may read (or of one group):
/// live, offline and retired, until the registry forgets them
/// (`registry.dead_after_ms`), with heartbeat, handlers and running jobs.
#[utoipa::path(get, path = "/api/v1/executors", tag = "groups",
    params(("group" = Option<String>, Query, description = "Only this group's executors.", pattern = "^[A-Za-z0-9_-]{1,64}$")),
    responses((status = 200, description = "Executors, by group then id.", body = Vec<ExecutorView>), ApiErrors))]
pub(super) async fn list_executors(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<Vec<ExecutorView>>> {
    let apps = match q.get("group") {
        Some(app) => {
            validate_app_name("group", app)?;
            caller.require(Access::ReadGroup(app), "group")?;
            vec![app.clone()]
        }
        None => {
            let mut apps: Vec<String> = s
                .store
                .list_groups()
                .await?
                .into_iter()
                .map(|g| g.app)
                .collect();
            if let Some(readable) = caller.readable_groups() {
                apps.retain(|a| readable.contains(a));
            }
            apps
        }
    };
    let now = clock::now_ms();
    let mut out = Vec::new();
    for app in apps {
        for m in s.dispatcher.registry().members(&app).await? {
            let seen = (m.state != MemberState::Retired).then_some(m.seen_ms);
            let entry = m.entry.unwrap_or_default();
            let known = !entry.app.is_empty();
            out.push(ExecutorView {
                id: m.id,
                group: app.clone(),
                state: match m.state {
                    MemberState::Live => "live",
                    MemberState::Offline => "offline",
                    MemberState::Retired => "retired",
                },
                last_seen_ms: seen,
                age_ms: seen.map(|at| (now - at).max(0)),
                host: known.then(|| entry.host.clone()),
                pid: known.then_some(entry.pid),
                started_ms: known.then_some(entry.started_ms),
                handlers: entry.handlers,
                running_jobs: entry.running_jobs,
            });
        }
    }
    Ok(Json(out))
}

/// The `{app}` path parameter.
#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)] // only describes the path; handlers read it as text
struct AppParam {
    /// The group's app name.
    #[param(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    app: String,
}
