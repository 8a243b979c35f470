//! `rondo`: the command-line client of the admin HTTP API.
//!
//! Every command is one HTTP call; the answer is printed as pretty JSON. An
//! API error prints its JSON body on stderr and exits 2 (bad input, no
//! credentials, a missing right) or 1.
//!
//! Credentials: `--token` / `RONDO_TOKEN`, else the token `rondo login`
//! saved for this API in the credentials file (`RONDO_CREDENTIALS`, default
//! `~/.config/rondo/credentials.json`, mode 0600).

// The CLI's job is to print.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use rondo_cli::{Api, credentials};
use rondo_model::model::ScheduleType;
use serde_json::{Map, Value, json};

#[derive(Parser)]
#[command(
    name = "rondo",
    version,
    about = "Command-line client of a rondo scheduler cluster"
)]
struct Cli {
    /// Base URL of any scheduler node's admin API.
    #[arg(long, env = "RONDO_API", default_value = "http://127.0.0.1:8600")]
    api: String,
    /// API token (`rondo_pat_…`); default: the one `rondo login` saved.
    #[arg(long, env = "RONDO_TOKEN", hide_env_values = true)]
    token: Option<String>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// Parsed once per process; boxing a variant would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Leader, term, live nodes, ring and due-set sizes.
    Cluster {
        #[command(subcommand)]
        action: Option<ClusterCmd>,
    },
    /// Executor groups.
    #[command(subcommand)]
    Group(GroupCmd),
    /// Jobs.
    #[command(subcommand)]
    Job(JobCmd),
    /// Schedules not saved yet.
    #[command(subcommand)]
    Schedule(ScheduleCmd),
    /// Brings jobs over from another scheduler: runs `rondo-import`
    /// (installed beside `rondo`) with these arguments; `rondo import
    /// --help` lists its commands.
    #[command(disable_help_flag = true)]
    Import {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// One trigger's log row and log lines.
    Log {
        trigger_id: String,
        /// Only the lines after this sequence number (to follow a run).
        #[arg(long)]
        after_seq: Option<i64>,
    },
    /// Executors the registry holds (live, offline, retired) with their
    /// heartbeat age, handlers and running jobs.
    Executors {
        #[arg(long)]
        group: Option<String>,
    },
    /// Trigger logs, newest first, by group, job, status and time.
    Logs {
        #[arg(long)]
        group: Option<String>,
        #[arg(long = "job")]
        job_id: Option<u64>,
        /// running, success or failure.
        #[arg(long)]
        status: Option<String>,
        #[arg(long)]
        from_ms: Option<i64>,
        #[arg(long)]
        until_ms: Option<i64>,
        /// The previous page's `next`.
        #[arg(long)]
        before: Option<String>,
        #[arg(long, default_value_t = 50)]
        limit: usize,
    },
    /// Kills a running trigger on its executor.
    Kill { trigger_id: String },
    /// Daily running / success / fail counts, recomputed first.
    Report {
        /// Days back, today included.
        #[arg(long, default_value_t = 7)]
        days: u32,
    },
    /// Drops the trigger logs older than the retention now.
    Retention {
        /// Days to keep (at least 7); default: the node's
        /// `persist.retention_days`.
        #[arg(long)]
        days: Option<u32>,
    },
    /// Signs in with a password (prompted, or `RONDO_PASSWORD`) and saves
    /// a new API token for this API in the credentials file.
    Login {
        #[arg(long)]
        user: String,
        /// Days the token lives (1 to 365).
        #[arg(long, default_value_t = 90)]
        days: u32,
    },
    /// Revokes the saved token and forgets it.
    Logout,
    /// Who the credentials are.
    Whoami,
    /// Changes your password (prompted, or `RONDO_PASSWORD` and
    /// `RONDO_NEW_PASSWORD`).
    Password,
    /// Users (admins).
    #[command(subcommand)]
    User(UserCmd),
    /// API tokens: yours (an admin: anyone's).
    #[command(subcommand)]
    Token(TokenCmd),
    /// The audit log (admins), newest first.
    Audit {
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        action: Option<String>,
        #[arg(long)]
        target: Option<String>,
        #[arg(long)]
        group: Option<String>,
        #[arg(long)]
        since_ms: Option<i64>,
        #[arg(long)]
        until_ms: Option<i64>,
        #[arg(long, default_value_t = 100)]
        limit: u32,
    },
}

#[derive(Subcommand)]
enum ScheduleCmd {
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

#[derive(Subcommand)]
enum ClusterCmd {
    /// Starts this node's lateness and claim-tick histograms afresh
    /// (admins).
    ResetStats,
}

#[derive(Subcommand)]
enum UserCmd {
    List,
    Get {
        username: String,
    },
    /// Creates a user; the password is prompted (or `RONDO_NEW_PASSWORD`).
    Create {
        username: String,
        /// admin, operator or viewer.
        #[arg(long, default_value = "viewer")]
        role: String,
        /// A group granted (repeat for more).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Shorthand for `--role admin`.
        #[arg(long)]
        admin: bool,
        /// Create the user disabled (it cannot sign in until enabled).
        #[arg(long)]
        disabled: bool,
    },
    /// Changes what is given.
    Update {
        username: String,
        #[arg(long)]
        role: Option<String>,
        /// The groups granted, replacing the old list (repeat).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Grant no group at all.
        #[arg(long, conflicts_with = "groups")]
        no_groups: bool,
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        #[arg(long)]
        disable: bool,
        /// Set a new password (prompted, or `RONDO_NEW_PASSWORD`).
        #[arg(long)]
        reset_password: bool,
    },
    Delete {
        username: String,
    },
}

#[derive(Subcommand)]
enum TokenCmd {
    List {
        /// An admin: one user's tokens.
        #[arg(long)]
        user: Option<String>,
    },
    /// A new token, printed once.
    Create {
        name: String,
        #[arg(long, default_value_t = 90)]
        days: u32,
        #[arg(long)]
        read_only: bool,
    },
    Revoke {
        id: u64,
    },
}

#[derive(Subcommand)]
enum GroupCmd {
    Create {
        app: String,
        #[arg(long)]
        title: Option<String>,
        /// An XXL-JOB executor fed by hand (`http://host:port/`), served by
        /// the XXL-JOB gateway as if it registered (repeat for more).
        #[arg(long = "xxl-address")]
        xxl_addresses: Vec<String>,
    },
    List,
    Get {
        app: String,
    },
    /// Changes the given fields only.
    Update {
        app: String,
        #[arg(long)]
        title: Option<String>,
        /// Replaces the XXL-JOB executors fed by hand (repeat for more).
        #[arg(long = "xxl-address")]
        xxl_addresses: Vec<String>,
        /// No XXL-JOB executors fed by hand.
        #[arg(long, conflicts_with = "xxl_addresses")]
        no_xxl_addresses: bool,
    },
    Delete {
        app: String,
    },
    /// Live executors of the group.
    Executors {
        app: String,
    },
}

#[derive(Subcommand)]
enum JobCmd {
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
        /// id (default), description or updated; a leading - reverses it.
        #[arg(long, allow_hyphen_values = true)]
        sort: Option<String>,
        #[arg(long, default_value_t = 100)]
        limit: usize,
        #[arg(long, default_value_t = 0)]
        offset: usize,
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
    },
    Stop {
        id: String,
    },
    /// Fires the job once, now.
    Trigger {
        id: String,
        #[arg(long)]
        params: Option<String>,
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
struct JobArgs {
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
    /// Where the job was imported from (`rondo import` sets it).
    #[arg(long)]
    import_ref: Option<String>,
    /// Create the job stopped.
    #[arg(long)]
    stopped: bool,
}

impl JobArgs {
    fn to_json(&self) -> Value {
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
        put("glue_type", self.glue_type.clone().map(Value::from));
        put("glue_source", self.glue_source.clone().map(Value::from));
        if let Some(path) = &self.glue_file {
            // Read at parse time would hide the path from the error; an
            // unreadable file becomes an empty script the API refuses.
            let source = std::fs::read_to_string(path).unwrap_or_default();
            put("glue_source", Some(source.into()));
        }
        put("glue_remark", self.glue_remark.clone().map(Value::from));
        put("import_ref", self.import_ref.clone().map(Value::from));
        if self.stopped {
            put("enabled", Some(false.into()));
        }
        Value::Object(m)
    }
}

/// The one HTTP call a plain command is. (`login`, `logout` and
/// `password` are conversations: see `credentials`.)
/// A password from the environment or the terminal: `(variable, what)`.
type Secret<'a> = &'a dyn Fn(&str, &str) -> anyhow::Result<String>;

fn request(
    cmd: &Command,
    secret: Secret<'_>,
) -> anyhow::Result<(reqwest::Method, String, Option<Value>)> {
    use reqwest::Method as M;
    Ok(match cmd {
        Command::Login { .. } | Command::Logout | Command::Password | Command::Import { .. } => {
            anyhow::bail!("not a single call")
        }
        Command::Whoami => (M::GET, "/api/v1/auth/me".into(), None),
        Command::User(u) => match u {
            UserCmd::List => (M::GET, "/api/v1/users".into(), None),
            UserCmd::Get { username } => (M::GET, format!("/api/v1/users/{username}"), None),
            UserCmd::Create {
                username,
                role,
                groups,
                admin,
                disabled,
            } => {
                let role = if *admin { "admin" } else { role.as_str() };
                let password = secret("RONDO_NEW_PASSWORD", "new user's password")?;
                let body = json!({
                    "username": username,
                    "password": password,
                    "role": role,
                    "groups": groups,
                    "enabled": !disabled,
                });
                (M::POST, "/api/v1/users".into(), Some(body))
            }
            UserCmd::Update {
                username,
                role,
                groups,
                no_groups,
                enable,
                disable,
                reset_password,
            } => {
                let mut m = Map::new();
                if let Some(role) = role {
                    m.insert("role".into(), role.clone().into());
                }
                if !groups.is_empty() || *no_groups {
                    m.insert("groups".into(), json!(groups));
                }
                if *enable || *disable {
                    m.insert("enabled".into(), (*enable).into());
                }
                if *reset_password {
                    let p = secret("RONDO_NEW_PASSWORD", "new password")?;
                    m.insert("password".into(), p.into());
                }
                (
                    M::PUT,
                    format!("/api/v1/users/{username}"),
                    Some(Value::Object(m)),
                )
            }
            UserCmd::Delete { username } => (M::DELETE, format!("/api/v1/users/{username}"), None),
        },
        Command::Token(t) => match t {
            TokenCmd::List { user } => {
                let q = user
                    .as_ref()
                    .map(|u| format!("?user={u}"))
                    .unwrap_or_default();
                (M::GET, format!("/api/v1/tokens{q}"), None)
            }
            TokenCmd::Create {
                name,
                days,
                read_only,
            } => (
                M::POST,
                "/api/v1/tokens".into(),
                Some(json!({ "name": name, "expires_in_days": days, "read_only": read_only })),
            ),
            TokenCmd::Revoke { id } => (M::DELETE, format!("/api/v1/tokens/{id}"), None),
        },
        Command::Audit {
            user,
            action,
            target,
            group,
            since_ms,
            until_ms,
            limit,
        } => {
            let mut q = vec![format!("limit={limit}")];
            let mut put = |k: &str, v: Option<String>| {
                if let Some(v) = v {
                    q.push(format!("{k}={}", credentials::query_escape(&v)));
                }
            };
            put("user", user.clone());
            put("action", action.clone());
            put("target", target.clone());
            put("group", group.clone());
            put("since_ms", since_ms.map(|v| v.to_string()));
            put("until_ms", until_ms.map(|v| v.to_string()));
            (M::GET, format!("/api/v1/audit?{}", q.join("&")), None)
        }
        Command::Cluster { action: None } => (M::GET, "/api/v1/cluster".into(), None),
        Command::Cluster {
            action: Some(ClusterCmd::ResetStats),
        } => (M::POST, "/api/v1/cluster/stats/reset".into(), None),
        Command::Log {
            trigger_id,
            after_seq,
        } => {
            let query = query_string(&[("after_seq", after_seq.map(|v| v.to_string()))]);
            let sep = if query.is_empty() { "" } else { "?" };
            (
                M::GET,
                format!("/api/v1/logs/{trigger_id}{sep}{query}"),
                None,
            )
        }
        Command::Executors { group } => {
            let query = query_string(&[("group", group.clone())]);
            let sep = if query.is_empty() { "" } else { "?" };
            (M::GET, format!("/api/v1/executors{sep}{query}"), None)
        }
        Command::Logs {
            group,
            job_id,
            status,
            from_ms,
            until_ms,
            before,
            limit,
        } => {
            let query = query_string(&[
                ("group", group.clone()),
                ("job_id", job_id.map(|v| v.to_string())),
                ("status", status.clone()),
                ("from_ms", from_ms.map(|v| v.to_string())),
                ("until_ms", until_ms.map(|v| v.to_string())),
                ("before", before.clone()),
                ("limit", Some(limit.to_string())),
            ]);
            (M::GET, format!("/api/v1/logs?{query}"), None)
        }
        Command::Kill { trigger_id } => (M::POST, format!("/api/v1/logs/{trigger_id}/kill"), None),
        Command::Report { days } => (M::GET, format!("/api/v1/reports?days={days}"), None),
        Command::Retention { days } => (
            M::POST,
            "/api/v1/maintenance/retention".into(),
            days.map(|days| json!({ "days": days })),
        ),
        Command::Group(g) => match g {
            GroupCmd::Create {
                app,
                title,
                xxl_addresses,
            } => (
                M::POST,
                "/api/v1/groups".into(),
                Some(json!({ "app": app, "title": title, "xxl_addresses": xxl_addresses })),
            ),
            GroupCmd::List => (M::GET, "/api/v1/groups".into(), None),
            GroupCmd::Get { app } => (M::GET, format!("/api/v1/groups/{app}"), None),
            GroupCmd::Update {
                app,
                title,
                xxl_addresses,
                no_xxl_addresses,
            } => {
                let mut change = Map::new();
                if let Some(title) = title {
                    change.insert("title".into(), json!(title));
                }
                if *no_xxl_addresses || !xxl_addresses.is_empty() {
                    change.insert("xxl_addresses".into(), json!(xxl_addresses));
                }
                (
                    M::PUT,
                    format!("/api/v1/groups/{app}"),
                    Some(Value::Object(change)),
                )
            }
            GroupCmd::Delete { app } => (M::DELETE, format!("/api/v1/groups/{app}"), None),
            GroupCmd::Executors { app } => {
                (M::GET, format!("/api/v1/groups/{app}/executors"), None)
            }
        },
        Command::Job(j) => match j {
            JobCmd::Create(args) => (M::POST, "/api/v1/jobs".into(), Some(args.to_json())),
            JobCmd::List {
                group,
                q,
                enabled,
                schedule_type,
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
                    ("sort", sort.clone()),
                ]);
                (M::GET, format!("/api/v1/jobs?{query}"), None)
            }
            JobCmd::Get { id } => (M::GET, format!("/api/v1/jobs/{id}"), None),
            JobCmd::Update { id, fields } => {
                (M::PUT, format!("/api/v1/jobs/{id}"), Some(fields.to_json()))
            }
            JobCmd::Delete { id } => (M::DELETE, format!("/api/v1/jobs/{id}"), None),
            JobCmd::Start { id } => (M::POST, format!("/api/v1/jobs/{id}/start"), None),
            JobCmd::Stop { id } => (M::POST, format!("/api/v1/jobs/{id}/stop"), None),
            JobCmd::Trigger { id, params } => (
                M::POST,
                format!("/api/v1/jobs/{id}/trigger"),
                Some(json!({ "params": params })),
            ),
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
        },
        Command::Schedule(ScheduleCmd::Preview {
            cron,
            fix_rate,
            fix_delay,
            zone,
            count,
        }) => {
            let (ty, conf) = match (cron, fix_rate, fix_delay) {
                (Some(c), _, _) => (ScheduleType::Cron, c.clone()),
                (_, Some(r), _) => (ScheduleType::FixRate, r.clone()),
                (_, _, Some(d)) => (ScheduleType::FixDelay, d.clone()),
                _ => anyhow::bail!("name a schedule: --cron, --fix-rate or --fix-delay"),
            };
            let mut body =
                json!({ "schedule_type": ty.as_str(), "schedule_conf": conf, "count": count });
            if let Some(zone) = zone {
                body["zone"] = zone.clone().into();
            }
            (M::POST, "/api/v1/schedules/preview".into(), Some(body))
        }
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut api = Api::new(&cli.api, cli.token.clone());
    let outcome = match &cli.command {
        Command::Login { user, days } => credentials::login(&mut api, user, *days).await,
        Command::Logout => credentials::logout(&mut api).await,
        Command::Password => credentials::change_password(&mut api).await,
        Command::Import { args } => import(&cli, args),
        other => match request(other, &credentials::secret) {
            Ok((method, path, body)) => api.call(method, &path, body).await,
            Err(e) => Err(e),
        },
    };
    rondo_cli::finish(outcome, &cli.api)
}

/// Runs `rondo-import` with `args`, the API and its token: the binary
/// beside this one, else the one on `PATH`. It replaces this process, so
/// its output and exit code are the command's.
fn import(cli: &Cli, args: &[String]) -> anyhow::Result<(u16, Value)> {
    use std::os::unix::process::CommandExt;
    let beside = std::env::current_exe()
        .ok()
        .map(|exe| exe.with_file_name("rondo-import"))
        .filter(|path| path.is_file());
    let program = beside.unwrap_or_else(|| "rondo-import".into());
    let mut command = std::process::Command::new(&program);
    command.arg("--api").arg(&cli.api).args(args);
    if let Some(token) = &cli.token {
        command.env("RONDO_TOKEN", token);
    }
    let error = command.exec();
    Err(anyhow::anyhow!("cannot run {}: {error}", program.display()))
}

/// `key=value&…` of the pairs that have a value, each URL-encoded.
fn query_string(pairs: &[(&str, Option<String>)]) -> String {
    let mut url = reqwest::Url::parse("http://rondo/").expect("a fixed URL");
    {
        let mut query = url.query_pairs_mut();
        for (key, value) in pairs {
            if let Some(v) = value {
                query.append_pair(key, v);
            }
        }
    }
    url.query().unwrap_or_default().to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every field of the API's job (the shared model) has a flag: a field
    /// added to `JobSpec` fails this test until the CLI can set it.
    #[test]
    fn job_flags_cover_every_field_of_the_shared_job_model() {
        let all = rondo_model::JobSpec {
            group: Some(String::new()),
            description: Some(String::new()),
            schedule_type: Some(String::new()),
            schedule_conf: Some(String::new()),
            zone: Some(String::new()),
            misfire: Some(String::new()),
            misfire_threshold_ms: Some(0),
            routing: Some(String::new()),
            block: Some(String::new()),
            handler: Some(String::new()),
            params: Some(String::new()),
            timeout_s: Some(0),
            retries: Some(0),
            child_jobs: Some(Vec::new()),
            retry_backoff_s: Some(0),
            alarm_email: Some(String::new()),
            alarm_webhook: Some(String::new()),
            glue_type: Some(String::new()),
            glue_source: Some(String::new()),
            glue_remark: Some(String::new()),
            import_ref: Some(String::new()),
            enabled: Some(false),
        };
        let model: Vec<String> = match serde_json::to_value(all).unwrap() {
            Value::Object(m) => m.keys().cloned().collect(),
            other => panic!("a job spec is an object: {other}"),
        };
        let cli = Cli::try_parse_from([
            "rondo",
            "job",
            "create",
            "--group",
            "g",
            "--handler",
            "h",
            "--cron",
            "0 * * * * ?",
            "--params",
            "p",
            "--description",
            "d",
            "--routing",
            "ROUND",
            "--block",
            "DISCARD_LATER",
            "--zone",
            "Asia/Shanghai",
            "--misfire",
            "FIRE_ONCE_NOW",
            "--misfire-threshold-ms",
            "60000",
            "--glue-type",
            "GLUE_PYTHON",
            "--glue-source",
            "print(1)",
            "--glue-remark",
            "r",
            "--import-ref",
            "xxl-job/db#1",
            "--timeout",
            "5",
            "--retries",
            "2",
            "--retry-backoff",
            "3",
            "--child-job",
            "7",
            "--child-job",
            "8",
            "--alarm-email",
            "a@b.c",
            "--alarm-webhook",
            "https://h/x",
            "--stopped",
        ])
        .expect("the flags parse");
        let Command::Job(JobCmd::Create(args)) = cli.command else {
            panic!("job create");
        };
        let body = args.to_json();
        let mut missing: Vec<&String> = model
            .iter()
            .filter(|k| body.get(k.as_str()).is_none())
            .collect();
        missing.sort();
        assert!(missing.is_empty(), "no CLI flag sets {missing:?}");
        assert_eq!(body["child_jobs"], json!([7, 8]));
        assert_eq!(body["retry_backoff_s"], 3);
        let cleared =
            Cli::try_parse_from(["rondo", "job", "update", "1", "--no-child-jobs"]).unwrap();
        let Command::Job(JobCmd::Update { fields, .. }) = cleared.command else {
            panic!("job update");
        };
        assert_eq!(fields.to_json(), json!({ "child_jobs": [] }));
    }

    /// One invocation of every command with every flag, and the calls of
    /// the conversations (`login`, `logout`, `password`).
    fn every_call() -> Vec<(String, String, Option<Value>)> {
        let argvs: &[&[&str]] = &[
            &["cluster"],
            &["cluster", "reset-stats"],
            &["group", "create", "g", "--title", "T"],
            &["group", "list"],
            &["group", "get", "g"],
            &["group", "update", "g", "--title", "T"],
            &[
                "group",
                "update",
                "g",
                "--xxl-address",
                "http://10.0.0.5:9999/",
            ],
            &["group", "delete", "g"],
            &["group", "executors", "g"],
            &[
                "job",
                "create",
                "--group",
                "g",
                "--handler",
                "h",
                "--cron",
                "0 * * * * ?",
                "--params",
                "p",
                "--description",
                "d",
                "--routing",
                "ROUND",
                "--block",
                "DISCARD_LATER",
                "--misfire",
                "FIRE_ONCE_NOW",
                "--zone",
                "Europe/Berlin",
                "--misfire-threshold-ms",
                "1000",
                "--glue-type",
                "GLUE_SHELL",
                "--glue-source",
                "echo hi",
                "--glue-remark",
                "first",
                "--import-ref",
                "x#1",
                "--timeout",
                "5",
                "--retries",
                "2",
                "--retry-backoff",
                "3",
                "--child-job",
                "7",
                "--alarm-email",
                "a@b.c",
                "--alarm-webhook",
                "https://h/x",
                "--stopped",
            ],
            &[
                "job",
                "list",
                "--group",
                "g",
                "--search",
                "nightly report",
                "--enabled",
                "true",
                "--schedule-type",
                "CRON",
                "--sort",
                "-updated",
                "--limit",
                "5",
                "--offset",
                "1",
            ],
            &["job", "get", "1"],
            &[
                "job",
                "update",
                "1",
                "--group",
                "g",
                "--handler",
                "h",
                "--fix-rate",
                "5",
                "--params",
                "p",
                "--description",
                "d",
                "--routing",
                "ROUND",
                "--block",
                "DISCARD_LATER",
                "--misfire",
                "FIRE_ONCE_NOW",
                "--zone",
                "Europe/Berlin",
                "--misfire-threshold-ms",
                "1000",
                "--glue-type",
                "GLUE_SHELL",
                "--glue-source",
                "echo hi",
                "--glue-remark",
                "first",
                "--import-ref",
                "x#1",
                "--timeout",
                "5",
                "--retries",
                "2",
                "--retry-backoff",
                "3",
                "--no-child-jobs",
                "--alarm-email",
                "",
                "--alarm-webhook",
                "",
                "--stopped",
            ],
            &["job", "delete", "1"],
            &["job", "start", "1"],
            &["job", "stop", "1"],
            &["job", "trigger", "1", "--params", "p"],
            &["job", "logs", "1", "--limit", "3"],
            &["job", "next", "1", "--count", "3"],
            &["job", "misfires", "1"],
            &["job", "scripts", "1"],
            &["job", "restore-script", "1", "2", "--remark", "back"],
            &[
                "schedule",
                "preview",
                "--cron",
                "0 0 2 * * ?",
                "--zone",
                "Asia/Shanghai",
                "--count",
                "3",
            ],
            &["log", "1-2-3"],
            &["log", "1-2-3", "--after-seq", "4"],
            &["executors"],
            &["executors", "--group", "g"],
            &[
                "logs",
                "--group",
                "g",
                "--job",
                "7",
                "--status",
                "failure",
                "--from-ms",
                "1",
                "--until-ms",
                "2",
                "--before",
                "2:7-1-0",
                "--limit",
                "10",
            ],
            &["kill", "1-2-3"],
            &["report", "--days", "3"],
            &["retention", "--days", "30"],
            &["whoami"],
            &["user", "list"],
            &["user", "get", "ann"],
            &[
                "user",
                "create",
                "ann",
                "--role",
                "operator",
                "--group",
                "g",
                "--disabled",
            ],
            &[
                "user",
                "update",
                "ann",
                "--role",
                "viewer",
                "--group",
                "g",
                "--enable",
                "--reset-password",
            ],
            &["user", "delete", "ann"],
            &["token", "list", "--user", "ann"],
            &["token", "create", "ci", "--days", "7", "--read-only"],
            &["token", "revoke", "3"],
            &[
                "audit",
                "--user",
                "ann",
                "--action",
                "job.create",
                "--target",
                "job:1",
                "--group",
                "g",
                "--since-ms",
                "1",
                "--until-ms",
                "2",
                "--limit",
                "5",
            ],
        ];
        let secret = |_: &str, _: &str| Ok("a password of the test".to_owned());
        let mut calls: Vec<(String, String, Option<Value>)> = argvs
            .iter()
            .map(|argv| {
                let cli = Cli::try_parse_from(std::iter::once("rondo").chain(argv.iter().copied()))
                    .unwrap_or_else(|e| panic!("{argv:?}: {e}"));
                let (method, path, body) = request(&cli.command, &secret).expect("one call");
                (method.to_string(), path, body)
            })
            .collect();
        use credentials::*;
        calls.extend([
            ("POST".into(), LOGIN.into(), Some(login_body("ann", "pw"))),
            ("POST".into(), TOKENS.into(), Some(token_body("cli", 90))),
            ("POST".into(), LOGOUT.into(), None),
            ("DELETE".into(), format!("{TOKENS}/3"), None),
            ("PUT".into(), PASSWORD.into(), Some(password_body("a", "b"))),
        ]);
        calls
    }

    /// Whether `path` (without its query) fills the spec's `template`.
    fn fills(template: &str, path: &str) -> bool {
        let (t, p): (Vec<&str>, Vec<&str>) =
            (template.split('/').collect(), path.split('/').collect());
        t.len() == p.len()
            && t.iter()
                .zip(&p)
                .all(|(t, p)| (t.starts_with('{') && !p.is_empty()) || t == p)
    }

    /// The properties of a request body's schema, following `$ref` and a
    /// nullable `oneOf`.
    fn body_fields(spec: &Value, schema: &Value) -> Vec<String> {
        if let Some(to) = schema["$ref"].as_str() {
            let name = to.rsplit('/').next().expect("a schema name");
            return body_fields(spec, &spec["components"]["schemas"][name]);
        }
        if let Some(any) = schema["oneOf"].as_array() {
            return any.iter().flat_map(|s| body_fields(spec, s)).collect();
        }
        schema["properties"]
            .as_object()
            .map(|p| p.keys().cloned().collect())
            .unwrap_or_default()
    }

    /// The CLI reaches every operation of the admin API (`/api/v1`; the
    /// probes and the scrape are for load balancers and Prometheus), sets
    /// every field of each request body (a path parameter names the field
    /// it fills) and every query parameter. Read from the committed spec,
    /// which the scheduler's own test holds to the handlers.
    #[test]
    fn the_cli_covers_every_route_field_and_query_parameter_of_the_spec() {
        let spec: Value =
            serde_json::from_str(include_str!("../../docs/openapi.json")).expect("the spec");
        let calls = every_call();
        let mut gaps = Vec::new();
        for (template, ops) in spec["paths"].as_object().expect("paths") {
            if !template.starts_with("/api/v1/") {
                continue;
            }
            for (method, op) in ops.as_object().expect("operations") {
                let method = method.to_uppercase();
                let mine: Vec<&(String, String, Option<Value>)> = calls
                    .iter()
                    .filter(|(m, p, _)| {
                        *m == method && fills(template, p.split('?').next().unwrap_or(p))
                    })
                    .collect();
                if mine.is_empty() {
                    gaps.push(format!("{method} {template}: no command"));
                    continue;
                }
                let params = op["parameters"].as_array().cloned().unwrap_or_default();
                let in_path: Vec<&str> = params
                    .iter()
                    .filter(|p| p["in"] == "path")
                    .filter_map(|p| p["name"].as_str())
                    .collect();
                for q in params.iter().filter(|p| p["in"] == "query") {
                    let name = q["name"].as_str().expect("a name");
                    let set = mine.iter().any(|(_, p, _)| {
                        p.split_once('?').is_some_and(|(_, query)| {
                            query
                                .split('&')
                                .any(|kv| kv.split('=').next() == Some(name))
                        })
                    });
                    if !set {
                        gaps.push(format!("{method} {template}: no flag sets query `{name}`"));
                    }
                }
                let schema = &op["requestBody"]["content"]["application/json"]["schema"];
                for field in body_fields(&spec, schema) {
                    let set = in_path.contains(&field.as_str())
                        || mine
                            .iter()
                            .any(|(_, _, b)| b.as_ref().is_some_and(|b| b.get(&field).is_some()));
                    if !set {
                        gaps.push(format!("{method} {template}: no flag sets `{field}`"));
                    }
                }
            }
        }
        assert!(
            gaps.is_empty(),
            "the CLI has fallen behind the API:\n{}",
            gaps.join("\n")
        );
        // The check sees what it should: a known operation and field.
        assert!(fills("/api/v1/jobs/{id}/trigger", "/api/v1/jobs/7/trigger"));
        assert!(!fills("/api/v1/jobs/{id}", "/api/v1/jobs/7/trigger"));
    }
}
