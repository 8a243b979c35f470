//! Configuration: a TOML file plus `RONDO_*` environment overrides, loaded by
//! a pure function so tests never touch the process environment.
//!
//! An override names a key as `RONDO_<SECTION>_<KEY>` (`RONDO_REDIS_URL`,
//! `RONDO_SCHEDULER_API_ADDR`) or `RONDO_<KEY>` for top-level keys
//! (`RONDO_NAMESPACE`). `RONDO_CONFIG` (the file path) and `RONDO_API`
//! (the CLI's) are not keys. Every key has a
//! default that works on a developer machine with the services on loopback.

use rondo_model::destination::Rule;
use rondo_model::mail_domains::MailDomains;
use serde::Deserialize;

mod auth;
mod executor;
mod persist;
mod scheduler;
mod services;
#[cfg(test)]
mod tests;
mod values;
mod xxl;

pub use auth::AuthConfig;
pub use executor::ExecutorConfig;
pub use persist::{LogConfig, PersistConfig};
pub use scheduler::{AlarmConfig, MonitorConfig, RegistryConfig, SchedulerConfig};
pub use services::{AmqpConfig, MysqlConfig, RedisConfig, ZkConfig};
pub use values::ConfigError;
use values::is_loopback;
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

    /// How far ahead the leader claims under the configured ZooKeeper
    /// session ([`SchedulerConfig::claim_ahead_ms`]; a running leader uses
    /// the session ZooKeeper granted, if longer).
    pub fn claim_ahead_ms(&self) -> i64 {
        self.scheduler
            .claim_ahead_ms(self.zookeeper.session_timeout_ms)
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
        let (lease, renew) = (self.scheduler.lease_ms, self.scheduler.lease_renew_ms);
        if lease != 0 && (renew == 0 || lease < renew.saturating_mul(3) || lease > 60_000) {
            return Err(ConfigError::Invalid(format!(
                "scheduler.lease_renew_ms must be > 0, and scheduler.lease_ms 0 (off) or at least \
                 three times it and at most 60000 (got {renew} and {lease})"
            )));
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
        self.check_outbound()?;
        self.check_redis_user()?;
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

    /// The allow-lists parse, and `executor.job_env` names variables a job
    /// may be given.
    fn check_outbound(&self) -> Result<(), ConfigError> {
        let invalid = |e: crate::Error| {
            ConfigError::Invalid(format!("{}: {}", e.field.unwrap_or_default(), e.message))
        };
        Rule::parse("executor.http_allow", &self.executor.http_allow).map_err(invalid)?;
        Rule::parse("alarm.webhook_allow", &self.alarm.webhook_allow).map_err(invalid)?;
        Rule::parse("xxl.address_allow", &self.xxl.address_allow).map_err(invalid)?;
        MailDomains::parse(
            "alarm.email_allow",
            &self.alarm.email_allow,
            &self.alarm.smtp_from,
        )
        .map_err(invalid)?;
        for name in &self.executor.job_env {
            let valid = name
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !valid {
                return Err(ConfigError::Invalid(format!(
                    "executor.job_env: {name:?} is not a variable name"
                )));
            }
            if name.starts_with("RONDO_") {
                return Err(ConfigError::Invalid(format!(
                    "executor.job_env: {name} starts with RONDO_: rondo's own settings (credentials among them) never reach a job"
                )));
            }
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
        let limits = [
            a.login_max_per_user,
            a.login_max_per_address,
            a.login_max_addresses_per_user,
            a.token_max_per_address,
        ];
        if a.login_window_s == 0 || limits.contains(&0) {
            return Err(ConfigError::Invalid(
                "auth.login_window_s, login_max_per_user, login_max_per_address, \
                 login_max_addresses_per_user and token_max_per_address must be > 0"
                    .into(),
            ));
        }
        if a.trust_forwarded_for {
            return Err(ConfigError::Invalid(
                "auth.trust_forwarded_for is replaced by auth.trusted_proxies: list the proxies' \
                 addresses, so a caller that reaches a node directly cannot name its own address"
                    .into(),
            ));
        }
        for proxy in &a.trusted_proxies {
            proxy
                .parse::<rondo_model::destination::Cidr>()
                .map_err(|e| {
                    ConfigError::Invalid(format!("auth.trusted_proxies: {proxy:?}: {e}"))
                })?;
        }
        Ok(())
    }

    /// Refuses the credentials that ship in this repository (the broker's
    /// `guest:guest`, the demo database's `rondo:rondo`) for a service that
    /// is not on this machine: they are only for a loopback demo.
    /// Redis's `default` user without a password is anyone who can reach
    /// the port: allowed on loopback only (a demo, a test).
    fn check_redis_user(&self) -> Result<(), ConfigError> {
        let urls = match self.redis.cluster_seeds() {
            Ok(Some(seeds)) => seeds,
            _ => vec![self.redis.url.clone()],
        };
        for url in urls {
            let rest = url
                .trim()
                .split_once("://")
                .map_or(url.as_str(), |(_, rest)| rest);
            let (userinfo, host) = match rest.rsplit_once('@') {
                Some((userinfo, host)) => (userinfo, host),
                None => ("", rest),
            };
            let host = host.split('/').next().unwrap_or(host);
            let password = userinfo.split_once(':').map_or("", |(_, p)| p);
            if password.is_empty() && !is_loopback(host) {
                return Err(ConfigError::Invalid(format!(
                    "redis.url connects to {host} as Redis's default user without a password; give this process its own ACL user (redis://<user>:<password>@{host}, docs/security.md)"
                )));
            }
        }
        Ok(())
    }

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
            .with_publisher(&crate::amqp::user_of(&self.amqp.url))
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
