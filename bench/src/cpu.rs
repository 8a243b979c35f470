//! CPU time over a window, from `/proc`: this process (the worker runs in
//! it), MySQL (`mariadbd`/`mysqld`), RabbitMQ (`beam.smp`) and the whole
//! machine. Expressed in cores: 1.0 is one core busy for the whole window.
//!
//! Linux only; elsewhere the figures are zero. Clock ticks are taken as
//! 100 per second (`USER_HZ` on every mainstream Linux build; reading it
//! would need `sysconf`, i.e. `unsafe`, which the workspace forbids).

use std::time::{Duration, Instant};

use serde::Serialize;

const TICKS_PER_SECOND: f64 = 100.0;
const MYSQL_NAMES: &[&str] = &["mariadbd", "mysqld"];
const RABBITMQ_NAMES: &[&str] = &["beam.smp"];

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
}
