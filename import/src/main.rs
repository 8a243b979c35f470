//! `rondo-import` (and `rondo import`, which runs it): brings another
//! scheduler's jobs over through the admin API, printing the answer as
//! `rondo` does.

use std::process::ExitCode;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches, Parser, Subcommand};
use rondo_cli::Target;
use rondo_import::xxl_job;

#[derive(Parser)]
#[command(
    name = "rondo import",
    bin_name = "rondo import",
    version,
    about = "Brings jobs over from another scheduler into a rondo cluster"
)]
struct Cli {
    #[command(flatten)]
    target: Target,
    #[command(subcommand)]
    command: ImportCmd,
}

#[derive(Subcommand)]
enum ImportCmd {
    /// Creates groups and jobs from XXL-JOB's xxl_job_group and
    /// xxl_job_info. Nothing is written when a row does not map; running it
    /// again changes nothing (jobs keep their XXL-JOB id in import_ref).
    XxlJob {
        /// XXL-JOB's database, mysql://user:password@host:3306/xxl_job:
        /// give it in RONDO_IMPORT_MYSQL rather than as the flag, which
        /// shows the password in `ps` and the shell's history.
        #[arg(long, env = MYSQL_ENV, hide_env_values = true)]
        mysql: String,
        /// The IANA zone XXL-JOB's admin ran in, for its cron (default: the
        /// cluster's `zone`).
        #[arg(long)]
        zone: Option<String>,
        /// Names the source in import_ref (default: the database's name).
        #[arg(long)]
        source: Option<String>,
        /// Prints what would be done and every row that does not map, with
        /// each job's next fires beside XXL-JOB's trigger_next_time.
        #[arg(long)]
        dry_run: bool,
        /// Creates every job stopped, those running in XXL-JOB too, for
        /// `xxl-switch` to start. (Once imported, a job's running or not
        /// is never changed by an import again.)
        #[arg(long)]
        stopped: bool,
        /// The access token XXL-JOB's executors send
        /// (`xxl.job.accessToken`), given to each imported group XXL-JOB
        /// keeps none of (before 3.5); XXL-JOB 3.5's per-group tokens are
        /// read from its table.
        #[arg(long, env = "RONDO_IMPORT_XXL_TOKEN", hide_env_values = true)]
        access_token: Option<String>,
        /// Imports XXL-JOB's admins enabled. Without it they come over
        /// disabled, for an admin of rondo to enable one by one: an
        /// XXL-JOB admin's password is an unsalted hash anyone who read
        /// XXL-JOB's table can try offline.
        #[arg(long)]
        enable_admins: bool,
    },
    /// Moves the firing of imported jobs from XXL-JOB to rondo (stopping
    /// them in XXL-JOB's table, starting them in rondo at the first instant
    /// XXL-JOB had not fired), or back with --back. One transaction per
    /// group; a failure leaves both sides as they were.
    XxlSwitch {
        /// XXL-JOB's database, mysql://user:password@host:3306/xxl_job:
        /// give it in RONDO_IMPORT_MYSQL rather than as the flag, which
        /// shows the password in `ps` and the shell's history.
        #[arg(long, env = MYSQL_ENV, hide_env_values = true)]
        mysql: String,
        /// The source the import named (default: the database's name).
        #[arg(long)]
        source: Option<String>,
        /// A group (app name) to switch; repeat for several. Default:
        /// every group with imported jobs.
        #[arg(long = "group")]
        groups: Vec<String>,
        /// From rondo back to XXL-JOB, while its tables are still there.
        #[arg(long)]
        back: bool,
    },
}

/// Where the XXL-JOB database's URL is read from, password and all.
const MYSQL_ENV: &str = "RONDO_IMPORT_MYSQL";

/// Warns when `--mysql` was given on the command line with a password in
/// it (anyone on the host sees it in `ps`, the shell keeps it in its
/// history); the warning names the variable, never the password.
fn warn_of_a_password_flag(matches: &ArgMatches) {
    let Some((_, sub)) = matches.subcommand() else {
        return;
    };
    if sub.value_source("mysql") != Some(ValueSource::CommandLine) {
        return;
    }
    let url = sub.get_one::<String>("mysql").map(String::as_str);
    let has_password = url
        .and_then(|u| reqwest::Url::parse(u).ok())
        .is_some_and(|u| u.password().is_some_and(|p| !p.is_empty()));
    if has_password {
        eprintln!(
            "rondo import: warning: --mysql has a password on the command line, where `ps` and the shell's history show it; set {MYSQL_ENV} instead"
        );
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    warn_of_a_password_flag(&matches);
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let mut api = cli.target.api();
    let outcome = match &cli.command {
        ImportCmd::XxlJob {
            mysql,
            zone,
            source,
            dry_run,
            stopped,
            access_token,
            enable_admins,
        } => {
            let args = xxl_job::ImportArgs {
                mysql,
                zone: zone.as_deref(),
                source: source.as_deref(),
                dry_run: *dry_run,
                stopped: *stopped,
                access_token: access_token.as_deref(),
                enable_admins: *enable_admins,
            };
            xxl_job::xxl_job(&mut api, &args).await
        }
        ImportCmd::XxlSwitch {
            mysql,
            source,
            groups,
            back,
        } => {
            let args = xxl_job::SwitchArgs {
                mysql,
                source: source.as_deref(),
                groups,
                back: *back,
            };
            xxl_job::switch(&mut api, &args).await
        }
    };
    rondo_cli::finish(outcome, &cli.target.api)
}
