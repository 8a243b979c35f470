//! The due sets and the claim (the leader's view): the fenced term of
//! each partition, reading what is due, and the claim script that moves
//! due jobs' fires into the nodes' rings.

use redis::Script;
use rondo_core::{Error, Names};

use super::views::{ApiStore, LeaderStore};

/// One job's part of a claim call.
#[derive(Debug, Clone)]
pub struct ClaimItem {
    pub job_id: u64,
    pub expected_score: i64,
    pub next: Option<i64>,
    /// Index into the node list passed with the claim.
    pub node: usize,
    pub fires: Vec<i64>,
    /// The fire in `fires` that is a misfire fired now (`MISFIRE`).
    pub misfire_fire: Option<i64>,
    /// Fires the job missed: how many never ran, and the record kept.
    pub missed: Option<(u64, String)>,
    /// A fixed-delay job's fire whose final result arms its next one.
    pub awaited: Option<i64>,
}

/// The claim script's call for `items` (see `lua/claim.lua`): every
/// write built here, so the script only checks the due scores and
/// applies them. Written straight into one command's buffer: a claim of
/// 1,000 jobs has about 5,000 arguments, and a `ScriptInvocation` would
/// allocate each of them and copy them all once more.
fn claim_cmd(
    names: &Names,
    script: &Script,
    partition: u32,
    term: u64,
    nodes: &[String],
    items: &[&ClaimItem],
) -> redis::Cmd {
    let (capacity, missed, awaited) = claim_capacity(nodes, items);
    let mut cmd = rondo_core::redis::script_cmd(script, 5 + nodes.len(), capacity);
    cmd.arg(names.term(partition))
        .arg(names.due(partition))
        .arg(names.ring_owners(partition))
        .arg(names.misfires(partition))
        .arg(names.delays(partition));
    for node in nodes {
        cmd.arg(names.ring(partition, node));
    }
    cmd.arg(term);
    for node in nodes {
        cmd.arg(node);
    }
    cmd.arg(items.len());
    for item in items {
        cmd.arg(item.job_id);
    }
    cmd.arg(items.len());
    for item in items {
        cmd.arg(item.expected_score);
    }
    let advance = items.iter().filter(|i| i.next.is_some()).count();
    cmd.arg(2 * advance);
    for item in items {
        if let Some(next) = item.next {
            cmd.arg(next).arg(item.job_id);
        }
    }
    cmd.arg(items.len() - advance);
    for item in items.iter().filter(|i| i.next.is_none()) {
        cmd.arg(item.job_id);
    }
    // Each fire goes to a ring of the list; a fire with no ring would be
    // lost while its job advances.
    assert!(
        items.iter().all(|i| i.node < nodes.len()),
        "a node out of the list"
    );
    let mut member = String::new();
    for node in 0..nodes.len() {
        let on_node = || items.iter().filter(move |i| i.node == node);
        cmd.arg(2 * on_node().map(|i| i.fires.len()).sum::<usize>());
        for item in on_node() {
            for &fire in &item.fires {
                member.clear();
                rondo_core::names::write_ring_member(&mut member, item.job_id, fire);
                if item.misfire_fire == Some(fire) {
                    member.push_str(rondo_core::names::MISFIRE_SUFFIX);
                }
                cmd.arg(fire).arg(member.as_str());
            }
        }
    }
    cmd.arg(3 * missed.len());
    for item in items {
        if let Some((skipped, record)) = &item.missed {
            cmd.arg(item.job_id).arg(skipped).arg(record);
        }
    }
    cmd.arg(2 * awaited);
    for item in items {
        if let Some(fire) = item.awaited {
            cmd.arg(item.job_id).arg(fire);
        }
    }
    cmd
}

/// What [`claim_cmd`] will add to its command, (arguments, bytes), at
/// most; and the missed records and awaited fires it counts on the way.
fn claim_capacity<'a>(
    nodes: &[String],
    items: &[&'a ClaimItem],
) -> ((usize, usize), Vec<&'a str>, usize) {
    let fires: usize = items.iter().map(|i| i.fires.len()).sum();
    let missed: Vec<&str> = items
        .iter()
        .filter_map(|i| i.missed.as_ref().map(|(_, record)| record.as_str()))
        .collect();
    let awaited = items.iter().filter(|i| i.awaited.is_some()).count();
    let advance = items.iter().filter(|i| i.next.is_some()).count();
    let leave = items.len() - advance;
    // Keys, and node ids as arguments: up to 80 bytes each.
    let names = 5 + 2 * nodes.len();
    // Numbers, up to 20 bytes each: the term; the jobs and their scores;
    // the advanced jobs' pairs and the ids that leave; each ring's fire
    // instants; the missed jobs' ids and skipped counts; the awaited
    // pairs; and the count before each section.
    let numbers = 1
        + 2 * items.len()
        + 2 * advance
        + leave
        + fires
        + 2 * missed.len()
        + 2 * awaited
        + 6
        + nodes.len();
    // Ring members ('<job>:<fire ms>:m', up to 43 bytes), the records.
    let capacity = (
        names + numbers + fires + missed.len(),
        80 * names + 20 * numbers + 43 * fires + missed.iter().map(|r| r.len()).sum::<usize>(),
    );
    (capacity, missed, awaited)
}

impl LeaderStore<'_> {
    /// Raises a partition's accepted term; returns what it accepts after.
    pub async fn raise_term(&self, partition: u32, term: u64) -> Result<u64, Error> {
        let mut conn = self.0.conn().await?;
        let accepted: u64 = self
            .0
            .raise_term
            .key(self.0.names.term(partition))
            .arg(term)
            .invoke_async(&mut conn)
            .await?;
        Ok(accepted)
    }

    /// Jobs of a partition due at or before `horizon_ms`, oldest first,
    /// and the partition's definitions version (`{pK}:defs-ver`; `None`
    /// before this build's first write), read in one round trip.
    pub async fn read_due(
        &self,
        partition: u32,
        horizon_ms: i64,
        limit: usize,
    ) -> Result<(Vec<(u64, i64)>, Option<u64>), Error> {
        let mut conn = self.0.conn().await?;
        let (rows, version): (Vec<(u64, f64)>, Option<u64>) = redis::pipe()
            .zrangebyscore_limit_withscores(
                self.0.names.due(partition),
                "-inf",
                horizon_ms,
                0,
                limit as isize,
            )
            .get(self.0.names.defs_version(partition))
            .query_async(&mut conn)
            .await?;
        let due = rows.into_iter().map(|(id, s)| (id, s as i64)).collect();
        Ok((due, version))
    }

    /// Runs the fenced claim script; returns `(claimed, skipped)`.
    /// `StaleTerm` when a newer leader has raised the partition's term.
    /// The script applies all of `items` or none: when some jobs' due
    /// scores moved (updated, stopped or claimed meanwhile), it writes
    /// nothing and names them, and the others are claimed by a second call
    /// (skipped: the moved ones).
    pub async fn claim(
        &self,
        partition: u32,
        term: u64,
        nodes: &[String],
        items: &[ClaimItem],
    ) -> Result<(u64, u64), Error> {
        let mut items: Vec<&ClaimItem> = items.iter().collect();
        let mut skipped = 0u64;
        let mut conn = self.0.conn().await?;
        while !items.is_empty() {
            let cmd = claim_cmd(&self.0.names, &self.0.claim, partition, term, nodes, &items);
            let reply: Vec<i64> =
                rondo_core::redis::run_script(&mut conn, &self.0.claim, &cmd).await?;
            match reply.split_first() {
                Some((&-1, moved)) => {
                    // Nothing was written: claim the others again.
                    let moved: std::collections::HashSet<usize> =
                        moved.iter().map(|&i| i as usize - 1).collect();
                    skipped += moved.len() as u64;
                    items = items
                        .into_iter()
                        .enumerate()
                        .filter(|(i, _)| !moved.contains(i))
                        .map(|(_, item)| item)
                        .collect();
                }
                Some((&claimed, _)) => return Ok((claimed as u64, skipped)),
                None => return Err(Error::internal("the claim script answered nothing")),
            }
        }
        Ok((0, skipped))
    }
}

impl ApiStore<'_> {
    /// Sizes of every partition's due set.
    pub async fn due_sizes(&self) -> Result<Vec<u64>, Error> {
        let mut pipe = redis::pipe();
        for p in 0..self.0.names.partitions() {
            pipe.zcard(self.0.names.due(p));
        }
        Ok(pipe.query_async(&mut self.0.conn().await?).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim script's arguments in the order `lua/claim.lua` reads
    /// them, for a small batch with every section.
    #[test]
    fn a_claim_command_has_the_layout_the_script_reads() {
        let names = Names::new("ns", 4);
        let script = Script::new("return 1");
        let nodes = ["a".to_owned(), "b".to_owned()];
        let item = |job_id, next, node, fires: &[i64]| ClaimItem {
            job_id,
            expected_score: 1000 + job_id as i64,
            next,
            node,
            fires: fires.to_vec(),
            misfire_fire: None,
            missed: None,
            awaited: None,
        };
        let items = [
            ClaimItem {
                misfire_fire: Some(1000),
                missed: Some((3, "{r}".to_owned())),
                ..item(1, Some(2000), 1, &[1000, 1500])
            },
            item(2, None, 0, &[1200]),
            ClaimItem {
                awaited: Some(1300),
                ..item(3, Some(5000), 1, &[1300])
            },
        ];
        let items: Vec<&ClaimItem> = items.iter().collect();
        let cmd = claim_cmd(&names, &script, 2, 9, &nodes, &items);
        let args: Vec<String> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => String::from_utf8_lossy(b).into_owned(),
                _ => "?".to_owned(),
            })
            .collect();
        let hash = script.get_hash().to_owned();
        let want = [
            "EVALSHA",
            &hash,
            "7",
            // keys: term, due, ring owners, misfires, delays, one ring per node
            &names.term(2),
            &names.due(2),
            &names.ring_owners(2),
            &names.misfires(2),
            &names.delays(2),
            &names.ring(2, "a"),
            &names.ring(2, "b"),
            // the term, the nodes
            "9",
            "a",
            "b",
            // the jobs, their expected scores
            "3",
            "1",
            "2",
            "3",
            "3",
            "1001",
            "1002",
            "1003",
            // advance: (next, job) pairs; leave
            "4",
            "2000",
            "1",
            "5000",
            "3",
            "1",
            "2",
            // node a's ring, node b's (the misfire marked)
            "2",
            "1200",
            "2:1200",
            "6",
            "1000",
            "1:1000:m",
            "1500",
            "1:1500",
            "1300",
            "3:1300",
            // missed triples, awaited pairs
            "3",
            "1",
            "3",
            "{r}",
            "2",
            "3",
            "1300",
        ];
        assert_eq!(args, want);
    }

    /// The command's buffers are sized once: what the claim of a varied
    /// batch adds (several nodes, fires in the window, a misfire, a missed
    /// record, a job that leaves, a fixed delay's awaited fire) fits in
    /// what [`claim_capacity`] reserved.
    #[test]
    fn a_claim_command_fits_the_room_made_for_it() {
        let names = Names::new("a-namespace-of-some-length-0123456789", 64);
        let script = Script::new("return 1");
        let nodes: Vec<String> = (0..3)
            .map(|n| format!("node-{n}-host.example.org:8080"))
            .collect();
        let now = 1_800_000_000_000_i64;
        let items: Vec<ClaimItem> = (0..500_u64)
            .map(|k| ClaimItem {
                job_id: u64::MAX - k,
                expected_score: now,
                next: (k % 7 != 0).then_some(now + 1_000),
                node: (k % 3) as usize,
                fires: (0..(k % 4) as i64).map(|f| now + f * 250).collect(),
                misfire_fire: (k % 5 == 0 && k % 4 > 0).then_some(now),
                missed: (k % 11 == 0).then(|| {
                    (
                        k,
                        format!("{{\"detected_ms\":{now},\"cause\":\"MISFIRE\"}}"),
                    )
                }),
                awaited: (k % 13 == 0).then_some(now),
            })
            .collect();
        let items: Vec<&ClaimItem> = items.iter().collect();
        let ((args, bytes), _, _) = claim_capacity(&nodes, &items);
        let cmd = claim_cmd(&names, &script, 63, u64::MAX, &nodes, &items);
        let written: Vec<usize> = cmd
            .args_iter()
            .map(|a| match a {
                redis::Arg::Simple(b) => b.len(),
                _ => 0,
            })
            .collect();
        // EVALSHA, the hash and the number of keys come on top.
        assert_eq!(written.len(), args + 3, "the count of arguments is exact");
        let data: usize = written.iter().sum();
        assert!(
            data <= bytes + 64,
            "{data} bytes written, {bytes} + 64 reserved"
        );
    }
}
