//! A job as a user sends it (`JobSpec`) and the validation that turns it
//! into a [`Job`](super::Job), each error naming its field.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::job::{Job, utc};
use super::text::validate_app_name;
use super::text::{MAX_PARAMS_BYTES, MAX_TEXT, check_len, validate_emails, validate_webhook};
use super::vocabulary::parse_glue_type;
use super::vocabulary::{BlockStrategy, GlueType, MAX_SCRIPT_BYTES, Misfire, Routing};
use crate::error::Error;
use crate::schedule::{Schedule, ScheduleType, parse_zone};

/// A job as the API receives it; every field optional so that one
/// validation names whichever is missing or wrong.
///
/// The enum fields are read as text so that an unknown value is answered
/// with the field's name and the values it takes; the spec lists them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct JobSpec {
    /// The executor group (required to create).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub group: Option<String>,
    #[schema(max_length = 255)]
    pub description: Option<String>,
    /// Who the job belongs to; at most 64 bytes.
    #[schema(max_length = 64)]
    pub owner: Option<String>,
    /// Default `NONE` (fires only when triggered).
    #[schema(value_type = Option<ScheduleType>)]
    pub schedule_type: Option<String>,
    /// A Quartz cron expression for `CRON`; for `FIX_RATE` and
    /// `FIX_DELAY` whole seconds (`"30"`, `"30s"`) or milliseconds
    /// (`"250ms"`); required unless `NONE`.
    pub schedule_conf: Option<String>,
    /// The IANA time zone the cron fields are read in (`Asia/Shanghai`);
    /// default: the cluster's `zone`.
    #[schema(max_length = 64, example = "Asia/Shanghai")]
    pub zone: Option<String>,
    /// Default `DO_NOTHING`.
    #[schema(value_type = Option<Misfire>)]
    pub misfire: Option<String>,
    /// A fire found later than this is a misfire (ms, 1000 to 30 days);
    /// default: the cluster's `scheduler.misfire_threshold_ms`.
    #[schema(minimum = 1000, maximum = 2592000000_u64)]
    pub misfire_threshold_ms: Option<u64>,
    /// Default `FIRST`.
    #[schema(value_type = Option<Routing>)]
    pub routing: Option<String>,
    /// Default `SERIAL_EXECUTION`.
    #[schema(value_type = Option<BlockStrategy>)]
    pub block: Option<String>,
    /// The executor's handler name.
    #[schema(max_length = 255)]
    pub handler: Option<String>,
    /// Passed to the handler; at most 16 KiB.
    #[schema(max_length = 16384)]
    pub params: Option<String>,
    /// Seconds; 0 (the default) = no timeout; at most a year.
    #[schema(maximum = 31536000)]
    pub timeout_s: Option<u32>,
    /// Retries after a failure; default 0, at most 1000.
    #[schema(maximum = 1000)]
    pub retries: Option<u32>,
    /// Jobs triggered after a success; at most 64, no cycles.
    #[schema(max_items = 64, value_type = Option<Vec<i64>>)]
    pub child_jobs: Option<Vec<u64>>,
    /// Seconds between a failure and its retry; at most 86400.
    #[schema(maximum = 86400)]
    pub retry_backoff_s: Option<u32>,
    /// Comma-separated e-mail addresses alerted on failure.
    #[schema(max_length = 255)]
    pub alarm_email: Option<String>,
    /// An http(s) URL that receives a JSON POST on failure.
    #[schema(max_length = 1024)]
    pub alarm_webhook: Option<String>,
    /// Alarm channels (DingTalk, WeCom, Feishu, Slack-style or JSON
    /// webhooks an admin defined) a failure goes to, by name; at most 8.
    #[schema(max_items = 8)]
    pub alarm_channels: Option<Vec<String>>,
    /// Default `BEAN` (run `handler`); a script type runs `glue_source` on
    /// executors that enable its interpreter, and `handler` is then
    /// `script:<interpreter>` (set for you).
    #[schema(value_type = Option<GlueType>)]
    pub glue_type: Option<String>,
    /// The script of a script job; at most 64 KiB.
    #[schema(max_length = 65536)]
    pub glue_source: Option<String>,
    /// A remark kept with this version of the script.
    #[schema(max_length = 255)]
    pub glue_remark: Option<String>,
    /// When this version of the script was written (ms), for an import of
    /// older versions (`rondo import` sets it from XXL-JOB's script
    /// history); default: now. Admins only; with a new `glue_source`, not
    /// in the future. The audit log keeps when the save really happened.
    #[schema(minimum = 1)]
    pub glue_saved_ms: Option<i64>,
    /// Where an importer took the job from (`rondo import` sets it).
    #[schema(max_length = 255)]
    pub import_ref: Option<String>,
    /// Named secrets (name → value), given to the handler as environment
    /// variables of shell and script jobs and through `${secret.NAME}` in
    /// `params`; never shown (each value reads `***`, and `***` sent back
    /// keeps the stored value). Names are environment variable names, not
    /// `RONDO_…`; at most 32, values 1 to 4096 bytes.
    pub secrets: Option<std::collections::BTreeMap<String, String>>,
    /// Default true.
    pub enabled: Option<bool>,
}

/// Routing strategies the dispatcher implements (all ten of XXL-JOB's).
pub const SUPPORTED_ROUTING: &[Routing] = &[
    Routing::First,
    Routing::Last,
    Routing::Round,
    Routing::Random,
    Routing::ConsistentHash,
    Routing::LeastFrequentlyUsed,
    Routing::LeastRecentlyUsed,
    Routing::Failover,
    Routing::Busyover,
    Routing::ShardingBroadcast,
];

impl JobSpec {
    /// Overlays the fields `patch` sets on `self` (for partial updates).
    pub fn overlay(self, patch: JobSpec) -> JobSpec {
        JobSpec {
            group: patch.group.or(self.group),
            description: patch.description.or(self.description),
            owner: patch.owner.or(self.owner),
            schedule_type: patch.schedule_type.or(self.schedule_type),
            schedule_conf: patch.schedule_conf.or(self.schedule_conf),
            zone: patch.zone.or(self.zone),
            misfire: patch.misfire.or(self.misfire),
            misfire_threshold_ms: patch.misfire_threshold_ms.or(self.misfire_threshold_ms),
            routing: patch.routing.or(self.routing),
            block: patch.block.or(self.block),
            handler: patch.handler.or(self.handler),
            params: patch.params.or(self.params),
            timeout_s: patch.timeout_s.or(self.timeout_s),
            retries: patch.retries.or(self.retries),
            child_jobs: patch.child_jobs.or(self.child_jobs),
            retry_backoff_s: patch.retry_backoff_s.or(self.retry_backoff_s),
            alarm_email: patch.alarm_email.or(self.alarm_email),
            alarm_webhook: patch.alarm_webhook.or(self.alarm_webhook),
            alarm_channels: patch.alarm_channels.or(self.alarm_channels),
            glue_type: patch.glue_type.or(self.glue_type),
            glue_source: patch.glue_source.or(self.glue_source),
            glue_remark: patch.glue_remark.or(self.glue_remark),
            glue_saved_ms: patch.glue_saved_ms.or(self.glue_saved_ms),
            import_ref: patch.import_ref.or(self.import_ref),
            secrets: match patch.secrets {
                Some(new) => Some(super::secrets::resolve(new, self.secrets.as_ref())),
                None => self.secrets,
            },
            enabled: patch.enabled.or(self.enabled),
        }
    }

    /// Validates every field and builds the job. Defaults follow XXL-JOB:
    /// `DO_NOTHING`, `FIRST`, `SERIAL_EXECUTION`, no timeout, no retry. The
    /// group's existence is checked by the caller, which has the store.
    pub fn validate(self, id: u64, now_ms: i64, created_ms: Option<i64>) -> Result<Job, Error> {
        let group = self
            .group
            .ok_or_else(|| Error::invalid("group", "is required"))?;
        validate_app_name("group", &group)?;
        let schedule_type = ScheduleType::parse(
            "schedule_type",
            self.schedule_type.as_deref().unwrap_or("NONE"),
        )?;
        let schedule_conf = self.schedule_conf.unwrap_or_default();
        if schedule_type != ScheduleType::None && schedule_conf.trim().is_empty() {
            return Err(Error::invalid(
                "schedule_conf",
                "is required for CRON, FIX_RATE and FIX_DELAY",
            ));
        }
        let zone = self.zone.unwrap_or_else(utc);
        let tz = parse_zone("zone", &zone)?;
        Schedule::parse(schedule_type, &schedule_conf, tz)?;
        let misfire_threshold_ms = self.misfire_threshold_ms;
        if misfire_threshold_ms
            .is_some_and(|ms| !(MIN_MISFIRE_THRESHOLD_MS..=MAX_MISFIRE_THRESHOLD_MS).contains(&ms))
        {
            return Err(Error::invalid(
                "misfire_threshold_ms",
                format!(
                    "must be from {MIN_MISFIRE_THRESHOLD_MS} (the claim period: a shorter one would find on-time fires late) to {MAX_MISFIRE_THRESHOLD_MS} (30 days)"
                ),
            ));
        }
        let routing = Routing::parse("routing", self.routing.as_deref().unwrap_or("FIRST"))?;
        if !SUPPORTED_ROUTING.contains(&routing) {
            return Err(Error::invalid(
                "routing",
                format!("routing strategy {routing} is not available in this version"),
            ));
        }
        let glue_type = parse_glue_type(self.glue_type.as_deref())?;
        let glue_source = self.glue_source.unwrap_or_default();
        check_len("glue_source", &glue_source, MAX_SCRIPT_BYTES)?;
        let glue_remark = self.glue_remark.unwrap_or_default();
        check_len("glue_remark", &glue_remark, MAX_TEXT)?;
        if let Some(saved) = self.glue_saved_ms {
            if saved < 1 {
                return Err(Error::invalid(
                    "glue_saved_ms",
                    "must be a time in ms since 1970",
                ));
            }
            if glue_type == GlueType::Bean {
                return Err(Error::invalid(
                    "glue_saved_ms",
                    "dates a version of a script; a BEAN job has none",
                ));
            }
        }
        let import_ref = self.import_ref.unwrap_or_default();
        check_len("import_ref", &import_ref, MAX_TEXT)?;
        let secrets = self.secrets.unwrap_or_default();
        super::secrets::validate(&secrets)?;
        let handler = match glue_type.handler() {
            None => {
                let handler = self.handler.unwrap_or_default();
                if handler.starts_with("script:") {
                    return Err(Error::invalid(
                        "handler",
                        format!(
                            "{handler:?} runs a job's script; a BEAN job names the executor's handler to run"
                        ),
                    ));
                }
                handler
            }
            Some(script) => {
                if glue_source.trim().is_empty() {
                    return Err(Error::invalid(
                        "glue_source",
                        format!("a {glue_type} job needs its script"),
                    ));
                }
                match self.handler.as_deref() {
                    None | Some("") => script,
                    Some(h) if *h == script || h.starts_with("script:") => script,
                    Some(h) => {
                        return Err(Error::invalid(
                            "handler",
                            format!(
                                "a {glue_type} job runs its script with handler {script:?}; leave handler empty (not {h:?})"
                            ),
                        ));
                    }
                }
            }
        };
        validate_handler_name(&handler)?;
        let params = self.params.unwrap_or_default();
        check_len("params", &params, MAX_PARAMS_BYTES)?;
        let description = self.description.unwrap_or_default();
        check_len("description", &description, MAX_TEXT)?;
        let owner = self.owner.unwrap_or_default();
        check_len("owner", &owner, MAX_OWNER)?;
        let alarm_email = self.alarm_email.unwrap_or_default();
        check_len("alarm_email", &alarm_email, MAX_TEXT)?;
        validate_emails(&alarm_email)?;
        let alarm_webhook = self.alarm_webhook.unwrap_or_default();
        validate_webhook(&alarm_webhook)?;
        let alarm_channels = self.alarm_channels.unwrap_or_default();
        super::channel::validate_job_channels(&alarm_channels)?;
        let retry_backoff_s = self.retry_backoff_s.unwrap_or(0);
        if retry_backoff_s > MAX_RETRY_BACKOFF_S {
            return Err(Error::invalid(
                "retry_backoff_s",
                format!("must be at most {MAX_RETRY_BACKOFF_S} (one day)"),
            ));
        }
        let timeout_s = self.timeout_s.unwrap_or(0);
        if timeout_s > MAX_TIMEOUT_S {
            return Err(Error::invalid(
                "timeout_s",
                format!("must be at most {MAX_TIMEOUT_S} (a year)"),
            ));
        }
        let retries = self.retries.unwrap_or(0);
        if retries > MAX_RETRIES {
            return Err(Error::invalid(
                "retries",
                format!("must be at most {MAX_RETRIES}"),
            ));
        }
        let child_jobs = self.child_jobs.unwrap_or_default();
        if child_jobs.contains(&id) {
            return Err(Error::invalid(
                "child_jobs",
                "a job cannot be its own child",
            ));
        }
        if child_jobs.len() > MAX_CHILD_JOBS {
            return Err(Error::invalid(
                "child_jobs",
                format!("names {} jobs; at most {MAX_CHILD_JOBS}", child_jobs.len()),
            ));
        }
        if let Some(twice) = child_jobs
            .iter()
            .enumerate()
            .find_map(|(i, c)| child_jobs[..i].contains(c).then_some(c))
        {
            return Err(Error::invalid(
                "child_jobs",
                format!("names job {twice} twice"),
            ));
        }
        Ok(Job {
            id,
            group,
            description,
            owner,
            schedule_type,
            schedule_conf,
            zone: tz.name().to_owned(),
            misfire: Misfire::parse("misfire", self.misfire.as_deref().unwrap_or("DO_NOTHING"))?,
            misfire_threshold_ms,
            routing,
            block: BlockStrategy::parse(
                "block",
                self.block.as_deref().unwrap_or("SERIAL_EXECUTION"),
            )?,
            handler,
            params,
            timeout_s,
            retries,
            child_jobs,
            retry_backoff_s,
            alarm_email,
            alarm_webhook,
            alarm_channels,
            glue_version: u32::from(glue_type != GlueType::Bean),
            glue_updated_ms: if glue_type == GlueType::Bean {
                0
            } else {
                self.glue_saved_ms.unwrap_or(now_ms)
            },
            glue_type,
            glue_source,
            glue_remark,
            import_ref,
            secrets,
            enabled: self.enabled.unwrap_or(true),
            run_until_ms: 0,
            created_ms: created_ms.unwrap_or(now_ms),
            updated_ms: now_ms,
        })
    }
}

/// The smallest per-job misfire threshold: the leader claims once a
/// second, so a fire due just after a claim is found up to a second late.
pub const MIN_MISFIRE_THRESHOLD_MS: u64 = 1000;

/// The largest per-job misfire threshold (30 days).
pub const MAX_MISFIRE_THRESHOLD_MS: u64 = 30 * 24 * 3600 * 1000;

/// The longest owner (XXL-JOB's `author` column).
pub const MAX_OWNER: usize = 64;

/// The longest timeout (a year).
pub const MAX_TIMEOUT_S: u32 = 365 * 24 * 3600;

/// The most retries of one fire.
pub const MAX_RETRIES: u32 = 1000;

/// The most child jobs a job may name.
pub const MAX_CHILD_JOBS: usize = 64;

/// The longest retry backoff (one day).
pub const MAX_RETRY_BACKOFF_S: u32 = 24 * 3600;

fn validate_handler_name(handler: &str) -> Result<(), Error> {
    if handler.trim().is_empty() {
        return Err(Error::invalid("handler", "must not be empty"));
    }
    check_len("handler", handler, MAX_TEXT)?;
    if handler.chars().any(char::is_whitespace) {
        return Err(Error::invalid("handler", "must not contain white space"));
    }
    Ok(())
}

impl Job {
    /// The job as an API spec, the base an update is applied on.
    pub fn to_spec(&self) -> JobSpec {
        JobSpec {
            group: Some(self.group.clone()),
            description: Some(self.description.clone()),
            owner: Some(self.owner.clone()),
            schedule_type: Some(self.schedule_type.as_str().to_owned()),
            schedule_conf: Some(self.schedule_conf.clone()),
            zone: Some(self.zone.clone()),
            misfire: Some(self.misfire.as_str().to_owned()),
            misfire_threshold_ms: self.misfire_threshold_ms,
            routing: Some(self.routing.as_str().to_owned()),
            block: Some(self.block.as_str().to_owned()),
            handler: Some(self.handler.clone()),
            params: Some(self.params.clone()),
            timeout_s: Some(self.timeout_s),
            retries: Some(self.retries),
            child_jobs: Some(self.child_jobs.clone()),
            retry_backoff_s: Some(self.retry_backoff_s),
            alarm_email: Some(self.alarm_email.clone()),
            alarm_webhook: Some(self.alarm_webhook.clone()),
            alarm_channels: Some(self.alarm_channels.clone()),
            glue_type: Some(self.glue_type.as_str().to_owned()),
            glue_source: Some(self.glue_source.clone()),
            glue_remark: Some(self.glue_remark.clone()),
            glue_saved_ms: None,
            import_ref: Some(self.import_ref.clone()),
            secrets: Some(self.secrets.clone()),
            enabled: Some(self.enabled),
        }
    }
}
