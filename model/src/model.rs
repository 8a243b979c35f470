//! Executor groups and jobs: what users define through the API, the enums
//! with XXL-JOB's names, and the validation that turns raw input into a job.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::Error;
use crate::named::named_enum;
pub use crate::schedule::ScheduleType;
use crate::schedule::{MisfireRule, Schedule, parse_zone};

/// The largest `params` accepted, in bytes. Parameters travel inside every
/// trigger message and every log row; larger payloads belong in a store the
/// handler reads.
pub const MAX_PARAMS_BYTES: usize = 16 * 1024;
/// The longest handler name, description or alarm address.
pub const MAX_TEXT: usize = 255;
/// The longest group app name (it becomes part of queue names).
pub const MAX_APP_NAME: usize = 64;

named_enum!(
    /// How the dispatcher picks executors of the group for a trigger.
    Routing {
        First = "FIRST",
        Last = "LAST",
        Round = "ROUND",
        Random = "RANDOM",
        ConsistentHash = "CONSISTENT_HASH",
        LeastFrequentlyUsed = "LEAST_FREQUENTLY_USED",
        LeastRecentlyUsed = "LEAST_RECENTLY_USED",
        Failover = "FAILOVER",
        Busyover = "BUSYOVER",
        ShardingBroadcast = "SHARDING_BROADCAST",
    }
);

named_enum!(
    /// What an executor does with a trigger while the job still runs.
    BlockStrategy {
        SerialExecution = "SERIAL_EXECUTION",
        DiscardLater = "DISCARD_LATER",
        CoverEarly = "COVER_EARLY",
    }
);

named_enum!(
    /// What the leader does with a fire it finds more than the threshold late.
    Misfire {
        DoNothing = "DO_NOTHING",
        FireOnceNow = "FIRE_ONCE_NOW",
    }
);

named_enum!(
    /// What a job runs (XXL-JOB's `glue_type`): a handler of the executor
    /// (`BEAN`), or a script kept with the job. `GLUE_GROOVY` is Java code
    /// that only XXL-JOB's own executor runs: its jobs belong in a group of
    /// `xxl-job-core` executors behind the XXL-JOB gateway.
    #[derive(Default)]
    GlueType {
        #[default]
        Bean = "BEAN",
        Shell = "GLUE_SHELL",
        Python = "GLUE_PYTHON",
        NodeJs = "GLUE_NODEJS",
        PowerShell = "GLUE_POWERSHELL",
        Php = "GLUE_PHP",
        Groovy = "GLUE_GROOVY",
    }
);

impl GlueType {
    /// The interpreter a script runs with, for a script type (`groovy`
    /// for `GLUE_GROOVY`, which runs inside XXL-JOB's executor).
    pub fn interpreter(self) -> Option<&'static str> {
        match self {
            GlueType::Bean => None,
            GlueType::Shell => Some("sh"),
            GlueType::Python => Some("python3"),
            GlueType::NodeJs => Some("node"),
            GlueType::PowerShell => Some("pwsh"),
            GlueType::Php => Some("php"),
            GlueType::Groovy => Some("groovy"),
        }
    }

    /// The handler name executors register a script type under:
    /// `script:<interpreter>`.
    pub fn handler(self) -> Option<String> {
        self.interpreter().map(|i| format!("script:{i}"))
    }

    /// Whether a rondo executor can run it (`GLUE_GROOVY` runs only in
    /// XXL-JOB's own executor, reached through the gateway).
    pub fn runs_on_rondo_executors(self) -> bool {
        self != GlueType::Groovy
    }

    /// The script types a rondo executor runs, by interpreter name (`sh`,
    /// `python3`, …).
    pub fn by_interpreter(name: &str) -> Option<GlueType> {
        Self::NAMES
            .iter()
            .filter_map(|n| GlueType::parse("glue_type", n).ok())
            .filter(|g| g.runs_on_rondo_executors())
            .find(|g| g.interpreter() == Some(name))
    }
}

/// The largest script kept with a job (XXL-JOB's `glue_source` is a
/// MEDIUMTEXT; a script this size belongs in the executor's image).
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;

impl Misfire {
    pub fn rule(self) -> MisfireRule {
        match self {
            Misfire::DoNothing => MisfireRule::DoNothing,
            Misfire::FireOnceNow => MisfireRule::FireOnceNow,
        }
    }
}

/// An executor group (XXL-JOB's `xxl_job_group`): the executors that share an
/// app name. Their addresses come from the registry, except for XXL-JOB
/// executors fed by hand (XXL-JOB's `address_type = 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Group {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub app: String,
    pub title: String,
    pub updated_ms: i64,
    /// Addresses of XXL-JOB executors (`xxl-job-core`) that serve this group
    /// without registering (XXL-JOB's manual address list): the XXL-JOB
    /// gateway treats each as registered and probes it with `/beat`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xxl_addresses: Vec<String>,
}

/// The most addresses a group's `xxl_addresses` holds.
pub const MAX_XXL_ADDRESSES: usize = 64;

/// A group as the API receives it.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Required to create; unchangeable (an update may repeat it).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub app: Option<String>,
    /// Defaults to `app`.
    #[schema(max_length = 255)]
    pub title: Option<String>,
    /// XXL-JOB executor addresses fed by hand (`http://host:port/`, at
    /// most 64); default none. Executors that register need none of this.
    pub xxl_addresses: Option<Vec<String>>,
}

impl GroupSpec {
    pub fn validate(self, now_ms: i64) -> Result<Group, Error> {
        let app = self
            .app
            .ok_or_else(|| Error::invalid("app", "is required"))?;
        validate_app_name("app", &app)?;
        let title = self.title.unwrap_or_else(|| app.clone());
        check_len("title", &title, MAX_TEXT)?;
        let xxl_addresses = validate_xxl_addresses(self.xxl_addresses.unwrap_or_default())?;
        Ok(Group {
            app,
            title,
            updated_ms: now_ms,
            xxl_addresses,
        })
    }

    /// `self` as a change of `old`: a field left out keeps its value.
    pub fn validate_update(self, old: &Group, now_ms: i64) -> Result<Group, Error> {
        GroupSpec {
            app: Some(old.app.clone()),
            title: self.title.or_else(|| Some(old.title.clone())),
            xxl_addresses: self
                .xxl_addresses
                .or_else(|| Some(old.xxl_addresses.clone())),
        }
        .validate(now_ms)
    }
}

/// Checks a group's XXL-JOB executor addresses and writes each as kept
/// (ending in `/`), without duplicates.
fn validate_xxl_addresses(list: Vec<String>) -> Result<Vec<String>, Error> {
    if list.len() > MAX_XXL_ADDRESSES {
        return Err(Error::invalid(
            "xxl_addresses",
            format!("at most {MAX_XXL_ADDRESSES} addresses"),
        ));
    }
    let mut kept: Vec<String> = Vec::with_capacity(list.len());
    for (i, address) in list.iter().enumerate() {
        let address = normalize_xxl_address(address)
            .map_err(|why| Error::invalid(&format!("xxl_addresses[{i}]"), why))?;
        if !kept.contains(&address) {
            kept.push(address);
        }
    }
    Ok(kept)
}

/// An XXL-JOB executor's address as the gateway keeps it:
/// `http(s)://host[:port][/path]/`, without user, query or fragment.
pub fn normalize_xxl_address(address: &str) -> Result<String, String> {
    let text = address.trim();
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or("must be an http:// or https:// address")?;
    if text.len() > 255 {
        return Err("must be at most 255 characters".into());
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err("has no host".into());
    }
    if let Some(bad) = rest
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '@' | '?' | '#' | '\\'))
    {
        return Err(format!("must not contain {bad:?}"));
    }
    let mut kept = text.to_owned();
    if !kept.ends_with('/') {
        kept.push('/');
    }
    Ok(kept)
}

/// Checks an app name: it becomes part of queue names and Redis keys.
pub fn validate_app_name(field: &str, app: &str) -> Result<(), Error> {
    if app.is_empty() || app.len() > MAX_APP_NAME {
        return Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_APP_NAME} characters"),
        ));
    }
    if !app
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    {
        return Err(Error::invalid(
            field,
            "may contain only ASCII letters, digits, '-' and '_'",
        ));
    }
    Ok(())
}

fn check_len(field: &str, value: &str, max: usize) -> Result<(), Error> {
    if value.len() > max {
        return Err(Error::invalid(
            field,
            format!("is {} bytes, the limit is {max}", value.len()),
        ));
    }
    Ok(())
}

/// A job as stored in Redis and MySQL (XXL-JOB's `xxl_job_info`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Job {
    pub id: u64,
    pub group: String,
    pub description: String,
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
    pub enabled: bool,
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
            glue_type: GlueType::default(),
            glue_source: String::new(),
            glue_remark: String::new(),
            glue_version: 0,
            glue_updated_ms: 0,
            import_ref: String::new(),
            enabled: true,
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

    /// The job as an API spec, the base an update is applied on.
    pub fn to_spec(&self) -> JobSpec {
        JobSpec {
            group: Some(self.group.clone()),
            description: Some(self.description.clone()),
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
            glue_type: Some(self.glue_type.as_str().to_owned()),
            glue_source: Some(self.glue_source.clone()),
            glue_remark: Some(self.glue_remark.clone()),
            import_ref: Some(self.import_ref.clone()),
            enabled: Some(self.enabled),
        }
    }
}

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
    /// Where an importer took the job from (`rondo import` sets it).
    #[schema(max_length = 255)]
    pub import_ref: Option<String>,
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
            glue_type: patch.glue_type.or(self.glue_type),
            glue_source: patch.glue_source.or(self.glue_source),
            glue_remark: patch.glue_remark.or(self.glue_remark),
            import_ref: patch.import_ref.or(self.import_ref),
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
        let import_ref = self.import_ref.unwrap_or_default();
        check_len("import_ref", &import_ref, MAX_TEXT)?;
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
        let alarm_email = self.alarm_email.unwrap_or_default();
        check_len("alarm_email", &alarm_email, MAX_TEXT)?;
        validate_emails(&alarm_email)?;
        let alarm_webhook = self.alarm_webhook.unwrap_or_default();
        validate_webhook(&alarm_webhook)?;
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
            glue_version: u32::from(glue_type != GlueType::Bean),
            glue_updated_ms: if glue_type == GlueType::Bean {
                0
            } else {
                now_ms
            },
            glue_type,
            glue_source,
            glue_remark,
            import_ref,
            enabled: self.enabled.unwrap_or(true),
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

/// The zone of jobs that name none, before the API fills in the cluster's.
fn utc() -> String {
    utc_borrowed().into_owned()
}

fn utc_borrowed() -> std::borrow::Cow<'static, str> {
    std::borrow::Cow::Borrowed("UTC")
}

/// The longest timeout (a year).
pub const MAX_TIMEOUT_S: u32 = 365 * 24 * 3600;
/// The most retries of one fire.
pub const MAX_RETRIES: u32 = 1000;
/// The most child jobs a job may name.
pub const MAX_CHILD_JOBS: usize = 64;
/// The longest retry backoff (one day).
pub const MAX_RETRY_BACKOFF_S: u32 = 24 * 3600;
/// The longest alarm webhook URL.
pub const MAX_URL: usize = 1024;

/// Checks a comma-separated list of e-mail addresses (empty = no mail).
fn validate_emails(list: &str) -> Result<(), Error> {
    for addr in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let valid = addr.split_once('@').is_some_and(|(user, host)| {
            !user.is_empty() && host.contains('.') && !addr.contains(char::is_whitespace)
        });
        if !valid {
            return Err(Error::invalid(
                "alarm_email",
                format!("{addr:?} is not an e-mail address"),
            ));
        }
    }
    Ok(())
}

/// Checks the alarm webhook: empty, or an http(s) URL.
fn validate_webhook(url: &str) -> Result<(), Error> {
    if url.is_empty() {
        return Ok(());
    }
    check_len("alarm_webhook", url, MAX_URL)?;
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/') || r.contains(char::is_whitespace)) {
        return Err(Error::invalid(
            "alarm_webhook",
            "must be an http:// or https:// URL",
        ));
    }
    Ok(())
}

/// Parses a `glue_type` (empty: `BEAN`).
fn parse_glue_type(text: Option<&str>) -> Result<GlueType, Error> {
    match text {
        None | Some("") => Ok(GlueType::Bean),
        Some(other) => GlueType::parse("glue_type", other),
    }
}

impl Job {
    /// The script version of `self` saved over `old` (the job it replaces,
    /// `None` when new): a changed type or source is a new version (with
    /// this save's remark and time), anything else keeps the old one.
    pub fn versioned_after(mut self, old: Option<&Job>, now_ms: i64) -> Job {
        let Some(old) = old else {
            return self;
        };
        let changed = self.glue_type != GlueType::Bean
            && (self.glue_type != old.glue_type || self.glue_source != old.glue_source);
        if changed {
            self.glue_version = old.glue_version + 1;
            self.glue_updated_ms = now_ms;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> JobSpec {
        JobSpec {
            group: Some("demo".into()),
            schedule_type: Some("CRON".into()),
            schedule_conf: Some("* * * * * ?".into()),
            handler: Some("demo".into()),
            ..JobSpec::default()
        }
    }

    /// The claim's view of a stored job reads what the whole job reads,
    /// and still reads a job whose other fields this build does not know.
    #[test]
    fn the_claims_view_of_a_job_agrees_with_the_job() {
        let jobs = [
            spec().validate(1, 10, None).unwrap(),
            JobSpec {
                schedule_type: Some("FIX_DELAY".into()),
                schedule_conf: Some("30".into()),
                zone: Some("Asia/Shanghai".into()),
                misfire: Some("FIRE_ONCE_NOW".into()),
                misfire_threshold_ms: Some(60_000),
                enabled: Some(false),
                params: Some("a \"quoted\" \\ param".into()),
                ..spec()
            }
            .validate(2, 10, None)
            .unwrap(),
        ];
        let new_year = 1_767_225_600_000;
        for job in jobs {
            let json = serde_json::to_string(&job).unwrap();
            let view: JobSchedule = serde_json::from_str(&json).unwrap();
            assert_eq!(view.enabled, job.enabled);
            assert_eq!(view.schedule_type, job.schedule_type);
            assert_eq!(view.schedule_conf, job.schedule_conf);
            assert_eq!(view.zone, job.zone);
            assert_eq!(view.misfire, job.misfire);
            assert_eq!(view.misfire_threshold(), job.misfire_threshold());
            let next = |s: Schedule| s.next_after(new_year);
            assert_eq!(
                next(view.schedule().unwrap()),
                next(job.schedule().unwrap())
            );
        }
        // Stored before zones existed: UTC, both ways.
        let mut old: serde_json::Value =
            serde_json::to_value(spec().validate(3, 10, None).unwrap()).unwrap();
        old.as_object_mut().unwrap().remove("zone");
        let text = old.to_string();
        let view: JobSchedule = serde_json::from_str(&text).unwrap();
        let job: Job = serde_json::from_value(old.clone()).unwrap();
        assert_eq!((view.zone.as_ref(), job.zone.as_str()), ("UTC", "UTC"));
        // A routing this build does not know: not a job here, still claimed.
        old["routing"] = "SOMETHING_NEWER".into();
        assert!(serde_json::from_value::<Job>(old.clone()).is_err());
        assert!(serde_json::from_str::<JobSchedule>(&old.to_string()).is_ok());
    }

    #[test]
    fn defaults_follow_xxl_job() {
        let job = spec().validate(1, 10, None).unwrap();
        assert_eq!(job.misfire, Misfire::DoNothing);
        assert_eq!(job.routing, Routing::First);
        assert_eq!(job.block, BlockStrategy::SerialExecution);
        assert!(job.enabled);
        assert_eq!((job.created_ms, job.updated_ms), (10, 10));
    }

    fn field_of(spec: JobSpec) -> String {
        spec.validate(1, 0, None).unwrap_err().field.unwrap()
    }

    #[test]
    fn each_bad_field_is_named() {
        assert_eq!(
            field_of(JobSpec {
                group: None,
                ..spec()
            }),
            "group"
        );
        assert_eq!(
            field_of(JobSpec {
                group: Some("a b".into()),
                ..spec()
            }),
            "group"
        );
        assert_eq!(
            field_of(JobSpec {
                schedule_conf: Some("* * *".into()),
                ..spec()
            }),
            "schedule_conf"
        );
        assert_eq!(
            field_of(JobSpec {
                schedule_type: Some("X".into()),
                ..spec()
            }),
            "schedule_type"
        );
        assert_eq!(
            field_of(JobSpec {
                routing: Some("NEAREST".into()),
                ..spec()
            }),
            "routing"
        );
        assert_eq!(
            field_of(JobSpec {
                block: Some("QUEUE".into()),
                ..spec()
            }),
            "block"
        );
        assert_eq!(
            field_of(JobSpec {
                misfire: Some("LATER".into()),
                ..spec()
            }),
            "misfire"
        );
        assert_eq!(
            field_of(JobSpec {
                handler: Some(" ".into()),
                ..spec()
            }),
            "handler"
        );
        assert_eq!(
            field_of(JobSpec {
                handler: None,
                ..spec()
            }),
            "handler"
        );
        assert_eq!(
            field_of(JobSpec {
                params: Some("x".repeat(MAX_PARAMS_BYTES + 1)),
                ..spec()
            }),
            "params"
        );
        assert_eq!(
            field_of(JobSpec {
                child_jobs: Some(vec![1]),
                ..spec()
            }),
            "child_jobs"
        );
    }

    #[test]
    fn params_at_the_limit_are_accepted() {
        assert!(
            JobSpec {
                params: Some("x".repeat(MAX_PARAMS_BYTES)),
                ..spec()
            }
            .validate(1, 0, None)
            .is_ok()
        );
    }

    #[test]
    fn overlay_keeps_unset_fields() {
        let job = spec().validate(1, 0, None).unwrap();
        let patched = job
            .to_spec()
            .overlay(JobSpec {
                params: Some("p".into()),
                ..JobSpec::default()
            })
            .validate(1, 5, Some(job.created_ms))
            .unwrap();
        assert_eq!(patched.params, "p");
        assert_eq!(patched.schedule_conf, job.schedule_conf);
        assert_eq!(patched.updated_ms, 5);
    }

    #[test]
    fn enum_names_round_trip_through_json() {
        for name in Routing::NAMES {
            let r = Routing::parse("routing", name).unwrap();
            assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{name}\""));
        }
    }

    #[test]
    fn a_script_job_runs_its_script_handler_and_versions_its_changes() {
        let script = |source: &str| JobSpec {
            handler: None,
            glue_type: Some("GLUE_PYTHON".into()),
            glue_source: Some(source.into()),
            glue_remark: Some("first".into()),
            ..spec()
        };
        let v1 = script("print(1)").validate(1, 10, None).unwrap();
        assert_eq!(
            (v1.handler.as_str(), v1.glue_version, v1.glue_updated_ms),
            ("script:python3", 1, 10)
        );
        // The same script saved again: the same version, and its remark.
        let same = JobSpec {
            glue_remark: Some("other".into()),
            ..script("print(1)")
        }
        .validate(1, 20, Some(10))
        .unwrap()
        .versioned_after(Some(&v1), 20);
        assert_eq!((same.glue_version, same.glue_remark.as_str()), (1, "first"));
        let v2 = JobSpec {
            glue_remark: Some("second".into()),
            ..script("print(2)")
        }
        .validate(1, 30, Some(10))
        .unwrap()
        .versioned_after(Some(&v1), 30);
        assert_eq!(
            (v2.glue_version, v2.glue_updated_ms, v2.glue_remark.as_str()),
            (2, 30, "second")
        );
        let bean = spec().validate(1, 0, None).unwrap();
        assert_eq!((bean.glue_type, bean.glue_version), (GlueType::Bean, 0));
    }

    #[test]
    fn a_groups_xxl_addresses_are_checked_and_kept_on_update() {
        let spec = |list: &[&str]| GroupSpec {
            app: Some("billing".into()),
            xxl_addresses: Some(list.iter().map(|s| (*s).to_owned()).collect()),
            ..GroupSpec::default()
        };
        let g = spec(&[
            "http://10.0.0.5:9999",
            "http://10.0.0.5:9999/",
            "https://h/ctx",
        ])
        .validate(1)
        .unwrap();
        assert_eq!(g.xxl_addresses, ["http://10.0.0.5:9999/", "https://h/ctx/"]);
        for (bad, why) in [
            ("10.0.0.5:9999", "http"),
            ("http://", "host"),
            ("http://u:p@h/", "'@'"),
            ("http://h/?x", "'?'"),
        ] {
            let e = spec(&["http://ok/", bad]).validate(1).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("xxl_addresses[1]"), "{bad}");
            assert!(e.message.contains(why), "{bad}: {}", e.message);
        }
        let many: Vec<String> = (0..=MAX_XXL_ADDRESSES)
            .map(|i| format!("http://h{i}/"))
            .collect();
        let many: Vec<&str> = many.iter().map(String::as_str).collect();
        assert!(spec(&many).validate(1).is_err());
        // An update that leaves them out keeps them, and the title too.
        let title_only = GroupSpec {
            title: Some("Billing".into()),
            ..GroupSpec::default()
        };
        let updated = title_only.validate_update(&g, 2).unwrap();
        assert_eq!(updated.xxl_addresses, g.xxl_addresses);
        assert_eq!(updated.title, "Billing");
        let cleared = spec(&[]).validate_update(&updated, 3).unwrap();
        assert!(cleared.xxl_addresses.is_empty());
        assert_eq!(cleared.title, "Billing");
    }

    #[test]
    fn script_fields_are_checked_naming_the_field() {
        let field = |spec: JobSpec| spec.validate(1, 0, None).unwrap_err().field.unwrap();
        let glue = |ty: &str, source: &str| JobSpec {
            handler: None,
            glue_type: Some(ty.into()),
            glue_source: Some(source.into()),
            ..spec()
        };
        assert_eq!(field(glue("GLUE_PYTHON2", "x")), "glue_type");
        assert_eq!(field(glue("GLUE_SHELL", " ")), "glue_source");
        let groovy = glue("GLUE_GROOVY", "class X {}")
            .validate(1, 0, None)
            .unwrap();
        assert_eq!(
            groovy.handler, "script:groovy",
            "run by XXL-JOB's executors"
        );
        assert!(!groovy.glue_type.runs_on_rondo_executors());
        assert_eq!(
            GlueType::by_interpreter("groovy"),
            None,
            "no rondo executor runs it"
        );
        assert_eq!(
            field(glue("GLUE_SHELL", &"x".repeat(MAX_SCRIPT_BYTES + 1))),
            "glue_source"
        );
        assert_eq!(
            field(JobSpec {
                handler: Some("demo".into()),
                ..glue("GLUE_SHELL", "x")
            }),
            "handler"
        );
        assert_eq!(
            field(JobSpec {
                handler: Some("script:sh".into()),
                ..spec()
            }),
            "handler"
        );
        assert_eq!(GlueType::by_interpreter("node"), Some(GlueType::NodeJs));
        assert_eq!(GlueType::by_interpreter("ruby"), None);
    }
}
