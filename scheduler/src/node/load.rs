//! Loading: every `scheduler.load_interval_ms`, read this node's rings for
//! fires due within `scheduler.load_ahead_ms` and put the new ones on the
//! wheel, earliest first, as long as the node holds fewer than
//! `scheduler.max_fires_loaded`.
//!
//! # Bounded loads
//! Every partition's read has a limit: the live members it may list again
//! plus a share of the room left. A read that returns its limit is *cut*:
//! its ring holds more, all later than the last member it returned. The
//! load then takes fresh members only up to the earliest such last member,
//! so nothing goes on the wheel ahead of a member still in Redis, and at
//! most the room left. While cut, the node is *behind*: its loads read
//! from the start and wait until a quarter of the bound is free, and the
//! backlog stays in the rings, in order.

use std::sync::Arc;
use std::time::Duration;

use rondo_core::clock;
use rondo_core::names::parse_ring_member;
use tokio_util::sync::CancellationToken;

use super::{Entry, Firing, Loads};
use crate::store::RingRead;

/// Every this many loads, the loader reads the rings from the start; the
/// loads in between read only past the previous load's horizon. Steady
/// schedules are claimed seconds ahead, far beyond that horizon, so the
/// incremental reads see them; what lands below it (a new job's first
/// fire, a dead node's fires moved here) waits for the next full read at
/// most `FULL_LOAD_EVERY × load_interval_ms`. At high fire rates this keeps
/// the loader from re-reading every loaded member ten times a second.
const FULL_LOAD_EVERY: u64 = 5;

/// The fewest fresh members a partition's read may list (when room allows).
const MIN_SHARE: usize = 64;

impl Firing {
    pub(super) async fn load_loop(self: Arc<Self>, shutdown: CancellationToken) {
        let mut tick = tokio::time::interval(Duration::from_millis(self.config.load_interval_ms));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = shutdown.cancelled() => break,
                _ = tick.tick() => {}
                _ = self.load_now.notified() => {}
            }
            if !self.lease_held() {
                // Loaded now, it might be taken before the lease is.
                continue;
            }
            if let Err(e) = self.load_once().await {
                // The next load reads everything again.
                *self.loads.lock().expect("loads lock") = Loads::default();
                tracing::warn!(error = %e, "loading the ring failed; retrying");
            }
        }
    }

    /// Reads this node's rings for fires due within the load window and puts
    /// the new ones on the wheel, within `scheduler.max_fires_loaded`.
    async fn load_once(&self) -> Result<(), rondo_core::Error> {
        let bound = self.config.max_fires_loaded.max(1);
        let partitions = self.store.names().partitions();
        let (room, live): (usize, Vec<usize>) = {
            let loaded = self.loaded.lock().expect("loaded lock");
            (
                bound.saturating_sub(loaded.live()),
                (0..partitions).map(|p| loaded.live_in(p)).collect(),
            )
        };
        let read_at = clock::now_ms();
        let until = read_at + self.config.load_ahead_ms;
        let generation = self.lease_generation();
        let after = {
            let mut loads = self.loads.lock().expect("loads lock");
            if room == 0 || (loads.behind && room < bound / 4) {
                // Full: the rings keep the backlog. Whatever they hold is
                // read from the start once there is room.
                loads.behind = true;
                return Ok(());
            }
            let incremental = !loads.behind && !loads.count.is_multiple_of(FULL_LOAD_EVERY);
            loads.count += 1;
            incremental.then_some(loads.horizon)
        };
        let share = room
            .saturating_mul(2)
            .div_ceil(partitions.max(1) as usize)
            .max(MIN_SHARE)
            .min(room);
        // A read from the start lists the live members again (they are
        // still in the ring): its limit makes room for them.
        let limits: Vec<usize> = live
            .iter()
            .map(|l| share.saturating_add(if after.is_none() { *l } else { 0 }))
            .collect();
        let reads = self
            .store
            .node()
            .read_rings(&self.node, after, until, &limits)
            .await?;
        if self.lease_generation() != generation {
            // The lease lapsed during the read: what it listed may be taken.
            return Ok(());
        }
        let chosen = {
            let mut loaded = self.loaded.lock().expect("loaded lock");
            let chosen = choose(reads, |m| loaded.contains(m), room);
            // Acked before this read was sent: gone from the ring for it
            // and every later read.
            loaded.forget_acked_before(read_at);
            chosen
        };
        {
            // Under the wheel's lock, which a lapse holds while it resets
            // the loads: a load that read before a lapse sets nothing.
            let _wheel = self.wheel.lock().expect("wheel lock");
            if self.lease_generation() != generation {
                return Ok(());
            }
            let mut loads = self.loads.lock().expect("loads lock");
            loads.behind = chosen.cut;
            if !chosen.cut {
                loads.horizon = until;
            }
        }
        let mut fresh: Vec<(u32, String, u64, i64)> = Vec::with_capacity(chosen.members.len());
        for (p, m, _) in chosen.members {
            match parse_ring_member(&m) {
                Some((job, fire)) => fresh.push((p, m, job, fire)),
                None => {
                    // Not written by a claim: it can never fire, and left at
                    // the head of the ring it would hold back every later
                    // fire of a bounded load.
                    tracing::error!(partition = p, member = %m, "a ring member that names no fire; removed");
                    self.store.ack(p, &self.node, &m).await?;
                }
            }
        }
        if fresh.is_empty() {
            return Ok(());
        }
        let mut ids: Vec<u64> = fresh.iter().map(|f| f.2).collect();
        ids.sort_unstable();
        ids.dedup();
        let jobs = self.store.get_jobs(&ids).await?;
        let mut entries = Vec::with_capacity(fresh.len());
        for (partition, member, job_id, fire_ms) in fresh {
            let Some(job) = jobs.get(&job_id).filter(|j| j.makes_claimed_fire(fire_ms)) else {
                tracing::info!(
                    job_id,
                    fire_ms,
                    "job deleted, or stopped before this fire, since the claim; fire dropped"
                );
                self.store.ack(partition, &self.node, &member).await?;
                continue;
            };
            entries.push(Entry {
                partition,
                misfire: rondo_core::names::is_misfire_member(&member),
                member,
                job: job.clone(),
                fire_ms,
                attempt: 0,
                generation,
            });
        }
        // On the wheel at once, under its lock, which a lapse holds while
        // it clears the wheel: if the lease lapsed since the read, nothing
        // goes on (the reload after it reads again).
        let mut earliest = i64::MAX;
        {
            let mut wheel = self.wheel.lock().expect("wheel lock");
            if self.lease_generation() != generation {
                return Ok(());
            }
            let mut loaded = self.loaded.lock().expect("loaded lock");
            for entry in entries {
                loaded.insert(entry.member.clone(), entry.partition);
                earliest = earliest.min(entry.fire_ms);
                wheel.insert(entry.fire_ms, entry);
            }
        }
        if earliest != i64::MAX {
            self.wake.notify_one();
        }
        Ok(())
    }
}

/// What a load puts on the wheel.
#[derive(Debug, PartialEq)]
struct Chosen {
    /// `(partition, member, instant)`, earliest first.
    members: Vec<(u32, String, i64)>,
    /// The rings may hold fires this load left there.
    cut: bool,
}

/// Chooses the members a load puts on the wheel: those not loaded yet,
/// earliest first, at most `room`, and none later than the last member of
/// a cut read (that partition's unread members come after its last one
/// read, and a later member of another partition must not go out before
/// them).
fn choose(reads: Vec<RingRead>, loaded: impl Fn(&str) -> bool, room: usize) -> Chosen {
    let mut cut = false;
    let mut up_to = i64::MAX;
    for read in reads.iter().filter(|r| r.cut()) {
        cut = true;
        if let Some((_, ms)) = read.members.last() {
            up_to = up_to.min(*ms);
        }
    }
    let mut members: Vec<(u32, String, i64)> = reads
        .into_iter()
        .flat_map(|r| {
            let p = r.partition;
            r.members.into_iter().map(move |(m, ms)| (p, m, ms))
        })
        .filter(|(_, m, ms)| *ms <= up_to && !loaded(m))
        .collect();
    members.sort_by_key(|(_, _, ms)| *ms);
    if members.len() > room {
        members.truncate(room);
        cut = true;
    }
    Chosen { members, cut }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(partition: u32, limit: usize, members: &[(&str, i64)]) -> RingRead {
        RingRead {
            partition,
            limit,
            members: members.iter().map(|(m, ms)| (m.to_string(), *ms)).collect(),
        }
    }

    fn names(c: &Chosen) -> Vec<&str> {
        c.members.iter().map(|(_, m, _)| m.as_str()).collect()
    }

    #[test]
    fn reads_within_their_limits_load_every_fresh_member_in_order() {
        let reads = vec![
            read(0, 10, &[("a", 1), ("c", 3), ("x", 4)]),
            read(1, 10, &[("b", 2), ("d", 5)]),
        ];
        let c = choose(reads, |m| m == "x", 100);
        assert_eq!(names(&c), ["a", "b", "c", "d"]);
        assert!(!c.cut);
    }

    #[test]
    fn nothing_goes_ahead_of_a_cut_partitions_unread_members() {
        // Partition 0 stopped at its limit at 3: its unread members are at
        // 3 or later, so partition 1's 5 and 6 wait; its 3 may go (same
        // millisecond).
        let reads = vec![
            read(0, 2, &[("a", 1), ("c", 3)]),
            read(1, 10, &[("b", 2), ("b3", 3), ("d", 5), ("e", 6)]),
        ];
        let c = choose(reads, |_| false, 100);
        assert_eq!(names(&c), ["a", "b", "c", "b3"]);
        assert!(c.cut);
    }

    #[test]
    fn loaded_members_count_against_a_reads_limit_but_are_not_loaded_again() {
        // A read from the start lists what is on the wheel; it returned its
        // limit, so it is cut even though only one member is fresh.
        let reads = vec![read(0, 3, &[("a", 1), ("b", 2), ("c", 3)])];
        let c = choose(reads, |m| m != "c", 100);
        assert_eq!(names(&c), ["c"]);
        assert!(c.cut);
    }

    #[test]
    fn the_room_takes_the_earliest_and_leaves_the_rest_behind() {
        let reads = vec![
            read(0, 10, &[("a", 1), ("c", 3)]),
            read(1, 10, &[("b", 2), ("d", 4)]),
        ];
        let c = choose(reads, |_| false, 3);
        assert_eq!(names(&c), ["a", "b", "c"]);
        assert!(c.cut, "d is left in the ring");
        let c = choose(vec![read(0, 10, &[("a", 1)])], |_| false, 0);
        assert!(c.members.is_empty() && c.cut);
    }

    #[test]
    fn an_empty_read_is_not_cut() {
        let c = choose(vec![read(0, 1, &[]), read(1, 1, &[])], |_| false, 5);
        assert_eq!(
            c,
            Chosen {
                members: vec![],
                cut: false
            }
        );
    }
}
