//! Events turned into table rows, grouped by table: the pure half of a write.
//!
//! Each row type holds exactly the columns its statement writes. Rows are
//! sorted by key (stably, so two events for one key keep their order) so
//! that concurrent workers lock rows in the same order and do not deadlock.

use chrono::{DateTime, Datelike, NaiveDateTime};
use rondo_core::Event;
use rondo_core::event::{AlarmRecord, AuditRecord, LogLines, TriggerRecord};
use rondo_core::trigger::ExecResult;
use rondo_core::{Group, Job};

/// Free text (messages, log lines) is clipped to this many bytes so that a
/// long stack trace fits a `TEXT` column instead of rejecting the event.
pub(crate) const MAX_TEXT_BYTES: usize = 60_000;
const CLIPPED: &str = " …[truncated]";

/// One executor group version; a delete is a tombstone with an empty title.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GroupRow {
    pub app: String,
    pub title: String,
    /// `xxl_addresses` as a JSON array; empty when there are none.
    pub xxl_addresses: String,
    pub xxl_gateway: bool,
    /// `xxl_access` as JSON; empty when no token is set.
    pub xxl_access: String,
    pub updated_ms: i64,
    pub deleted: bool,
}

/// One job version; a delete is a tombstone carrying only id and time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JobRow {
    pub job: Job,
    pub deleted: bool,
}

/// The trigger side of a `job_log` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TriggerRow {
    pub record: TriggerRecord,
    pub trigger_time: Option<NaiveDateTime>,
    pub msg: String,
}

/// The handle side of a `job_log` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResultRow {
    pub result: ExecResult,
    pub handle_start: Option<NaiveDateTime>,
    pub handle_time: Option<NaiveDateTime>,
    pub msg: String,
}

/// The alarm side of a `job_log` row: what alarming a failed trigger did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AlarmRow {
    pub record: AlarmRecord,
    pub msg: String,
}

/// One log line of a trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LineRow {
    pub trigger_id: String,
    /// u64 so that `first_seq + i` cannot overflow here; MySQL rejects a
    /// value past `INT UNSIGNED`, which isolates that one event.
    pub seq: u64,
    pub ts_ms: i64,
    pub line: String,
}

/// The rows of a batch of events, one list per statement.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(crate) struct Rows {
    pub groups: Vec<GroupRow>,
    pub jobs: Vec<JobRow>,
    pub triggers: Vec<TriggerRow>,
    pub results: Vec<ResultRow>,
    /// A trigger and its result met in one batch: written as one complete
    /// row instead of two upserts of the same row (half the MySQL work).
    pub complete: Vec<(TriggerRow, ResultRow)>,
    pub alarms: Vec<AlarmRow>,
    pub lines: Vec<LineRow>,
    pub audit: Vec<AuditRecord>,
    /// Deleted jobs' last states (`job_deleted`), for a restore.
    pub deleted_jobs: Vec<DeletedJobRow>,
}

/// A deleted job's last state, as JSON (with its secrets: as `job` keeps
/// them), and when it was deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DeletedJobRow {
    pub id: u64,
    pub deleted_ms: i64,
    pub job: String,
}

impl Rows {
    /// Splits events by table and sorts each table's rows by key.
    pub fn from_events(events: &[Event]) -> Rows {
        let mut rows = Rows::default();
        for event in events {
            rows.push(event);
        }
        rows.groups.sort_by(|a, b| a.app.cmp(&b.app));
        rows.jobs.sort_by_key(|r| r.job.id);
        rows.triggers.sort_by(|a, b| {
            a.record
                .trigger
                .trigger_id
                .cmp(&b.record.trigger.trigger_id)
        });
        rows.results
            .sort_by(|a, b| a.result.trigger_id.cmp(&b.result.trigger_id));
        rows.alarms
            .sort_by(|a, b| a.record.trigger_id.cmp(&b.record.trigger_id));
        rows.lines
            .sort_by(|a, b| (&a.trigger_id, a.seq).cmp(&(&b.trigger_id, b.seq)));
        rows.audit.sort_by(|a, b| a.id.cmp(&b.id));
        rows.pair_triggers_with_results();
        rows
    }

    /// Moves each trigger whose result is in the same batch (one of each
    /// for the key) into `complete`. Keys seen more than once on a side
    /// stay apart: their order between versions matters and the separate
    /// upserts already resolve it.
    fn pair_triggers_with_results(&mut self) {
        use std::collections::HashMap;
        type Key = (String, i64);
        let mut counts: HashMap<Key, (u32, u32)> = HashMap::new();
        for t in &self.triggers {
            counts
                .entry((
                    t.record.trigger.trigger_id.clone(),
                    t.record.trigger.fire_ms,
                ))
                .or_default()
                .0 += 1;
        }
        for r in &self.results {
            counts
                .entry((r.result.trigger_id.clone(), r.result.fire_ms))
                .or_default()
                .1 += 1;
        }
        let pairs = |k: &Key| counts.get(k) == Some(&(1, 1));
        let mut results: HashMap<Key, ResultRow> = HashMap::new();
        let mut kept_results = Vec::with_capacity(self.results.len());
        for r in std::mem::take(&mut self.results) {
            let key = (r.result.trigger_id.clone(), r.result.fire_ms);
            if pairs(&key) {
                results.insert(key, r);
            } else {
                kept_results.push(r);
            }
        }
        let mut kept_triggers = Vec::with_capacity(self.triggers.len());
        for t in std::mem::take(&mut self.triggers) {
            let key = (
                t.record.trigger.trigger_id.clone(),
                t.record.trigger.fire_ms,
            );
            match results.remove(&key) {
                Some(r) => self.complete.push((t, r)),
                None => kept_triggers.push(t),
            }
        }
        debug_assert!(results.is_empty());
        self.triggers = kept_triggers;
        self.results = kept_results;
    }

    fn push(&mut self, event: &Event) {
        match event {
            Event::GroupUpserted { group } => self.groups.push(group_row(group)),
            Event::GroupDeleted { app, at_ms } => self.groups.push(GroupRow {
                app: app.clone(),
                title: String::new(),
                xxl_addresses: String::new(),
                xxl_gateway: false,
                xxl_access: String::new(),
                updated_ms: *at_ms,
                deleted: true,
            }),
            Event::JobUpserted { job } => self.jobs.push(JobRow {
                job: job.clone(),
                deleted: false,
            }),
            Event::JobDeleted { id, at_ms, last } => {
                self.jobs.push(tombstone(*id, *at_ms));
                if let Some(job) = last {
                    self.deleted_jobs.push(DeletedJobRow {
                        id: *id,
                        deleted_ms: *at_ms,
                        job: serde_json::to_string(job).unwrap_or_default(),
                    });
                }
            }
            Event::Triggered(record) => self.triggers.push(TriggerRow {
                trigger_time: datetime(record.trigger.sent_ms),
                msg: clip(&record.msg),
                record: record.clone(),
            }),
            Event::Result(result) => self.results.push(ResultRow {
                handle_start: datetime(result.start_ms),
                handle_time: datetime(result.end_ms),
                msg: clip(&result.msg),
                result: result.clone(),
            }),
            Event::Log(lines) => self.lines.extend(line_rows(lines)),
            Event::Alarm(record) => self.alarms.push(AlarmRow {
                msg: clip(&record.msg),
                record: record.clone(),
            }),
            Event::Audit(record) => self.audit.push(AuditRecord {
                detail: record.detail.as_deref().map(clip),
                ..record.clone()
            }),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
            && self.jobs.is_empty()
            && self.triggers.is_empty()
            && self.results.is_empty()
            && self.complete.is_empty()
            && self.alarms.is_empty()
            && self.lines.is_empty()
            && self.audit.is_empty()
            && self.deleted_jobs.is_empty()
    }
}

fn group_row(group: &Group) -> GroupRow {
    GroupRow {
        app: group.app.clone(),
        title: group.title.clone(),
        xxl_addresses: if group.xxl_addresses.is_empty() {
            String::new()
        } else {
            serde_json::to_string(&group.xxl_addresses).unwrap_or_default()
        },
        xxl_gateway: group.xxl_gateway,
        xxl_access: if group.xxl_access.is_empty() {
            String::new()
        } else {
            serde_json::to_string(&group.xxl_access).unwrap_or_default()
        },
        updated_ms: group.updated_ms,
        deleted: false,
    }
}

/// A deleted job: the id and the deletion time; the other columns are
/// emptied (see `upsert` for why a tombstone does not keep the definition).
fn tombstone(id: u64, at_ms: i64) -> JobRow {
    JobRow {
        job: Job {
            enabled: false,
            updated_ms: at_ms,
            ..Job::new(id, "", "")
        },
        deleted: true,
    }
}

fn line_rows(lines: &LogLines) -> impl Iterator<Item = LineRow> + '_ {
    lines.lines.iter().enumerate().map(|(i, line)| LineRow {
        trigger_id: lines.trigger_id.clone(),
        seq: u64::from(lines.first_seq) + i as u64,
        ts_ms: line.ts_ms,
        line: clip(&line.text),
    })
}

/// Milliseconds since the epoch as a UTC `DATETIME(3)`; `None` (stored as
/// NULL) outside MySQL's range of years 1000 to 9999.
pub(crate) fn datetime(ms: i64) -> Option<NaiveDateTime> {
    let at = DateTime::from_timestamp_millis(ms)?.naive_utc();
    (1000..=9999).contains(&at.year()).then_some(at)
}

/// Clips text to [`MAX_TEXT_BYTES`] on a character boundary, marking the cut.
pub(crate) fn clip(text: &str) -> String {
    rondo_core::model::clip(text, MAX_TEXT_BYTES, CLIPPED)
}

#[cfg(test)]
mod tests;
