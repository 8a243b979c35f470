//! The alarm outbox: alarms leave the result monitor's path.
//!
//! The monitor only *folds* a failure into its job's pending alarm (one
//! Redis script, a few keys under the `{alarm}` hash tag): the first
//! failure of a job opens one, due at `now + alarm.gather_ms`, or, if the
//! job was alarmed less than `alarm.throttle_ms` ago, at that alarm's time
//! plus the throttle; every later failure until it is sent only counts
//! (its trigger's `alarm_status` is 5, folded, naming the alarm's lead
//! trigger, which is 4, queued). So a job alarms at most once per
//! throttle, and each alarm says how many failures it stands for.
//!
//! Every node's sender claims due alarms (the script moves the pending
//! alarm aside and leases it, so one node sends it), sends it to the job's
//! e-mail, webhook and channels with `alarm.retries` more attempts
//! `alarm.retry_backoff_ms` apart while any channel fails, and records the
//! outcome on the lead trigger (2 sent, 3 failed). An alarm whose sender
//! died is claimed again when its lease lapses (it may then be sent twice;
//! it is never lost). A slow channel holds a sender's task, never the
//! monitor.

use std::sync::Arc;
use std::time::Duration;

use rondo_core::event::{AlarmRecord, alarm_status};
use rondo_core::redis::{run_script, script_cmd};
use rondo_core::{Error, Event, Job, Names, clock};
use tokio_util::sync::CancellationToken;

use super::{Alarmer, Failure};
use crate::store::Store;

/// Folds a failure into its job's pending alarm. KEYS: pending, due,
/// last. ARGV: job id, trigger id, failure JSON, now, gather, throttle.
/// Returns {failures so far, lead trigger id, due at}.
const FOLD: &str = r"
local n = redis.call('HINCRBY', KEYS[1], 'count', 1)
if n == 1 then
  redis.call('HSET', KEYS[1], 'lead', ARGV[2], 'failure', ARGV[3])
  local last = tonumber(redis.call('HGET', KEYS[3], ARGV[1]) or '0')
  local at = math.max(tonumber(ARGV[4]) + tonumber(ARGV[5]), last + tonumber(ARGV[6]))
  redis.call('ZADD', KEYS[2], at, ARGV[1])
  return {n, ARGV[2], at}
end
local at = redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0'
return {n, redis.call('HGET', KEYS[1], 'lead'), math.floor(tonumber(at))}
";

/// Claims up to ARGV[3] alarms: those due (the pending alarm moved aside
/// to its sending key; a job whose last alarm is still being sent waits)
/// and those whose sender's lease lapsed. KEYS: due, inflight, last.
/// ARGV: now, lease end, max, the pending prefix, the sending prefix.
/// Returns the job ids claimed.
const CLAIM: &str = r"
local now, lease, max = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local claimed = {}
for _, job in ipairs(redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, max)) do
  redis.call('ZADD', KEYS[2], lease, job)
  table.insert(claimed, job)
end
for _, job in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, max)) do
  if #claimed >= max then break end
  if redis.call('ZSCORE', KEYS[2], job) then
    redis.call('ZADD', KEYS[1], now + 1000, job)
  else
    redis.call('ZREM', KEYS[1], job)
    local fields = redis.call('HGETALL', ARGV[4] .. job)
    if #fields > 0 then
      redis.call('HSET', ARGV[5] .. job, unpack(fields))
      redis.call('DEL', ARGV[4] .. job)
      redis.call('HSET', KEYS[3], job, now)
      redis.call('ZADD', KEYS[2], lease, job)
      table.insert(claimed, job)
    end
  end
end
return claimed
";

/// How a failure was taken in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Folded {
    /// The failures of the job's pending alarm so far, this one counted.
    pub failures: u64,
    /// The trigger the alarm is about (its first failure).
    pub lead: String,
    /// When the alarm is due (ms).
    pub due_ms: i64,
}

/// The outbox's settings, from `[alarm]`.
#[derive(Debug, Clone)]
pub struct OutboxConfig {
    pub gather_ms: u64,
    pub throttle_ms: u64,
    pub retries: u32,
    pub retry_backoff_ms: u64,
}

impl OutboxConfig {
    pub fn of(alarm: &rondo_core::config::AlarmConfig) -> OutboxConfig {
        OutboxConfig {
            gather_ms: alarm.gather_ms,
            throttle_ms: alarm.throttle_ms,
            retries: alarm.retries,
            retry_backoff_ms: alarm.retry_backoff_ms,
        }
    }
}

/// The outbox over the cluster's Redis.
#[derive(Clone)]
pub struct Outbox {
    store: Store,
    names: Names,
    config: OutboxConfig,
    fold: Arc<redis::Script>,
    claim: Arc<redis::Script>,
}

impl Outbox {
    pub fn new(store: Store, config: OutboxConfig) -> Outbox {
        Outbox {
            names: store.names().clone(),
            store,
            config,
            fold: Arc::new(redis::Script::new(FOLD)),
            claim: Arc::new(redis::Script::new(CLAIM)),
        }
    }

    /// Folds `failure` of `job` into the job's pending alarm, and says
    /// what its trigger's alarm status is now (4 queued for the alarm's
    /// lead, 5 folded for the others).
    pub async fn fold(&self, job: &Job, failure: &Failure) -> Result<AlarmRecord, Error> {
        let mut conn = self.store.pool().get().await?;
        let json = serde_json::to_string(failure)?;
        let mut cmd = script_cmd(&self.fold, 3, (9, json.len() + 256));
        cmd.arg(self.names.alarm_pending(job.id))
            .arg(self.names.alarm_due())
            .arg(self.names.alarm_last())
            .arg(job.id)
            .arg(&failure.trigger_id)
            .arg(&json)
            .arg(clock::now_ms())
            .arg(self.config.gather_ms)
            .arg(self.config.throttle_ms);
        let (failures, lead, due_ms): (u64, String, i64) =
            run_script(&mut conn, &self.fold, &cmd).await?;
        let folded = Folded {
            failures,
            lead,
            due_ms,
        };
        let (status, msg) = if folded.lead == failure.trigger_id {
            (
                alarm_status::QUEUED,
                format!("queued: the job's alarm goes at {}", folded.due_ms),
            )
        } else {
            (
                alarm_status::FOLDED,
                format!(
                    "folded into the alarm of trigger {} (failure {} of it)",
                    folded.lead, folded.failures
                ),
            )
        };
        Ok(AlarmRecord {
            trigger_id: failure.trigger_id.clone(),
            job_id: job.id,
            fire_ms: failure.fire_ms,
            status,
            msg,
        })
    }

    /// The longest a sender may take over one alarm before another node
    /// may claim it again.
    fn lease_ms(&self, alarmer: &Alarmer) -> i64 {
        let attempts = u64::from(self.config.retries) + 1;
        let per = alarmer.timeout().as_millis() as u64 + self.config.retry_backoff_ms;
        i64::try_from(attempts * per + 30_000).unwrap_or(i64::MAX)
    }

    /// Claims the alarms due now (at most `max`).
    async fn claim(&self, lease_ms: i64, max: usize) -> Result<Vec<u64>, Error> {
        let mut conn = self.store.pool().get().await?;
        let now = clock::now_ms();
        let mut cmd = script_cmd(&self.claim, 3, (8, 256));
        cmd.arg(self.names.alarm_due())
            .arg(self.names.alarm_inflight())
            .arg(self.names.alarm_last())
            .arg(now)
            .arg(now.saturating_add(lease_ms))
            .arg(max)
            .arg(self.names.alarm_pending_prefix())
            .arg(self.names.alarm_sending_prefix());
        Ok(run_script(&mut conn, &self.claim, &cmd).await?)
    }

    /// The claimed alarm of `job_id`: its lead failure with the count.
    async fn load(&self, job_id: u64) -> Result<Option<Failure>, Error> {
        use redis::AsyncCommands;
        let mut conn = self.store.pool().get().await?;
        let (json, count): (Option<String>, Option<u32>) = conn
            .hmget(self.names.alarm_sending(job_id), &["failure", "count"])
            .await?;
        let Some(json) = json else {
            return Ok(None);
        };
        let mut failure: Failure = serde_json::from_str(&json)?;
        failure.failures = count.unwrap_or(1);
        Ok(Some(failure))
    }

    /// Forgets a sent (or given up) alarm.
    async fn done(&self, job_id: u64) -> Result<(), Error> {
        let mut conn = self.store.pool().get().await?;
        let _: () = redis::pipe()
            .atomic()
            .del(self.names.alarm_sending(job_id))
            .zrem(self.names.alarm_inflight(), job_id)
            .query_async(&mut conn)
            .await?;
        Ok(())
    }

    /// Sends due alarms until `shutdown`: every 200 ms, claims what is due
    /// and sends each on a task of its own.
    pub async fn run(
        self,
        alarmer: Alarmer,
        events: rondo_dispatcher::EventPublisher,
        shutdown: CancellationToken,
    ) {
        let lease_ms = self.lease_ms(&alarmer);
        let sending = tokio_util::task::TaskTracker::new();
        loop {
            match self.claim(lease_ms, 32).await {
                Ok(jobs) => {
                    for job_id in jobs {
                        let (outbox, alarmer, events) =
                            (self.clone(), alarmer.clone(), events.clone());
                        sending.spawn(async move {
                            if let Err(e) = outbox.send(job_id, &alarmer, &events).await {
                                tracing::warn!(job_id, error = %e, "an alarm is not sent yet; it is claimed again after its lease");
                            }
                        });
                    }
                }
                Err(e) => tracing::warn!(error = %e, "claiming due alarms"),
            }
            tokio::select! {
                () = shutdown.cancelled() => break,
                () = tokio::time::sleep(Duration::from_millis(200)) => {}
            }
        }
        sending.close();
        // What is being sent finishes or is claimed again after its lease.
        let _ = tokio::time::timeout(Duration::from_secs(5), sending.wait()).await;
    }

    /// Sends one claimed alarm, with retries, and records how it went.
    async fn send(
        &self,
        job_id: u64,
        alarmer: &Alarmer,
        events: &rondo_dispatcher::EventPublisher,
    ) -> Result<(), Error> {
        let Some(failure) = self.load(job_id).await? else {
            return self.done(job_id).await;
        };
        let job = match self.store.get_job(job_id).await {
            Ok(job) => job,
            Err(e) if e.kind == rondo_core::ErrorKind::NotFound => {
                let record = AlarmRecord {
                    trigger_id: failure.trigger_id.clone(),
                    job_id,
                    fire_ms: failure.fire_ms,
                    status: alarm_status::FAILED,
                    msg: "the job was deleted before its alarm went".into(),
                };
                events.publish(&[Event::Alarm(record)]).await?;
                return self.done(job_id).await;
            }
            Err(e) => return Err(e),
        };
        let channels = self.store.channels_named(&job.alarm_channels).await?;
        let mut attempt = 0;
        let record = loop {
            let record = alarmer.alarm(&job, &channels, &failure).await;
            if record.status != alarm_status::FAILED || attempt >= self.config.retries {
                break record;
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(self.config.retry_backoff_ms)).await;
        };
        let outcome = match record.status {
            alarm_status::SENT => "sent",
            alarm_status::NOT_NEEDED => "not_needed",
            _ => "failed",
        };
        metrics::counter!("rondo_alarms_total", "outcome" => outcome).increment(1);
        let mut record = record;
        if attempt > 0 {
            record.msg = format!("{} (after {} attempts)", record.msg, attempt + 1);
        }
        events.publish(&[Event::Alarm(record)]).await?;
        self.done(job_id).await
    }
}
