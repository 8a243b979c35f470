//! A Redis Cluster: its shared connection, and plain pipelines split by
//! slot (see the parent module's comment).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use redis::aio::ConnectionLike;
use redis::cluster::ClusterClient;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::Slot;
use redis::{Cmd, Pipeline, RedisResult, Value};

use super::health::{Health, moved};

/// A Redis Cluster: one multiplexed connection per node, shared by every
/// caller (the cluster client reconnects and re-reads the slot map itself).
#[derive(Clone)]
pub struct ClusterPool {
    pub(super) client: ClusterClient,
    pub(super) conn: Arc<tokio::sync::RwLock<Option<ClusterConnection>>>,
    pub(super) health: Arc<Health>,
    pub(super) wait: Wait,
}

/// A pipeline on a cluster: as it is when its commands keep to one slot (a
/// transaction must), otherwise split by slot (see the module's comment).
pub(super) async fn cluster_pipeline(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    let slots: Vec<Option<Slot>> = pipeline.cmd_iter().map(slot_of).collect();
    let groups = group_by_slot(&slots);
    if groups.len() <= 1 {
        return one_slot_pipeline(conn, pipeline, offset, count).await;
    }
    if pipeline.is_transaction() {
        let kind: redis::ErrorKind = redis::ServerErrorKind::CrossSlot.into();
        return Err(redis::RedisError::from((
            kind,
            "a transaction spans several hash slots",
        )));
    }
    let commands: Vec<&Cmd> = pipeline.cmd_iter().collect();
    let parts = groups.iter().map(|indexes| {
        let mut part = redis::pipe();
        for i in indexes {
            part.add_command(commands[*i].clone());
        }
        let mut conn = conn.clone();
        async move {
            let n = part.len();
            conn.req_packed_commands(&part, 0, n).await
        }
    });
    let replies = futures_util::future::try_join_all(parts).await?;
    let mut ordered: Vec<Option<Value>> = vec![None; commands.len()];
    for (indexes, values) in groups.iter().zip(replies) {
        for (i, value) in indexes.iter().zip(values) {
            ordered[*i] = Some(value);
        }
    }
    Ok(ordered
        .into_iter()
        .skip(offset)
        .take(count)
        .map(|v| v.unwrap_or(Value::Nil))
        .collect())
}

/// A pipeline of one slot. The cluster client follows `MOVED` and `ASK`
/// for single commands and plain pipelines, but a transaction whose slot
/// moved (a failover, a resharding) comes back aborted, every command
/// refused with `MOVED`, `ASK` or `TRYAGAIN`, nothing applied: then one
/// plain command of the slot teaches the client where the slot is, and the
/// transaction is sent again, for up to [`SLOT_SETTLES`].
async fn one_slot_pipeline(
    conn: &mut ClusterConnection,
    pipeline: &Pipeline,
    offset: usize,
    count: usize,
) -> RedisResult<Vec<Value>> {
    let started = std::time::Instant::now();
    let mut attempt = 0u64;
    loop {
        let reply = conn.req_packed_commands(pipeline, offset, count).await;
        let redirected = matches!(&reply, Err(e) if pipeline.is_transaction() && moved(e));
        if !redirected || started.elapsed() >= SLOT_SETTLES {
            return reply;
        }
        attempt += 1;
        if let Some(key) = pipeline.cmd_iter().find_map(first_key) {
            let _: RedisResult<Value> = redis::cmd("EXISTS").arg(key).query_async(conn).await;
        }
        tokio::time::sleep(Duration::from_millis((50 * attempt).min(500))).await;
    }
}

/// How long a transaction refused for its slot's move is retried: a
/// failover's new master is known within moments, but a slot being
/// migrated (resharding) answers `ASK` for the keys already moved, and a
/// transaction over keys on both sides can only wait until the last key
/// moved.
const SLOT_SETTLES: Duration = Duration::from_secs(5);

/// How [`Connection::replicate`](super::Connection::replicate) waits for replicas (`WAIT`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    pub replicas: u32,
    pub timeout_ms: u64,
}

/// Indexes of the commands of each slot, in order of first appearance; a
/// command without a key goes with the first group.
fn group_by_slot(slots: &[Option<Slot>]) -> Vec<Vec<usize>> {
    let mut order: Vec<Vec<usize>> = Vec::new();
    let mut of_slot: HashMap<Slot, usize> = HashMap::new();
    let mut keyless = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        match slot {
            Some(slot) => {
                let g = *of_slot.entry(*slot).or_insert_with(|| {
                    order.push(Vec::new());
                    order.len() - 1
                });
                order[g].push(i);
            }
            None => keyless.push(i),
        }
    }
    match order.first_mut() {
        Some(first) => {
            first.extend(keyless);
            first.sort_unstable();
        }
        None if !keyless.is_empty() => order.push(keyless),
        None => {}
    }
    order
}

/// The slot of a command's first key (see [`first_key`]).
fn slot_of(cmd: &Cmd) -> Option<Slot> {
    first_key(cmd).map(Slot::for_key)
}

/// A command's first key: the argument after the command name, or after
/// `numkeys` for scripts; `None` for a command without a key.
fn first_key(cmd: &Cmd) -> Option<Vec<u8>> {
    let args: Vec<&[u8]> = cmd
        .args_iter()
        .filter_map(|a| match a {
            redis::Arg::Simple(bytes) => Some(bytes),
            _ => None,
        })
        .collect();
    let name = args.first()?.to_ascii_uppercase();
    let key = match name.as_slice() {
        b"EVAL" | b"EVALSHA" | b"EVAL_RO" | b"EVALSHA_RO" | b"FCALL" | b"FCALL_RO" => {
            let numkeys: usize = std::str::from_utf8(args.get(2)?).ok()?.parse().ok()?;
            if numkeys == 0 {
                return None;
            }
            args.get(3)?
        }
        b"PING" | b"TIME" | b"SCRIPT" | b"INFO" | b"MULTI" | b"EXEC" | b"WAIT" | b"CLUSTER"
        | b"DBSIZE" | b"FLUSHDB" | b"ECHO" => return None,
        _ => args.get(1)?,
    };
    Some(key.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_group_by_the_slot_of_their_first_key() {
        let mut pipe = redis::pipe();
        pipe.zcard("ns:{p0}:due")
            .zcard("ns:{p1}:due")
            .hget("ns:{p0}:job:1", "def")
            .cmd("PING");
        let slots: Vec<Option<Slot>> = pipe.cmd_iter().map(slot_of).collect();
        assert_eq!(slots[0], Some(Slot::for_key("p0")));
        assert_eq!(slots[3], None);
        assert_eq!(group_by_slot(&slots), vec![vec![0, 2, 3], vec![1]]);
    }

    #[test]
    fn a_script_is_routed_by_its_first_key() {
        let script = redis::Script::new("return 1");
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(1).arg("ns:{p7}:term").arg(1);
        assert_eq!(slot_of(&cmd), Some(Slot::for_key("p7")));
        let mut keyless = redis::cmd("EVALSHA");
        keyless.arg(script.get_hash()).arg(0);
        assert_eq!(slot_of(&keyless), None);
    }
}
