//! rondo-bench: rondo's throughput measured side by side with the ceiling
//! of the service it runs on, in the same run, on the same machine.
//!
//! A figure alone says little on a noisy 2-core machine; a figure next to
//! what the underlying service can do at best (measured a few seconds
//! earlier, same data) says how much rondo leaves on the table. Every
//! scenario therefore reports its own rate, the ceiling's rate and the
//! ratio.
//!
//! # Layout
//!
//! * `options`: the command line ([`Options`], [`Scenario`]) and the sizes
//!   a run uses (`--smoke` shrinks them to seconds).
//! * [`persistence`]: events stored per second by the persistence worker
//!   against multi-row `INSERT`s of the same rows through sqlx.
//! * [`broker`]: RabbitMQ's ceiling for firing: confirmed persistent
//!   publishes of trigger messages, one per message and batched.
//! * [`throughput`]: fires per second, lateness and CPU of a cluster for a
//!   stepping number of jobs firing every second, against that ceiling.
//! * [`scale`]: a million jobs: creation rate, Redis bytes per job, the
//!   claim tick with ten thousand due.
//! * [`scaling`]: the throughput step with 1, 2, 3 nodes, on one Redis,
//!   ZooKeeper and RabbitMQ and on the cluster topology: each node's share
//!   and the leader's claim per tick.
//! * [`failover`]: `kill -9` of the leader: time to the next claim, lost
//!   and duplicate fires.
//! * [`xxl`]: the same load through the XXL-JOB gateway to stand-in XXL-JOB
//!   executors and through `rondo-executor`: what the gateway adds.
//! * `cluster`: scheduler nodes as child processes, recording executors,
//!   the persistence worker, job creation through the admin API, and the
//!   counting of lost and duplicate fires.
//! * `sandbox`: a fresh namespace and database per measurement, removed
//!   afterwards.
//! * `cpu`: CPU time of this process, MySQL and RabbitMQ over a window,
//!   read from `/proc`, to tell which resource limits a figure.
//! * `machine`: what the figures were measured on.
//! * `output`: the [`Report`] trait, the JSON file and the markdown table.
//!
//! A new scenario is a sibling of `persistence`: a module with its
//! `Params`, a `run(&Config, &Params)` returning a type that implements
//! [`Report`], and one arm in [`run`].

pub mod broker;
mod cluster;
mod counts;
mod cpu;
pub mod failover;
mod machine;
mod options;
mod output;
pub mod overload;
pub mod pages;
pub mod persistence;
mod sandbox;
pub mod scale;
pub mod scaling;
pub mod throughput;
pub mod xxl;

use std::path::PathBuf;

use rondo_core::Config;

pub use cluster::Binaries;
pub use cluster::fires::FireCount;
pub use cluster::latency::Latency;
pub use cpu::{CpuShare, ProcessCpu};
pub use machine::Machine;
pub use options::{ExecutorKind, Options, Scenario, Topology};
pub use output::{Report, write_report};
pub use rondo_testkit::watchdog::Binary;

/// Runs the scenarios `options` selects against the services of `config`
/// (its namespace and database are not used: each measurement makes its
/// own). Writes each report to `options.out` and returns the reports'
/// markdown with the paths of their JSON files.
pub async fn run(options: &Options, config: &Config) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut written = Vec::new();
    for scenario in options.scenario.expand() {
        match scenario {
            Scenario::Persistence => {
                let params = persistence::Params::new(options);
                let report = persistence::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Broker => {
                let params = broker::Params::new(options);
                let report = broker::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Throughput => {
                let params = throughput::Params::new(options);
                let report = throughput::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Scale => {
                let params = scale::Params::new(options);
                let report = scale::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Failover => {
                let params = failover::Params::new(options);
                let report = failover::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Pages => {
                let params = pages::Params::new(options);
                let report = pages::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Scaling => {
                let params = scaling::Params::new(options);
                let report = scaling::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Overload => {
                let params = overload::Params::new(options);
                let report = overload::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::Xxl => {
                let params = xxl::Params::new(options);
                let report = xxl::run(config, &params).await?;
                let path = write_report(&report, &options.out)?;
                written.push((report.markdown(), path));
            }
            Scenario::All => unreachable!("expand() lists single scenarios"),
        }
    }
    Ok(written)
}
