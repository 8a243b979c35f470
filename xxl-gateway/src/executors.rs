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
use rondo_core::{Error, Names, clock};

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
}

/// The rondo executor id of XXL-JOB executor `address` of `app`:
/// `<app>-<host>-<port>` with every other character `-`, and a hash of
/// both when that is longer than 64 characters.
pub fn executor_id(app: &str, address: &str) -> String {
    let rest = address.split_once("://").map_or(address, |(_, r)| r);
    let place: String = rest
        .trim_end_matches('/')
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let id = format!("{app}-{place}");
    if id.len() <= MAX_ID {
        return id;
    }
    use sha2_like::digest8;
    let tail = digest8(&format!("{app}\n{address}"));
    format!("{}-{tail}", &id[..MAX_ID - tail.len() - 1])
}

/// A short, stable hash for ids that must be cut (FNV-1a, 64 bits, hex):
/// not a secret, only a tie-breaker.
mod sha2_like {
    pub fn digest8(text: &str) -> String {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
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
        })
    }
}

/// Why a registration was refused.
#[derive(Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Another address of the app has the same id (hosts that differ only
    /// in punctuation).
    IdTaken { id: String, address: String },
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

    /// Registers (or renews) `address` of `app`; a new one gets a new
    /// incarnation. `address` must be normalized.
    pub async fn register(
        &self,
        app: &str,
        address: &str,
        manual: bool,
        now_ms: i64,
    ) -> Result<Result<Record, Refusal>, Error> {
        let id = executor_id(app, address);
        let key = self.names.xxl_executor(&id);
        let mut conn = self.pool.get().await?;
        let known: Option<String> = conn.hget(&key, "address").await?;
        if let Some(known) = known.filter(|k| k != address) {
            return Ok(Err(Refusal::IdTaken { id, address: known }));
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

    /// The manual address lists of the groups (`xxl_addresses`), by app.
    pub async fn manual_lists(&self) -> Result<HashMap<String, Vec<String>>, Error> {
        let groups: HashMap<String, String> =
            self.pool.get().await?.hgetall(self.names.groups()).await?;
        Ok(groups
            .into_iter()
            .filter_map(|(app, json)| {
                let group: rondo_core::Group = serde_json::from_str(&json).ok()?;
                (!group.xxl_addresses.is_empty()).then_some((app, group.xxl_addresses))
            })
            .collect())
    }

    /// Whether group `app` exists in rondo.
    pub async fn group_exists(&self, app: &str) -> Result<bool, Error> {
        Ok(self
            .pool
            .get()
            .await?
            .hexists(self.names.groups(), app)
            .await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_readable_and_bounded() {
        assert_eq!(
            executor_id("billing", "http://10.0.0.5:9999/"),
            "billing-10-0-0-5-9999"
        );
        let long = executor_id(&"a".repeat(60), "http://host.example.com:9999/");
        assert_eq!(long.len(), MAX_ID);
        assert_ne!(
            long,
            executor_id(&"a".repeat(60), "http://host.example.org:9999/"),
            "cut ids still differ"
        );
    }
}
