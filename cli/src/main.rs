//! `rondo`: the command-line client of the admin HTTP API.
//!
//! Every command is one HTTP call; the answer is printed as pretty JSON. An
//! API error prints its JSON body on stderr and exits 2 (bad input) or 1.

// The CLI's job is to print.
#![allow(clippy::print_stdout)]

use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Parser, Subcommand};
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
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
// Parsed once per process; boxing a variant would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Leader, term, live nodes, ring and due-set sizes.
    Cluster,
    /// Executor groups.
    #[command(subcommand)]
    Group(GroupCmd),
    /// Jobs.
    #[command(subcommand)]
    Job(JobCmd),
    /// One trigger's log row and log lines.
    Log { trigger_id: String },
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
}

#[derive(Subcommand)]
enum GroupCmd {
    Create {
        app: String,
        #[arg(long)]
        title: Option<String>,
    },
    List,
    Get {
        app: String,
    },
    Update {
        app: String,
        #[arg(long)]
        title: String,
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
}

#[derive(Args)]
struct JobArgs {
    #[arg(long)]
    group: Option<String>,
    #[arg(long)]
    handler: Option<String>,
    /// Quartz cron expression (schedule_type CRON).
    #[arg(long, conflicts_with_all = ["fix_rate", "no_schedule"])]
    cron: Option<String>,
    /// Fixed rate: seconds ("5") or milliseconds ("250ms") (schedule_type FIX_RATE).
    #[arg(long, conflicts_with = "no_schedule")]
    fix_rate: Option<String>,
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
    /// Seconds, 0 = none.
    #[arg(long)]
    timeout: Option<u32>,
    #[arg(long)]
    retries: Option<u32>,
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
            put("schedule_type", Some("CRON".into()));
            put("schedule_conf", Some(expr.clone().into()));
        } else if let Some(rate) = &self.fix_rate {
            put("schedule_type", Some("FIX_RATE".into()));
            put("schedule_conf", Some(rate.clone().into()));
        } else if self.no_schedule {
            put("schedule_type", Some("NONE".into()));
        }
        put("params", self.params.clone().map(Value::from));
        put("description", self.description.clone().map(Value::from));
        put("routing", self.routing.clone().map(Value::from));
        put("block", self.block.clone().map(Value::from));
        put("misfire", self.misfire.clone().map(Value::from));
        put("timeout_s", self.timeout.map(Value::from));
        put("retries", self.retries.map(Value::from));
        if self.stopped {
            put("enabled", Some(false.into()));
        }
        Value::Object(m)
    }
}

struct Api {
    base: String,
    http: reqwest::Client,
}

impl Api {
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let url = format!("{}{path}", self.base.trim_end_matches('/'));
        let mut req = self.http.request(method, &url);
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.with_context(|| format!("calling {url}"))?;
        let status = resp.status().as_u16();
        let text = resp.text().await?;
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, value))
    }
}

fn request(cmd: &Command) -> (reqwest::Method, String, Option<Value>) {
    use reqwest::Method as M;
    match cmd {
        Command::Cluster => (M::GET, "/api/v1/cluster".into(), None),
        Command::Log { trigger_id } => (M::GET, format!("/api/v1/logs/{trigger_id}"), None),
        Command::Kill { trigger_id } => (M::POST, format!("/api/v1/logs/{trigger_id}/kill"), None),
        Command::Report { days } => (M::GET, format!("/api/v1/reports?days={days}"), None),
        Command::Retention { days } => (
            M::POST,
            "/api/v1/maintenance/retention".into(),
            days.map(|days| json!({ "days": days })),
        ),
        Command::Group(g) => match g {
            GroupCmd::Create { app, title } => (
                M::POST,
                "/api/v1/groups".into(),
                Some(json!({ "app": app, "title": title })),
            ),
            GroupCmd::List => (M::GET, "/api/v1/groups".into(), None),
            GroupCmd::Get { app } => (M::GET, format!("/api/v1/groups/{app}"), None),
            GroupCmd::Update { app, title } => (
                M::PUT,
                format!("/api/v1/groups/{app}"),
                Some(json!({ "title": title })),
            ),
            GroupCmd::Delete { app } => (M::DELETE, format!("/api/v1/groups/{app}"), None),
            GroupCmd::Executors { app } => {
                (M::GET, format!("/api/v1/groups/{app}/executors"), None)
            }
        },
        Command::Job(j) => match j {
            JobCmd::Create(args) => (M::POST, "/api/v1/jobs".into(), Some(args.to_json())),
            JobCmd::List {
                group,
                limit,
                offset,
            } => {
                let g = group
                    .as_ref()
                    .map(|g| format!("&group={g}"))
                    .unwrap_or_default();
                (
                    M::GET,
                    format!("/api/v1/jobs?limit={limit}&offset={offset}{g}"),
                    None,
                )
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
        },
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let api = Api {
        base: cli.api.clone(),
        http: reqwest::Client::new(),
    };
    let (method, path, body) = request(&cli.command);
    match api.call(method, &path, body).await {
        Ok((status, value)) if status < 300 => {
            if !value.is_null() {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
            }
            ExitCode::SUCCESS
        }
        Ok((status, value)) => {
            eprintln!(
                "{}",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            );
            ExitCode::from(if (400..500).contains(&status) { 2 } else { 1 })
        }
        Err(e) => {
            eprintln!("rondo: {e:#}");
            ExitCode::FAILURE
        }
    }
}
