//! Events published to the `events` topic exchange. The persistence worker
//! stores them all; the result monitor reads `result.*`.
//!
//! A message body is a JSON array of events of the same routing key, so a
//! publisher may batch; a batch of one is `[event]`. Every event is keyed by
//! an id (group app, job id, trigger id, trigger id + line sequence), so
//! storing it twice or out of order ends in the same row.

use serde::{Deserialize, Serialize};

use crate::model::{Group, Job};
use crate::trigger::{ExecResult, Trigger};

/// The dispatcher's record of a trigger: published, or failed before it
/// reached an executor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct TriggerRecord {
    pub trigger: Trigger,
    /// 200 when the broker confirmed it, 500 when it could not be published.
    pub code: i32,
    pub msg: String,
}

/// Log lines a handler wrote, in order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLines {
    pub trigger_id: String,
    pub job_id: u64,
    /// Sequence number of the first line (lines are numbered from 0 per trigger).
    pub first_seq: u32,
    pub lines: Vec<LogLine>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogLine {
    pub ts_ms: i64,
    pub text: String,
}

/// XXL-JOB's alarm status of a trigger log: 0 default, 1 no alarm needed,
/// 2 sent, 3 sending failed.
pub mod alarm_status {
    pub const DEFAULT: i32 = 0;
    pub const NOT_NEEDED: i32 = 1;
    pub const SENT: i32 = 2;
    pub const FAILED: i32 = 3;
    /// rondo's: the alarm waits in the outbox (gathering, throttled).
    pub const QUEUED: i32 = 4;
    /// rondo's: counted into the alarm of another trigger of the job.
    pub const FOLDED: i32 = 5;
}

/// The outcome of alarming for one failed trigger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmRecord {
    pub trigger_id: String,
    pub job_id: u64,
    /// With the trigger id, the key of the log row.
    pub fire_ms: i64,
    /// One of [`alarm_status`].
    pub status: i32,
    pub msg: String,
}

/// Who changed or ran what, when, from where: one row of the audit log.
/// Published, and confirmed by the broker, before the API answers the
/// change it records, so a MySQL outage delays it and loses nothing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct AuditRecord {
    /// Random, unique: storing the record twice keeps one row.
    pub id: String,
    pub at_ms: i64,
    pub username: String,
    /// `job.create`, `job.update`, `job.delete`, `job.start`, `job.stop`,
    /// `job.trigger`, `job.script.restore`, `trigger.kill`, `logs.clean`,
    /// `group.create`, `group.update`, `group.delete`, `alarm_channel.*`,
    /// `user.*`, `token.*`, `session.*`, `retention.apply`, `stats.reset`.
    /// A job's saves keep what changed in `detail` (a JSON object of field
    /// to `[before, after]`).
    pub action: String,
    /// What it was done to: `job:7`, `group:billing`, `user:ann`,
    /// `token:3`, `trigger:<id>`.
    pub target: String,
    /// The executor group concerned, when there is one.
    pub group: Option<String>,
    /// The client's address.
    pub address: String,
    /// More about the change (never a secret).
    pub detail: Option<String>,
}

/// Everything that happens in a rondo cluster and is worth keeping.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    GroupUpserted {
        group: Group,
    },
    GroupDeleted {
        app: String,
        at_ms: i64,
    },
    JobUpserted {
        job: Job,
    },
    JobDeleted {
        id: u64,
        at_ms: i64,
        /// The job as it was, kept apart for a restore (`job_deleted`);
        /// the `job` row itself becomes a tombstone.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        last: Option<Box<crate::model::Job>>,
    },
    Triggered(TriggerRecord),
    Result(ExecResult),
    Log(LogLines),
    Alarm(AlarmRecord),
    Audit(AuditRecord),
}

impl Event {
    /// Whether only a scheduler node makes this event: a definition (group
    /// or job), a trigger's sending, an alarm's outcome, an audit entry.
    /// Results and log lines come from executors.
    pub fn is_schedulers(&self) -> bool {
        !matches!(self, Event::Result(_) | Event::Log(_))
    }

    /// The routing key on the events exchange.
    pub fn routing_key(&self) -> &'static str {
        match self {
            Event::GroupUpserted { .. } => "group.upsert",
            Event::GroupDeleted { .. } => "group.delete",
            Event::JobUpserted { .. } => "job.upsert",
            Event::JobDeleted { .. } => "job.delete",
            Event::Triggered(r) if r.code == crate::trigger::code::SUCCESS => "trigger.sent",
            Event::Triggered(_) => "trigger.failed",
            Event::Result(r) if r.is_success() => "result.success",
            Event::Result(_) => "result.fail",
            Event::Log(_) => "log.lines",
            Event::Alarm(_) => "alarm.status",
            Event::Audit(_) => "audit.entry",
        }
    }
}

/// Decodes a message body: an array of events, or a single event.
pub fn decode_events(body: &[u8]) -> Result<Vec<Event>, serde_json::Error> {
    match serde_json::from_slice::<Vec<Event>>(body) {
        Ok(events) => Ok(events),
        Err(array_err) => serde_json::from_slice::<Event>(body)
            .map(|e| vec![e])
            .map_err(|_| array_err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_events_and_arrays_decode() {
        let e = Event::JobDeleted {
            id: 3,
            at_ms: 9,
            last: None,
        };
        let one = serde_json::to_vec(&e).unwrap();
        let many = serde_json::to_vec(&vec![e.clone(), e.clone()]).unwrap();
        assert_eq!(decode_events(&one).unwrap(), vec![e.clone()]);
        assert_eq!(decode_events(&many).unwrap().len(), 2);
        assert!(decode_events(b"{\"type\":\"nope\"}").is_err());
        assert!(decode_events(b"garbage").is_err());
    }

    #[test]
    fn wire_format_is_tagged() {
        let json = serde_json::to_value(Event::JobDeleted {
            id: 3,
            at_ms: 9,
            last: None,
        })
        .unwrap();
        assert_eq!(json["type"], "job_deleted");
        assert_eq!(json["id"], 3);
    }
}
