//! The command line and the sizes a run uses.

use std::path::PathBuf;

/// `rondo-bench [--scenario persistence|all] [--events N] [--out DIR] [--smoke]`
#[derive(Debug, Clone, clap::Parser)]
#[command(
    name = "rondo-bench",
    version,
    about = "rondo's throughput next to the ceiling of the services it runs on"
)]
pub struct Options {
    /// Which scenario to run.
    #[arg(long, value_enum, default_value_t = Scenario::All)]
    pub scenario: Scenario,
    /// Events per measurement (persistence: half triggers, half results).
    /// Defaults to 200,000, or 2,000 with `--smoke`.
    #[arg(long)]
    pub events: Option<usize>,
    /// Where the JSON files and `latest.md` go.
    #[arg(long, default_value = "bench/results")]
    pub out: PathBuf,
    /// Tiny sizes: checks that everything runs, in seconds. The figures
    /// mean nothing.
    #[arg(long)]
    pub smoke: bool,
    /// Persistence: the worker's `persist.batch_size` (events per
    /// transaction); the worker's default when absent.
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Persistence: events per AMQP message (one JSON array). The
    /// dispatcher publishes a dispatch round's triggers as one message;
    /// executors publish one result per message.
    #[arg(long, default_value_t = 50)]
    pub events_per_message: usize,
}

impl Options {
    /// The options of `--smoke` with results in `out`.
    pub fn smoke(scenario: Scenario, out: PathBuf) -> Options {
        Options {
            scenario,
            events: None,
            out,
            smoke: true,
            batch_size: None,
            events_per_message: 50,
        }
    }

    /// Events per measurement, after `--smoke`.
    pub fn events(&self) -> usize {
        match (self.events, self.smoke) {
            (Some(events), _) => events,
            (None, true) => 2_000,
            (None, false) => 200_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// Events stored per second by the persistence worker, against raw
    /// multi-row INSERTs of the same rows.
    Persistence,
    /// Every scenario, one after the other.
    All,
}

impl Scenario {
    /// The single scenarios this one stands for.
    pub fn expand(self) -> Vec<Scenario> {
        match self {
            Scenario::All => vec![Scenario::Persistence],
            single => vec![single],
        }
    }
}
