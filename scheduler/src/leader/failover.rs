//! Failover of rings: the leader moves the ring members of nodes that are no
//! longer alive (their `/nodes` znode vanished: crash, lost session, or a
//! graceful leave) to live nodes, so their fires still happen.
//!
//! Each partition's `{pK}:rings` set names the nodes that have a ring there,
//! so the leader finds dead rings without scanning the keyspace. For every
//! member of a dead ring:
//!
//! * job deleted or stopped → dropped;
//! * later than the misfire threshold → the job's misfire strategy:
//!   `DO_NOTHING` drops it, `FIRE_ONCE_NOW` keeps one (the latest) of the
//!   job's late fires and fires it now;
//! * otherwise → moved, with its fire time, to the live node the job hashes
//!   to (the same rule as the claim), which fires it at its instant, or at
//!   once if that instant has passed.
//!
//! A member keeps its `<job>:<fire_ms>` name, so its trigger id does not
//! change: if the dead node had published it before dying, the executor's
//! dedupe drops the second copy. The move is the fenced `lua/reassign.lua`.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use rondo_core::names::{MISFIRE_SUFFIX, is_misfire_member, parse_ring_member};
use rondo_core::schedule::MissedRecord;
use rondo_core::{Error, Job, Misfire};

use super::assign::pick_node;
use crate::store::{Move, Store};

/// Members moved per script call.
const CHUNK: usize = 1000;

/// What a failover pass did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FailoverReport {
    pub moved: u64,
    pub dropped: u64,
}

/// Plans the fate of a dead ring's members (see the module doc).
pub fn plan_moves(
    members: &[(String, i64)],
    jobs: &HashMap<u64, Arc<Job>>,
    live: &[String],
    now_ms: i64,
    misfire_threshold_ms: i64,
) -> Vec<Move> {
    let drop = |member: &str, score: i64| Move {
        member: member.to_owned(),
        target: None,
        score,
        rename: None,
        missed: None,
    };
    let threshold = |job: &Job| job.misfire_threshold().unwrap_or(misfire_threshold_ms);
    let late = |job: &Job, score: i64| now_ms - score > threshold(job);
    // The latest late member of each FIRE_ONCE_NOW job is the one fired now.
    let mut fire_now: HashMap<u64, (i64, &str)> = HashMap::new();
    for (member, score) in members {
        let Some((job_id, fire_ms)) = parse_ring_member(member) else {
            continue;
        };
        let Some(job) = jobs.get(&job_id).filter(|j| j.makes_claimed_fire(fire_ms)) else {
            continue;
        };
        if job.misfire == Misfire::FireOnceNow
            && late(job, *score)
            && fire_now.get(&job_id).is_none_or(|(f, _)| *f < fire_ms)
        {
            fire_now.insert(job_id, (fire_ms, member));
        }
    }
    let chosen: HashSet<&str> = fire_now.values().map(|(_, m)| *m).collect();
    let mut moves: Vec<Move> = members
        .iter()
        .map(|(member, score)| {
            let Some((job_id, fire_ms)) = parse_ring_member(member) else { return drop(member, *score) };
            let Some(job) = jobs.get(&job_id).filter(|j| j.makes_claimed_fire(fire_ms)) else { return drop(member, *score) };
            let target = Some(pick_node(job.id, live));
            if !late(job, *score) {
                return Move { member: member.clone(), target, score: *score, rename: None, missed: None };
            }
            if chosen.contains(member.as_str()) {
                // Renamed to a misfire member (trigger type MISFIRE), its
                // fire instant kept so its trigger id does not change.
                let rename = (!is_misfire_member(member))
                    .then(|| format!("{member}{MISFIRE_SUFFIX}"));
                return Move { member: member.clone(), target, score: now_ms, rename, missed: None };
            }
            tracing::warn!(job_id, member = %member, late_ms = now_ms - score, strategy = %job.misfire, "misfire of a dead node's fire");
            drop(member, *score)
        })
        .collect();
    attach_missed(&mut moves, jobs, now_ms, misfire_threshold_ms);
    moves
}

/// Gives each job with late members one record of what it missed, carried
/// by the first of its late moves (the script records it only if it moves
/// or drops that member, so a retried call does not count it twice).
fn attach_missed(
    moves: &mut [Move],
    jobs: &HashMap<u64, Arc<Job>>,
    now_ms: i64,
    misfire_threshold_ms: i64,
) {
    // Per job: index of the carrying move, the late fires, the dropped ones
    // and the one fired now.
    let mut per_job: HashMap<u64, (usize, Vec<i64>, u64, Option<i64>)> = HashMap::new();
    for (i, m) in moves.iter().enumerate() {
        let Some((job_id, fire_ms)) = parse_ring_member(&m.member) else {
            continue;
        };
        let Some(job) = jobs.get(&job_id).filter(|j| j.makes_claimed_fire(fire_ms)) else {
            continue;
        };
        let threshold = job.misfire_threshold().unwrap_or(misfire_threshold_ms);
        if now_ms - fire_ms <= threshold {
            continue;
        }
        let entry = per_job.entry(job_id).or_insert((i, Vec::new(), 0, None));
        entry.1.push(fire_ms);
        if m.target.is_none() {
            entry.2 += 1;
        } else {
            entry.3 = Some(fire_ms);
        }
    }
    for (job_id, (carrier, fires, skipped, fired)) in per_job {
        let job = &jobs[&job_id];
        let record = MissedRecord {
            detected_ms: now_ms,
            first_ms: fires.iter().copied().min().unwrap_or(now_ms),
            last_ms: fires.iter().copied().max().unwrap_or(now_ms),
            count: fires.len() as u64,
            skipped,
            cause: "NODE_LOST".to_owned(),
            strategy: job.misfire.as_str().to_owned(),
            threshold_ms: job.misfire_threshold().unwrap_or(misfire_threshold_ms),
            fired_ms: fired,
        };
        let json = serde_json::to_string(&record).expect("a record serializes");
        moves[carrier].missed = Some((skipped, json));
    }
}

/// A `FIX_DELAY` job whose fire was dropped as a misfire gets no result to
/// arm its next fire: it is armed here, one delay from now (once: only if
/// the dropped fire is the one the job awaits). A leader that dies between
/// the drop and this leaves the job unarmed until it is saved or started.
async fn rearm_dropped_delays(
    store: &Store,
    moves: &[Move],
    jobs: &HashMap<u64, Arc<Job>>,
) -> Result<(), Error> {
    for m in moves.iter().filter(|m| m.target.is_none()) {
        let Some((job_id, fire_ms)) = parse_ring_member(&m.member) else {
            continue;
        };
        // A stopped job is never re-armed.
        let Some(job) = jobs.get(&job_id).filter(|j| j.enabled) else {
            continue;
        };
        if let Ok(rondo_core::schedule::Schedule::FixDelay(delay)) = job.schedule() {
            let next = rondo_core::clock::now_ms().saturating_add(delay);
            store.rearm_fix_delay(job_id, fire_ms, next).await?;
        }
    }
    Ok(())
}

/// Moves every dead node's ring members to live nodes.
pub async fn failover_pass(
    store: &Store,
    term: u64,
    live: &[String],
    misfire_threshold_ms: i64,
) -> Result<FailoverReport, Error> {
    debug_assert!(!live.is_empty());
    let mut report = FailoverReport::default();
    for (p, owners) in store.leader().ring_owners().await?.into_iter().enumerate() {
        for dead in owners.iter().filter(|o| !live.contains(o)) {
            let (moved, dropped) =
                drain_ring(store, p as u32, term, dead, live, misfire_threshold_ms).await?;
            if moved + dropped > 0 {
                tracing::info!(node = %dead, partition = p, moved, dropped, term, "reassigned a dead node's ring");
            }
            report.moved += moved;
            report.dropped += dropped;
        }
    }
    Ok(report)
}

async fn drain_ring(
    store: &Store,
    p: u32,
    term: u64,
    dead: &str,
    live: &[String],
    threshold: i64,
) -> Result<(u64, u64), Error> {
    let (mut moved, mut dropped) = (0, 0);
    loop {
        let members = store.leader().ring_members(p, dead, CHUNK).await?;
        let mut ids: Vec<u64> = members
            .iter()
            .filter_map(|(m, _)| parse_ring_member(m).map(|(j, _)| j))
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let jobs = store.get_jobs(&ids).await?;
        let moves = plan_moves(
            &members,
            &jobs,
            live,
            rondo_core::clock::now_ms(),
            threshold,
        );
        let (m, d) = store.leader().reassign(p, term, dead, live, &moves).await?;
        rearm_dropped_delays(store, &moves, &jobs).await?;
        moved += m;
        dropped += d;
        if members.len() < CHUNK {
            return Ok((moved, dropped));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_core::JobSpec;

    fn job(id: u64, misfire: &str, enabled: bool) -> Arc<Job> {
        let spec = JobSpec {
            group: Some("g".into()),
            handler: Some("h".into()),
            misfire: Some(misfire.into()),
            enabled: Some(enabled),
            ..JobSpec::default()
        };
        Arc::new(spec.validate(id, 0, None).unwrap())
    }

    fn live() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn on_time_members_move_with_their_fire_time() {
        let jobs = HashMap::from([(1, job(1, "DO_NOTHING", true))]);
        let moves = plan_moves(&[("1:10000".into(), 10_000)], &jobs, &live(), 12_000, 5_000);
        assert_eq!(
            moves,
            vec![Move {
                member: "1:10000".into(),
                target: Some(pick_node(1, &live())),
                score: 10_000,
                rename: None,
                missed: None,
            }]
        );
    }

    #[test]
    fn late_do_nothing_members_are_dropped() {
        let jobs = HashMap::from([(1, job(1, "DO_NOTHING", true))]);
        let moves = plan_moves(&[("1:1000".into(), 1_000)], &jobs, &live(), 12_000, 5_000);
        assert_eq!(moves[0].target, None);
        let (skipped, record) = moves[0].missed.clone().expect("a missed record");
        let record: MissedRecord = serde_json::from_str(&record).unwrap();
        assert_eq!(skipped, 1);
        assert_eq!(
            (
                record.cause.as_str(),
                record.first_ms,
                record.count,
                record.fired_ms
            ),
            ("NODE_LOST", 1_000, 1, None)
        );
    }

    #[test]
    fn a_jobs_own_threshold_decides_lateness_in_a_failover() {
        let mut patient = (*job(1, "DO_NOTHING", true)).clone();
        patient.misfire_threshold_ms = Some(60_000);
        let jobs = HashMap::from([(1, Arc::new(patient))]);
        let moves = plan_moves(&[("1:1000".into(), 1_000)], &jobs, &live(), 12_000, 5_000);
        assert_eq!((moves[0].target.is_some(), moves[0].score), (true, 1_000));
        assert_eq!(moves[0].missed, None);
    }

    #[test]
    fn late_fire_once_now_fires_only_the_latest_now() {
        let jobs = HashMap::from([(1, job(1, "FIRE_ONCE_NOW", true))]);
        let members = [
            ("1:1000".to_owned(), 1_000),
            ("1:2000".to_owned(), 2_000),
            ("1:11000".to_owned(), 11_000),
        ];
        let moves = plan_moves(&members, &jobs, &live(), 12_000, 5_000);
        assert_eq!(moves[0].target, None, "older late fire dropped");
        assert_eq!(
            (moves[1].target.is_some(), moves[1].score),
            (true, 12_000),
            "latest late fire fires now"
        );
        assert_eq!(
            moves[1].rename.as_deref(),
            Some("1:2000:m"),
            "as a MISFIRE, with its own trigger id"
        );
        let (skipped, record) = moves[0].missed.clone().expect("one record, on the first");
        let record: MissedRecord = serde_json::from_str(&record).unwrap();
        assert_eq!(
            (skipped, record.count, record.fired_ms),
            (1, 2, Some(2_000))
        );
        assert_eq!(
            (moves[2].target.is_some(), moves[2].score),
            (true, 11_000),
            "on-time fire keeps its instant"
        );
    }

    #[test]
    fn members_of_deleted_or_stopped_jobs_and_garbage_are_dropped() {
        let jobs = HashMap::from([(2, job(2, "DO_NOTHING", false))]);
        let members = [
            ("1:10000".to_owned(), 10_000),
            ("2:10000".to_owned(), 10_000),
            ("junk".to_owned(), 10_000),
        ];
        let moves = plan_moves(&members, &jobs, &live(), 10_000, 5_000);
        assert!(moves.iter().all(|m| m.target.is_none()), "{moves:?}");
        assert_eq!(moves.len(), 3);
    }
}
