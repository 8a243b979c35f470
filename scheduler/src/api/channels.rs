//! Alarm channels: the chat group bots (DingTalk, WeCom, Feishu) and
//! webhooks (Slack-style, rondo's JSON) a job's failures go to, named by
//! jobs in `alarm_channels`. An admin defines them; anyone signed in lists
//! them to pick one (the URL's path and query, where a robot's token
//! lives, shown to admins only). A signing secret is never shown.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::{AlarmChannel, AlarmChannelSpec, validate_app_name};
use rondo_core::{Error, clock};

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

/// `channel` as `caller` may see it: the secret as `***`, and for one who
/// is not an admin the URL without its path and query.
fn shown_to(caller: &Caller, channel: AlarmChannel) -> AlarmChannel {
    let mut channel = channel.masked();
    if !caller.principal.may(Access::ReadAdmin) {
        channel.url = rondo_core::redact::url_path(&channel.url);
    }
    channel
}

/// Every channel, by name.
#[utoipa::path(get, path = "/api/v1/alarm-channels", tag = "alarms",
    responses((status = 200, description = "The channels.", body = Vec<AlarmChannel>), ApiErrors))]
pub(super) async fn list_channels(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Json<Vec<AlarmChannel>>> {
    let channels = s.store.channels().await?;
    Ok(Json(
        channels.into_iter().map(|c| shown_to(&caller, c)).collect(),
    ))
}

/// One channel.
#[utoipa::path(get, path = "/api/v1/alarm-channels/{name}", tag = "alarms",
    params(NameParam),
    responses((status = 200, description = "The channel.", body = AlarmChannel), ApiErrors))]
pub(super) async fn get_channel(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<Json<AlarmChannel>> {
    validate_app_name("name", &name)?;
    Ok(Json(shown_to(&caller, s.store.channel(&name).await?)))
}

/// Creates a channel. Admins only.
#[utoipa::path(post, path = "/api/v1/alarm-channels", tag = "alarms",
    request_body = AlarmChannelSpec,
    responses((status = 201, description = "The channel, created.", body = AlarmChannel), ApiErrors))]
pub(super) async fn create_channel(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<(StatusCode, Json<AlarmChannel>)> {
    caller.require(Access::Admin, "name")?;
    let channel = parse_body::<AlarmChannelSpec>(&body)?.validate(None, clock::now_ms())?;
    s.store.api().put_channel(&channel, true).await?;
    audit(&s, &caller, "alarm_channel.create", &channel).await?;
    Ok((StatusCode::CREATED, Json(shown_to(&caller, channel))))
}

/// Changes a channel; a field left out keeps its value, a secret sent as
/// `***` is kept. Admins only.
#[utoipa::path(put, path = "/api/v1/alarm-channels/{name}", tag = "alarms",
    params(NameParam), request_body(content = Option<AlarmChannelSpec>, description = "The fields to change."),
    responses((status = 200, description = "The channel, changed.", body = AlarmChannel), ApiErrors))]
pub(super) async fn update_channel(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
    body: Bytes,
) -> ApiResult<Json<AlarmChannel>> {
    caller.require(Access::Admin, "name")?;
    validate_app_name("name", &name)?;
    let spec = parse_body::<AlarmChannelSpec>(&body)?;
    let old = s.store.channel(&name).await?;
    let channel = spec.validate(Some(&old), clock::now_ms())?;
    s.store.api().put_channel(&channel, false).await?;
    audit(&s, &caller, "alarm_channel.update", &channel).await?;
    Ok(Json(shown_to(&caller, channel)))
}

/// Deletes a channel; a job that still names it fails its alarms there
/// ("no such channel"). Admins only.
#[utoipa::path(delete, path = "/api/v1/alarm-channels/{name}", tag = "alarms",
    params(NameParam),
    responses((status = 204, description = "Deleted."), ApiErrors))]
pub(super) async fn delete_channel(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> ApiResult<StatusCode> {
    caller.require(Access::Admin, "name")?;
    validate_app_name("name", &name)?;
    s.store.api().delete_channel(&name).await?;
    let event = caller.audit(
        "alarm_channel.delete",
        format!("alarm_channel:{name}"),
        None,
        None,
    );
    s.events.publish(&[event]).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The audit row of a saved channel (its kind and host, never its secret
/// or the URL's path and query).
async fn audit(
    s: &AppState,
    caller: &Caller,
    action: &str,
    channel: &AlarmChannel,
) -> Result<(), Error> {
    let detail = format!(
        "kind {}, url {}, signed {}",
        channel.kind,
        rondo_core::redact::url_path(&channel.url),
        !channel.secret.is_empty()
    );
    let event = caller.audit(
        action,
        format!("alarm_channel:{}", channel.name),
        None,
        Some(detail),
    );
    s.events.publish(&[event]).await
}

/// Checks that every channel a job names exists.
pub(super) async fn check_job_channels(s: &AppState, names: &[String]) -> Result<(), Error> {
    let found = s.store.channels_named(names).await?;
    if let Some(missing) = names.iter().zip(&found).find(|(_, c)| c.is_none()) {
        return Err(Error::invalid(
            "alarm_channels",
            format!("no alarm channel {:?} (rondo channel list)", missing.0),
        ));
    }
    Ok(())
}

#[derive(utoipa::IntoParams)]
#[into_params(parameter_in = Path)]
#[allow(dead_code)]
struct NameParam {
    /// The channel's name.
    #[param(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    name: String,
}
