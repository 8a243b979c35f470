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
    done: Arc<redis::Script>,
}

impl Outbox {
    pub fn new(store: Store, config: OutboxConfig) -> Outbox {
        Outbox {
            names: store.names().clone(),
            store,
            config,
            fold: Arc::new(redis::Script::new(include_str!("../../lua/alarm_fold.lua"))),
            claim: Arc::new(redis::Script::new(include_str!(
                "../../lua/alarm_claim.lua"
            ))),
            done: Arc::new(redis::Script::new(include_str!("../../lua/alarm_done.lua"))),
        }
    }

    /// Folds `failure` of `job` into the job's pending alarm, and says
    /// what its trigger's alarm status is now (4 queued for the alarm's
    /// lead, 5 folded for the others).
    pub async fn fold(&self, job: &Job, failure: &Failure) -> Result<AlarmRecord, Error> {
        let mut conn = self.store.pool().get().await?;
        let json = serde_json::to_string(failure)?;
        // A trigger is remembered past any window its alarm may wait in.
        let remember_ms = self.config.gather_ms + self.config.throttle_ms + 600_000;
        let mut cmd = script_cmd(&self.fold, 4, (11, json.len() + 320));
        cmd.arg(self.names.alarm_pending(job.id))
            .arg(self.names.alarm_due())
            .arg(self.names.alarm_last(job.id))
            .arg(self.names.alarm_seen(job.id))
            .arg(job.id)
            .arg(&failure.trigger_id)
            .arg(&json)
            .arg(clock::now_ms())
            .arg(self.config.gather_ms)
            .arg(self.config.throttle_ms)
            .arg(remember_ms);
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

    /// Claims the alarms due now (at most `max`) under `token`.
    async fn claim(&self, lease_ms: i64, max: usize, token: &str) -> Result<Vec<u64>, Error> {
        let mut conn = self.store.pool().get().await?;
        let now = clock::now_ms();
        let mut cmd = script_cmd(&self.claim, 2, (10, 256));
        cmd.arg(self.names.alarm_due())
            .arg(self.names.alarm_inflight())
            .arg(now)
            .arg(now.saturating_add(lease_ms))
            .arg(max)
            .arg(self.names.alarm_pending_prefix())
            .arg(self.names.alarm_sending_prefix())
            .arg(self.names.alarm_last_prefix())
            .arg(self.config.throttle_ms)
            .arg(token);
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

    /// Forgets a sent (or given up) alarm, if this sender still holds it
    /// (`token`); false when another claimed it after this one's lease.
    async fn done(&self, job_id: u64, token: &str) -> Result<bool, Error> {
        let mut conn = self.store.pool().get().await?;
        let mut cmd = script_cmd(&self.done, 2, (4, 128));
        cmd.arg(self.names.alarm_sending(job_id))
            .arg(self.names.alarm_inflight())
            .arg(job_id)
            .arg(token);
        let forgotten: i64 = run_script(&mut conn, &self.done, &cmd).await?;
        Ok(forgotten == 1)
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
        let me: u64 = rand::random();
        let mut claims: u64 = 0;
        loop {
            claims += 1;
            let token = format!("{me:016x}-{claims}");
            match self.claim(lease_ms, 32, &token).await {
                Ok(jobs) => {
                    for job_id in jobs {
                        let (outbox, alarmer, events, token) =
                            (self.clone(), alarmer.clone(), events.clone(), token.clone());
                        sending.spawn(async move {
                            if let Err(e) = outbox.send(job_id, &token, &alarmer, &events).await {
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
        token: &str,
        alarmer: &Alarmer,
        events: &rondo_dispatcher::EventPublisher,
    ) -> Result<(), Error> {
        let Some(failure) = self.load(job_id).await? else {
            self.done(job_id, token).await?;
            return Ok(());
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
                self.done(job_id, token).await?;
                return Ok(());
            }
            Err(e) => return Err(e),
        };
        let channels = self.store.channels_named(&job.alarm_channels).await?;
        // Each retry goes only to the channels that failed.
        let mut attempt = 0;
        let mut outcomes: Vec<super::Outcome> = Vec::new();
        loop {
            let sent: Vec<String> = outcomes
                .iter()
                .filter(|o| o.result.is_ok())
                .map(|o| o.channel.clone())
                .collect();
            let now = alarmer.attempt(&job, &channels, &failure, &sent).await;
            outcomes.retain(|o| o.result.is_ok());
            outcomes.extend(now);
            let failed = outcomes.iter().any(|o| o.result.is_err());
            if !failed || attempt >= self.config.retries {
                break;
            }
            attempt += 1;
            tokio::time::sleep(Duration::from_millis(self.config.retry_backoff_ms)).await;
        }
        let record = alarmer.record(&job, &failure, &outcomes);
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
        if !self.done(job_id, token).await? {
            tracing::info!(
                job_id,
                "an alarm outlived its lease: another sender holds it now"
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The outbox's scripts against the real Redis.

    use super::*;
    use rondo_core::testkit;

    fn failure(trigger_id: &str) -> Failure {
        Failure {
            trigger_id: trigger_id.into(),
            fire_ms: 1,
            executor_id: "e".into(),
            code: 500,
            msg: "boom".into(),
            retry_count: 0,
            params: String::new(),
            failures: 1,
        }
    }

    /// A sender whose lease lapsed neither forgets the alarm another
    /// claimed since nor the next one of the job; the job's next alarm
    /// waits while one is being sent.
    #[tokio::test]
    async fn a_lapsed_sender_leaves_the_alarms_it_no_longer_holds() {
        let namespace = testkit::Namespace::new("alarm-outbox");
        let config = namespace.config.clone();
        let pool = rondo_core::redis::pool(&config.redis).unwrap();
        let store = Store::new(pool, config.names());
        let outbox = Outbox::new(
            store,
            OutboxConfig {
                gather_ms: 0,
                throttle_ms: 0,
                retries: 0,
                retry_backoff_ms: 0,
            },
        );
        let job = testkit::fixtures::job(1);
        let first = outbox.fold(&job, &failure("1-a")).await.unwrap();
        assert_eq!(first.status, alarm_status::QUEUED);
        let folded = outbox.fold(&job, &failure("1-b")).await.unwrap();
        assert_eq!(folded.status, alarm_status::FOLDED);
        // The same result handled again (a redelivery) counts once.
        let again = outbox.fold(&job, &failure("1-b")).await.unwrap();
        assert_eq!(again.status, alarm_status::FOLDED);
        // X claims with a lease that lapses at once; Y claims it again.
        assert_eq!(outbox.claim(0, 10, "x").await.unwrap(), [1]);
        tokio::time::sleep(Duration::from_millis(5)).await;
        assert_eq!(outbox.claim(60_000, 10, "y").await.unwrap(), [1]);
        let held = outbox.load(1).await.unwrap().unwrap();
        assert_eq!((held.trigger_id.as_str(), held.failures), ("1-a", 2));
        // A new failure while Y sends: its alarm waits for Y.
        outbox.fold(&job, &failure("1-c")).await.unwrap();
        assert!(outbox.claim(60_000, 10, "z").await.unwrap().is_empty());
        // X, late, forgets nothing; Y does.
        assert!(!outbox.done(1, "x").await.unwrap());
        assert!(outbox.load(1).await.unwrap().is_some());
        assert!(outbox.done(1, "y").await.unwrap());
        // Now the next alarm goes (it was put off a second), to Z, and
        // only Z forgets it.
        let mut claimed = Vec::new();
        for _ in 0..100 {
            claimed = outbox.claim(60_000, 10, "z").await.unwrap();
            if !claimed.is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(claimed, [1]);
        let next = outbox.load(1).await.unwrap().unwrap();
        assert_eq!((next.trigger_id.as_str(), next.failures), ("1-c", 1));
        assert!(!outbox.done(1, "y").await.unwrap());
        assert!(outbox.done(1, "z").await.unwrap());
    }
}
