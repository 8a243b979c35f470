//! The XXL-JOB executors the gateways serve, kept in Redis so that every
//! gateway instance serves the same ones: an index `ns:xxl:executors`
//! (rondo executor id scored by the last registration) and one hash per
//! executor `ns:xxl:executor:<id>` (its [`Record`]).
//!
//! An executor gets here by registering (`/api/registry`, every 30 s from
//! `xxl-job-core`) or by being listed in its group's `xxl_addresses`
//! (XXL-JOB's manual address list). It leaves by `/api/registryRemove`, by
//! not registering for `xxl.registration_ttl_ms` (XXL-JOB's 90 s), or by
//! leaving its group's list.

use std::collections::HashMap;

use redis::AsyncCommands;
use rondo_core::redis::Pool;
use rondo_core::{Error, Group, Names, clock, registry};
use sha2::{Digest, Sha256};

use crate::wire::Generation;

/// The longest executor id (it names a queue and Redis keys).
const MAX_ID: usize = 64;

/// One XXL-JOB executor, as the gateways know it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Its rondo executor id ([`executor_id`]).
    pub id: String,
    pub app: String,
    /// As registered, ending in `/`.
    pub address: String,
    /// From its group's address list, not from a registration.
    pub manual: bool,
    /// New each time it (re)enters the fleet: what its dedupe marks say.
    pub incarnation: String,
    /// When it entered the fleet (ms).
    pub first_ms: i64,
    /// Its last registration (ms); manual ones: the last time the list was
    /// read.
    pub registered_ms: i64,
    /// What `xxl-job-core` generation it runs, once a trigger told (the
    /// first send learns it: the other generation refuses the path).
    pub generation: Option<Generation>,
    /// The fingerprint of the access token it registered with (it is sent
    /// that one while its group takes it); empty for a listed address.
    pub token_fp: String,
}

/// The rondo executor id of XXL-JOB executor `address` of `app`:
/// `<app>-<host>-<port>` with every other character `-` (cut to fit), then
/// `-` and 12 hex digits of the SHA-256 of both. The readable part alone
/// would let two addresses share an id (`http://127-0-0-1:8771/` and
/// `http://127.0.0.1:8771/`, or app `a` at `b.c` and app `a-b` at `c`);
/// the digest keeps every address of every group apart.
pub fn executor_id(app: &str, address: &str) -> String {
    let digest = Sha256::digest(format!("{app}\n{address}").as_bytes());
    let tail: String = digest.iter().take(6).map(|b| format!("{b:02x}")).collect();
    let mut head = readable_id(app, address);
    // Only ASCII here (app names are), so any cut is a boundary.
    head.truncate(MAX_ID - tail.len() - 1);
    format!("{head}-{tail}")
}

/// The readable part of an executor id (all of it, before ids ended in a
/// digest): `<app>-<host>-<port>` with every other character `-`.
pub fn readable_id(app: &str, address: &str) -> String {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    let place: String = rest
        .trim_end_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    format!("{app}-{place}")
}

impl Record {
    fn from_hash(id: &str, hash: &HashMap<String, String>) -> Option<Record> {
        let get = |k: &str| hash.get(k).cloned();
        Some(Record {
            id: id.to_owned(),
            app: get("app")?,
            address: get("address")?,
            manual: get("manual").as_deref() == Some("1"),
            incarnation: get("incarnation")?,
            first_ms: get("first_ms")?.parse().ok()?,
            registered_ms: get("registered_ms")?.parse().ok()?,
            generation: match get("generation").as_deref() {
                Some("2") => Some(Generation::Two),
                Some("3") => Some(Generation::Three),
                _ => None,
            },
            token_fp: get("token_fp").unwrap_or_default(),
        })
    }
}

/// Why a registration was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another address has the same id (a digest collision: never seen).
    IdTaken { id: String, address: String },
    /// A rondo executor of that id is live: its queue is not the
    /// gateway's to consume.
    NativeId {
        id: String,
        app: String,
        host: String,
    },
}

impl Refusal {
    /// The refusal as the registration's answer says it, naming both.
    pub fn message(&self, address: &str) -> String {
        match self {
            Refusal::IdTaken { id, address: known } => format!(
                "registryValue {address:?}: its rondo executor id {id} is that of {known:?} already; give the executor another address"
            ),
            Refusal::NativeId { id, app, host } => format!(
                "registryValue {address:?}: its rondo executor id {id} is that of a live rondo executor of group {app:?} on {host:?}; give the executor another address"
            ),
        }
    }
}

/// The executors' records in Redis.
#[derive(Clone)]
pub struct Executors {
    pool: Pool,
    names: Names,
}

impl Executors {
    pub fn new(pool: Pool, names: Names) -> Executors {
        Executors { pool, names }
    }

    /// Registers (or renews) `address` of `app`, which registered with the
    /// token of fingerprint `token_fp` (empty for a listed address); a new
    /// one gets a new incarnation. `address` must be normalized. Refused
    /// when its id is another executor's, of the gateway or rondo's own.
    pub async fn register(
        &self,
        app: &str,
        address: &str,
        manual: bool,
        token_fp: &str,
        now_ms: i64,
    ) -> Result<Result<Record, Refusal>, Error> {
        let id = executor_id(app, address);
        let key = self.names.xxl_executor(&id);
        let mut conn = self.pool.get().await?;
        let known: Option<String> = conn.hget(&key, "address").await?;
        if let Some(known) = known.as_ref().filter(|k| *k != address) {
            return Ok(Err(Refusal::IdTaken {
                id,
                address: known.clone(),
            }));
        }
        if known.is_none()
            && let Some(refusal) = self.native_holder(&mut conn, &id).await?
        {
            return Ok(Err(refusal));
        }
        let incarnation = format!("{:016x}", rand::random::<u64>());
        let mut pipe = redis::pipe();
        pipe.hset_nx(&key, "incarnation", &incarnation)
            .ignore()
            .hset_nx(&key, "first_ms", now_ms)
            .ignore()
            .hset_multiple(
                &key,
                &[
                    ("app", app),
                    ("address", address),
                    ("manual", if manual { "1" } else { "0" }),
                    ("token_fp", token_fp),
                ],
            )
            .ignore()
            .hset(&key, "registered_ms", now_ms)
            .ignore()
            .zadd(self.names.xxl_executors(), &id, now_ms)
            .ignore()
            .hgetall(&key);
        let (hash,): (HashMap<String, String>,) = pipe.query_async(&mut conn).await?;
        Record::from_hash(&id, &hash).map(Ok).ok_or_else(|| {
            Error::internal(format!("executor record {id} unreadable after its write"))
        })
    }

    /// The rondo executor (not the gateway's) that holds id `id`, if its
    /// registry entry is there: the gateway's executors' entries say
    /// `via`, a rondo executor's do not.
    async fn native_holder(
        &self,
        conn: &mut rondo_core::redis::Connection,
        id: &str,
    ) -> Result<Option<Refusal>, Error> {
        let hash: HashMap<String, String> = conn.hgetall(self.names.executor(id)).await?;
        let Some(entry) = registry::Entry::from_fields(&hash) else {
            return Ok(None);
        };
        Ok(entry.via.is_empty().then(|| Refusal::NativeId {
            id: id.to_owned(),
            app: entry.app,
            host: entry.host,
        }))
    }

    /// One executor's record, if it is in the fleet.
    pub async fn get(&self, id: &str) -> Result<Option<Record>, Error> {
        let hash: HashMap<String, String> = self
            .pool
            .get()
            .await?
            .hgetall(self.names.xxl_executor(id))
            .await?;
        Ok(Record::from_hash(id, &hash))
    }

    /// Removes an executor from the fleet (every gateway stops serving it),
    /// noting it departed: runs it had that no callback answers are failed
    /// as lost by the lost-run scan.
    pub async fn remove(&self, id: &str) -> Result<(), Error> {
        let mut pipe = redis::pipe();
        pipe.zrem(self.names.xxl_executors(), id)
            .ignore()
            .del(self.names.xxl_executor(id))
            .ignore()
            .zadd(self.names.xxl_departed(), id, clock::now_ms())
            .ignore();
        let () = pipe.query_async(&mut self.pool.get().await?).await?;
        Ok(())
    }

    /// Every executor of the fleet.
    pub async fn load(&self) -> Result<Vec<Record>, Error> {
        let mut conn = self.pool.get().await?;
        let ids: Vec<String> = conn.zrange(self.names.xxl_executors(), 0, -1).await?;
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let mut pipe = redis::pipe();
        for id in &ids {
            pipe.hgetall(self.names.xxl_executor(id));
        }
        let hashes: Vec<HashMap<String, String>> = pipe.query_async(&mut conn).await?;
        let mut records = Vec::with_capacity(ids.len());
        let mut broken = Vec::new();
        for (id, hash) in ids.iter().zip(&hashes) {
            match Record::from_hash(id, hash) {
                Some(r) => records.push(r),
                None => broken.push(id.clone()),
            }
        }
        if !broken.is_empty() {
            // An index entry whose hash is gone (removed meanwhile, or a
            // write cut short): drop it.
            let _: () = conn.zrem(self.names.xxl_executors(), &broken).await?;
        }
        Ok(records)
    }

    /// Notes which `xxl-job-core` an executor runs.
    pub async fn set_generation(&self, id: &str, generation: Generation) -> Result<(), Error> {
        let value = match generation {
            Generation::Two => "2",
            Generation::Three => "3",
        };
        let mut conn = self.pool.get().await?;
        let key = self.names.xxl_executor(id);
        // Only onto a record that still exists.
        if conn.exists::<_, bool>(&key).await? {
            let () = conn.hset(&key, "generation", value).await?;
        }
        Ok(())
    }

    /// Every group (the served ones say `xxl_gateway`); a group whose
    /// JSON does not read is left out.
    pub async fn groups(&self) -> Result<Vec<Group>, Error> {
        let groups: HashMap<String, String> =
            self.pool.get().await?.hgetall(self.names.groups()).await?;
        Ok(groups
            .values()
            .filter_map(|json| serde_json::from_str(json).ok())
            .collect())
    }

    /// Group `app`, if it exists.
    pub async fn group(&self, app: &str) -> Result<Option<Group>, Error> {
        let json: Option<String> = self
            .pool
            .get()
            .await?
            .hget(self.names.groups(), app)
            .await?;
        Ok(json.and_then(|j| serde_json::from_str(&j).ok()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_readable_bounded_and_never_shared() {
        let id = executor_id("billing", "http://10.0.0.5:9999/");
        assert!(id.starts_with("billing-10-0-0-5-9999-"), "{id}");
        assert_eq!(id.len(), "billing-10-0-0-5-9999-".len() + 12);
        let long = executor_id(&"a".repeat(60), "http://host.example.com:9999/");
        assert_eq!(long.len(), MAX_ID);
        assert_ne!(
            long,
            executor_id(&"a".repeat(60), "http://host.example.org:9999/"),
            "cut ids still differ"
        );
        // Punctuation and the app's own dashes no longer fold together.
        assert_ne!(
            executor_id("app", "http://127.0.0.1:8771/"),
            executor_id("app", "http://127-0-0-1:8771/")
        );
        assert_ne!(
            executor_id("a", "http://b.c:1/"),
            executor_id("a-b", "http://c:1/")
        );
    }
}
