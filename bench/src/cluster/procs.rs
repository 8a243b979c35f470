//! rondo's scheduler nodes as child processes of the bench, on testkit's
//! [`watchdog`](rondo_testkit::watchdog): no node outlives the run, even
//! when the bench is killed -9.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rondo_core::Config;

pub(crate) use rondo_testkit::procs::{config_env, free_addr};
pub(crate) use rondo_testkit::watchdog::{Binary, Proc, binary, binary_at};

/// One `rondo-scheduler` node.
pub(crate) struct NodeProc {
    pub id: String,
    pub addr: SocketAddr,
    pub proc: Proc,
}

impl NodeProc {
    pub async fn spawn(
        config: &Config,
        binary: &Binary,
        id: &str,
        rust_log: &str,
        log_dir: &Path,
    ) -> anyhow::Result<NodeProc> {
        let addr = free_addr();
        let mut env = config_env(config);
        env.push(("RONDO_SCHEDULER_NODE_ID".into(), id.to_owned()));
        env.push(("RONDO_SCHEDULER_API_ADDR".into(), addr.to_string()));
        let log = log_dir.join(format!("{id}.log"));
        let proc = Proc::spawn(id, binary, env, rust_log, log).await?;
        Ok(NodeProc {
            id: id.to_owned(),
            addr,
            proc,
        })
    }
}

/// A fresh directory for the children's logs (kept after the run).
pub(crate) fn log_dir(namespace: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("rondo-bench-{namespace}"));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
