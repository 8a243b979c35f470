//! CPU time over a window, from `/proc`: this process (the worker runs in
//! it), MySQL (`mariadbd`/`mysqld`), RabbitMQ (`beam.smp`) and the whole
//! machine ([`Snapshot`]), or any labelled set of processes: child
//! processes by pid, services by command name ([`ProcSnapshot`]).
//! Expressed in cores: 1.0 is one core busy for the whole window.
//!
//! Linux only; elsewhere the figures are zero. Clock ticks are taken as
//! 100 per second (`USER_HZ` on every mainstream Linux build; reading it
//! would need `sysconf`, i.e. `unsafe`, which the workspace forbids).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use serde::Serialize;

const TICKS_PER_SECOND: f64 = 100.0;
const MYSQL_NAMES: &[&str] = &["mariadbd", "mysqld"];
const RABBITMQ_NAMES: &[&str] = &["beam.smp"];
const REDIS_NAMES: &[&str] = &["redis-server"];

/// Cumulative CPU ticks at one instant.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    at: Instant,
    bench: u64,
    mysql: u64,
    rabbitmq: u64,
    machine_busy: u64,
}

/// Average cores used over a window.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct CpuShare {
    pub window_s: f64,
    /// This process: the worker when it runs in-process, plus the bench's
    /// own polling and (in steady state) publishing.
    pub bench_cores: f64,
    pub mysql_cores: f64,
    pub rabbitmq_cores: f64,
    /// Every process on the machine (other users' work included).
    pub machine_busy_cores: f64,
    pub machine_cores: usize,
}

impl Snapshot {
    pub fn take() -> Snapshot {
        Snapshot {
            at: Instant::now(),
            bench: process_ticks("self"),
            mysql: ticks_of_named(MYSQL_NAMES),
            rabbitmq: ticks_of_named(RABBITMQ_NAMES),
            machine_busy: machine_busy_ticks(),
        }
    }

    /// The average cores used between `earlier` and this snapshot.
    pub fn since(&self, earlier: &Snapshot) -> CpuShare {
        let window = self
            .at
            .duration_since(earlier.at)
            .max(Duration::from_millis(1));
        let seconds = window.as_secs_f64();
        let cores =
            |now: u64, then: u64| now.saturating_sub(then) as f64 / TICKS_PER_SECOND / seconds;
        CpuShare {
            window_s: seconds,
            bench_cores: cores(self.bench, earlier.bench),
            mysql_cores: cores(self.mysql, earlier.mysql),
            rabbitmq_cores: cores(self.rabbitmq, earlier.rabbitmq),
            machine_busy_cores: cores(self.machine_busy, earlier.machine_busy),
            machine_cores: crate::machine::cores(),
        }
    }
}

/// Where a labelled CPU figure comes from.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// This process.
    This,
    /// One process (a child): 0 once it is gone.
    Pid(u32),
    /// Every process with one of these command names.
    Named(&'static [&'static str]),
}

impl Source {
    pub const MYSQL: Source = Source::Named(MYSQL_NAMES);
    pub const RABBITMQ: Source = Source::Named(RABBITMQ_NAMES);
    pub const REDIS: Source = Source::Named(REDIS_NAMES);

    fn ticks(&self) -> u64 {
        match self {
            Source::This => process_ticks("self"),
            Source::Pid(pid) => process_ticks(&pid.to_string()),
            Source::Named(names) => ticks_of_named(names),
        }
    }
}

/// Cumulative CPU ticks of labelled processes at one instant.
#[derive(Debug, Clone)]
pub(crate) struct ProcSnapshot {
    at: Instant,
    ticks: Vec<(String, u64)>,
    machine_busy: u64,
}

/// Average cores used over a window, per labelled process.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ProcessCpu {
    pub window_s: f64,
    /// Label → cores (1.0 = one core busy for the whole window).
    pub cores: BTreeMap<String, f64>,
    /// Every process on the machine (other users' work included).
    pub machine_busy_cores: f64,
    pub machine_cores: usize,
}

impl ProcessCpu {
    /// The sum over the labels that start with `prefix`.
    pub fn sum(&self, prefix: &str) -> f64 {
        self.cores
            .iter()
            .filter(|(label, _)| label.starts_with(prefix))
            .map(|(_, cores)| cores)
            .sum()
    }

    /// `label 0.42, label 0.10, …, machine 1.2 of 2`, for markdown.
    pub fn line(&self) -> String {
        let mut parts: Vec<String> = self
            .cores
            .iter()
            .map(|(label, cores)| format!("{label} {cores:.2}"))
            .collect();
        parts.push(format!(
            "machine {:.2} of {}",
            self.machine_busy_cores, self.machine_cores
        ));
        parts.join(", ")
    }
}

impl ProcSnapshot {
    pub fn take(sources: &[(String, Source)]) -> ProcSnapshot {
        ProcSnapshot {
            at: Instant::now(),
            ticks: sources
                .iter()
                .map(|(label, source)| (label.clone(), source.ticks()))
                .collect(),
            machine_busy: machine_busy_ticks(),
        }
    }

    /// The average cores used between `earlier` and this snapshot, for the
    /// labels both have.
    pub fn since(&self, earlier: &ProcSnapshot) -> ProcessCpu {
        let seconds = self
            .at
            .duration_since(earlier.at)
            .max(Duration::from_millis(1))
            .as_secs_f64();
        let cores =
            |now: u64, then: u64| now.saturating_sub(then) as f64 / TICKS_PER_SECOND / seconds;
        let before: BTreeMap<&str, u64> = earlier
            .ticks
            .iter()
            .map(|(label, ticks)| (label.as_str(), *ticks))
            .collect();
        ProcessCpu {
            window_s: seconds,
            cores: self
                .ticks
                .iter()
                .filter_map(|(label, now)| {
                    let then = before.get(label.as_str())?;
                    Some((label.clone(), cores(*now, *then)))
                })
                .collect(),
            machine_busy_cores: cores(self.machine_busy, earlier.machine_busy),
            machine_cores: crate::machine::cores(),
        }
    }
}

/// utime + stime of `/proc/<pid>/stat` (fields 14 and 15), 0 if unreadable.
fn process_ticks(pid: &str) -> u64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0;
    };
    // The command name (field 2) may hold spaces: count from its ')'.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // `rest` starts at field 3, so field n is at index n - 3.
    field(11) + field(12)
}

/// The summed ticks of every process whose command name is in `names`.
fn ticks_of_named(names: &[&str]) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .filter_map(|entry| entry.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| names.contains(&comm.trim()))
        })
        .map(|pid| process_ticks(&pid))
        .sum()
}

/// All CPU ticks of the machine but idle and iowait (first line of /proc/stat).
fn machine_busy_ticks() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/stat") else {
        return 0;
    };
    let Some(line) = stat.lines().next() else {
        return 0;
    };
    let ticks: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let total: u64 = ticks.iter().take(8).sum();
    let idle = ticks.get(3).copied().unwrap_or(0) + ticks.get(4).copied().unwrap_or(0);
    total.saturating_sub(idle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_has_spent_some_cpu() {
        let busy = (0..2_000_000u64).fold(0u64, |acc, i| acc.wrapping_add(i * i));
        assert!(busy > 0);
        let before = Snapshot::take();
        std::thread::sleep(Duration::from_millis(20));
        let share = Snapshot::take().since(&before);
        assert!(share.window_s > 0.0);
        assert!(share.bench_cores >= 0.0);
    }

    #[test]
    fn labelled_processes_are_measured() {
        let sources = vec![
            ("bench".to_owned(), Source::This),
            ("gone".to_owned(), Source::Pid(u32::MAX)),
            ("redis".to_owned(), Source::REDIS),
        ];
        let before = ProcSnapshot::take(&sources);
        let busy = (0..5_000_000u64).fold(0u64, |acc, i| acc.wrapping_add(i ^ (i >> 3)));
        assert!(busy > 0);
        let cpu = ProcSnapshot::take(&sources).since(&before);
        assert_eq!(cpu.cores.len(), 3);
        assert_eq!(cpu.cores["gone"], 0.0);
        assert!(cpu.sum("") >= cpu.cores["bench"]);
        assert!(cpu.line().contains("machine"));
    }
}
