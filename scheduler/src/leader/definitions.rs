//! Job definitions parsed for the claim, kept from one tick to the next.
//!
//! A claim needs each due job's definition: whether it is enabled, its
//! schedule, its misfire rule. Reading and decoding the JSON and parsing
//! the schedule cost several µs a job; jobs that fire every few seconds are
//! due in every tick with the same definition, and reading 600 bytes of
//! JSON a job from Redis in every tick costs Redis as much again. Every
//! save and delete of a job sets its partition's version `{pK}:defs-ver`
//! to a new random token in the same transaction (a rebuild from MySQL and
//! a layout move set new ones when they are done); the claim reads the token
//! with the due set, and a definition whose bytes it read after reading
//! the same token cannot have changed: it is reused without a read
//! ([`Definitions::unchanged`]), so an edit is still seen at once. The
//! others are read (one `HMGET`) and reuse what was parsed from the same
//! bytes ([`Definitions::parse`]). What was not due in this tick or the one
//! before is dropped, so the cache holds at most two ticks' due jobs, and
//! never more than [`MAX_KEPT`] a tick.
//!
//! Parsing a cron expression (the Quartz port builds a set per field) costs
//! about 10 µs, seven times the JSON; jobs often share their expression
//! ("every hour", "every five minutes"), so parsed schedules are also kept
//! per expression and zone, up to [`MAX_SCHEDULES`].

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rondo_core::Misfire;
use rondo_core::model::JobSchedule;
use rondo_core::schedule::{MisfireRule, Schedule};

/// Definitions kept per tick, at most (beyond, they are parsed every time).
const MAX_KEPT: usize = 262_144;
/// Distinct schedules kept, at most (when full, they are forgotten at once).
const MAX_SCHEDULES: usize = 16_384;

/// One job's definition as the claim needs it ([`JobSchedule`]), its
/// schedule parsed.
#[derive(Debug)]
pub(super) struct Parsed {
    /// The stored bytes it was parsed from.
    raw: String,
    pub enabled: bool,
    pub misfire: Misfire,
    /// The job's own misfire threshold (ms), if it sets one.
    pub misfire_threshold: Option<i64>,
    /// The schedule, or why the stored one does not parse.
    pub schedule: Result<Arc<Schedule>, String>,
}

impl Parsed {
    pub fn misfire_rule(&self) -> MisfireRule {
        self.misfire.rule()
    }
}

#[derive(Debug)]
pub(super) struct Definitions {
    /// Definitions kept per tick, at most ([`MAX_KEPT`]).
    max_kept: usize,
    ticks: Mutex<Ticks>,
    /// Parsed schedules by type, zone and expression.
    schedules: Mutex<HashMap<String, Arc<Schedule>>>,
}

#[derive(Debug, Default)]
struct Ticks {
    this: HashMap<u64, Kept>,
    before: HashMap<u64, Kept>,
}

/// A parsed definition and the version of its partition's definitions
/// (`{pK}:defs-ver`) read before its bytes were (`None`: there was none).
#[derive(Debug, Clone)]
struct Kept {
    parsed: Arc<Parsed>,
    version: Option<u64>,
}

impl Default for Definitions {
    fn default() -> Self {
        Definitions::keeping(MAX_KEPT)
    }
}

impl Definitions {
    fn keeping(max_kept: usize) -> Self {
        Definitions {
            max_kept,
            ticks: Mutex::default(),
            schedules: Mutex::default(),
        }
    }

    /// The kept definitions of `ids` that cannot have changed: those whose
    /// bytes were read after their partition's definitions version was
    /// read as `version` (every write to a partition's definitions raises
    /// its version in the same transaction). `None` for the others, which
    /// the caller reads and passes to [`Definitions::parse`].
    pub fn unchanged(&self, version: Option<u64>, ids: &[u64]) -> Vec<Option<Arc<Parsed>>> {
        if version.is_none() {
            return vec![None; ids.len()];
        }
        let mut ticks = self.ticks.lock().expect("definitions lock");
        ids.iter()
            .map(|id| {
                let kept = ticks.this.get(id).cloned().or_else(|| {
                    let kept = ticks.before.remove(id)?;
                    if ticks.this.len() < self.max_kept {
                        ticks.this.insert(*id, kept.clone());
                    }
                    Some(kept)
                })?;
                (kept.version == version).then_some(kept.parsed)
            })
            .collect()
    }

    /// The parsed definitions of `ids` from their stored bytes `defs` (same
    /// order), read after their partition's definitions version was read as
    /// `version`; `None` where a job is gone or its definition does not
    /// decode.
    pub fn parse(
        &self,
        version: Option<u64>,
        ids: &[u64],
        defs: Vec<Option<String>>,
    ) -> Vec<Option<Arc<Parsed>>> {
        let mut out: Vec<Option<Arc<Parsed>>> = Vec::with_capacity(ids.len());
        let mut misses = Vec::new();
        {
            let mut ticks = self.ticks.lock().expect("definitions lock");
            for (i, (id, def)) in ids.iter().zip(defs).enumerate() {
                let Some(def) = def else {
                    out.push(None);
                    continue;
                };
                // The same bytes as kept: the parse is reused, and known
                // current as of `version`.
                let same = |k: &Kept| k.parsed.raw == def;
                let kept = match ticks.this.get_mut(id) {
                    Some(k) if same(k) => {
                        k.version = version;
                        Some(k.parsed.clone())
                    }
                    _ => match ticks.before.remove(id) {
                        Some(mut k) if same(&k) => {
                            k.version = version;
                            let parsed = k.parsed.clone();
                            if ticks.this.len() < self.max_kept {
                                ticks.this.insert(*id, k);
                            }
                            Some(parsed)
                        }
                        _ => None,
                    },
                };
                if kept.is_none() {
                    misses.push((i, *id, def));
                }
                out.push(kept);
            }
        }
        if misses.is_empty() {
            return out;
        }
        let parsed: Vec<(usize, u64, Arc<Parsed>)> = misses
            .into_iter()
            .filter_map(|(i, id, raw)| {
                let parsed = match serde_json::from_str::<JobSchedule>(&raw) {
                    Ok(fields) => Parsed {
                        enabled: fields.enabled,
                        misfire: fields.misfire,
                        misfire_threshold: fields.misfire_threshold(),
                        schedule: self.schedule(&fields),
                        raw,
                    },
                    Err(e) => {
                        tracing::error!(job_id = id, error = %e, "stored job definition does not decode");
                        return None;
                    }
                };
                Some((i, id, Arc::new(parsed)))
            })
            .collect();
        let mut ticks = self.ticks.lock().expect("definitions lock");
        for (i, id, parsed) in parsed {
            if ticks.this.len() < self.max_kept {
                let kept = Kept {
                    parsed: parsed.clone(),
                    version,
                };
                ticks.this.insert(id, kept);
            }
            out[i] = Some(parsed);
        }
        out
    }

    /// A job's schedule, parsed once per type, zone and expression.
    fn schedule(&self, job: &JobSchedule) -> Result<Arc<Schedule>, String> {
        let key = format!(
            "{}\0{}\0{}",
            job.schedule_type.as_str(),
            job.zone,
            job.schedule_conf
        );
        if let Some(s) = self.schedules.lock().expect("schedules lock").get(&key) {
            return Ok(s.clone());
        }
        let schedule = job.schedule().map_err(|e| e.to_string())?;
        let schedule = Arc::new(schedule);
        let mut schedules = self.schedules.lock().expect("schedules lock");
        if schedules.len() >= MAX_SCHEDULES {
            schedules.clear();
        }
        schedules.insert(key, schedule.clone());
        Ok(schedule)
    }

    /// A tick ended: what it did not use is forgotten at the end of the next.
    /// The map of the tick before is emptied and reused for the next tick,
    /// keeping its size: grown anew by doubling each tick, its tables were
    /// fresh memory the kernel zeroed, a tenth of a claim of 10 k jobs.
    pub fn end_tick(&self) {
        let mut ticks = self.ticks.lock().expect("definitions lock");
        let ticks = &mut *ticks;
        std::mem::swap(&mut ticks.this, &mut ticks.before);
        ticks.this.clear();
        // Room for a tick like the one that ended; a crowd long gone is
        // given back.
        let last = ticks.before.len();
        ticks.this.shrink_to(last + last / 2);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_core::Job;

    fn def(id: u64, cron: &str) -> String {
        let job = Job {
            schedule_conf: cron.to_owned(),
            ..rondo_core::testkit::fixtures::job(id)
        };
        serde_json::to_string(&job).expect("serializes")
    }

    #[test]
    fn the_same_bytes_are_parsed_once_and_an_edit_is_seen_at_once() {
        let defs = Definitions::default();
        let a = defs.parse(None, &[1], vec![Some(def(1, "0 * * * * ?"))]);
        let again = defs.parse(None, &[1], vec![Some(def(1, "0 * * * * ?"))]);
        assert!(Arc::ptr_eq(
            a[0].as_ref().unwrap(),
            again[0].as_ref().unwrap()
        ));
        let edited = defs.parse(None, &[1], vec![Some(def(1, "30 * * * * ?"))]);
        assert!(!Arc::ptr_eq(
            a[0].as_ref().unwrap(),
            edited[0].as_ref().unwrap()
        ));
        assert_eq!(
            edited[0].as_ref().unwrap().raw,
            def(1, "30 * * * * ?"),
            "parsed from the edited bytes"
        );
    }

    #[test]
    fn a_definition_is_kept_for_the_next_tick_and_dropped_after_one_without_it() {
        let defs = Definitions::default();
        let first = defs.parse(None, &[1, 2], vec![Some(def(1, "* * * * * ?")), None]);
        assert!(first[1].is_none(), "a job gone");
        defs.end_tick();
        let next = defs.parse(None, &[1], vec![Some(def(1, "* * * * * ?"))]);
        assert!(Arc::ptr_eq(
            first[0].as_ref().unwrap(),
            next[0].as_ref().unwrap()
        ));
        defs.end_tick();
        defs.end_tick();
        let later = defs.parse(None, &[1], vec![Some(def(1, "* * * * * ?"))]);
        assert!(!Arc::ptr_eq(
            first[0].as_ref().unwrap(),
            later[0].as_ref().unwrap()
        ));
    }

    #[test]
    fn a_definition_read_under_the_current_version_is_reused_unread() {
        let defs = Definitions::default();
        let bytes = || vec![Some(def(1, "0 * * * * ?")), Some(def(2, "0 * * * * ?"))];
        let read = defs.parse(Some(7), &[1, 2], bytes());
        let same = defs.unchanged(Some(7), &[1, 2, 3]);
        assert!(Arc::ptr_eq(
            read[0].as_ref().unwrap(),
            same[0].as_ref().unwrap()
        ));
        assert!(same[1].is_some());
        assert!(same[2].is_none(), "never read: to read");
        // The partition was written since (another token), or has no
        // token: everything is read again.
        assert!(defs.unchanged(Some(8), &[1, 2]).iter().all(Option::is_none));
        assert!(defs.unchanged(None, &[1, 2]).iter().all(Option::is_none));
        // Read again under the new token, the same bytes keep their parse
        // and are then reused under it, also after a tick.
        let again = defs.parse(Some(8), &[1, 2], bytes());
        assert!(Arc::ptr_eq(
            read[0].as_ref().unwrap(),
            again[0].as_ref().unwrap()
        ));
        defs.end_tick();
        assert!(defs.unchanged(Some(8), &[1, 2]).iter().all(Option::is_some));
        assert!(defs.unchanged(Some(7), &[1, 2]).iter().all(Option::is_none));
        // Read with no token at all: never reused unread.
        defs.parse(None, &[1], vec![Some(def(1, "0 * * * * ?"))]);
        assert!(defs.unchanged(Some(8), &[1])[0].is_none());
    }

    #[test]
    fn jobs_with_one_expression_and_zone_share_its_parse() {
        let defs = Definitions::default();
        let got = defs.parse(
            None,
            &[1, 2, 3],
            vec![
                Some(def(1, "0 0 * * * ?")),
                Some(def(2, "0 0 * * * ?")),
                Some(
                    serde_json::to_string(&Job {
                        zone: "Asia/Shanghai".into(),
                        schedule_conf: "0 0 * * * ?".into(),
                        ..rondo_core::testkit::fixtures::job(3)
                    })
                    .expect("serializes"),
                ),
            ],
        );
        let schedule = |i: usize| got[i].as_ref().unwrap().schedule.clone().unwrap();
        assert!(Arc::ptr_eq(&schedule(0), &schedule(1)));
        assert!(!Arc::ptr_eq(&schedule(0), &schedule(2)), "another zone");
    }

    #[test]
    fn a_tick_keeps_at_most_its_cap_also_of_definitions_carried_over() {
        let defs = Definitions::keeping(10);
        let raw = |ids: &[u64]| ids.iter().map(|id| Some(def(*id, "0 0 * * * ?"))).collect();
        let old: Vec<u64> = (0..10).collect();
        defs.parse(None, &old, raw(&old));
        defs.end_tick();
        // New ones first fill the tick, then the last tick's come back.
        let new: Vec<u64> = (100..110).collect();
        defs.parse(None, &new, raw(&new));
        defs.parse(None, &old, raw(&old));
        assert_eq!(defs.ticks.lock().unwrap().this.len(), 10);
    }

    #[test]
    fn the_claim_takes_what_it_needs_from_a_whole_stored_job() {
        let defs = Definitions::default();
        let job = Job {
            enabled: false,
            misfire: Misfire::FireOnceNow,
            misfire_threshold_ms: Some(30_000),
            zone: "Asia/Shanghai".into(),
            schedule_conf: "0 0 8 * * ?".into(),
            params: "a \"quoted\" param".into(),
            ..rondo_core::testkit::fixtures::job(1)
        };
        let got = defs.parse(None, &[1], vec![Some(serde_json::to_string(&job).unwrap())]);
        let got = got[0].as_ref().unwrap();
        assert!(!got.enabled);
        assert_eq!(got.misfire, Misfire::FireOnceNow);
        assert_eq!(got.misfire_threshold, Some(30_000));
        // 2026-01-01T00:00:00Z: 08:00 in Shanghai is 00:00 UTC, the next
        // is a day later.
        let new_year = 1_767_225_600_000;
        let next = |p: &Parsed| p.schedule.as_ref().unwrap().next_after(new_year);
        assert_eq!(next(got), Some(new_year + 86_400_000), "read in its zone");
        // A job stored before zones existed runs in UTC.
        let mut old: serde_json::Value = serde_json::to_value(&job).unwrap();
        old.as_object_mut().unwrap().remove("zone");
        let got = defs.parse(None, &[2], vec![Some(old.to_string())]);
        assert_eq!(
            next(got[0].as_ref().unwrap()),
            Some(new_year + 8 * 3_600_000)
        );
    }

    #[test]
    fn a_schedule_that_does_not_parse_is_kept_as_its_error() {
        let defs = Definitions::default();
        let bad = defs.parse(None, &[1], vec![Some(def(1, "not a cron"))]);
        assert!(bad[0].as_ref().unwrap().schedule.is_err());
        let undecodable = defs.parse(None, &[2], vec![Some("{".to_owned())]);
        assert!(undecodable[0].is_none());
    }
}
