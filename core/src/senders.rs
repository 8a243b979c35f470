//! Who may send which event, decided from the AMQP `user_id` a message
//! carries (RabbitMQ refuses a `user_id` that is not the connection's, so
//! it can be trusted):
//!
//! * definitions, trigger records, alarms and audit entries come only from
//!   the scheduler nodes' users (`amqp.scheduler_users`);
//! * a result or log lines of job *J* come from a scheduler's user, a
//!   gateway's (`amqp.gateway_users`), or the broker user of *J*'s group's
//!   executors (`amqp.executor_user`, `{app}` standing for the group), and
//!   only for a trigger id of *J* (every trigger id starts with its job id).
//!
//! A job's group is trusted data (its definition comes from a scheduler
//! node), read by the caller: the monitor from Redis, the persistence
//! worker from MySQL, both through a [`JobGroups`] cache.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::config::AmqpConfig;
use crate::event::Event;
use crate::trigger_id;

/// The senders the config names.
#[derive(Debug, Clone)]
pub struct Senders {
    schedulers: Vec<String>,
    gateways: Vec<String>,
    executor_user: String,
}

impl Senders {
    pub fn new(amqp: &AmqpConfig) -> Self {
        Senders {
            schedulers: amqp.scheduler_users(),
            gateways: amqp.gateway_users.clone(),
            executor_user: amqp.executor_user.clone(),
        }
    }

    /// The broker user of `app`'s executors.
    pub fn executor_user(&self, app: &str) -> String {
        self.executor_user.replace("{app}", app)
    }

    fn is_scheduler(&self, sender: Option<&str>) -> bool {
        sender.is_some_and(|s| self.schedulers.iter().any(|u| u == s))
    }

    fn may_report_for_any(&self, sender: Option<&str>) -> bool {
        self.is_scheduler(sender) || sender.is_some_and(|s| self.gateways.iter().any(|u| u == s))
    }

    /// The jobs whose group decides whether `sender` may send `events`:
    /// those of its results and log lines, unless it may report for any
    /// group. Empty: [`Self::refused`] needs no groups.
    pub fn jobs_to_check(&self, sender: Option<&str>, events: &[Event]) -> Vec<u64> {
        if self.may_report_for_any(sender) {
            return Vec::new();
        }
        let mut jobs: Vec<u64> = events.iter().filter_map(reported_job).collect();
        jobs.sort_unstable();
        jobs.dedup();
        jobs
    }

    /// Why a message from `sender` carrying `events` is refused, if it is:
    /// the first event it may not send. `groups` holds the group of each
    /// job [`Self::jobs_to_check`] named (`None`: no such live job).
    pub fn refused(
        &self,
        sender: Option<&str>,
        events: &[Event],
        groups: &HashMap<u64, Option<String>>,
    ) -> Option<String> {
        self.refusals(sender, events, groups)
            .into_iter()
            .flatten()
            .next()
    }

    /// For each of `events`, why `sender` may not send it (`None`: it may),
    /// so that a message whose other events are genuine (an executor's
    /// batch of results, one of a job deleted since) loses only those.
    pub fn refusals(
        &self,
        sender: Option<&str>,
        events: &[Event],
        groups: &HashMap<u64, Option<String>>,
    ) -> Vec<Option<String>> {
        events
            .iter()
            .map(|event| self.refusal(sender, event, groups))
            .collect()
    }

    fn refusal(
        &self,
        sender: Option<&str>,
        event: &Event,
        groups: &HashMap<u64, Option<String>>,
    ) -> Option<String> {
        let from = sender.unwrap_or("a sender without user_id");
        if event.is_schedulers() {
            return (!self.is_scheduler(sender)).then(|| {
                format!(
                    "forbidden: {} events are taken only from the scheduler's broker user ({}), this one came from {from}",
                    event.routing_key(),
                    self.schedulers.join(", "),
                )
            });
        }
        if self.may_report_for_any(sender) {
            return None;
        }
        let (job_id, trigger) = match event {
            Event::Result(r) => (r.job_id, r.trigger_id.as_str()),
            Event::Log(l) => (l.job_id, l.trigger_id.as_str()),
            _ => return None,
        };
        if trigger_id::job_of(trigger).ok() != Some(job_id) {
            return Some(format!(
                "forbidden: {} names job {job_id} for trigger {trigger:?}, which is not that job's",
                event.routing_key()
            ));
        }
        match groups.get(&job_id).cloned().flatten() {
            Some(app) if sender == Some(self.executor_user(&app).as_str()) => None,
            Some(app) => Some(format!(
                "forbidden: {} of job {job_id} (group {app}) are taken only from the broker user {}, a scheduler's or a gateway's; this one came from {from}",
                event.routing_key(),
                self.executor_user(&app),
            )),
            None => Some(format!(
                "forbidden: {} of job {job_id}, which is not a live job, are taken only from a scheduler's or a gateway's broker user; this one came from {from}",
                event.routing_key(),
            )),
        }
    }
}

/// The job a result or log lines report on.
fn reported_job(event: &Event) -> Option<u64> {
    match event {
        Event::Result(r) => Some(r.job_id),
        Event::Log(l) => Some(l.job_id),
        _ => None,
    }
}

/// How long a job's group is taken from the cache before it is read again
/// (a job moved to another group is refused its old group's results after
/// at most this long).
const GROUP_TTL: Duration = Duration::from_secs(30);
/// Entries kept before the cache starts over.
const MAX_ENTRIES: usize = 200_000;

/// A cache of jobs' groups (`None`: no such live job), so checking a
/// sender costs a read only for a job not seen lately.
#[derive(Default)]
pub struct JobGroups {
    entries: Mutex<HashMap<u64, (Option<String>, Instant)>>,
}

impl JobGroups {
    /// The cached groups of `jobs`, and the jobs to read.
    pub fn lookup(&self, jobs: &[u64]) -> (HashMap<u64, Option<String>>, Vec<u64>) {
        let entries = self.entries.lock().expect("job groups lock");
        let mut known = HashMap::with_capacity(jobs.len());
        let mut missing = Vec::new();
        for &job in jobs {
            match entries.get(&job) {
                Some((group, at)) if at.elapsed() < GROUP_TTL => {
                    known.insert(job, group.clone());
                }
                _ => missing.push(job),
            }
        }
        (known, missing)
    }

    /// Remembers groups just read (or seen in a scheduler's event).
    pub fn remember(&self, groups: impl IntoIterator<Item = (u64, Option<String>)>) {
        let mut entries = self.entries.lock().expect("job groups lock");
        let now = Instant::now();
        for (job, group) in groups {
            if entries.len() >= MAX_ENTRIES {
                entries.clear();
            }
            entries.insert(job, (group, now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{LogLine, LogLines};
    use crate::trigger::ExecResult;

    fn senders() -> Senders {
        let amqp = AmqpConfig {
            scheduler_users: vec!["sched".into()],
            gateway_users: vec!["gw".into()],
            executor_user: "exec-{app}".into(),
            ..AmqpConfig::default()
        };
        Senders::new(&amqp)
    }

    fn result(trigger_id: &str, job_id: u64) -> Event {
        Event::Result(ExecResult {
            trigger_id: trigger_id.into(),
            job_id,
            executor_id: "a-1".into(),
            fire_ms: 1,
            start_ms: 1,
            end_ms: 2,
            code: 200,
            msg: String::new(),
            retryable: true,
        })
    }

    fn lines(trigger_id: &str, job_id: u64) -> Event {
        Event::Log(LogLines {
            trigger_id: trigger_id.into(),
            job_id,
            first_seq: 0,
            lines: vec![LogLine {
                ts_ms: 1,
                text: "x".into(),
            }],
        })
    }

    #[test]
    fn a_groups_executor_reports_only_on_its_groups_jobs() {
        let s = senders();
        let groups = HashMap::from([(7, Some("a".to_owned())), (8, Some("b".to_owned()))]);
        let own = [result("7-1-0", 7), lines("7-1-0", 7)];
        assert_eq!(s.jobs_to_check(Some("exec-a"), &own), vec![7]);
        assert_eq!(s.refused(Some("exec-a"), &own, &groups), None);
        let other = [result("8-1-0", 8)];
        let why = s.refused(Some("exec-a"), &other, &groups).unwrap();
        assert!(
            why.starts_with("forbidden:") && why.contains("exec-b"),
            "{why}"
        );
        assert!(
            s.refused(Some("exec-a"), &[lines("8-1-0", 8)], &groups)
                .is_some()
        );
        assert!(s.refused(None, &own, &groups).is_some());
    }

    #[test]
    fn only_the_refused_events_of_a_message_are_refused() {
        let s = senders();
        let groups = HashMap::from([(7, Some("a".to_owned())), (9, None)]);
        let events = [result("7-1-0", 7), result("9-1-0", 9), lines("7-1-0", 7)];
        let why = s.refusals(Some("exec-a"), &events, &groups);
        assert_eq!(why[0], None);
        assert!(why[1].is_some(), "a deleted job's result from an executor");
        assert_eq!(why[2], None);
    }

    #[test]
    fn a_result_must_name_its_trigger_ids_job() {
        let s = senders();
        let groups = HashMap::from([(7, Some("a".to_owned()))]);
        // Job 8's trigger reported as job 7's, whose group the sender has.
        let why = s.refused(Some("exec-a"), &[result("8-1-0", 7)], &groups);
        assert!(why.is_some_and(|w| w.contains("not that job's")));
    }

    #[test]
    fn an_unknown_job_is_reported_on_only_by_the_trusted() {
        let s = senders();
        let groups = HashMap::from([(9, None)]);
        let events = [result("9-1-0", 9)];
        assert!(s.refused(Some("exec-a"), &events, &groups).is_some());
        for trusted in ["sched", "gw"] {
            assert!(s.jobs_to_check(Some(trusted), &events).is_empty());
            assert_eq!(s.refused(Some(trusted), &events, &HashMap::new()), None);
        }
    }

    #[test]
    fn scheduler_events_come_from_schedulers_only() {
        let s = senders();
        let event = Event::JobDeleted {
            id: 1,
            at_ms: 1,
            last: None,
        };
        for sender in [Some("gw"), Some("exec-a"), None] {
            let why = s.refused(sender, std::slice::from_ref(&event), &HashMap::new());
            assert!(why.is_some_and(|w| w.contains("job.delete")), "{sender:?}");
        }
        assert_eq!(s.refused(Some("sched"), &[event], &HashMap::new()), None);
    }

    #[test]
    fn the_cache_forgets_nothing_it_was_told_within_the_ttl() {
        let cache = JobGroups::default();
        cache.remember([(1, Some("a".to_owned())), (2, None)]);
        let (known, missing) = cache.lookup(&[1, 2, 3]);
        assert_eq!(known.get(&1), Some(&Some("a".to_owned())));
        assert_eq!(known.get(&2), Some(&None));
        assert_eq!(missing, vec![3]);
    }
}
