//! Executor groups: create, list, read, update, delete (only without jobs),
//! and the live executors of one. Creating and deleting a group is an
//! admin's; editing one is an operator's of that group.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::{GroupSpec, validate_app_name};
use rondo_core::{Error, Event, clock};
use serde_json::{Value, json};

use super::auth::Caller;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

pub(super) async fn create_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    caller.require(Access::Admin, "app")?;
    let group = parse_body::<GroupSpec>(&body)?.validate(clock::now_ms())?;
    s.store.create_group(&group).await?;
    let target = format!("group:{}", group.app);
    let audit = caller.audit("group.create", target, Some(&group.app), None);
    s.events
        .publish(&[
            Event::GroupUpserted {
                group: group.clone(),
            },
            audit,
        ])
        .await?;
    Ok((StatusCode::CREATED, Json(json!(group))))
}

/// The groups the caller may read.
pub(super) async fn list_groups(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Value>> {
    let mut groups = s.store.list_groups().await?;
    if let Some(readable) = caller.readable_groups() {
        groups.retain(|g| readable.contains(&g.app));
    }
    Ok(Json(json!(groups)))
}

pub(super) async fn get_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<Json<Value>> {
    validate_app_name("app", &app)?;
    caller.require(Access::ReadGroup(&app), "app")?;
    Ok(Json(json!(s.store.get_group(&app).await?)))
}

pub(super) async fn update_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    validate_app_name("app", &app)?;
    caller.require(Access::OperateGroup(&app), "app")?;
    let mut spec = parse_body::<GroupSpec>(&body)?;
    if spec.app.as_deref().is_some_and(|a| a != app) {
        return Err(Error::invalid("app", "cannot rename a group").into());
    }
    spec.app = Some(app);
    let group = spec.validate(clock::now_ms())?;
    s.store.update_group(&group).await?;
    let target = format!("group:{}", group.app);
    let detail = format!("title {:?}", group.title);
    let audit = caller.audit("group.update", target, Some(&group.app), Some(detail));
    s.events
        .publish(&[
            Event::GroupUpserted {
                group: group.clone(),
            },
            audit,
        ])
        .await?;
    Ok(Json(json!(group)))
}

pub(super) async fn delete_group(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<StatusCode> {
    caller.require(Access::Admin, "app")?;
    s.store.delete_group(&app).await?;
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

pub(super) async fn group_executors(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(app): Path<String>,
) -> ApiResult<Json<Value>> {
    validate_app_name("app", &app)?;
    caller.require(Access::ReadGroup(&app), "app")?;
    Ok(Json(json!(s.dispatcher.registry().live(&app).await?)))
}
