//! Schedules and their maths: `CRON` in Quartz syntax read in the job's
//! time zone, `FIX_RATE`, `FIX_DELAY`, `NONE`, and the plan the leader
//! follows when it claims a due job (misfire rule, every fire inside the
//! pre-read window, the following fire).
//!
//! # Quartz, as Quartz computes it
//!
//! XXL-JOB users write Quartz expressions: a seconds field, `?`, `L`, `W`,
//! `#`, Quartz weekday numbers (1 = Sunday … 7 = Saturday), ranges that wrap
//! (`22-2`, `NOV-FEB`) and an optional year. [`quartz`] is a port of Quartz
//! 2.3's `CronExpression`, so an imported job fires at the instants it fired
//! under XXL-JOB, daylight-saving changes included; what Quartz accepts but
//! cannot compute is refused with the reason.

use chrono::Utc;
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::named::named_enum;

pub mod quartz;

use quartz::CronExpr;

/// The longest fixed rate or delay accepted (one year), a guard against
/// typos.
const MAX_FIX_RATE_MS: i64 = 366 * 24 * 3600 * 1000;
/// The shortest fixed rate or delay accepted.
const MIN_FIX_RATE_MS: i64 = 10;

/// Parses an IANA time zone name (`Asia/Shanghai`, `UTC`); the error names
/// `field`.
pub fn parse_zone(field: &str, name: &str) -> Result<Tz, Error> {
    name.parse::<Tz>().map_err(|_| {
        Error::invalid(
            field,
            format!("unknown time zone {name:?}; expected an IANA name such as \"Asia/Shanghai\", \"Europe/Berlin\" or \"UTC\""),
        )
    })
}

named_enum!(
    /// XXL-JOB's schedule types.
    ScheduleType {
        None = "NONE",
        Cron = "CRON",
        FixRate = "FIX_RATE",
        /// Not in XXL-JOB: the next fire is a delay after the previous run's
        /// final result.
        FixDelay = "FIX_DELAY",
    }
);

/// How a job is scheduled. Parsed from XXL-JOB's `schedule_type` /
/// `schedule_conf` pair.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Fired only through the API (manual trigger, child job).
    None,
    /// A Quartz cron expression, its fields read as wall-clock fields of
    /// the zone.
    Cron(Box<CronExpr>, Tz),
    /// Every `n` milliseconds (written `N` seconds or `Nms`).
    FixRate(i64),
    /// `n` milliseconds after the previous run's final result (written like
    /// a fixed rate). Only the first fire is computed from a clock; each
    /// later one is set by the result monitor.
    FixDelay(i64),
}

impl Schedule {
    /// Parses a schedule whose cron fields are read in `zone`; errors name
    /// the field that is wrong.
    pub fn parse(schedule_type: ScheduleType, conf: &str, zone: Tz) -> Result<Schedule, Error> {
        match schedule_type {
            ScheduleType::None => Ok(Schedule::None),
            ScheduleType::Cron => {
                parse_quartz(conf, zone).map(|c| Schedule::Cron(Box::new(c), zone))
            }
            ScheduleType::FixRate => parse_fix_rate(conf).map(Schedule::FixRate),
            ScheduleType::FixDelay => parse_fix_rate(conf).map(Schedule::FixDelay),
        }
    }

    /// The first fire of a job saved (or rebuilt) at `now_ms`: the next
    /// cron or rate fire, and for a fixed delay one delay from now.
    pub fn first_after(&self, now_ms: i64) -> Option<i64> {
        match self {
            Schedule::FixDelay(delay) => now_ms.checked_add(*delay),
            _ => self.next_after(now_ms),
        }
    }

    /// The first fire strictly after `after_ms`, or `None` when the schedule
    /// never fires again, never fires by itself, or (a fixed delay) waits for
    /// a result to set its next fire.
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        match self {
            Schedule::None | Schedule::FixDelay(_) => None,
            Schedule::FixRate(rate) => after_ms.checked_add(*rate),
            Schedule::Cron(cron, zone) => cron.next_after(*zone, after_ms),
        }
    }

    /// The next `count` fires after `after_ms` (fewer when the schedule
    /// ends). A fixed delay's are what they would be if every run took no
    /// time: the first one delay from `after_ms`, then one delay apart.
    pub fn preview(&self, after_ms: i64, count: usize) -> Vec<i64> {
        let mut fires = Vec::with_capacity(count.min(64));
        let mut cursor = self.first_after(after_ms);
        while let Some(fire) = cursor {
            if fires.len() >= count {
                break;
            }
            fires.push(fire);
            cursor = match self {
                Schedule::FixDelay(delay) => fire.checked_add(*delay),
                _ => self.next_after(fire),
            };
        }
        fires
    }
}

fn parse_quartz(conf: &str, zone: Tz) -> Result<CronExpr, Error> {
    if quartz::wall_clock_zone(zone).is_none() {
        return Err(Error::invalid(
            "zone",
            format!("time zone {zone} has no daylight-saving rules in the cron engine's zone data"),
        ));
    }
    let cron = CronExpr::parse(conf).map_err(|e| {
        Error::invalid(
            "schedule_conf",
            format!("invalid cron expression {conf:?}: {e}"),
        )
    })?;
    // An expression that matches no instant in the future (e.g. 30 February)
    // is a mistake the user wants to hear about now, not a job that never runs.
    if cron
        .next_after(zone, Utc::now().timestamp_millis())
        .is_none()
    {
        return Err(Error::invalid(
            "schedule_conf",
            format!("cron expression {conf:?} never fires"),
        ));
    }
    Ok(cron)
}

fn parse_fix_rate(conf: &str) -> Result<i64, Error> {
    let conf = conf.trim();
    let (digits, scale) = match conf.strip_suffix("ms") {
        Some(ms) => (ms, 1),
        None => (conf.strip_suffix('s').unwrap_or(conf), 1000),
    };
    let value: i64 = digits.trim().parse().map_err(|_| {
        Error::invalid(
            "schedule_conf",
            format!("fixed rate or delay {conf:?} is not a whole number of seconds (\"5\", \"5s\") or milliseconds (\"250ms\")"),
        )
    })?;
    let rate = value.saturating_mul(scale);
    if !(MIN_FIX_RATE_MS..=MAX_FIX_RATE_MS).contains(&rate) {
        return Err(Error::invalid(
            "schedule_conf",
            format!(
                "a fixed rate or delay must be between {MIN_FIX_RATE_MS} ms and one year, got {conf:?}"
            ),
        ));
    }
    Ok(rate)
}

/// What to do with a fire found more than the misfire threshold late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MisfireRule {
    /// Skip it; the next fire is computed from now.
    DoNothing,
    /// Fire once now (trigger type `MISFIRE`); the next fire is computed
    /// from now.
    FireOnceNow,
}

/// Lateness that is only the claim period (the leader claims once a
/// second): a job saved with its first fire under a second away, or a
/// sub-second rate, is found this late by the next claim without anything
/// having gone wrong. Its fires are claimed as if on time.
pub const ON_TIME_MS: i64 = 1000;

/// The most missed fires a claim counts one by one; past it the count says
/// "at least this many" (a job every 10 ms, found a day late).
pub const MAX_COUNTED_MISSES: u64 = 100_000;

/// What the leader does with one due job in one claim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimPlan {
    /// Fire instants (ms) to put on a node's ring, in order.
    pub fires: Vec<i64>,
    /// The fire in `fires` that a misfire fires now (`FIRE_ONCE_NOW`): it
    /// is recorded as trigger type `MISFIRE`.
    pub misfire_fire: Option<i64>,
    /// The fires the job missed, if it was found late.
    pub missed: Option<Missed>,
    /// The job's new due-set score; `None` removes it (no further fire).
    pub next: Option<i64>,
}

/// Fires a job missed because it was claimed late (the leader was down,
/// stalled or failing over): what became of them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missed {
    /// The first and the last missed fire (ms).
    pub first_ms: i64,
    pub last_ms: i64,
    /// How many scheduled fires fell from `first_ms` to the claim
    /// ([`MAX_COUNTED_MISSES`] at most).
    pub count: u64,
    /// How many of them never ran: all of them for `DO_NOTHING`, all but
    /// the one fired in their place otherwise.
    pub skipped: u64,
    /// More than the threshold late (a misfire); otherwise late by less,
    /// and fired once at its own instant like XXL-JOB does.
    pub misfire: bool,
}

/// One occurrence of missed fires as kept per job (newest first) and shown
/// by `GET /api/v1/jobs/{id}/misfires`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MissedRecord {
    /// When the leader found the job late (ms).
    pub detected_ms: i64,
    /// The first and last missed fire (ms).
    pub first_ms: i64,
    pub last_ms: i64,
    /// Scheduled fires from `first_ms` up to `detected_ms`.
    pub count: u64,
    /// Of those, fires that never ran.
    pub skipped: u64,
    /// `MISFIRE` (later than the threshold: the job's misfire strategy
    /// applied), `LATE` (late by less: the first fired late, the rest
    /// skipped), or `NODE_LOST` (claimed to a node that died before firing
    /// it, and found past the threshold when moved).
    pub cause: String,
    /// The job's misfire strategy then.
    pub strategy: String,
    /// The threshold that applied (ms).
    pub threshold_ms: i64,
    /// The fire run in their place (ms), if any; `MISFIRE` fires are
    /// stored with trigger type `MISFIRE`.
    pub fired_ms: Option<i64>,
}

/// The fires a job missed: how many never ran since it was created (a
/// Redis count: not rebuilt when Redis is), and the last 20 occurrences.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct MissedFires {
    pub skipped: u64,
    #[serde(default, deserialize_with = "list_or_empty_object")]
    pub recent: Vec<MissedRecord>,
}

/// Lua's cjson writes an empty list as `{}`.
fn list_or_empty_object<'de, D>(d: D) -> Result<Vec<MissedRecord>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrObject {
        List(Vec<MissedRecord>),
        Object(#[allow(dead_code)] serde_json::Map<String, serde_json::Value>),
    }
    Ok(match ListOrObject::deserialize(d)? {
        ListOrObject::List(list) => list,
        ListOrObject::Object(_) => Vec::new(),
    })
}

/// Inputs of [`plan_claim`] that are the same for every job of a claim.
#[derive(Debug, Clone, Copy)]
pub struct ClaimWindow {
    /// The leader's clock when it read the due set.
    pub now_ms: i64,
    /// Fires at or before this instant are claimed (now + pre-read).
    pub horizon_ms: i64,
    /// A fire later than this many ms is a misfire, unless the job sets its
    /// own threshold.
    pub misfire_threshold_ms: i64,
    /// The most fires one job may put on rings in one claim.
    pub max_fires: usize,
}

/// Plans one claim of a job whose due-set score is `due_ms`, with the job's
/// own misfire threshold if it has one.
///
/// As in XXL-JOB, a job found late fires at most once for everything it
/// missed, and its next fire is computed from now:
/// * more than the threshold late (a misfire): `DO_NOTHING` skips every
///   missed fire, `FIRE_ONCE_NOW` fires once now as `MISFIRE`;
/// * late by less: the first missed fire is fired (late, as `CRON`) and
///   the others up to now are skipped; the schedule goes on from the last
///   of them.
///
/// Then every fire up to the horizon is claimed, and the first fire past it
/// becomes the new score.
pub fn plan_claim(
    schedule: &Schedule,
    rule: MisfireRule,
    threshold_ms: Option<i64>,
    due_ms: i64,
    w: ClaimWindow,
) -> ClaimPlan {
    let mut plan = ClaimPlan::default();
    let mut cursor = Some(due_ms);
    if due_ms < w.now_ms - ON_TIME_MS {
        let (count, last_ms) = count_until(schedule, due_ms, w.now_ms);
        let misfire = due_ms < w.now_ms - threshold_ms.unwrap_or(w.misfire_threshold_ms);
        let fired = if misfire {
            (rule == MisfireRule::FireOnceNow).then_some(w.now_ms)
        } else {
            Some(due_ms)
        };
        if let Some(fire) = fired {
            plan.fires.push(fire);
        }
        if misfire {
            plan.misfire_fire = fired;
        }
        let skipped = count - u64::from(fired.is_some());
        if misfire || skipped > 0 {
            plan.missed = Some(Missed {
                first_ms: due_ms,
                last_ms,
                count,
                skipped,
                misfire,
            });
        }
        cursor = if fired.is_none() {
            // A fixed delay that fired nothing re-arms from now: no result
            // will.
            schedule.first_after(w.now_ms)
        } else if misfire || count >= MAX_COUNTED_MISSES {
            schedule.next_after(w.now_ms)
        } else {
            // Late by less: the schedule goes on after the last missed fire
            // (a fixed rate keeps its phase).
            schedule.next_after(last_ms)
        };
    }
    while let Some(fire) = cursor {
        if fire > w.horizon_ms || plan.fires.len() >= w.max_fires {
            break;
        }
        plan.fires.push(fire);
        cursor = schedule.next_after(fire);
    }
    plan.next = cursor;
    debug_assert!(plan.fires.windows(2).all(|p| p[0] < p[1]));
    plan
}

/// How many fires from `first_ms` (a fire) up to `now_ms` (inclusive), at
/// most [`MAX_COUNTED_MISSES`], and the last of them.
fn count_until(schedule: &Schedule, first_ms: i64, now_ms: i64) -> (u64, i64) {
    let (mut count, mut last) = (1, first_ms);
    while count < MAX_COUNTED_MISSES {
        match schedule.next_after(last) {
            Some(fire) if fire <= now_ms => {
                count += 1;
                last = fire;
            }
            _ => break,
        }
    }
    (count, last)
}

#[cfg(test)]
mod tests;
