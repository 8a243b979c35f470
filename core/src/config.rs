//! Configuration: a TOML file plus `RONDO_*` environment overrides, loaded by
//! a pure function so tests never touch the process environment.
//!
//! An override names a key as `RONDO_<SECTION>_<KEY>` (`RONDO_REDIS_URL`,
//! `RONDO_SCHEDULER_API_ADDR`) or `RONDO_<KEY>` for top-level keys
//! (`RONDO_NAMESPACE`). `RONDO_CONFIG` (the file path) and `RONDO_API`
//! (the CLI's) are not keys. Every key has a
//! default that works on a developer machine with the services on loopback.

use serde::Deserialize;

mod xxl;
pub use xxl::XxlConfig;

/// Sections of the file; an env override `RONDO_<SECTION>_<KEY>` lands in one.
const SECTIONS: &[&str] = &[
    "redis",
    "amqp",
    "zookeeper",
    "mysql",
    "registry",
    "scheduler",
    "executor",
    "persist",
    "monitor",
    "alarm",
    "auth",
    "log",
    "xxl",
];
/// Variables that start with `RONDO_` but are not configuration keys: the
/// config file path and the CLI's own (API address, token, credentials
/// file, passwords, the importer's source database).
const NOT_KEYS: &[&str] = &[
    "config",
    "api",
    "token",
    "credentials",
    "password",
    "new_password",
    "import_mysql",
];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("config is not valid TOML: {0}")]
    Toml(#[from] toml::de::Error),
    #[error("environment override {var}: {message}")]
    Env { var: String, message: String },
    #[error("invalid config: {0}")]
    Invalid(String),
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Prefix of every Redis key, AMQP name and the ZooKeeper chroot.
    pub namespace: String,
    /// Partitions of the due sets; fixed when a cluster is created.
    pub partitions: u32,
    /// The cluster's default time zone (IANA name): a job created without
    /// a `zone` gets this one (stored with the job, so changing it later
    /// moves no existing job).
    pub zone: String,
    /// The zone whose days the daily report counts; empty: `zone`.
    pub report_zone: String,
    pub redis: RedisConfig,
    pub amqp: AmqpConfig,
    pub zookeeper: ZkConfig,
    pub mysql: MysqlConfig,
    pub registry: RegistryConfig,
    pub scheduler: SchedulerConfig,
    pub monitor: MonitorConfig,
    pub alarm: AlarmConfig,
    pub auth: AuthConfig,
    pub executor: ExecutorConfig,
    pub persist: PersistConfig,
    pub log: LogConfig,
    pub xxl: XxlConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            namespace: "rondo".into(),
            partitions: 16,
            zone: "UTC".into(),
            report_zone: String::new(),
            redis: RedisConfig::default(),
            amqp: AmqpConfig::default(),
            zookeeper: ZkConfig::default(),
            mysql: MysqlConfig::default(),
            registry: RegistryConfig::default(),
            scheduler: SchedulerConfig::default(),
            monitor: MonitorConfig::default(),
            alarm: AlarmConfig::default(),
            auth: AuthConfig::default(),
            executor: ExecutorConfig::default(),
            persist: PersistConfig::default(),
            log: LogConfig::default(),
            xxl: XxlConfig::default(),
        }
    }
}

#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RedisConfig {
    pub url: String,
    /// Connections to one Redis, each shared by every request of the
    /// process (multiplexed: any number of requests in flight on each).
    pub pool_size: usize,
    /// Response timeout per command; redis-rs defaults to 500 ms, too short
    /// for big pipelines under load.
    pub response_timeout_ms: u64,
    /// On a Redis Cluster: the replicas a write that must survive its
    /// master's failover waits for (`WAIT`); unset means 1 on a cluster.
    /// Ignored on one Redis.
    pub wait_replicas: Option<u32>,
    /// On a Redis Cluster: how long such a write waits for them (ms). A
    /// `WAIT` holds every request of the process to that master behind it,
    /// so this stays short; a master found without its replicas is not
    /// waited for again for 10 s.
    pub wait_timeout_ms: u64,
}

impl RedisConfig {
    /// The seed URLs of a cluster, or `None` for one Redis.
    pub fn cluster_seeds(&self) -> Result<Option<Vec<String>>, crate::error::Error> {
        let url = self.url.trim();
        for (scheme, plain) in [
            ("redis+cluster://", "redis://"),
            ("rediss+cluster://", "rediss://"),
        ] {
            if let Some(rest) = url.strip_prefix(scheme) {
                let (userinfo, hosts) = match rest.rsplit_once('@') {
                    Some((user, hosts)) => (format!("{user}@"), hosts),
                    None => (String::new(), rest),
                };
                let (hosts, tail) = hosts.split_once('/').unwrap_or((hosts, ""));
                let seeds: Vec<String> = hosts
                    .split(',')
                    .map(str::trim)
                    .filter(|h| !h.is_empty())
                    .map(|h| {
                        let tail = if tail.is_empty() {
                            String::new()
                        } else {
                            format!("/{tail}")
                        };
                        format!("{plain}{userinfo}{h}{tail}")
                    })
                    .collect();
                if seeds.is_empty() {
                    return Err(crate::error::Error::invalid(
                        "redis.url",
                        "a cluster URL names no node",
                    ));
                }
                return Ok(Some(seeds));
            }
        }
        if url.contains(',') {
            let seeds: Vec<String> = url.split(',').map(|u| u.trim().to_owned()).collect();
            if seeds.iter().any(|u| u.is_empty()) {
                return Err(crate::error::Error::invalid(
                    "redis.url",
                    "an empty URL in the list of cluster nodes",
                ));
            }
            return Ok(Some(seeds));
        }
        Ok(None)
    }
}

impl Default for RedisConfig {
    fn default() -> Self {
        RedisConfig {
            url: "redis://127.0.0.1:6379".into(),
            pool_size: 4,
            response_timeout_ms: 5000,
            wait_replicas: None,
            wait_timeout_ms: 100,
        }
    }
}

#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AmqpConfig {
    /// One broker's URL, or the nodes of a cluster as URLs separated by
    /// commas (a comma in a password is written `%2C`): each connection
    /// goes to the next one that answers.
    pub url: String,
    /// `classic` (default: what works on one broker) or `quorum`: the
    /// executor queues, the persist queue, the monitor queue and the dead
    /// letters become quorum queues, replicated over the cluster's nodes
    /// (a publish is confirmed once a majority has it).
    pub queue_type: String,
}

impl Default for AmqpConfig {
    fn default() -> Self {
        AmqpConfig {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            queue_type: "classic".into(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ZkConfig {
    pub connect: String,
    /// A dead node is noticed after about this long.
    pub session_timeout_ms: u64,
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig {
            connect: "127.0.0.1:2181".into(),
            session_timeout_ms: 6000,
        }
    }
}

#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MysqlConfig {
    pub url: String,
    pub pool_size: u32,
}

impl Default for MysqlConfig {
    fn default() -> Self {
        MysqlConfig {
            url: "mysql://rondo:rondo@127.0.0.1:3306/rondo".into(),
            pool_size: 4,
        }
    }
}

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
    /// How far ahead the leader claims (XXL-JOB's 5 s pre-read).
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
    /// On SIGTERM, in-flight work gets this long.
    pub shutdown_grace_ms: u64,
    /// `/metrics` without credentials (otherwise any signed-in user's
    /// token: Prometheus sends it as `authorization`).
    pub metrics_public: bool,
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
        }
    }
}

/// Sign-in to the admin API (`scheduler/src/api/auth.rs`).
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The first admin, created by a node when there is no user at all
    /// (both set, or neither). There is no built-in default: without them,
    /// nobody can sign in until an admin is made this way.
    pub admin_user: String,
    pub admin_password: String,
    /// A browser session ends after this long without a request…
    pub session_idle_s: u64,
    /// …and this long after sign-in, whatever its use.
    pub session_max_s: u64,
    /// Failed sign-ins counted per window, per username and per client
    /// address; past a limit, sign-in answers 429 until the window ends.
    pub login_window_s: u64,
    pub login_max_per_user: u32,
    pub login_max_per_address: u32,
    /// How long a node trusts what it read about a token or a user (a
    /// revocation or a role change reaches other nodes within this).
    pub cache_ms: u64,
    /// Mark the session cookie `Secure` (set it when the API is served
    /// over HTTPS, directly or behind a proxy).
    pub cookie_secure: bool,
    /// Take the client address from the last `X-Forwarded-For` entry (only
    /// behind a proxy that sets it); otherwise the TCP peer.
    pub trust_forwarded_for: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            admin_user: String::new(),
            admin_password: String::new(),
            session_idle_s: 30 * 60,
            session_max_s: 12 * 3600,
            login_window_s: 15 * 60,
            login_max_per_user: 10,
            login_max_per_address: 50,
            cache_ms: 5_000,
            cookie_secure: false,
            trust_forwarded_for: false,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ExecutorConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (open, so
    /// keep it on loopback or a private network); empty: not served.
    pub metrics_addr: String,
    /// The executor group this executor serves.
    pub app: String,
    /// Stable id (names its durable queue); empty = `<app>-<hostname>`.
    pub id: String,
    /// Two bounds (see `executor/README.md`): trigger *messages* delivered
    /// and not yet acked (AMQP prefetch; a message may carry hundreds of
    /// triggers), and handlers running at once (triggers).
    pub prefetch: u16,
    /// How long a trigger id is remembered for dedupe.
    pub dedupe_ttl_s: u64,
    /// Log lines are shipped at least this often while a handler runs.
    pub log_flush_ms: u64,
    pub shutdown_grace_ms: u64,
    /// Whether the built-in handlers that run commands (`shell`) are
    /// offered. Off by default: with them on, whoever may create a job in
    /// this executor's group may run any command on its host.
    pub command_handlers: bool,
    /// Interpreters this executor runs script jobs with (XXL-JOB's GLUE):
    /// any of `sh`, `python3`, `node`, `pwsh`, `php`. Empty by default: as
    /// with `command_handlers`, whoever may create a job in this group may
    /// then run any script on this host. One not installed is skipped with
    /// a warning at start. In the environment: a comma-separated list
    /// (`RONDO_EXECUTOR_SCRIPT_HANDLERS=sh,python3`).
    #[serde(deserialize_with = "list_or_csv")]
    pub script_handlers: Vec<String>,
    /// A PEM file of CA certificates the built-in `http` handler trusts
    /// for `https://` URLs on top of the bundled Mozilla roots (an
    /// internal CA); empty: none. Read when the executor is built: a
    /// missing file, or one without a usable certificate, is a config
    /// error naming this key.
    pub http_ca_file: String,
    /// Whether the `http` handler skips certificate checks for `https://`
    /// URLs (any certificate, any host name), so anyone on the path can
    /// read and change the traffic: for a test bench only. Logged as a
    /// warning at start; set with `http_ca_file` it is a config error.
    pub http_insecure: bool,
    /// The most response-body bytes the `http` handler reads (streamed:
    /// only the first 1 KiB is kept, for the job log). A run waits for the
    /// whole body, so this bounds the slot and bandwidth an endpoint that
    /// answers without end can take; a longer response fails the run, not
    /// retried (the endpoint did answer, and a retry would call it again).
    /// At least 1.
    pub http_max_response_bytes: u64,
}

impl Default for ExecutorConfig {
    fn default() -> Self {
        ExecutorConfig {
            metrics_addr: String::new(),
            app: "demo".into(),
            id: String::new(),
            prefetch: 64,
            dedupe_ttl_s: 7 * 24 * 3600,
            log_flush_ms: 500,
            shutdown_grace_ms: 10_000,
            command_handlers: false,
            script_handlers: Vec::new(),
            http_ca_file: String::new(),
            http_insecure: false,
            http_max_response_bytes: 1024 * 1024,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PersistConfig {
    /// Where `/metrics`, `/healthz` and `/readyz` are served (open, so
    /// keep it on loopback or a private network); empty: not served.
    pub metrics_addr: String,
    /// Events per transaction at most.
    pub batch_size: usize,
    /// A batch is written when it is full or this old.
    pub linger_ms: u64,
    /// Unacked events in flight (AMQP prefetch); at least `batch_size`.
    pub prefetch: u16,
    pub shutdown_grace_ms: u64,
    /// Trigger logs older than this many days are dropped, once a day
    /// (XXL-JOB's `logretentiondays`); below 7 disables retention.
    pub retention_days: u32,
    /// How often the daily report counts (the last three days) are
    /// refreshed; retention runs at start and every 24 h.
    pub report_interval_ms: u64,
}

impl Default for PersistConfig {
    fn default() -> Self {
        PersistConfig {
            metrics_addr: String::new(),
            batch_size: 1000,
            linger_ms: 50,
            prefetch: 2000,
            shutdown_grace_ms: 10_000,
            retention_days: 30,
            report_interval_ms: 60_000,
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LogConfig {
    /// `plain` or `json`.
    pub format: String,
    /// A tracing filter; `RUST_LOG` wins when set.
    pub filter: String,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            format: "plain".into(),
            filter: "info".into(),
        }
    }
}

impl Config {
    /// Loads a config from TOML text and environment variables (only those
    /// starting with `RONDO_` are read).
    pub fn load<I>(text: &str, env: I) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = (String, String)>,
    {
        let mut root: toml::Table = toml::from_str(text)?;
        for (var, value) in env {
            apply_override(&mut root, &var, &value)?;
        }
        let config: Config = toml::Value::Table(root).try_into()?;
        config.check()?;
        Ok(config)
    }

    /// The default job zone, parsed (checked at load).
    pub fn default_zone(&self) -> chrono_tz::Tz {
        self.zone.parse().unwrap_or(chrono_tz::Tz::UTC)
    }

    /// The daily report's zone, parsed (checked at load).
    pub fn report_tz(&self) -> chrono_tz::Tz {
        match self.report_zone.as_str() {
            "" => self.default_zone(),
            zone => zone.parse().unwrap_or(chrono_tz::Tz::UTC),
        }
    }

    fn check(&self) -> Result<(), ConfigError> {
        for (key, zone) in [("zone", &self.zone), ("report_zone", &self.report_zone)] {
            if !(key == "report_zone" && zone.is_empty()) {
                crate::schedule::parse_zone(key, zone)
                    .map_err(|e| ConfigError::Invalid(format!("{key}: {}", e.message)))?;
            }
        }
        crate::model::validate_app_name("namespace", &self.namespace)
            .map_err(|e| ConfigError::Invalid(format!("namespace: {}", e.message)))?;
        crate::model::validate_app_name("executor.app", &self.executor.app)
            .map_err(|e| ConfigError::Invalid(format!("executor.app: {}", e.message)))?;
        if !self.executor.id.is_empty() {
            crate::model::validate_app_name("executor.id", &self.executor.id)
                .map_err(|e| ConfigError::Invalid(format!("executor.id: {}", e.message)))?;
        }
        if !["classic", "quorum"].contains(&self.amqp.queue_type.as_str()) {
            return Err(ConfigError::Invalid(format!(
                "amqp.queue_type must be classic or quorum, got {:?}",
                self.amqp.queue_type
            )));
        }
        self.redis
            .cluster_seeds()
            .map_err(|e| ConfigError::Invalid(format!("redis.url: {}", e.message)))?;
        if self.redis.wait_timeout_ms == 0 || self.redis.wait_timeout_ms > 60_000 {
            return Err(ConfigError::Invalid(format!(
                "redis.wait_timeout_ms must be 1 to 60000, got {}",
                self.redis.wait_timeout_ms
            )));
        }
        if self.amqp.url.split(',').any(|u| u.trim().is_empty()) {
            return Err(ConfigError::Invalid(
                "amqp.url: an empty address in the list".into(),
            ));
        }
        if self.partitions == 0 || self.partitions > 4096 {
            return Err(ConfigError::Invalid(
                "partitions must be between 1 and 4096".into(),
            ));
        }
        if self.scheduler.preread_ms < 1000 || self.scheduler.claim_interval_ms == 0 {
            return Err(ConfigError::Invalid(
                "scheduler.preread_ms must be ≥ 1000 and claim_interval_ms > 0".into(),
            ));
        }
        for (name, value) in [
            ("max_fires_in_flight", self.scheduler.max_fires_in_flight),
            ("max_fires_loaded", self.scheduler.max_fires_loaded),
        ] {
            if !(1..=1_000_000_000).contains(&value) {
                return Err(ConfigError::Invalid(format!(
                    "scheduler.{name} must be 1 to 1000000000, got {value}"
                )));
            }
        }
        // The reaper reads the handled mark of a record older than
        // `lost_after_ms` (a crash between the mark and the record's
        // removal): the mark must still be there, or a handled trigger
        // would be reported lost.
        let handled = self.monitor.handled_ttl_s;
        const YEAR_S: u64 = 31_536_000;
        let least = (self.monitor.lost_after_ms.max(0) as u64 * 2)
            .div_ceil(1000)
            .max(3_600);
        if least > YEAR_S {
            return Err(ConfigError::Invalid(format!(
                "monitor.lost_after_ms must be at most half a year (monitor.handled_ttl_s, at most a year, keeps marks twice as long), got {}",
                self.monitor.lost_after_ms
            )));
        }
        if !(least..=YEAR_S).contains(&handled) {
            return Err(ConfigError::Invalid(format!(
                "monitor.handled_ttl_s must be {least} (an hour, and twice monitor.lost_after_ms) to 31536000 (a year), got {handled}"
            )));
        }
        let r = &self.registry;
        if r.lease_ms < 200 || r.lease_ms >= r.dead_after_ms || r.heartbeat_ms == 0 {
            return Err(ConfigError::Invalid(
                "registry.lease_ms must be ≥ 200 and below registry.dead_after_ms, and registry.heartbeat_ms > 0".into(),
            ));
        }
        if usize::from(self.persist.prefetch) < self.persist.batch_size {
            return Err(ConfigError::Invalid(
                "persist.prefetch must be at least persist.batch_size".into(),
            ));
        }
        if !matches!(self.alarm.smtp_tls.as_str(), "none" | "starttls" | "tls") {
            return Err(ConfigError::Invalid(
                "alarm.smtp_tls must be none, starttls or tls".into(),
            ));
        }
        for name in &self.executor.script_handlers {
            if crate::model::GlueType::by_interpreter(name).is_none() {
                return Err(ConfigError::Invalid(format!(
                    "executor.script_handlers: unknown interpreter {name:?}; expected any of sh, python3, node, pwsh, php"
                )));
            }
        }
        self.check_auth()?;
        self.check_default_secrets()?;
        self.xxl.check()?;
        if !matches!(self.log.format.as_str(), "plain" | "json") {
            return Err(ConfigError::Invalid(
                "log.format must be plain or json".into(),
            ));
        }
        Ok(())
    }

    fn check_auth(&self) -> Result<(), ConfigError> {
        let a = &self.auth;
        if a.admin_user.is_empty() != a.admin_password.is_empty() {
            return Err(ConfigError::Invalid(
                "auth.admin_user and auth.admin_password go together: set both or neither".into(),
            ));
        }
        if !a.admin_user.is_empty() {
            crate::auth::check_username("auth.admin_user", &a.admin_user)
                .map_err(|e| ConfigError::Invalid(format!("auth.admin_user: {}", e.message)))?;
            crate::auth::check_new_password("auth.admin_password", &a.admin_password)
                .map_err(|e| ConfigError::Invalid(format!("auth.admin_password: {}", e.message)))?;
        }
        if a.session_idle_s == 0 || a.session_max_s < a.session_idle_s {
            return Err(ConfigError::Invalid(
                "auth.session_idle_s must be > 0 and at most auth.session_max_s".into(),
            ));
        }
        if a.login_window_s == 0 || a.login_max_per_user == 0 || a.login_max_per_address == 0 {
            return Err(ConfigError::Invalid(
                "auth.login_window_s, login_max_per_user and login_max_per_address must be > 0"
                    .into(),
            ));
        }
        Ok(())
    }

    /// Refuses the credentials that ship in this repository (the broker's
    /// `guest:guest`, the demo database's `rondo:rondo`) for a service that
    /// is not on this machine: they are only for a loopback demo.
    fn check_default_secrets(&self) -> Result<(), ConfigError> {
        let shipped = [
            ("amqp.url", &self.amqp.url, "guest:guest"),
            ("mysql.url", &self.mysql.url, "rondo:rondo"),
        ];
        for (key, urls, userinfo) in shipped {
            for url in urls.split(',') {
                if let Some(host) = crate::redact::host_with_userinfo(url.trim(), userinfo)
                    && !is_loopback(&host)
                {
                    return Err(ConfigError::Invalid(format!(
                        "{key} uses the demo credentials {userinfo} for {host}, which is not this machine; give the service its own user and password"
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn names(&self) -> crate::names::Names {
        crate::names::Names::new(&self.namespace, self.partitions)
            .with_quorum_queues(self.amqp.queue_type == "quorum")
    }
}

/// Whether a URL's host (`host`, `host:port`, `[v6]:port`) is this
/// machine.
fn is_loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().unwrap_or(rest),
        None => host.rsplit_once(':').map_or(host, |(h, _)| h),
    };
    name.eq_ignore_ascii_case("localhost")
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Config sections with a secret print it as `***`.
impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &crate::redact::urls(&self.url))
            .field("pool_size", &self.pool_size)
            .field("response_timeout_ms", &self.response_timeout_ms)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_timeout_ms", &self.wait_timeout_ms)
            .finish()
    }
}

impl std::fmt::Debug for AmqpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AmqpConfig")
            .field("url", &crate::redact::urls(&self.url))
            .field("queue_type", &self.queue_type)
            .finish()
    }
}

impl std::fmt::Debug for MysqlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MysqlConfig")
            .field("url", &crate::redact::url(&self.url))
            .field("pool_size", &self.pool_size)
            .finish()
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
            .finish()
    }
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("admin_user", &self.admin_user)
            .field(
                "admin_password",
                &crate::redact::secret(&self.admin_password),
            )
            .field("session_idle_s", &self.session_idle_s)
            .field("session_max_s", &self.session_max_s)
            .field("login_window_s", &self.login_window_s)
            .field("login_max_per_user", &self.login_max_per_user)
            .field("login_max_per_address", &self.login_max_per_address)
            .field("cache_ms", &self.cache_ms)
            .field("cookie_secure", &self.cookie_secure)
            .field("trust_forwarded_for", &self.trust_forwarded_for)
            .finish()
    }
}

fn apply_override(root: &mut toml::Table, var: &str, value: &str) -> Result<(), ConfigError> {
    let Some(rest) = var.strip_prefix("RONDO_") else {
        return Ok(());
    };
    let rest = rest.to_ascii_lowercase();
    if NOT_KEYS.contains(&rest.as_str()) {
        return Ok(());
    }
    if SECTIONS.contains(&rest.as_str()) {
        return Err(ConfigError::Env {
            var: var.to_owned(),
            message: format!(
                "[{rest}] is a section; set one of its keys as RONDO_{}_<KEY>",
                rest.to_ascii_uppercase()
            ),
        });
    }
    let parsed = parse_scalar(value);
    let section = SECTIONS
        .iter()
        .find(|s| rest.strip_prefix(*s).is_some_and(|k| k.starts_with('_')));
    let Some(section) = section else {
        root.insert(rest, parsed);
        return Ok(());
    };
    let key = rest[section.len() + 1..].to_owned();
    let entry = root
        .entry((*section).to_owned())
        .or_insert_with(|| toml::Value::Table(toml::Table::new()));
    let Some(table) = entry.as_table_mut() else {
        return Err(ConfigError::Env {
            var: var.to_owned(),
            message: format!("[{section}] is not a table in the file"),
        });
    };
    table.insert(key, parsed);
    Ok(())
}

/// A list key given as a TOML array or as one comma-separated string (what
/// an environment variable holds).
fn list_or_csv<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum ListOrCsv {
        List(Vec<String>),
        Csv(String),
    }
    Ok(match ListOrCsv::deserialize(d)? {
        ListOrCsv::List(list) => list,
        ListOrCsv::Csv(text) => text
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect(),
    })
}

/// Environment values are strings; numbers and booleans are read as such so
/// `RONDO_PARTITIONS=8` fills an integer key. Only a number written as
/// TOML would print it is one: `0012` stays text, so a secret of digits
/// keeps its leading zeros.
fn parse_scalar(value: &str) -> toml::Value {
    if let Ok(i) = value.parse::<i64>()
        && i.to_string() == value
    {
        return toml::Value::Integer(i);
    }
    match value {
        "true" => toml::Value::Boolean(true),
        "false" => toml::Value::Boolean(false),
        _ => toml::Value::String(value.to_owned()),
    }
}

#[cfg(test)]
mod tests {
    fn seeds(url: &str) -> Result<Option<Vec<String>>, crate::error::Error> {
        RedisConfig {
            url: url.into(),
            ..RedisConfig::default()
        }
        .cluster_seeds()
    }

    #[test]
    fn one_url_is_one_redis_and_a_cluster_url_or_a_list_are_seeds() {
        assert_eq!(seeds("redis://127.0.0.1:6379").unwrap(), None);
        assert_eq!(
            seeds("redis+cluster://u:p@10.0.0.1:7000,10.0.0.2:7001").unwrap(),
            Some(vec![
                "redis://u:p@10.0.0.1:7000".to_owned(),
                "redis://u:p@10.0.0.2:7001".to_owned()
            ])
        );
        assert_eq!(
            seeds("redis://a:7000, redis://b:7001").unwrap(),
            Some(vec![
                "redis://a:7000".to_owned(),
                "redis://b:7001".to_owned()
            ])
        );
        assert!(seeds("redis+cluster://").is_err());
        assert!(seeds("redis://a:7000,,redis://b:1").is_err());
    }

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn empty_text_gives_working_defaults() {
        let c = Config::load("", env(&[])).unwrap();
        assert_eq!(c.namespace, "rondo");
        assert_eq!(c.partitions, 16);
        assert_eq!(c.scheduler.preread_ms, 5000);
        assert_eq!(c.registry.dead_after_ms, 90_000);
    }

    #[test]
    fn file_then_env_overrides() {
        let text = "namespace = \"a\"\n[redis]\nurl = \"redis://x\"\n[scheduler]\napi_addr = \"0.0.0.0:1\"\n";
        let c = Config::load(
            text,
            env(&[
                ("RONDO_NAMESPACE", "b"),
                ("RONDO_SCHEDULER_API_ADDR", "127.0.0.1:9"),
                ("RONDO_PARTITIONS", "8"),
                ("RONDO_PERSIST_BATCH_SIZE", "10"),
                ("RONDO_MONITOR_PREFETCH", "32"),
                ("RONDO_CONFIG", "/etc/rondo.toml"),
                ("RONDO_LOG_FILTER", "debug"),
                ("RONDO_API", "http://127.0.0.1:8600"),
                ("HOME", "/root"),
            ]),
        )
        .unwrap();
        assert_eq!(c.namespace, "b");
        assert_eq!(c.redis.url, "redis://x");
        assert_eq!(c.scheduler.api_addr, "127.0.0.1:9");
        assert_eq!(c.partitions, 8);
        assert_eq!(c.persist.batch_size, 10);
        assert_eq!(c.monitor.prefetch, 32);
        assert_eq!(c.log.filter, "debug");
    }

    #[test]
    fn a_variable_naming_a_whole_section_is_an_error_that_says_so() {
        let e = Config::load("", env(&[("RONDO_LOG", "debug")])).unwrap_err();
        assert!(e.to_string().contains("RONDO_LOG_<KEY>"), "{e}");
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors() {
        assert!(Config::load("nope = 1", env(&[])).is_err());
        assert!(Config::load("[redis]\nurll = \"x\"", env(&[])).is_err());
        assert!(Config::load("", env(&[("RONDO_PARTITIONS", "zero")])).is_err());
        assert!(Config::load("partitions = 0", env(&[])).is_err());
        assert!(Config::load("[registry]\nlease_ms = 100", env(&[])).is_err());
        assert!(Config::load("[registry]\nlease_ms = 90000", env(&[])).is_err());
        assert!(Config::load("namespace = \"a b\"", env(&[])).is_err());
        assert!(Config::load("[log]\nformat = \"xml\"", env(&[])).is_err());
        assert!(Config::load("[scheduler]\nmax_fires_loaded = 0", env(&[])).is_err());
        let huge = "[scheduler]\nmax_fires_loaded = 2000000000";
        let e = Config::load(huge, env(&[])).unwrap_err();
        assert!(e.to_string().contains("scheduler.max_fires_loaded"), "{e}");
        assert!(Config::load("[scheduler]\nmax_fires_in_flight = 0", env(&[])).is_err());
        let brief = env(&[("RONDO_MONITOR_HANDLED_TTL_S", "60")]);
        let e = Config::load("", brief).unwrap_err();
        assert!(e.to_string().contains("monitor.handled_ttl_s"), "{e}");
        let day = env(&[("RONDO_MONITOR_HANDLED_TTL_S", "86400")]);
        assert_eq!(Config::load("", day).unwrap().monitor.handled_ttl_s, 86_400);
        let shorter_than_lost = env(&[
            ("RONDO_MONITOR_HANDLED_TTL_S", "7200"),
            ("RONDO_MONITOR_LOST_AFTER_MS", "7200000"),
        ]);
        let e = Config::load("", shorter_than_lost).unwrap_err();
        assert!(e.to_string().contains("monitor.lost_after_ms"), "{e}");
        let lost_for_a_year = env(&[("RONDO_MONITOR_LOST_AFTER_MS", "31536000000")]);
        let e = Config::load("", lost_for_a_year).unwrap_err();
        assert!(
            e.to_string().contains("monitor.lost_after_ms must be"),
            "{e}"
        );
        assert!(Config::load("[auth]\nadmin_user = \"root\"", env(&[])).is_err());
        let short = "[auth]\nadmin_user = \"root\"\nadmin_password = \"short\"";
        assert!(Config::load(short, env(&[])).is_err());
        let good = "[auth]\nadmin_user = \"root\"\nadmin_password = \"long enough pass\"";
        assert!(Config::load(good, env(&[])).is_ok());
    }

    #[test]
    fn shipped_credentials_work_on_loopback_only() {
        assert!(Config::load("", env(&[])).is_ok());
        let remote = env(&[("RONDO_AMQP_URL", "amqp://guest:guest@mq.prod:5672/%2f")]);
        let e = Config::load("", remote).unwrap_err();
        assert!(e.to_string().contains("amqp.url"), "{e}");
        let remote_db = env(&[("RONDO_MYSQL_URL", "mysql://rondo:rondo@10.0.0.5/rondo")]);
        assert!(Config::load("", remote_db).is_err());
        let own = env(&[("RONDO_AMQP_URL", "amqp://sched:x7Gq@mq.prod:5672/%2f")]);
        assert!(Config::load("", own).is_ok());
        let local = env(&[("RONDO_MYSQL_URL", "mysql://rondo:rondo@localhost:3306/x")]);
        assert!(Config::load("", local).is_ok());
        let v6 = env(&[("RONDO_AMQP_URL", "amqp://guest:guest@[::1]:5672/%2f")]);
        assert!(Config::load("", v6).is_ok());
    }

    #[test]
    fn secrets_never_show_in_the_debug_form() {
        let text = "[alarm]\nsmtp_password = \"smtp-secret\"\n[auth]\nadmin_user = \"root\"\nadmin_password = \"admin-secret-123\"";
        let vars = env(&[
            ("RONDO_AMQP_URL", "amqp://u:amqp-secret@127.0.0.1/%2f"),
            ("RONDO_REDIS_URL", "redis://:redis-secret@127.0.0.1:6379"),
            ("RONDO_MYSQL_URL", "mysql://u:mysql-secret@127.0.0.1/r"),
        ]);
        let shown = format!("{:?}", Config::load(text, vars).unwrap());
        for secret in [
            "smtp-secret",
            "admin-secret",
            "amqp-secret",
            "redis-secret",
            "mysql-secret",
        ] {
            assert!(!shown.contains(secret), "{secret} in {shown}");
        }
        assert!(shown.contains("127.0.0.1"));
    }
}
