//! Failure alarms: e-mail over SMTP, a JSON webhook and alarm channels
//! (chat group bots, see [`chat`]), per job.
//!
//! The result monitor folds a failed trigger into its job's pending alarm
//! in the [`outbox`] (gathered, throttled per job) and publishes its status
//! (4 queued or 5 folded) as `Event::Alarm` (routing key `alarm.status`);
//! a sender then calls [`Alarmer::alarm`] and publishes the outcome for the
//! alarm's lead trigger. The persistence worker stores each on the
//! trigger's log row (`job_log.alarm_status`, `job_log.alarm_msg`). The
//! status follows XXL-JOB's fail monitor, with rondo's 4 and 5:
//!
//! | status | when |
//! | --- | --- |
//! | 1 not needed | the job has no `alarm_email`, `alarm_webhook` nor `alarm_channels` |
//! | 2 sent | every configured channel accepted the alarm |
//! | 3 failed | any channel failed (after the retries); `msg` says which one and why |
//! | 4 queued | the alarm waits in the outbox (the gather time, the throttle) |
//! | 5 folded | counted into the alarm of another trigger of the job (`msg` names it) |
//!
//! `msg` has one part per channel, `; `-separated, e.g.
//! `email: sent to 2 recipients; webhook failed: HTTP 500 Internal Server
//! Error: boom`. An alarm never panics and never returns an error: whatever
//! goes wrong ends in status 3 and its reason. The channels run concurrently
//! and each is bounded by `[alarm] timeout_ms` (0 = 5 s), so an alarm takes
//! at most about one timeout.
//!
//! # E-mail
//!
//! One plain-text message to every address of `alarm_email` (comma-separated),
//! in one SMTP conversation (one `RCPT TO` per address), through `[alarm]`
//! `smtp_host`:`smtp_port` with `smtp_tls` = `none` (plain SMTP), `starttls`
//! (STARTTLS required, usually port 587) or `tls` (implicit TLS, usually
//! 465). TLS is rustls (ring) with the Mozilla root certificates of
//! `webpki-roots`: a server whose certificate chains to a private CA is
//! refused. `AUTH` (PLAIN or LOGIN, whichever the server offers) is used when
//! `smtp_user` is set (with `smtp_tls = "none"` the password crosses the
//! network in clear text). An empty `smtp_host` fails every e-mail alarm with
//! "alarm.smtp_host is not configured". The subject and body carry what
//! XXL-JOB's alarm mail carries (group, job id and description, the failure)
//! plus the trigger's details.
//!
//! # Webhook
//!
//! A `POST` of a JSON object (`Content-Type: application/json`,
//! `User-Agent: rondo-scheduler/<version>`) to `alarm_webhook`; any 2xx
//! answer counts as sent. Redirects are not followed (a 3xx fails: a
//! redirected POST would silently become a GET). A webhook reaches public
//! addresses of other hosts only: one whose URL is, or whose name resolves
//! only to, an address of this host, a loopback, link-local (cloud
//! metadata), private, shared, unique-local or other special-purpose
//! address fails (`destination refused: …`) unless `alarm.webhook_allow`
//! names it (this host's own addresses: only the address itself). No HTTP proxy is used (it would resolve and connect in
//! rondo's place). The body, version 1:
//!
//! ```json
//! {
//!   "v": 1,
//!   "text": "rondo alarm: job 42 (nightly report) failed: trigger 42-1700000000000-0 on demo-host-1, code 500: boom",
//!   "job_id": 42,
//!   "job_description": "nightly report",
//!   "group": "demo",
//!   "handler": "report",
//!   "trigger_id": "42-1700000000000-0",
//!   "fire_ms": 1700000000000,
//!   "fire_time": "2023-11-14T22:13:20.000Z",
//!   "executor_id": "demo-host-1",
//!   "code": 500,
//!   "msg": "boom",
//!   "params": "--day=today",
//!   "retry_count": 0,
//!   "failures": 1,
//!   "sent_ms": 1700000000123
//! }
//! ```
//!
//! `code` is XXL-JOB's (500 failed, 502 timed out); `executor_id` is empty
//! when the trigger never reached an executor; `retry_count` is the failed
//! attempt's (0 = the first run); `failures` counts this failure and those
//! of the job folded into its alarm while it was throttled; `sent_ms` is when the alarm was sent.
//! `msg` and `params` are clipped to [`MAX_FIELD_BYTES`]. `text` is a
//! one-line summary, so chat tools that take Slack-style incoming webhooks
//! show something useful without an adapter; it is escaped as Slack's
//! mrkdwn requires (`&amp;`, `&lt;`, `&gt;`), so a job's output shows
//! literally there (no `<!channel>`, no disguised link), while `msg` and
//! the other fields carry the text as it is. Fields may be added in version
//! 1; a change of meaning bumps `v`.

mod channel;
pub mod chat;
#[cfg(test)]
mod chat_tests;
mod failure;
pub mod outbox;
mod render;
mod smtp;
#[cfg(test)]
mod tests;
mod webhook;

use std::fmt;
use std::time::Duration;

use rondo_core::config::AlarmConfig;
use rondo_core::event::{AlarmRecord, alarm_status};
use rondo_core::model::AlarmChannel;
use rondo_core::{Job, clock};
use tracing::Instrument;

use self::channel::timeout;
pub use self::channel::{AlarmConfigError, DEFAULT_TIMEOUT};
pub use self::failure::Failure;
use self::render::Report;
pub use self::render::{MAX_FIELD_BYTES, WEBHOOK_BODY_VERSION};
use self::smtp::{Mail, mail_setup, recipients};
use self::webhook::http_client;

/// Sends failure alarms. Cheap to clone (the clients are shared); holds no
/// connection between alarms.
#[derive(Clone)]
pub struct Alarmer {
    mail: Mail,
    /// The client, or why it could not be built (reported per alarm).
    http: Result<webhook::Webhook, String>,
    timeout: Duration,
    /// `alarm.console_url`, for channels' `{link}`.
    console_url: String,
}

impl fmt::Debug for Alarmer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mail = match &self.mail {
            Mail::NotConfigured => "not configured".to_owned(),
            Mail::Broken(reason) => format!("broken: {reason}"),
            Mail::Ready { from, domains, .. } => {
                format!("ready, from {from}, to {}", domains.describe())
            }
        };
        f.debug_struct("Alarmer")
            .field("mail", &mail)
            .field("webhook", &self.http.as_ref().map(|_| "ready"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Alarmer {
    /// An alarmer that always exists: a part of `[alarm]` that cannot work
    /// is logged now and reported as the reason of every alarm that needs
    /// it, so a bad mail setting never stops the scheduler.
    pub fn new(config: &AlarmConfig) -> Alarmer {
        let mail = mail_setup(config).unwrap_or_else(|e| {
            tracing::error!(error = %e, "e-mail alarms will fail");
            Mail::Broken(e.to_string())
        });
        let timeout = timeout(config);
        let http = http_client(timeout, &config.webhook_allow).map_err(|e| {
            tracing::error!(error = %e, "webhook alarms will fail");
            e.to_string()
        });
        Alarmer {
            mail,
            http,
            timeout,
            console_url: config.console_url.clone(),
        }
    }

    /// Like [`Alarmer::new`], but refuses a section that cannot work, for
    /// callers that check the config at start.
    pub fn try_new(config: &AlarmConfig) -> Result<Alarmer, AlarmConfigError> {
        let timeout = timeout(config);
        Ok(Alarmer {
            mail: mail_setup(config)?,
            http: Ok(http_client(timeout, &config.webhook_allow)?),
            timeout,
            console_url: config.console_url.clone(),
        })
    }

    /// The bound of each channel.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Alarms the job's e-mail, webhook and `channels` (its
    /// `alarm_channels` as found, `None` for one that does not exist) about
    /// `failure` and says how it went.
    pub async fn alarm(
        &self,
        job: &Job,
        channels: &[Option<AlarmChannel>],
        failure: &Failure,
    ) -> AlarmRecord {
        let outcomes = self.attempt(job, channels, failure, &[]).await;
        self.record(job, failure, &outcomes)
    }

    /// One attempt at the job's channels but those named in `sent` (a
    /// retry goes only to the channels that failed), each channel's
    /// outcome.
    async fn attempt(
        &self,
        job: &Job,
        channels: &[Option<AlarmChannel>],
        failure: &Failure,
        sent: &[String],
    ) -> Vec<Outcome> {
        let span = tracing::info_span!(
            "alarm",
            job_id = job.id,
            trigger_id = %failure.trigger_id,
            fire_ms = failure.fire_ms,
        );
        self.send(job, channels, failure, sent)
            .instrument(span)
            .await
    }

    /// The record of an alarm whose channels ended in `outcomes`.
    fn record(&self, job: &Job, failure: &Failure, outcomes: &[Outcome]) -> AlarmRecord {
        let (status, msg) = summarize(outcomes);
        match status {
            alarm_status::FAILED => {
                tracing::warn!(job_id = job.id, trigger_id = %failure.trigger_id, status, msg = %msg, "alarm failed")
            }
            _ => {
                tracing::info!(job_id = job.id, trigger_id = %failure.trigger_id, status, msg = %msg, "alarm done")
            }
        }
        AlarmRecord {
            trigger_id: failure.trigger_id.clone(),
            job_id: job.id,
            fire_ms: failure.fire_ms,
            status,
            msg,
        }
    }

    async fn send(
        &self,
        job: &Job,
        channels: &[Option<AlarmChannel>],
        failure: &Failure,
        sent: &[String],
    ) -> Vec<Outcome> {
        let wanted = |name: &str| !sent.iter().any(|s| s == name);
        let report = Report {
            job,
            failure,
            sent_ms: clock::now_ms(),
        };
        let addresses = recipients(&job.alarm_email);
        let webhook = job.alarm_webhook.trim();
        let mail = async {
            if addresses.is_empty() || !wanted("email") {
                return None;
            }
            Some(Outcome::new(
                "email",
                smtp::send(&self.mail, self.timeout, &addresses, &report).await,
            ))
        };
        let hook = async {
            if webhook.is_empty() || !wanted("webhook") {
                return None;
            }
            Some(Outcome::new(
                "webhook",
                webhook::post(&self.http, self.timeout, webhook, &report).await,
            ))
        };
        let chats = futures_util::future::join_all(
            job.alarm_channels
                .iter()
                .enumerate()
                .filter(|(_, name)| wanted(&format!("channel {name}")))
                .map(|(i, name)| {
                    let report = &report;
                    async move {
                        let result = match channels.get(i).and_then(Option::as_ref) {
                            Some(channel) => {
                                chat::post(
                                    &self.http,
                                    self.timeout,
                                    channel,
                                    report,
                                    &self.console_url,
                                )
                                .await
                            }
                            None => Err("no such channel".to_owned()),
                        };
                        Outcome::new(format!("channel {name}"), result)
                    }
                }),
        );
        let (mail, hook, chats) = tokio::join!(mail, hook, chats);
        [mail, hook].into_iter().flatten().chain(chats).collect()
    }
}

/// One channel's result.
struct Outcome {
    channel: String,
    result: Result<String, String>,
}

impl Outcome {
    fn new(channel: impl Into<String>, result: Result<String, String>) -> Outcome {
        Outcome {
            channel: channel.into(),
            result,
        }
    }
}

/// The status and message of an alarm from its channels' results.
fn summarize(outcomes: &[Outcome]) -> (i32, String) {
    if outcomes.is_empty() {
        let msg = "no alarm channel: alarm_email, alarm_webhook and alarm_channels are empty";
        return (alarm_status::NOT_NEEDED, msg.to_owned());
    }
    let parts: Vec<String> = outcomes
        .iter()
        .map(|o| match &o.result {
            Ok(done) => format!("{}: {done}", o.channel),
            Err(reason) => format!("{} failed: {reason}", o.channel),
        })
        .collect();
    let failed = outcomes.iter().any(|o| o.result.is_err());
    let status = if failed {
        alarm_status::FAILED
    } else {
        alarm_status::SENT
    };
    (status, parts.join("; "))
}
