//! `rondo job …` and `rondo schedule …`: jobs, and schedules not saved yet.

use clap::{Args, Subcommand};
use reqwest::Method as M;
use rondo_model::model::ScheduleType;
use serde_json::{Map, Value, json};

use crate::call::{Call, query_string};

#[derive(Subcommand)]
pub(crate) enum JobCmd {
    Create(JobArgs),
    List {
        #[arg(long)]
        group: Option<String>,
        /// A job id, or text found in the description or the handler.
        #[arg(long = "search")]
        q: Option<String>,
        /// Only running (true) or stopped (false) jobs.
        #[arg(long)]
        enabled: Option<bool>,
        /// Only jobs of this schedule type (CRON, FIX_RATE, FIX_DELAY, NONE).
        #[arg(long)]
        schedule_type: Option<String>,
        /// Only jobs of this owner (exactly).
        #[arg(long)]
        owner: Option<String>,
        /// id (default), description or updated; a leading - reverses it.
        #[arg(long, allow_hyphen_values = true)]
        sort: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long, default_value_t = 0)]
        offset: usize,
    },
    /// Who changed the job and what, field by field, newest first.
    History {
        id: String,
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// Restores a deleted job from its last state, stopped (admins).
    Restore {
        id: String,
    },
    /// Kills every run of the job without a result (running, or waiting
    /// its turn).
    Kill {
        id: String,
    },
    Get {
        id: String,
    },
    /// Changes the given fields only.
    Update {
        id: String,
        #[command(flatten)]
        fields: JobArgs,
    },
    Delete {
        id: String,
    },
    Start {
        id: String,
        /// The first fire (ms since the epoch): a FIX_RATE job's exactly,
        /// a cron job's at its first instant from then.
        #[arg(long)]
        from_ms: Option<i64>,
    },
    Stop {
        id: String,
    },
    /// Fires the job once, now.
    Trigger {
        id: String,
        #[arg(long)]
        params: Option<String>,
        /// Run on this executor of the group only (repeat for more; the
        /// job's routing picks among them).
        #[arg(long = "executor")]
        executors: Vec<String>,
    },
    /// The latest trigger logs of the job.
    Logs {
        id: String,
        #[arg(long, default_value_t = 20)]
        limit: usize,
    },
    /// The job's next fires, in UTC and in its zone.
    Next {
        id: String,
        #[arg(long, default_value_t = 5)]
        count: u32,
    },
    /// The fires the job missed (misfires, late claims, lost nodes).
    Misfires {
        id: String,
    },
    /// The saved versions of a script job's script, newest first.
    Scripts {
        id: String,
    },
    /// Makes an old version of the script the current one (a new version).
    RestoreScript {
        id: String,
        version: u32,
        #[arg(long)]
        remark: Option<String>,
    },
}

#[derive(Args)]
pub(crate) struct JobArgs {
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    handler: Option<String>,
    /// Quartz cron expression (schedule_type CRON).
    #[arg(long, conflicts_with_all = ["fix_rate", "fix_delay", "no_schedule"])]
    cron: Option<String>,
    /// Fixed rate: seconds ("5") or milliseconds ("250ms") (schedule_type FIX_RATE).
    #[arg(long, conflicts_with_all = ["fix_delay", "no_schedule"])]
    fix_rate: Option<String>,
    /// Fixed delay after each run's result: seconds ("5") or milliseconds
    /// ("250ms") (schedule_type FIX_DELAY).
    #[arg(long, conflicts_with = "no_schedule")]
    fix_delay: Option<String>,
    /// IANA time zone the cron is read in ("Asia/Shanghai"); default: the
    /// cluster's.
    #[arg(long)]
    zone: Option<String>,
    /// No schedule: fired only by `trigger` or as a child job.
    #[arg(long = "no-schedule")]
    no_schedule: bool,
    #[arg(long)]
    params: Option<String>,
    #[arg(long)]
    description: Option<String>,
    /// Who the job belongs to.
    #[arg(long)]
    owner: Option<String>,
    /// A named secret, `NAME=VALUE`, or `NAME` to take the value of the
    /// environment variable NAME (kept off the command line); repeat for
    /// more. Given, they replace the job's secrets; `NAME=***` keeps a
    /// stored value.
    #[arg(long = "secret")]
    secrets: Vec<String>,
    /// FIRST, ROUND, …
    #[arg(long)]
    routing: Option<String>,
    /// SERIAL_EXECUTION, DISCARD_LATER, COVER_EARLY
    #[arg(long)]
    block: Option<String>,
    /// DO_NOTHING, FIRE_ONCE_NOW
    #[arg(long)]
    misfire: Option<String>,
    /// A fire later than this many ms is a misfire (default: the cluster's).
    #[arg(long)]
    misfire_threshold_ms: Option<u64>,
    /// Seconds, 0 = none.
    #[arg(long)]
    timeout: Option<u32>,
    #[arg(long)]
    retries: Option<u32>,
    /// Seconds between a failure and its retry (doubling per retry).
    #[arg(long)]
    retry_backoff: Option<u32>,
    /// A child job triggered after a success (repeat for more; replaces
    /// the list on update).
    #[arg(long = "child-job")]
    child_jobs: Vec<u64>,
    /// No child jobs (clears the list on update).
    #[arg(long, conflicts_with = "child_jobs")]
    no_child_jobs: bool,
    /// Addresses e-mailed when a trigger fails (comma-separated; "" clears).
    #[arg(long)]
    alarm_email: Option<String>,
    /// URL POSTed when a trigger fails ("" clears).
    #[arg(long)]
    alarm_webhook: Option<String>,
    /// An alarm channel a failure goes to, by name (repeat for more;
    /// replaces the list on update; `rondo channel list` shows them).
    #[arg(long = "alarm-channel")]
    alarm_channels: Vec<String>,
    /// No alarm channels (clears the list on update).
    #[arg(long, conflicts_with = "alarm_channels")]
    no_alarm_channels: bool,
    /// BEAN (run --handler) or a script type: GLUE_SHELL, GLUE_PYTHON,
    /// GLUE_NODEJS, GLUE_POWERSHELL, GLUE_PHP.
    #[arg(long)]
    glue_type: Option<String>,
    /// The script's source.
    #[arg(long, conflicts_with = "glue_file")]
    glue_source: Option<String>,
    /// The script's source, read from a file.
    #[arg(long)]
    glue_file: Option<std::path::PathBuf>,
    /// A remark kept with this version of the script.
    #[arg(long)]
    glue_remark: Option<String>,
    /// When this version of the script was written (ms since 1970), for
    /// an import of older versions; admins only.
    #[arg(long)]
    glue_saved_ms: Option<i64>,
    /// Where the job was imported from (`rondo import` sets it).
    #[arg(long)]
    import_ref: Option<String>,
    /// Create the job stopped.
    #[arg(long)]
    stopped: bool,
}

impl JobArgs {
    pub(crate) fn to_json(&self) -> Value {
        let mut m = Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                m.insert(k.to_owned(), v);
            }
        };
        put("group", self.group.clone().map(Value::from));
        put("handler", self.handler.clone().map(Value::from));
        if let Some(expr) = &self.cron {
            put("schedule_type", Some(ScheduleType::Cron.as_str().into()));
            put("schedule_conf", Some(expr.clone().into()));
        } else if let Some(rate) = &self.fix_rate {
            put("schedule_type", Some(ScheduleType::FixRate.as_str().into()));
            put("schedule_conf", Some(rate.clone().into()));
        } else if let Some(delay) = &self.fix_delay {
            put(
                "schedule_type",
                Some(ScheduleType::FixDelay.as_str().into()),
            );
            put("schedule_conf", Some(delay.clone().into()));
        } else if self.no_schedule {
            put("schedule_type", Some(ScheduleType::None.as_str().into()));
        }
        put("params", self.params.clone().map(Value::from));
        put("description", self.description.clone().map(Value::from));
        put("owner", self.owner.clone().map(Value::from));
        if !self.secrets.is_empty() {
            let map: serde_json::Map<String, Value> = self
                .secrets
                .iter()
                .map(|s| match s.split_once('=') {
                    Some((name, value)) => (name.to_owned(), Value::from(value)),
                    None => (s.clone(), Value::from(std::env::var(s).unwrap_or_default())),
                })
                .collect();
            put("secrets", Some(Value::Object(map)));
        }
        put("routing", self.routing.clone().map(Value::from));
        put("block", self.block.clone().map(Value::from));
        put("zone", self.zone.clone().map(Value::from));
        put("misfire", self.misfire.clone().map(Value::from));
        put(
            "misfire_threshold_ms",
            self.misfire_threshold_ms.map(Value::from),
        );
        put("timeout_s", self.timeout.map(Value::from));
        put("retries", self.retries.map(Value::from));
        put("retry_backoff_s", self.retry_backoff.map(Value::from));
        if !self.child_jobs.is_empty() || self.no_child_jobs {
            put("child_jobs", Some(json!(self.child_jobs)));
        }
        put("alarm_email", self.alarm_email.clone().map(Value::from));
        put("alarm_webhook", self.alarm_webhook.clone().map(Value::from));
        if !self.alarm_channels.is_empty() || self.no_alarm_channels {
            put("alarm_channels", Some(json!(self.alarm_channels)));
        }
        put("glue_type", self.glue_type.clone().map(Value::from));
        put("glue_source", self.glue_source.clone().map(Value::from));
        if let Some(path) = &self.glue_file {
            // Read at parse time would hide the path from the error; an
            // unreadable file becomes an empty script the API refuses.
            let source = std::fs::read_to_string(path).unwrap_or_default();
            put("glue_source", Some(source.into()));
        }
        put("glue_remark", self.glue_remark.clone().map(Value::from));
        put("glue_saved_ms", self.glue_saved_ms.map(Value::from));
        put("import_ref", self.import_ref.clone().map(Value::from));
        if self.stopped {
            put("enabled", Some(false.into()));
        }
        Value::Object(m)
    }
}

#[derive(Subcommand)]
pub(crate) enum ScheduleCmd {
    /// The next fires of a schedule, in UTC and in its zone (or the error
    /// naming what is wrong).
    Preview {
        /// Quartz cron expression.
        #[arg(long, conflicts_with_all = ["fix_rate", "fix_delay"])]
        cron: Option<String>,
        /// Fixed rate: seconds ("5") or milliseconds ("250ms").
        #[arg(long, conflicts_with = "fix_delay")]
        fix_rate: Option<String>,
        /// Fixed delay: seconds or milliseconds.
        #[arg(long)]
        fix_delay: Option<String>,
        /// IANA zone (default: the cluster's).
        #[arg(long)]
        zone: Option<String>,
        #[arg(long, default_value_t = 5)]
        count: u32,
    },
}

/// The call of a `job` command.
pub(crate) fn request(cmd: &JobCmd) -> Call {
    match cmd {
        JobCmd::Create(args) => (M::POST, "/api/v1/jobs".into(), Some(args.to_json())),
        JobCmd::List {
            group,
            q,
            enabled,
            schedule_type,
            owner,
            sort,
            limit,
            offset,
        } => {
            let query = query_string(&[
                ("limit", Some(limit.to_string())),
                ("offset", Some(offset.to_string())),
                ("group", group.clone()),
                ("q", q.clone()),
                ("enabled", enabled.map(|e| e.to_string())),
                ("schedule_type", schedule_type.clone()),
                ("owner", owner.clone()),
                ("sort", sort.clone()),
            ]);
            (M::GET, format!("/api/v1/jobs?{query}"), None)
        }
        JobCmd::Get { id } => (M::GET, format!("/api/v1/jobs/{id}"), None),
        JobCmd::Kill { id } => (M::POST, format!("/api/v1/jobs/{id}/kill"), None),
        JobCmd::Restore { id } => (M::POST, format!("/api/v1/jobs/{id}/restore"), None),
        JobCmd::History { id, limit } => (
            M::GET,
            format!("/api/v1/jobs/{id}/history?limit={limit}"),
            None,
        ),
        JobCmd::Update { id, fields } => {
            (M::PUT, format!("/api/v1/jobs/{id}"), Some(fields.to_json()))
        }
        JobCmd::Delete { id } => (M::DELETE, format!("/api/v1/jobs/{id}"), None),
        JobCmd::Start { id, from_ms } => (
            M::POST,
            format!("/api/v1/jobs/{id}/start"),
            from_ms.map(|ms| json!({ "from_ms": ms })),
        ),
        JobCmd::Stop { id } => (M::POST, format!("/api/v1/jobs/{id}/stop"), None),
        JobCmd::Trigger {
            id,
            params,
            executors,
        } => {
            let mut body = json!({ "params": params });
            if !executors.is_empty() {
                body["executors"] = json!(executors);
            }
            (M::POST, format!("/api/v1/jobs/{id}/trigger"), Some(body))
        }
        JobCmd::Logs { id, limit } => (
            M::GET,
            format!("/api/v1/jobs/{id}/logs?limit={limit}"),
            None,
        ),
        JobCmd::Next { id, count } => (
            M::GET,
            format!("/api/v1/jobs/{id}/next?count={count}"),
            None,
        ),
        JobCmd::Misfires { id } => (M::GET, format!("/api/v1/jobs/{id}/misfires"), None),
        JobCmd::Scripts { id } => (M::GET, format!("/api/v1/jobs/{id}/scripts"), None),
        JobCmd::RestoreScript {
            id,
            version,
            remark,
        } => (
            M::POST,
            format!("/api/v1/jobs/{id}/scripts/{version}/restore"),
            Some(json!({ "remark": remark })),
        ),
    }
}

/// The call of a `schedule` command.
pub(crate) fn preview(cmd: &ScheduleCmd) -> anyhow::Result<Call> {
    let ScheduleCmd::Preview {
        cron,
        fix_rate,
        fix_delay,
        zone,
        count,
    } = cmd;
    let (ty, conf) = match (cron, fix_rate, fix_delay) {
        (Some(c), _, _) => (ScheduleType::Cron, c.clone()),
        (_, Some(r), _) => (ScheduleType::FixRate, r.clone()),
        (_, _, Some(d)) => (ScheduleType::FixDelay, d.clone()),
        _ => anyhow::bail!("name a schedule: --cron, --fix-rate or --fix-delay"),
    };
    let mut body = json!({ "schedule_type": ty.as_str(), "schedule_conf": conf, "count": count });
    if let Some(zone) = zone {
        body["zone"] = zone.clone().into();
    }
    Ok((M::POST, "/api/v1/schedules/preview".into(), Some(body)))
}
