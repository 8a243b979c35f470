//! A job as stored and fired: its fields, its compiled schedule, and its
//! script versions.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::vocabulary::{BlockStrategy, GlueType, Misfire, Routing};
use crate::error::Error;
use crate::schedule::{Schedule, ScheduleType, parse_zone};

/// A job as stored in Redis and MySQL (XXL-JOB's `xxl_job_info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: u64,
    pub group: String,
    pub description: String,
    /// Who the job belongs to (free text, at most 64 bytes; XXL-JOB's
    /// `author`).
    #[serde(default)]
    pub owner: String,
    pub schedule_type: ScheduleType,
    pub schedule_conf: String,
    /// The IANA zone the cron fields are read in (jobs stored before zones
    /// existed ran in UTC).
    #[serde(default = "utc")]
    pub zone: String,
    pub misfire: Misfire,
    /// A fire later than this is a misfire; `None`: the cluster's
    /// `scheduler.misfire_threshold_ms`.
    #[serde(default)]
    pub misfire_threshold_ms: Option<u64>,
    pub routing: Routing,
    pub block: BlockStrategy,
    pub handler: String,
    pub params: String,
    /// Seconds; 0 = no timeout.
    pub timeout_s: u32,
    pub retries: u32,
    pub child_jobs: Vec<u64>,
    /// Seconds between a failure and its retry (XXL-JOB retries at once).
    #[serde(default)]
    pub retry_backoff_s: u32,
    /// Comma-separated addresses mailed when a trigger fails.
    pub alarm_email: String,
    /// URL that receives a JSON POST when a trigger fails.
    #[serde(default)]
    pub alarm_webhook: String,
    /// The alarm channels (chat bots, webhooks) a failure goes to, by name.
    #[serde(default)]
    pub alarm_channels: Vec<String>,
    /// `BEAN` runs `handler`; a script type runs `glue_source`.
    #[serde(default)]
    pub glue_type: GlueType,
    /// The script of a script job.
    #[serde(default)]
    pub glue_source: String,
    /// The remark saved with the script's current version.
    #[serde(default)]
    pub glue_remark: String,
    /// The script's version: 1 for the first, one more at every save that
    /// changes the type or the source (0: never a script).
    #[serde(default)]
    pub glue_version: u32,
    /// When the current version was saved (ms).
    #[serde(default)]
    pub glue_updated_ms: i64,
    /// Where an importer took the job from (`xxl-job/<database>#<id>`), so a
    /// second import finds it instead of making a copy; empty otherwise.
    #[serde(default)]
    pub import_ref: String,
    /// Named secrets: environment variables of shell and script jobs, and
    /// `${secret.NAME}` in `params`. Every answer shows each value as
    /// `***`; sent back so, the stored value is kept.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub secrets: std::collections::BTreeMap<String, String>,
    pub enabled: bool,
    /// Set by a stop: the fires the job had claimed that are due by this
    /// instant (ms; the stop plus the nodes' load-ahead, so every fire a
    /// node may already hold) still run, and no later one. 0: none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub run_until_ms: i64,
    pub created_ms: i64,
    pub updated_ms: i64,
}

/// What the leader's claim reads of a stored [`Job`]: the same JSON,
/// decoded for these fields only. The decoder skips the others (handler,
/// params, scripts, alarms…) without building them, and borrows the
/// strings it can: a claim of 10 k jobs due at once decodes 10 k of them.
///
/// It is laxer than [`Job`] on purpose: a definition whose other fields an
/// older build does not know (a new routing, say, written by a newer build
/// during an upgrade) is still claimed, and its fires wait for a node that
/// can read it, rather than leaving the due set for good.
#[derive(Debug, Deserialize)]
pub struct JobSchedule<'a> {
    pub enabled: bool,
    pub schedule_type: ScheduleType,
    #[serde(borrow)]
    pub schedule_conf: std::borrow::Cow<'a, str>,
    #[serde(borrow, default = "utc_borrowed")]
    pub zone: std::borrow::Cow<'a, str>,
    pub misfire: Misfire,
    #[serde(default)]
    pub misfire_threshold_ms: Option<u64>,
}

impl JobSchedule<'_> {
    /// The compiled schedule (see [`Job::schedule`]).
    pub fn schedule(&self) -> Result<Schedule, Error> {
        compile_schedule(self.schedule_type, &self.schedule_conf, &self.zone)
    }

    /// The job's own misfire threshold, if it sets one.
    pub fn misfire_threshold(&self) -> Option<i64> {
        threshold_ms(self.misfire_threshold_ms)
    }
}

fn compile_schedule(
    schedule_type: ScheduleType,
    conf: &str,
    zone: &str,
) -> Result<Schedule, Error> {
    let zone = parse_zone("zone", zone)?;
    Schedule::parse(schedule_type, conf, zone)
}

fn threshold_ms(ms: Option<u64>) -> Option<i64> {
    ms.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX))
}

impl Job {
    /// Job `id` of `group` running `handler`, every other field empty or
    /// at its API default: no schedule (`NONE`), UTC, `DO_NOTHING`,
    /// `FIRST`, `SERIAL_EXECUTION`, enabled, no time. The one literal of
    /// every field outside the places a job is read from (a spec, a row):
    /// tests, fixtures and rows build on it with
    /// `Job { field: …, ..Job::new(id, group, handler) }`, so a new field
    /// is added here and where it is read.
    pub fn new(id: u64, group: &str, handler: &str) -> Job {
        Job {
            id,
            group: group.to_owned(),
            description: String::new(),
            owner: String::new(),
            schedule_type: ScheduleType::None,
            schedule_conf: String::new(),
            zone: "UTC".into(),
            misfire: Misfire::DoNothing,
            misfire_threshold_ms: None,
            routing: Routing::First,
            block: BlockStrategy::SerialExecution,
            handler: handler.to_owned(),
            params: String::new(),
            timeout_s: 0,
            retries: 0,
            child_jobs: Vec::new(),
            retry_backoff_s: 0,
            alarm_email: String::new(),
            alarm_webhook: String::new(),
            alarm_channels: Vec::new(),
            glue_type: GlueType::default(),
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_version: 0,
            glue_updated_ms: 0,
            import_ref: String::new(),
            secrets: Default::default(),
            enabled: true,
            run_until_ms: 0,
            created_ms: 0,
            updated_ms: 0,
        }
    }

    /// The compiled schedule. Stored jobs were validated, so this only fails
    /// on data written by something else.
    pub fn schedule(&self) -> Result<Schedule, Error> {
        compile_schedule(self.schedule_type, &self.schedule_conf, &self.zone)
    }

    /// The job's own misfire threshold, if it sets one.
    pub fn misfire_threshold(&self) -> Option<i64> {
        threshold_ms(self.misfire_threshold_ms)
    }
}

fn is_zero(ms: &i64) -> bool {
    *ms == 0
}

impl Job {
    /// Whether a fire of this job at `fire_ms` that was claimed (it is on
    /// a node's ring) is still made: the job runs, or it was stopped after
    /// the fire was claimed and the fire is due by [`Job::run_until_ms`].
    pub fn makes_claimed_fire(&self, fire_ms: i64) -> bool {
        self.enabled || fire_ms <= self.run_until_ms
    }

    /// The script version of `self` saved over `old` (the job it replaces,
    /// `None` when new): a changed type or source is a new version (with
    /// this save's remark and time: the one its spec gave in
    /// `glue_saved_ms`, else now), anything else keeps the old one.
    pub fn versioned_after(mut self, old: Option<&Job>) -> Job {
        let Some(old) = old else {
            return self;
        };
        if !self.enabled && !old.enabled {
            // An edit of a stopped job keeps what its stop let run.
            self.run_until_ms = old.run_until_ms;
        }
        let changed = self.glue_type != GlueType::Bean
            && (self.glue_type != old.glue_type || self.glue_source != old.glue_source);
        if changed {
            self.glue_version = old.glue_version + 1;
        } else {
            self.glue_version = old.glue_version;
            self.glue_updated_ms = old.glue_updated_ms;
            if self.glue_type == old.glue_type {
                self.glue_remark.clone_from(&old.glue_remark);
            }
        }
        self
    }
}

/// The zone of jobs that name none, before the API fills in the cluster's.
pub(crate) fn utc() -> String {
    utc_borrowed().into_owned()
}

pub(crate) fn utc_borrowed() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed("UTC")
}
