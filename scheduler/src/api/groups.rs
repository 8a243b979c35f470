//! Executor groups: create, list, read, update, delete (only without jobs),
//! and the live executors of one.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use rondo_core::model::{GroupSpec, validate_app_name};
use rondo_core::{Error, Event, clock};
use serde_json::{Value, json};

use super::input::parse_body;
use super::state::{ApiResult, AppState};

pub(super) async fn create_group(
    State(s): State<AppState>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<Value>)> {
    let group = parse_body::<GroupSpec>(&body)?.validate(clock::now_ms())?;
    s.store.create_group(&group).await?;
    s.events
        .publish(&[Event::GroupUpserted {
            group: group.clone(),
        }])
        .await?;
    Ok((StatusCode::CREATED, Json(json!(group))))
}

pub(super) async fn list_groups(State(s): State<AppState>) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.store.list_groups().await?)))
}

pub(super) async fn get_group(
    State(s): State<AppState>,
    Path(app): Path<String>,
) -> ApiResult<Json<Value>> {
    Ok(Json(json!(s.store.get_group(&app).await?)))
}

pub(super) async fn update_group(
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
    s.events
        .publish(&[Event::GroupUpserted {
            group: group.clone(),
        }])
        .await?;
    Ok(Json(json!(group)))
}

pub(super) async fn delete_group(
    State(s): State<AppState>,
    Path(app): Path<String>,
) -> ApiResult<StatusCode> {
    s.store.delete_group(&app).await?;
    s.events
        .publish(&[Event::GroupDeleted {
            app,
            at_ms: clock::now_ms(),
        }])
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

pub(super) async fn group_executors(
    State(s): State<AppState>,
    Path(app): Path<String>,
) -> ApiResult<Json<Value>> {
    validate_app_name("app", &app)?;
    Ok(Json(json!(s.dispatcher.registry().live(&app).await?)))
}
