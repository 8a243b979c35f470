//! `rondo`: the command-line client of the admin HTTP API.
//!
//! The commands by family: `jobs` (jobs and schedule previews), `groups`, `channels` (alarm channels),
//! `users` (users and tokens); the rest, one call each, are here, and
//! `call` says what a call is.
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

mod call;
mod channels;
mod groups;
mod jobs;
#[cfg(test)]
mod tests;
mod users;

use call::{Call, Secret, query_string};
use channels::ChannelCmd;
use clap::{Parser, Subcommand};
use groups::GroupCmd;
use jobs::{JobCmd, ScheduleCmd};
use rondo_cli::{Target, credentials};
use rondo_model::language::Language;
use serde_json::{Value, json};
use users::{TokenCmd, UserCmd};

#[derive(Parser)]
#[command(
    name = "rondo",
    version,
    about = "Command-line client of a rondo scheduler cluster"
)]
struct Cli {
    #[command(flatten)]
    target: Target,
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
    /// Alarm channels: chat group bots and webhooks jobs alarm.
    #[command(subcommand)]
    Channel(ChannelCmd),
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
    /// Deletes trigger logs with their lines: a job's (--job), a group's
    /// (--group) or every group's (admins), by one of --preset (XXL-JOB's:
    /// 1 older than a month, 2 three months, 3 six months, 4 a year, 5 all
    /// but the newest 1,000, 6 10,000, 7 30,000, 8 100,000, 9 all),
    /// --older-than-days, --keep-last or --all.
    CleanLogs {
        #[arg(long)]
        job: Option<u64>,
        #[arg(long, conflicts_with = "job")]
        group: Option<String>,
        #[arg(long)]
        preset: Option<u8>,
        #[arg(long)]
        older_than_days: Option<u32>,
        #[arg(long)]
        keep_last: Option<u64>,
        #[arg(long)]
        all: bool,
    },
    /// Daily running / success / fail counts, recomputed first.
    Report {
        /// Days back, today included (default 7).
        #[arg(long, conflicts_with = "from")]
        days: Option<u32>,
        /// The first day (YYYY-MM-DD, in the report's zone).
        #[arg(long)]
        from: Option<String>,
        /// The last day (default today); with --from.
        #[arg(long, requires = "from")]
        to: Option<String>,
    },
    /// Drops the trigger logs older than the retention now (admins);
    /// `retention show` only shows the retention configured.
    #[command(args_conflicts_with_subcommands = true)]
    Retention {
        #[command(subcommand)]
        action: Option<RetentionCmd>,
        /// Days to keep (at least 7); default: the node's
        /// `persist.retention_days`.
        #[arg(long)]
        days: Option<u32>,
    },
    /// Signs in with a password (prompted, or `RONDO_PASSWORD`) and saves
    /// a new API token for this API in the credentials file (a password
    /// moved from XXL-JOB is replaced first: prompted, or
    /// `RONDO_NEW_PASSWORD`).
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
    /// Your own account's settings.
    #[command(subcommand)]
    Account(AccountCmd),
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
enum RetentionCmd {
    /// The retention configured (`persist.retention_days`) and the days
    /// `--days` may ask (admins).
    Show,
}

#[derive(Subcommand)]
enum AccountCmd {
    /// Sets the web console's language for you (`whoami` shows it).
    Language {
        #[arg(
            required_unless_present = "clear",
            value_parser = clap::builder::PossibleValuesParser::new(Language::NAMES),
        )]
        language: Option<String>,
        /// No language of your own: the console follows the browser.
        #[arg(long, conflicts_with = "language")]
        clear: bool,
    },
}

#[derive(Subcommand)]
enum ClusterCmd {
    /// Starts this node's lateness and claim-tick histograms afresh
    /// (admins).
    ResetStats,
}

/// The one HTTP call a plain command is (`login`, `logout` and `password`
/// are conversations: see `credentials`; `import` runs `rondo-import`).
fn request(cmd: &Command, secret: Secret<'_>) -> anyhow::Result<Call> {
    use reqwest::Method as M;
    Ok(match cmd {
        Command::Login { .. } | Command::Logout | Command::Password | Command::Import { .. } => {
            anyhow::bail!("not a single call")
        }
        Command::Whoami => (M::GET, "/api/v1/auth/me".into(), None),
        Command::User(u) => users::user(u, secret)?,
        Command::Token(t) => users::token(t),
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
        Command::CleanLogs {
            job,
            group,
            preset,
            older_than_days,
            keep_last,
            all,
        } => {
            let mut body = serde_json::Map::new();
            let mut put = |k: &str, v: Option<serde_json::Value>| {
                if let Some(v) = v {
                    body.insert(k.into(), v);
                }
            };
            put("job_id", job.map(|v| json!(v)));
            put("group", group.clone().map(|v| json!(v)));
            put("preset", preset.map(|v| json!(v)));
            put("older_than_days", older_than_days.map(|v| json!(v)));
            put("keep_last", keep_last.map(|v| json!(v)));
            put("all", all.then_some(json!(true)));
            (
                M::POST,
                "/api/v1/logs/clean".into(),
                Some(serde_json::Value::Object(body)),
            )
        }
        Command::Report { days, from, to } => {
            let query = match from {
                Some(from) => {
                    let mut q = format!("from={}", credentials::query_escape(from));
                    if let Some(to) = to {
                        q.push_str(&format!("&to={}", credentials::query_escape(to)));
                    }
                    q
                }
                None => format!("days={}", days.unwrap_or(7)),
            };
            (M::GET, format!("/api/v1/reports?{query}"), None)
        }
        Command::Retention {
            action: Some(RetentionCmd::Show),
            ..
        } => (M::GET, "/api/v1/maintenance/retention".into(), None),
        Command::Retention { action: None, days } => (
            M::POST,
            "/api/v1/maintenance/retention".into(),
            days.map(|days| json!({ "days": days })),
        ),
        Command::Account(AccountCmd::Language { language, .. }) => (
            M::PUT,
            "/api/v1/auth/language".into(),
            Some(json!({ "language": language })),
        ),
        Command::Group(g) => groups::request(g, secret)?,
        Command::Channel(c) => channels::request(c, secret)?,
        Command::Job(j) => jobs::request(j),
        Command::Schedule(cmd) => jobs::preview(cmd)?,
    })
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let mut api = cli.target.api();
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
    rondo_cli::finish(outcome, &cli.target.api)
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
    command.arg("--api").arg(&cli.target.api).args(args);
    if let Some(token) = &cli.target.token {
        command.env("RONDO_TOKEN", token);
    }
    let error = command.exec();
    Err(anyhow::anyhow!("cannot run {}: {error}", program.display()))
}
