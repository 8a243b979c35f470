//! Ring leases (every node's): a node holds a short lease on each of its
//! rings, one key per partition, renewed many times a lease; the node's
//! standby takes the coming fires of a ring whose lease lapsed
//! (`lua/take_ring.lua`, the lease checked in the same step).

use rondo_core::Error;

use super::views::NodeStore;

/// How a renewal went, per partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Renewal {
    /// Held, for another lease from the renewal's sending.
    Held,
    /// Lapsed before this renewal: a standby may have taken fires.
    Lapsed,
}

impl NodeStore<'_> {
    /// Renews this node's leases on its rings of every partition (`acquire`:
    /// takes them whatever they were, after a lapse or at start). One round
    /// trip; a lease that had lapsed is not renewed (it must be taken again
    /// once the node has dropped what it held).
    pub async fn renew_leases(
        &self,
        node: &str,
        token: &str,
        lease_ms: u64,
        acquire: bool,
    ) -> Result<Vec<Renewal>, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            let cmd = pipe
                .cmd("SET")
                .arg(self.0.names.lease(p, node))
                .arg(token)
                .arg("PX")
                .arg(lease_ms.max(1));
            if !acquire {
                cmd.arg("XX");
            }
        }
        let answers: Vec<Option<String>> = pipe.query_async(&mut self.0.conn().await?).await?;
        Ok(answers
            .into_iter()
            .map(|a| {
                if a.is_some() {
                    Renewal::Held
                } else {
                    Renewal::Lapsed
                }
            })
            .collect())
    }

    /// Drops this node's leases (a graceful stop: its standby need not wait
    /// them out; the leader moves what is left once the node leaves).
    pub async fn release_leases(&self, node: &str) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            pipe.del(self.0.names.lease(p, node)).ignore();
        }
        let () = pipe.query_async(&mut self.0.conn().await?).await?;
        Ok(())
    }

    /// Per partition, whether `node` holds its lease.
    pub async fn leases_held(&self, node: &str) -> Result<Vec<bool>, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            pipe.exists(self.0.names.lease(p, node));
        }
        Ok(pipe.query_async(&mut self.0.conn().await?).await?)
    }

    /// Moves the fires of `from`'s ring in `partition` due by `until_ms`
    /// (at most `limit`) to `to`'s ring, if `from`'s lease there has
    /// lapsed. `None`: the lease is held, nothing moved.
    pub async fn take_ring(
        &self,
        partition: u32,
        from: &str,
        to: &str,
        until_ms: i64,
        limit: usize,
    ) -> Result<Option<u64>, Error> {
        let taken: i64 = self
            .0
            .take_ring
            .key(self.0.names.lease(partition, from))
            .key(self.0.names.ring(partition, from))
            .key(self.0.names.ring(partition, to))
            .key(self.0.names.ring_owners(partition))
            .arg(until_ms)
            .arg(to)
            .arg(limit.max(1))
            .invoke_async(&mut self.0.conn().await?)
            .await?;
        Ok(u64::try_from(taken).ok())
    }
}
