//! Schedules and their maths: `CRON` in Quartz syntax, `FIX_RATE`, `NONE`,
//! and the plan the leader follows when it claims a due job (misfire rule,
//! every fire inside the pre-read window, the following fire).
//!
//! # Why `croner`
//!
//! XXL-JOB users write Quartz expressions: a seconds field, `?`, `L`, `W`, `#`
//! and Quartz weekday numbers (1 = Sunday … 7 = Saturday). The `cron` crate
//! rejects `L`, `W` and `#`. `croner` parses all of them, and with
//! `alternative_weekdays` it reads weekday numbers the Quartz way, so `6#3`
//! is the third Friday as a Quartz user means it. The optional seventh field
//! (year) is accepted too.

use chrono::{DateTime, TimeZone, Utc};
use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};

use crate::error::Error;

/// The longest fixed rate accepted (one year), a guard against typos.
const MAX_FIX_RATE_MS: i64 = 366 * 24 * 3600 * 1000;
/// The shortest fixed rate accepted.
const MIN_FIX_RATE_MS: i64 = 10;

/// How a job is scheduled. Parsed from XXL-JOB's `schedule_type` /
/// `schedule_conf` pair.
#[derive(Debug, Clone)]
pub enum Schedule {
    /// Fired only through the API (manual trigger, child job).
    None,
    /// A Quartz cron expression, evaluated in UTC.
    Cron(Box<Cron>),
    /// Every `n` milliseconds (written `N` seconds or `Nms`).
    FixRate(i64),
}

impl Schedule {
    /// Parses a schedule; errors name the field that is wrong.
    pub fn parse(schedule_type: &str, conf: &str) -> Result<Schedule, Error> {
        match schedule_type {
            "NONE" => Ok(Schedule::None),
            "CRON" => parse_quartz(conf).map(|c| Schedule::Cron(Box::new(c))),
            "FIX_RATE" => parse_fix_rate(conf).map(Schedule::FixRate),
            other => Err(Error::invalid(
                "schedule_type",
                format!("unknown schedule type {other:?}, expected CRON, FIX_RATE or NONE"),
            )),
        }
    }

    /// The first fire strictly after `after_ms`, or `None` when the schedule
    /// never fires again (or never fires by itself).
    pub fn next_after(&self, after_ms: i64) -> Option<i64> {
        self.next_after_in(&Utc, after_ms)
    }

    /// [`Schedule::next_after`] in a given time zone (cron fields are wall
    /// clock fields of that zone).
    pub fn next_after_in<Tz: TimeZone>(&self, tz: &Tz, after_ms: i64) -> Option<i64> {
        match self {
            Schedule::None => None,
            Schedule::FixRate(rate) => after_ms.checked_add(*rate),
            Schedule::Cron(cron) => {
                let after: DateTime<Tz> = tz.timestamp_millis_opt(after_ms).single()?;
                let next = cron.find_next_occurrence(&after, false).ok()?;
                Some(next.timestamp_millis())
            }
        }
    }
}

fn parse_quartz(conf: &str) -> Result<Cron, Error> {
    let fields = conf.split_whitespace().count();
    if !(6..=7).contains(&fields) {
        return Err(Error::invalid(
            "schedule_conf",
            format!(
                "a cron expression needs 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got {fields}"
            ),
        ));
    }
    let parser = CronParser::builder()
        .seconds(Seconds::Required)
        .year(Year::Optional)
        .alternative_weekdays(true)
        .sloppy_ranges(true)
        .build();
    let cron = parser.parse(conf).map_err(|e| {
        Error::invalid(
            "schedule_conf",
            format!("invalid cron expression {conf:?}: {e}"),
        )
    })?;
    // An expression that matches no instant in the future (e.g. 30 February)
    // is a mistake the user wants to hear about now, not a job that never runs.
    let probe = Utc::now();
    if cron.find_next_occurrence(&probe, false).is_err() {
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
            format!("fixed rate {conf:?} is not a whole number of seconds (\"5\", \"5s\") or milliseconds (\"250ms\")"),
        )
    })?;
    let rate = value.saturating_mul(scale);
    if !(MIN_FIX_RATE_MS..=MAX_FIX_RATE_MS).contains(&rate) {
        return Err(Error::invalid(
            "schedule_conf",
            format!("fixed rate must be between {MIN_FIX_RATE_MS} ms and one year, got {conf:?}"),
        ));
    }
    Ok(rate)
}

/// What to do with a fire found more than the misfire threshold late.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MisfireRule {
    /// Skip it; the next fire is computed from now.
    DoNothing,
    /// Fire once now; the next fire is computed from now.
    FireOnceNow,
}

/// What the leader does with one due job in one claim.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ClaimPlan {
    /// Fire instants (ms) to put on a node's ring, in order.
    pub fires: Vec<i64>,
    /// The late fire that was skipped or replaced, if the job misfired.
    pub misfired: Option<i64>,
    /// The job's new due-set score; `None` removes it (no further fire).
    pub next: Option<i64>,
}

/// Inputs of [`plan_claim`] that are the same for every job of a claim.
#[derive(Debug, Clone, Copy)]
pub struct ClaimWindow {
    /// The leader's clock when it read the due set.
    pub now_ms: i64,
    /// Fires at or before this instant are claimed (now + pre-read).
    pub horizon_ms: i64,
    /// A fire later than this many ms is a misfire.
    pub misfire_threshold_ms: i64,
    /// The most fires one job may put on rings in one claim.
    pub max_fires: usize,
}

/// Plans one claim of a job whose due-set score is `due_ms`.
///
/// A fire more than the threshold late follows `rule`; then every fire up to
/// the horizon is claimed, and the first fire past it becomes the new score.
pub fn plan_claim(
    schedule: &Schedule,
    rule: MisfireRule,
    due_ms: i64,
    w: ClaimWindow,
) -> ClaimPlan {
    let mut plan = ClaimPlan::default();
    let mut cursor = Some(due_ms);
    if due_ms < w.now_ms - w.misfire_threshold_ms {
        plan.misfired = Some(due_ms);
        if rule == MisfireRule::FireOnceNow {
            plan.fires.push(w.now_ms);
        }
        cursor = schedule.next_after(w.now_ms);
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

#[cfg(test)]
mod tests;
