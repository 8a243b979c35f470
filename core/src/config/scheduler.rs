//! The scheduler's sections: `[registry]` (the executors' liveness, which
//! executors and gateways share), `[scheduler]`, `[monitor]`, `[alarm]`.

use serde::Deserialize;

/// Executor registry timings (XXL-JOB: beat every 30 s, dead after 90 s),
/// and the short liveness lease that routing goes by.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistryConfig {
    /// The full registration (handlers, host, running jobs) is rewritten
    /// this often.
    pub heartbeat_ms: u64,
    /// An executor renews its registry score every `lease_ms / 4`; one
    /// whose score is older than `lease_ms` gets no trigger, and the
    /// leader moves what waits in its queue to a live executor.
    pub lease_ms: u64,
    /// An executor silent this long leaves the registry.
    pub dead_after_ms: u64,
}

impl Default for RegistryConfig {
    fn default() -> Self {
        RegistryConfig {
            heartbeat_ms: 30_000,
            lease_ms: 2_000,
            dead_after_ms: 90_000,
        }
    }
}

impl RegistryConfig {
    /// How often an executor renews its lease.
    pub fn lease_renew(&self) -> std::time::Duration {
        std::time::Duration::from_millis((self.lease_ms / 4).max(1))
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchedulerConfig {
    /// This node's id; empty = `<hostname>-<api port>`.
    pub node_id: String,
    /// Where the admin HTTP API listens.
    pub api_addr: String,
    /// How far ahead the leader claims (XXL-JOB's 5 s pre-read); the
    /// leader claims at least the ZooKeeper session plus three claim
    /// intervals ahead, so a dead leader's successor comes before the
    /// claimed fires run out ([`SchedulerConfig::claim_ahead_ms`]).
    pub preread_ms: i64,
    /// A fire later than this is a misfire.
    pub misfire_threshold_ms: i64,
    /// The leader claims once per this interval, aligned to it.
    pub claim_interval_ms: u64,
    /// Due jobs read per partition per round trip.
    pub claim_batch: usize,
    /// The most fires one job may put on rings in one claim.
    pub max_fires_per_claim: usize,
    /// A node reads its rings this often …
    pub load_interval_ms: u64,
    /// … for fires due within this much time.
    pub load_ahead_ms: i64,
    /// Fires a node has handed to the dispatcher and not yet settled, at
    /// most. Beyond, due fires wait on the wheel and go out late, in order
    /// (admission control: an overloaded node does not grow a task per
    /// due fire).
    pub max_fires_in_flight: usize,
    /// Fires a node holds in memory (on its wheel or in flight), at most.
    /// Beyond, the loader reads its rings with a limit, earliest first, and
    /// the rest of a backlog waits in Redis: an overloaded node's memory
    /// stays bounded.
    pub max_fires_loaded: usize,
    /// A node's lease on its rings lapses this long after its last
    /// renewal: then its standby (the next live node in rendezvous order)
    /// takes the rings' coming fires, without waiting for ZooKeeper to end
    /// the node's session. A node fires only while it holds its lease.
    /// 0 turns leases off: a dead node's fires wait for the leader's
    /// failover (the benchmark's comparison of their cost).
    pub lease_ms: u64,
    /// A node renews its leases (and a standby looks at the leases of the
    /// nodes it stands by for) this often; at most a third of `lease_ms`.
    pub lease_renew_ms: u64,
    /// On SIGTERM, in-flight work gets this long.
    pub shutdown_grace_ms: u64,
    /// `/metrics` without credentials (otherwise any signed-in user's
    /// token: Prometheus sends it as `authorization`).
    pub metrics_public: bool,
}

impl SchedulerConfig {
    /// How far ahead the leader claims under a ZooKeeper session of
    /// `session_ms`: `preread_ms`, and never less than the session plus a
    /// margin of three claim intervals, at least 3 s. A dead leader is
    /// replaced about a session after it died, and the new one claims at
    /// once; until then, the fires its predecessor claimed keep coming from
    /// the rings. A horizon shorter than that gap leaves the jobs due in it
    /// unclaimed until the new leader comes, late, and per-second jobs lose
    /// fires to the misfire rule (late by less than the threshold: the
    /// first missed fire runs, the rest are skipped). The margin covers the
    /// old leader's last claim (up to an interval before it died),
    /// ZooKeeper's expiry in tick-sized buckets (a tickTime of at most 1 s
    /// keeps it within the margin), and the new leader's election and
    /// failover pass.
    pub fn claim_ahead_ms(&self, session_ms: u64) -> i64 {
        let session = i64::try_from(session_ms).unwrap_or(i64::MAX / 4);
        let interval = i64::try_from(self.claim_interval_ms).unwrap_or(i64::MAX / 4);
        let margin = interval.saturating_mul(3).max(3_000);
        self.preread_ms.max(session.saturating_add(margin))
    }
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            node_id: String::new(),
            api_addr: "127.0.0.1:8600".into(),
            preread_ms: 5000,
            misfire_threshold_ms: 5000,
            claim_interval_ms: 1000,
            claim_batch: 1000,
            max_fires_per_claim: 1000,
            load_interval_ms: 100,
            load_ahead_ms: 1500,
            max_fires_in_flight: 4096,
            max_fires_loaded: 65_536,
            lease_ms: 500,
            lease_renew_ms: 100,
            shutdown_grace_ms: 10_000,
            metrics_public: false,
        }
    }
}

/// The scheduler's result monitor: retries, child jobs, lost triggers, and
/// triggers stranded in a dead executor's queue.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MonitorConfig {
    /// A trigger without a result for this long whose executor is gone is
    /// marked failed ("lost") and retried per its job (XXL-JOB: 10 min).
    pub lost_after_ms: i64,
    /// How often the leader looks for lost triggers (offline executors'
    /// queues are checked every quarter of `registry.lease_ms`).
    pub scan_interval_ms: u64,
    /// Triggers in an offline executor's queue wait this long for a live
    /// executor of the group before they are failed.
    pub reroute_timeout_ms: i64,
    /// How long a handled mark is kept after its minute's set was last
    /// written (seconds; from an hour and twice `lost_after_ms`, to a
    /// year): a result that comes again
    /// within it (redelivered, or republished by an executor whose trigger
    /// was redelivered) is not reacted to twice. Every fire keeps one
    /// (about 85 B of Redis) this long.
    pub handled_ttl_s: u64,
    /// Result *messages* unacked at once per node (AMQP prefetch). One
    /// message carries many results when executors batch; what has been
    /// delivered is handled as one group (at most 4,096 events).
    pub prefetch: u16,
}

impl Default for MonitorConfig {
    fn default() -> Self {
        MonitorConfig {
            lost_after_ms: 600_000,
            scan_interval_ms: 5_000,
            reroute_timeout_ms: 60_000,
            handled_ttl_s: 7 * 24 * 3600,
            prefetch: 256,
        }
    }
}

/// How failure alarms are sent (per job: `alarm_email`, `alarm_webhook`).
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AlarmConfig {
    /// SMTP server; empty = e-mail alarms are not sent (status "failed").
    pub smtp_host: String,
    pub smtp_port: u16,
    /// `none`, `starttls` or `tls`.
    pub smtp_tls: String,
    pub smtp_user: String,
    pub smtp_password: String,
    pub smtp_from: String,
    /// Per webhook POST and per SMTP conversation.
    pub timeout_ms: u64,
    /// Addresses a webhook may reach though the destination rule refuses
    /// them (as `executor.http_allow`; this host's own addresses only by
    /// an entry naming the address). Empty by default: webhooks go to
    /// public addresses of other hosts only.
    #[serde(deserialize_with = "super::values::list_or_csv")]
    pub webhook_allow: Vec<String>,
    /// The domains `alarm_email` recipients may be in: `example.com` (that
    /// domain) or `*.example.com` (its subdomains). Empty by default: the
    /// domain of `smtp_from` only, so the SMTP relay mails the
    /// organisation's own addresses and no others. Checked when a job is
    /// saved and when an alarm is sent.
    #[serde(deserialize_with = "super::values::list_or_csv")]
    pub email_allow: Vec<String>,
    /// The console's address as people reach it (`https://rondo.example.com`):
    /// an alarm channel's `{link}` is `<console_url>/logs/<trigger_id>`.
    /// Empty (the default): `{link}` is empty.
    pub console_url: String,
    /// A job's first failure is alarmed this long after it (ms), so a
    /// burst of failures makes one alarm.
    pub gather_ms: u64,
    /// At most one alarm per job in this long (ms); the failures in
    /// between are folded into the next one, with their count. 0: none.
    pub throttle_ms: u64,
    /// More attempts at an alarm any of whose channels failed.
    pub retries: u32,
    /// Between those attempts (ms).
    pub retry_backoff_ms: u64,
}

impl Default for AlarmConfig {
    fn default() -> Self {
        AlarmConfig {
            smtp_host: String::new(),
            smtp_port: 25,
            smtp_tls: "none".into(),
            smtp_user: String::new(),
            smtp_password: String::new(),
            smtp_from: "rondo@localhost".into(),
            timeout_ms: 5_000,
            webhook_allow: Vec::new(),
            email_allow: Vec::new(),
            console_url: String::new(),
            gather_ms: 1_000,
            throttle_ms: 60_000,
            retries: 2,
            retry_backoff_ms: 5_000,
        }
    }
}

impl std::fmt::Debug for AlarmConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlarmConfig")
            .field("smtp_host", &self.smtp_host)
            .field("smtp_port", &self.smtp_port)
            .field("smtp_tls", &self.smtp_tls)
            .field("smtp_user", &self.smtp_user)
            .field("smtp_password", &crate::redact::secret(&self.smtp_password))
            .field("smtp_from", &self.smtp_from)
            .field("timeout_ms", &self.timeout_ms)
            .field("webhook_allow", &self.webhook_allow)
            .field("email_allow", &self.email_allow)
            .finish()
    }
}
