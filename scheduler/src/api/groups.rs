//! Executor groups: create, list, read, update, delete (only without jobs),
//! the live executors of one, and every executor the registry holds with
//! what it says about itself. Creating and deleting a group is an
//! admin's; editing one is an operator's of that group, but marking it as
//! the XXL-JOB gateway's and its access tokens are an admin's. No answer
//! shows a token (`***`).

use axum::body::Bytes;
use std::collections::HashMap;

use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::Group;
use rondo_core::model::{GroupSpec, XxlAccess, validate_app_name, validate_xxl_token};
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
    check_destinations(&s, &group.xxl_addresses).await?;
    s.store.api().create_group(&group).await?;
    announce(&s, &caller, &group, "group.create", Some(detail_of(&group))).await?;
    Ok((StatusCode::CREATED, Json(group.masked())))
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
    Ok(Json(groups.into_iter().map(Group::masked).collect()))
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
    Ok(Json(s.store.api().get_group(&app).await?.masked()))
}

/// Changes a group's title or XXL-JOB executor addresses; a field left out
/// keeps its value (a group cannot be renamed). Operators of the group;
/// `xxl_gateway` changed by admins only.
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
    if spec
        .xxl_gateway
        .is_some_and(|served| served != old.xxl_gateway)
    {
        caller.require(Access::Admin, "xxl_gateway")?;
    }
    let group = spec.validate_update(&old, clock::now_ms())?;
    if group.xxl_addresses != old.xxl_addresses {
        check_destinations(&s, &group.xxl_addresses).await?;
    }
    s.store.api().update_group(&group).await?;
    announce(&s, &caller, &group, "group.update", Some(detail_of(&group))).await?;
    Ok(Json(group.masked()))
}

/// What a group's audit row says of it (never a token).
fn detail_of(group: &Group) -> String {
    format!(
        "title {:?}, xxl_gateway {}, xxl_addresses {:?}",
        group.title, group.xxl_gateway, group.xxl_addresses
    )
}

/// Refuses an XXL-JOB executor address the gateway's destination rule
/// (`xxl.address_allow`) refuses: the address as written, or what its
/// host name resolves to now (the gateway judges it again at every call).
async fn check_destinations(s: &AppState, addresses: &[String]) -> Result<(), Error> {
    for (i, address) in addresses.iter().enumerate() {
        let field = format!("xxl_addresses[{i}]");
        let url = reqwest::Url::parse(address)
            .map_err(|e| Error::invalid(&field, format!("{address:?}: {e}")))?;
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(80);
        let resolved = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            rondo_core::outbound::resolve(&s.xxl_address_rule, host, port),
        )
        .await;
        if let Ok(Ok(Err(refused))) = resolved {
            return Err(Error::invalid(
                &field,
                format!("{refused}: the XXL-JOB gateway may not call it (xxl.address_allow)"),
            ));
        }
    }
    Ok(())
}

/// What an admin sends to set a group's XXL-JOB access token.
#[derive(serde::Deserialize, utoipa::ToSchema, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct XxlTokenSpec {
    /// The token its executors send (`xxl.job.accessToken`, 8 to 255
    /// printable characters; XXL-JOB's stock `default_token` is refused).
    /// Left out: rondo generates one (256 random bits) and answers it once.
    token: Option<String>,
    /// Keep taking the token it had until the rotation is ended
    /// (`DELETE …/xxl-token/previous`), and keep sending it to the
    /// executors that registered with it (default false: it stops now).
    keep_previous: Option<bool>,
}

/// A group's new XXL-JOB access token, as set.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub(super) struct XxlTokenSet {
    app: String,
    /// The token rondo generated, answered this once; absent when the
    /// caller chose it.
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<String>,
    /// Whether the token before is still taken.
    previous_kept: bool,
    changed_ms: i64,
}

/// Sets (or generates) the XXL-JOB access token of a group the gateway
/// serves. Admins only; the token is never answered again.
#[utoipa::path(post, path = "/api/v1/groups/{app}/xxl-token", tag = "groups",
    params(AppParam), request_body(content = Option<XxlTokenSpec>, description = "The token, or nothing to have one generated."),
    responses((status = 200, description = "The token set; a generated one is in the answer, this once.", body = XxlTokenSet), ApiErrors))]
pub(super) async fn set_xxl_token(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    body: Bytes,
) -> ApiResult<Json<XxlTokenSet>> {
    validate_app_name("app", &app)?;
    caller.require(Access::Admin, "app")?;
    let spec = if body.is_empty() {
        XxlTokenSpec::default()
    } else {
        parse_body::<XxlTokenSpec>(&body)?
    };
    let mut group = served_group(&s, &app).await?;
    let generated = spec.token.is_none();
    let token = match spec.token {
        Some(token) => {
            validate_xxl_token("token", &token)?;
            token
        }
        None => rand::random::<[u8; 32]>()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect(),
    };
    let keep = spec.keep_previous.unwrap_or(false) && !group.xxl_access.token.is_empty();
    let now = clock::now_ms();
    group.xxl_access = XxlAccess {
        previous: if keep {
            std::mem::take(&mut group.xxl_access.token)
        } else {
            String::new()
        },
        token: token.clone(),
        changed_ms: now,
    };
    group.updated_ms = now;
    s.store.api().update_group(&group).await?;
    let detail = format!(
        "{}{}",
        if generated { "generated" } else { "set" },
        if keep { ", the previous one kept" } else { "" }
    );
    announce(&s, &caller, &group, "group.xxl_token", Some(detail)).await?;
    Ok(Json(XxlTokenSet {
        app,
        token: generated.then_some(token),
        previous_kept: keep,
        changed_ms: now,
    }))
}

/// Ends a rotation: the group's previous XXL-JOB access token is no longer
/// taken (executors still sending it are refused). Admins only.
#[utoipa::path(delete, path = "/api/v1/groups/{app}/xxl-token/previous", tag = "groups",
    params(AppParam),
    responses((status = 204, description = "The previous token is no longer taken."), ApiErrors))]
pub(super) async fn end_xxl_token_rotation(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<StatusCode> {
    validate_app_name("app", &app)?;
    caller.require(Access::Admin, "app")?;
    let mut group = served_group(&s, &app).await?;
    if group.xxl_access.previous.is_empty() {
        return Ok(StatusCode::NO_CONTENT);
    }
    group.xxl_access.previous.clear();
    group.updated_ms = clock::now_ms();
    s.store.api().update_group(&group).await?;
    let detail = "the previous one ended".to_owned();
    announce(&s, &caller, &group, "group.xxl_token", Some(detail)).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Group `app`, which must be served by the XXL-JOB gateway.
async fn served_group(s: &AppState, app: &str) -> Result<Group, Error> {
    let group = s.store.api().get_group(app).await?;
    if !group.xxl_gateway {
        return Err(Error::invalid(
            "xxl_gateway",
            format!(
                "group {app} is not served by the XXL-JOB gateway; mark it first (xxl_gateway)"
            ),
        ));
    }
    Ok(group)
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
