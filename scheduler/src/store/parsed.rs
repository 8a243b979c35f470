//! Job definitions decoded once per version of their bytes, shared by every
//! reader of one node (the loader, the result monitor, the failover's and
//! the offline-queue drain's reads, the API's lists).
//!
//! The loader puts every fire on the wheel with its job's definition, read
//! from Redis when the fire is loaded, and the monitor reads the definition
//! again for the fire's result: at 10 k fires/s, decoding those 600-byte
//! JSON documents took about 9 % of the scheduler's CPU (`perf`, the
//! throughput scenario), for jobs whose definitions rarely change. The
//! readers still read the bytes (what is current is what Redis holds), but
//! a definition whose bytes equal those it was decoded from is not decoded
//! again: the decoded job is shared. Any edit changes the bytes (the
//! definition carries its `updated_ms`), so it is decoded at once.
//!
//! Kept in two generations: a lookup moves an entry from the older one to
//! the newer; when the newer holds [`MAX_KEPT`] definitions or
//! [`MAX_BYTES`] of their JSON, it becomes the older and the older is
//! dropped. So the jobs read in the recent past stay, and at most two
//! generations are kept: `2 × MAX_BYTES` of JSON and the decoded jobs,
//! about as large again, however large the definitions (a script may be
//! 64 KiB).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rondo_core::{Error, Job};

/// Definitions per generation, at most.
const MAX_KEPT: usize = 32_768;
/// Bytes of stored JSON per generation, at most.
const MAX_BYTES: usize = 16 << 20;

#[derive(Debug)]
pub(crate) struct ParsedJobs {
    max_kept: usize,
    max_bytes: usize,
    generations: Mutex<Generations>,
}

#[derive(Debug, Default)]
struct Generations {
    newer: HashMap<u64, Kept>,
    /// The JSON bytes of `newer`'s definitions.
    newer_bytes: usize,
    older: HashMap<u64, Kept>,
}

#[derive(Debug, Clone)]
struct Kept {
    /// The stored bytes the job was decoded from.
    raw: Arc<str>,
    job: Arc<Job>,
}

impl Default for ParsedJobs {
    fn default() -> Self {
        ParsedJobs::keeping(MAX_KEPT, MAX_BYTES)
    }
}

impl Generations {
    /// Keeps `kept` in the newer generation; when that one is full, it
    /// becomes the older one, and the older one is returned, for the
    /// caller to drop once it released the lock.
    fn insert(
        &mut self,
        limits: (usize, usize),
        id: u64,
        kept: Kept,
    ) -> Option<HashMap<u64, Kept>> {
        let (max_kept, max_bytes) = limits;
        let bytes = kept.raw.len();
        let mut dropped = None;
        if !self.newer.is_empty()
            && (self.newer.len() >= max_kept || self.newer_bytes + bytes > max_bytes)
        {
            let newer = std::mem::take(&mut self.newer);
            dropped = Some(std::mem::replace(&mut self.older, newer));
            self.newer_bytes = 0;
        }
        self.newer_bytes += bytes;
        if let Some(old) = self.newer.insert(id, kept) {
            self.newer_bytes -= old.raw.len();
        }
        dropped
    }
}

impl ParsedJobs {
    fn keeping(max_kept: usize, max_bytes: usize) -> Self {
        ParsedJobs {
            max_kept: max_kept.max(1),
            max_bytes,
            generations: Mutex::default(),
        }
    }

    fn limits(&self) -> (usize, usize) {
        (self.max_kept, self.max_bytes)
    }

    /// The jobs decoded from `defs`, the stored definitions of `ids` (same
    /// order; `None` where a job is gone): `None` for a gone job, an error
    /// for a definition that does not decode.
    pub fn decode(
        &self,
        ids: &[u64],
        defs: Vec<Option<String>>,
    ) -> Vec<Option<Result<Arc<Job>, Error>>> {
        let mut out: Vec<Option<Result<Arc<Job>, Error>>> = Vec::with_capacity(ids.len());
        let mut misses: Vec<(usize, u64, String)> = Vec::new();
        // Generations pushed out, dropped after the lock is released.
        let mut dropped = Vec::new();
        {
            let mut generations = self.generations.lock().expect("parsed jobs lock");
            for (i, (id, def)) in ids.iter().zip(defs).enumerate() {
                let Some(def) = def else {
                    out.push(None);
                    continue;
                };
                let kept = match generations.newer.get(id) {
                    Some(k) if *k.raw == *def => Some(k.job.clone()),
                    Some(_) => None,
                    None => match generations.older.remove(id) {
                        Some(k) if *k.raw == *def => {
                            let job = k.job.clone();
                            dropped.extend(generations.insert(self.limits(), *id, k));
                            Some(job)
                        }
                        _ => None,
                    },
                };
                match kept {
                    Some(job) => out.push(Some(Ok(job))),
                    None => {
                        misses.push((i, *id, def));
                        out.push(None);
                    }
                }
            }
        }
        drop(dropped);
        if misses.is_empty() {
            return out;
        }
        // Decoded outside the lock; kept in one more.
        let mut fresh: Vec<(u64, Kept)> = Vec::with_capacity(misses.len());
        for (i, id, def) in misses {
            match serde_json::from_str::<Job>(&def) {
                Ok(job) => {
                    let job = Arc::new(job);
                    out[i] = Some(Ok(job.clone()));
                    fresh.push((
                        id,
                        Kept {
                            raw: def.into(),
                            job,
                        },
                    ));
                }
                Err(e) => out[i] = Some(Err(e.into())),
            }
        }
        let mut dropped = Vec::new();
        {
            let mut generations = self.generations.lock().expect("parsed jobs lock");
            for (id, kept) in fresh {
                dropped.extend(generations.insert(self.limits(), id, kept));
            }
        }
        drop(dropped);
        out
    }

    #[cfg(test)]
    fn kept(&self) -> usize {
        let g = self.generations.lock().expect("parsed jobs lock");
        g.newer.len() + g.older.len()
    }
}

#[cfg(test)]
mod tests {
    use rondo_core::JobSpec;

    use super::*;

    fn def(id: u64, handler: &str) -> String {
        let spec = JobSpec {
            group: Some("g".into()),
            handler: Some(handler.into()),
            ..JobSpec::default()
        };
        let job = spec.validate(id, 1_700_000_000_000, None).expect("valid");
        serde_json::to_string(&job).expect("encodes")
    }

    fn one(jobs: &ParsedJobs, id: u64, raw: &str) -> Arc<Job> {
        let mut out = jobs.decode(&[id], vec![Some(raw.to_owned())]);
        out.pop().flatten().expect("present").expect("decodes")
    }

    #[test]
    fn the_same_bytes_share_one_decoded_job_and_other_bytes_are_decoded() {
        let jobs = ParsedJobs::default();
        let a = def(1, "a");
        let first = one(&jobs, 1, &a);
        assert!(Arc::ptr_eq(&first, &one(&jobs, 1, &a)), "not decoded again");
        let edited = def(1, "b");
        let second = one(&jobs, 1, &edited);
        assert_eq!(second.handler, "b", "an edit is seen at once");
        assert!(!Arc::ptr_eq(&first, &second));
        assert!(Arc::ptr_eq(&second, &one(&jobs, 1, &edited)));
    }

    #[test]
    fn gone_jobs_and_undecodable_definitions_are_reported_and_not_kept() {
        let jobs = ParsedJobs::default();
        let out = jobs.decode(
            &[1, 2, 3],
            vec![None, Some("{not json".into()), Some(def(3, "c"))],
        );
        assert!(out[0].is_none());
        assert!(matches!(out[1], Some(Err(_))));
        assert_eq!(out[2].as_ref().unwrap().as_ref().unwrap().id, 3);
        assert_eq!(jobs.kept(), 1);
    }

    #[test]
    fn recently_read_jobs_stay_and_the_rest_is_dropped_within_two_generations() {
        let jobs = ParsedJobs::keeping(2, usize::MAX);
        let defs: Vec<String> = (0..4).map(|id| def(id, "h")).collect();
        let (a0, a1) = (one(&jobs, 0, &defs[0]), one(&jobs, 1, &defs[1]));
        // The newer generation is full: 0 and 1 become the older one.
        one(&jobs, 2, &defs[2]);
        // 0 read again: moved to the newer generation, not decoded again.
        assert!(Arc::ptr_eq(&a0, &one(&jobs, 0, &defs[0])));
        // Full again (2, 0): it becomes the older one, and 1 is dropped.
        one(&jobs, 3, &defs[3]);
        assert!(
            !Arc::ptr_eq(&a1, &one(&jobs, 1, &defs[1])),
            "1 was dropped and is decoded again"
        );
        assert!(Arc::ptr_eq(&a0, &one(&jobs, 0, &defs[0])), "0 stayed");
        assert!(jobs.kept() <= 4, "two generations at most");
    }

    #[test]
    fn a_generation_also_ends_at_its_bytes() {
        let defs: Vec<String> = (0..3).map(|id| def(id, "h")).collect();
        // Room for two definitions' bytes, not three.
        let jobs = ParsedJobs::keeping(1_000, defs[0].len() * 2 + 1);
        let a0 = one(&jobs, 0, &defs[0]);
        one(&jobs, 1, &defs[1]);
        one(&jobs, 2, &defs[2]);
        let g = jobs.generations.lock().unwrap();
        assert_eq!((g.newer.len(), g.older.len()), (1, 2));
        assert_eq!(g.newer_bytes, defs[2].len());
        drop(g);
        assert!(
            Arc::ptr_eq(&a0, &one(&jobs, 0, &defs[0])),
            "the older one is read"
        );
    }
}
