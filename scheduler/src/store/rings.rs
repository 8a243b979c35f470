//! The rings (every node's view): a node reads its rings and acks what it
//! fired; the leader reads who owns which ring and reassigns a dead node's.

use redis::AsyncCommands;
use rondo_core::Error;

use super::handle::Store;
use super::views::{ApiStore, LeaderStore, NodeStore};

/// One partition's part of a ring read: members and their instants,
/// earliest first, and the limit the read had (a read that returned
/// `limit` members may have left later ones in the ring).
#[derive(Debug, Clone, PartialEq)]
pub struct RingRead {
    pub partition: u32,
    pub members: Vec<(String, i64)>,
    pub limit: usize,
}

impl RingRead {
    /// The read stopped at its limit: the ring may hold more.
    pub fn cut(&self) -> bool {
        !self.members.is_empty() && self.members.len() >= self.limit
    }
}

/// One dead-ring member's fate in a reassignment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Move {
    pub member: String,
    /// Index into the target nodes, or `None` to drop the member.
    pub target: Option<usize>,
    /// Its score in the target ring (when it should fire).
    pub score: i64,
    /// Its name in the target ring, if not its own (a late fire fired now
    /// as a misfire).
    pub rename: Option<String>,
    /// Fires its job missed (how many never ran, and the record), counted
    /// when this member is moved or dropped.
    pub missed: Option<(u64, String)>,
}

impl NodeStore<'_> {
    /// Reads this node's rings: per partition, the members due after
    /// `after_ms` (from the start if `None`) and by `until_ms`, earliest
    /// first, at most `limits[p]` of them, with their instants.
    pub async fn read_rings(
        &self,
        node: &str,
        after_ms: Option<i64>,
        until_ms: i64,
        limits: &[usize],
    ) -> Result<Vec<RingRead>, Error> {
        let from = after_ms.map_or_else(|| "-inf".to_owned(), |ms| format!("({ms}"));
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            let limit = limits.get(p as usize).copied().unwrap_or(0).max(1);
            // Redis reads a negative count as "no limit".
            let limit = isize::try_from(limit).unwrap_or(isize::MAX);
            pipe.zrangebyscore_limit_withscores(
                self.0.names.ring(p, node),
                &from,
                until_ms,
                0,
                limit,
            );
        }
        let per_partition: Vec<Vec<(String, f64)>> =
            pipe.query_async(&mut self.0.conn().await?).await?;
        Ok(per_partition
            .into_iter()
            .enumerate()
            .map(|(p, members)| RingRead {
                partition: p as u32,
                limit: limits.get(p).copied().unwrap_or(0).max(1),
                members: members
                    .into_iter()
                    .map(|(m, score)| (m, score as i64))
                    .collect(),
            })
            .collect())
    }

    /// Removes many fired members of one partition from the node's ring in
    /// one command (see [`Store::ack`]); how many were still there.
    pub async fn ack_many(
        &self,
        partition: u32,
        node: &str,
        members: &[String],
    ) -> Result<u64, Error> {
        if members.is_empty() {
            return Ok(0);
        }
        let removed: u64 = self
            .0
            .conn()
            .await?
            .zrem(self.0.names.ring(partition, node), members)
            .await?;
        Ok(removed)
    }
}

impl Store {
    /// Removes a fired member from the node's ring. Not fenced: it only
    /// removes the caller's own member, and a member reassigned elsewhere is
    /// no longer in this ring, so a stale node's ack is a no-op.
    pub async fn ack(&self, partition: u32, node: &str, member: &str) -> Result<(), Error> {
        let _: u64 = self
            .conn()
            .await?
            .zrem(self.names.ring(partition, node), member)
            .await?;
        Ok(())
    }
}

impl ApiStore<'_> {
    /// Total ring size of a node over all partitions.
    pub async fn ring_size(&self, node: &str) -> Result<u64, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            pipe.zcard(self.0.names.ring(p, node));
        }
        let sizes: Vec<u64> = pipe.query_async(&mut self.0.conn().await?).await?;
        Ok(sizes.iter().sum())
    }
}

impl LeaderStore<'_> {
    /// Ring owners of every partition, in one round trip.
    pub async fn ring_owners(&self) -> Result<Vec<Vec<String>>, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            pipe.smembers(self.0.names.ring_owners(p));
        }
        Ok(pipe.query_async(&mut self.0.conn().await?).await?)
    }

    /// The first `limit` members of a node's ring in a partition, with scores.
    pub async fn ring_members(
        &self,
        partition: u32,
        node: &str,
        limit: usize,
    ) -> Result<Vec<(String, i64)>, Error> {
        let mut conn = self.0.conn().await?;
        let rows: Vec<(String, f64)> = conn
            .zrange_withscores(self.0.names.ring(partition, node), 0, limit as isize - 1)
            .await?;
        Ok(rows.into_iter().map(|(m, s)| (m, s as i64)).collect())
    }

    /// Runs the fenced reassign script; returns `(moved, dropped)`.
    pub async fn reassign(
        &self,
        partition: u32,
        term: u64,
        dead: &str,
        targets: &[String],
        moves: &[Move],
    ) -> Result<(u64, u64), Error> {
        let mut inv = self.0.reassign.prepare_invoke();
        inv.key(self.0.names.term(partition))
            .key(self.0.names.ring(partition, dead))
            .key(self.0.names.ring_owners(partition))
            .key(self.0.names.misfires(partition));
        for node in targets {
            inv.key(self.0.names.ring(partition, node));
        }
        inv.arg(term).arg(dead).arg(targets.len());
        for node in targets {
            inv.arg(node);
        }
        for m in moves {
            let (skipped, record) = m.missed.clone().unwrap_or_default();
            inv.arg(&m.member)
                .arg(m.target.map_or(0, |t| t + 5))
                .arg(m.score)
                .arg(m.rename.as_deref().unwrap_or(""))
                .arg(skipped)
                .arg(record);
        }
        let (moved, dropped): (u64, u64) = inv.invoke_async(&mut self.0.conn().await?).await?;
        Ok((moved, dropped))
    }
}
