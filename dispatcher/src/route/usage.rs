//! LEAST_FREQUENTLY_USED and LEAST_RECENTLY_USED with cluster-wide state.
//!
//! XXL-JOB keeps both maps in one admin's memory, so with two admins each
//! balances only its own fires. rondo keeps them in Redis, one key per job,
//! and reads, picks and updates in one Lua script: two scheduler nodes
//! routing the same job at the same instant are serialised by Redis, and the
//! second sees the first's pick.
//!
//! * LFU: a HASH executor → uses. New executors start at a random count
//!   below the group size (XXL-JOB's "random once to ease the first fires"),
//!   the least used is picked, and the hash expires 24 h after it was
//!   created, so frequencies are per day (XXL-JOB clears its map every 24 h).
//! * LRU: a ZSET executor → last use (ms, Redis clock). The least recently
//!   used is picked; an executor never used comes first. The set is dropped
//!   after 24 h without use.

use std::sync::LazyLock;

use rand::Rng;
use redis::Script;
use rondo_core::{Error, Job};

use super::context::RouteContext;

/// LFU counts restart this long after the first use in a window.
const LFU_WINDOW_MS: i64 = 24 * 3600 * 1000;
/// A count above this is reseeded (XXL-JOB's overflow guard).
const LFU_RESEED_ABOVE: u64 = 1_000_000;
/// LRU state of a job unused this long is dropped.
const LRU_IDLE_TTL_MS: i64 = 24 * 3600 * 1000;

static LFU: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/lfu.lua")));
static LRU: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("../../lua/lru.lua")));

/// LEAST_FREQUENTLY_USED: the executor this job used least today.
pub async fn least_frequently_used(
    job: &Job,
    executors: &[&str],
    ctx: &RouteContext,
) -> Result<String, Error> {
    let mut invocation = LFU.key(ctx.names.route_lfu(job.id));
    invocation.arg(LFU_WINDOW_MS).arg(LFU_RESEED_ABOVE);
    for (id, seed) in executors.iter().zip(seeds(executors.len())) {
        invocation.arg(*id).arg(seed);
    }
    let mut conn = ctx.pool.get().await?;
    let picked: String = invocation.invoke_async(&mut conn).await?;
    checked(picked, executors)
}

/// LEAST_RECENTLY_USED: the executor this job used longest ago.
pub async fn least_recently_used(
    job: &Job,
    executors: &[&str],
    ctx: &RouteContext,
) -> Result<String, Error> {
    let mut invocation = LRU.key(ctx.names.route_lru(job.id));
    invocation.arg(LRU_IDLE_TTL_MS);
    for id in executors {
        invocation.arg(*id);
    }
    let mut conn = ctx.pool.get().await?;
    let picked: String = invocation.invoke_async(&mut conn).await?;
    checked(picked, executors)
}

/// XXL-JOB's starting counts: random, below the group size. (Drawn before
/// any await: the thread-local generator must not live across one.)
fn seeds(group_size: usize) -> Vec<usize> {
    let mut rng = rand::rng();
    (0..group_size)
        .map(|_| rng.random_range(0..group_size))
        .collect()
}

/// The scripts return one of the ids they were given; anything else is a bug.
fn checked(picked: String, executors: &[&str]) -> Result<String, Error> {
    if executors.contains(&picked.as_str()) {
        Ok(picked)
    } else {
        Err(Error::internal(format!(
            "routing script picked {picked:?}, not a live executor"
        )))
    }
}
