//! Next fire times: of a saved job (`GET /api/v1/jobs/{id}/next`) and of a
//! schedule not saved yet (`POST /api/v1/schedules/preview`), each instant
//! in UTC and in the schedule's zone, so a user sees what "0 0 2 * * ?"
//! means where they are and where the cluster's clocks are.

use std::collections::HashMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use chrono::{DateTime, SecondsFormat, Utc};
use chrono_tz::Tz;
use rondo_core::model::ScheduleType;
use rondo_core::schedule::{Schedule, parse_zone};
use rondo_core::{Error, clock};
use serde::{Deserialize, Serialize};

use super::doc::ApiErrors;
use super::input::{parse_body, query_usize};
use super::state::{ApiResult, AppState};

/// The most fires one preview lists.
pub(super) const MAX_PREVIEW: usize = 100;
/// Fires listed when the caller names no count (XXL-JOB's console: five).
const DEFAULT_PREVIEW: usize = 5;

/// One fire instant.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct FireTime {
    /// Milliseconds since the epoch.
    pub at_ms: i64,
    /// The instant in UTC (RFC 3339).
    pub utc: String,
    /// The wall-clock time in the schedule's zone, with its offset then
    /// (RFC 3339): daylight saving shows as a changed offset.
    pub local: String,
}

/// The next fires of a schedule.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct NextFires {
    #[schema(value_type = ScheduleType)]
    pub schedule_type: String,
    pub schedule_conf: String,
    /// The IANA zone cron fields are read in, and `local` is shown in.
    pub zone: String,
    /// From this instant on (ms; now).
    pub from_ms: i64,
    /// In order; fewer than asked when the schedule ends, none for `NONE`.
    /// A `FIX_DELAY` job's are estimates: each run is taken to end at once.
    pub fires: Vec<FireTime>,
}

impl NextFires {
    /// The next `count` fires of `schedule` from now, shown in `zone` (the
    /// job's; rates and delays are durations, but a user still reads
    /// their instants on a wall clock). Computed on a blocking thread,
    /// not the API's async workers (a sparse cron expression may search
    /// years ahead), and refused naming `schedule_conf` past
    /// [`PREVIEW_BOUND`].
    pub(super) async fn of(
        schedule: Schedule,
        zone: Tz,
        conf: (&str, &str),
        count: usize,
    ) -> Result<Self, Error> {
        let from_ms = clock::now_ms();
        let search = move || schedule.preview(from_ms, count);
        Self::within(search, from_ms, zone, conf, PREVIEW_BOUND).await
    }

    /// The fires `search` finds from `from_ms`, or a refusal past `bound`.
    async fn within(
        search: impl FnOnce() -> Vec<i64> + Send + 'static,
        from_ms: i64,
        zone: Tz,
        (ty, conf): (&str, &str),
        bound: std::time::Duration,
    ) -> Result<Self, Error> {
        let compute = tokio::task::spawn_blocking(search);
        let fires = match tokio::time::timeout(bound, compute).await {
            Ok(Ok(fires)) => fires,
            Ok(Err(e)) => return Err(Error::internal(format!("computing fires: {e}"))),
            Err(_) => {
                return Err(Error::invalid(
                    "schedule_conf",
                    format!(
                        "its next fires took longer than {} ms to compute",
                        bound.as_millis()
                    ),
                ));
            }
        };
        Ok(NextFires {
            schedule_type: ty.to_owned(),
            schedule_conf: conf.to_owned(),
            zone: zone.name().to_owned(),
            from_ms,
            fires: fires
                .into_iter()
                .filter_map(|ms| fire_time(ms, zone))
                .collect(),
        })
    }
}

/// The most time a preview may take.
const PREVIEW_BOUND: std::time::Duration = std::time::Duration::from_secs(2);

fn fire_time(ms: i64, zone: Tz) -> Option<FireTime> {
    let utc: DateTime<Utc> = DateTime::from_timestamp_millis(ms)?;
    Some(FireTime {
        at_ms: ms,
        utc: utc.to_rfc3339_opts(SecondsFormat::Secs, true),
        local: utc
            .with_timezone(&zone)
            .to_rfc3339_opts(SecondsFormat::Secs, true),
    })
}

/// The `count` query parameter.
pub(super) fn count_param(q: &HashMap<String, String>) -> Result<usize, Error> {
    let count = query_usize(q, "count", DEFAULT_PREVIEW, MAX_PREVIEW)?;
    if count == 0 {
        return Err(Error::invalid("count", "must be at least 1"));
    }
    Ok(count)
}

/// A schedule to preview.
#[derive(Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct PreviewSpec {
    #[schema(value_type = ScheduleType)]
    pub schedule_type: Option<String>,
    /// As a job's `schedule_conf`.
    pub schedule_conf: Option<String>,
    /// Default: the cluster's `zone`.
    #[schema(max_length = 64, example = "Asia/Shanghai")]
    pub zone: Option<String>,
    /// Fires to list (default 5, at most 100).
    #[schema(minimum = 1, maximum = 100)]
    pub count: Option<u32>,
}

/// The next fires of a schedule that is not saved: the fires, or a 400
/// naming the field that is wrong (any signed-in user).
#[utoipa::path(post, path = "/api/v1/schedules/preview", tag = "jobs",
    request_body = PreviewSpec,
    responses((status = 200, description = "The next fires.", body = NextFires), ApiErrors))]
pub(super) async fn preview(State(s): State<AppState>, body: Bytes) -> ApiResult<Json<NextFires>> {
    let spec = parse_body::<PreviewSpec>(&body)?;
    let ty = spec
        .schedule_type
        .ok_or_else(|| Error::invalid("schedule_type", "is required"))?;
    let ty = ScheduleType::parse("schedule_type", &ty)?;
    let conf = spec.schedule_conf.unwrap_or_default();
    if ty != ScheduleType::None && conf.trim().is_empty() {
        return Err(Error::invalid("schedule_conf", "is required unless NONE").into());
    }
    let zone = match spec.zone.as_deref() {
        Some(name) => parse_zone("zone", name)?,
        None => s.default_zone,
    };
    let count = spec.count.map_or(DEFAULT_PREVIEW, |c| c as usize);
    if !(1..=MAX_PREVIEW).contains(&count) {
        return Err(Error::invalid("count", format!("must be 1 to {MAX_PREVIEW}")).into());
    }
    let schedule = Schedule::parse(ty, &conf, zone)?;
    let fires = NextFires::of(schedule, zone, (ty.as_str(), &conf), count).await?;
    Ok(Json(fires))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A preview that outlasts its bound is refused naming the schedule,
    /// and the API's worker is not held (the search goes on, alone, on a
    /// blocking thread).
    #[tokio::test]
    async fn a_preview_past_its_bound_is_refused_naming_the_schedule() {
        let tz: Tz = "UTC".parse().unwrap();
        let conf = ("CRON", "* * * * * ?");
        // A search that outlasts its bound, whatever the machine's speed.
        let slow = || {
            std::thread::sleep(std::time::Duration::from_millis(500));
            vec![0]
        };
        let bound = std::time::Duration::from_millis(20);
        let e = NextFires::within(slow, 0, tz, conf, bound)
            .await
            .err()
            .expect("refused past its bound");
        assert_eq!(e.field.as_deref(), Some("schedule_conf"), "{e:?}");
        let every_second =
            Schedule::parse(rondo_core::schedule::ScheduleType::Cron, "* * * * * ?", tz).unwrap();
        let fires = NextFires::of(every_second, tz, conf, 3)
            .await
            .expect("within the real bound");
        assert_eq!(fires.fires.len(), 3);
    }
}
