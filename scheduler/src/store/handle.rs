//! [`Store`]: the handle every view of the scheduler's state goes through
//! (its connection pool, its names, its scripts); what it reads and writes
//! is in the files named after what is stored.

use std::sync::Arc;

use redis::Script;
use rondo_core::redis::Pool;
use rondo_core::{Error, Job, Names};

use super::fence::fenced;
use super::parsed::ParsedJobs;

#[derive(Clone)]
pub struct Store {
    pub(super) pool: Pool,
    pub(super) names: Names,
    pub(super) claim: Arc<Script>,
    pub(super) rearm: Arc<Script>,
    pub(super) raise_term: Arc<Script>,
    pub(super) reassign: Arc<Script>,
    pub(super) take_ring: Arc<Script>,
    /// Definitions decoded once per version of their bytes, shared by the
    /// clones of this store (one node's readers).
    parsed: Arc<ParsedJobs>,
}

impl Store {
    pub fn new(pool: Pool, names: Names) -> Self {
        Store {
            pool,
            names,
            claim: Arc::new(fenced(&format!(
                "{}\n{}",
                include_str!("../../lua/missed.lua"),
                include_str!("../../lua/claim.lua")
            ))),
            raise_term: Arc::new(Script::new(include_str!("../../lua/raise_term.lua"))),
            rearm: Arc::new(Script::new(include_str!("../../lua/rearm.lua"))),
            reassign: Arc::new(fenced(&format!(
                "{}\n{}",
                include_str!("../../lua/missed.lua"),
                include_str!("../../lua/reassign.lua")
            ))),
            take_ring: Arc::new(Script::new(include_str!("../../lua/take_ring.lua"))),
            parsed: Arc::default(),
        }
    }

    /// The jobs in `defs`, the stored definitions of `ids` (same order;
    /// `None` where a job is gone), decoded, or shared with an earlier
    /// decode of the same bytes (`parsed`).
    pub(crate) fn decode_jobs(
        &self,
        ids: &[u64],
        defs: Vec<Option<String>>,
    ) -> Vec<Option<Result<Arc<Job>, Error>>> {
        self.parsed.decode(ids, defs)
    }

    pub fn names(&self) -> &Names {
        &self.names
    }

    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    pub(super) async fn conn(&self) -> Result<rondo_core::redis::Connection, Error> {
        Ok(self.pool.get().await?)
    }

    /// Waits until this process's writes are on a replica of each master
    /// (a Redis Cluster; see `rondo_core::redis::Connection::replicate`).
    pub async fn replicate(&self) -> Result<(), Error> {
        self.conn().await?.replicate().await?;
        Ok(())
    }

    /// Whether Redis answers.
    pub async fn ping(&self) -> Result<(), Error> {
        let _: String = redis::cmd("PING")
            .query_async(&mut self.conn().await?)
            .await?;
        Ok(())
    }
}
