//! The services' sections: `[redis]`, `[amqp]`, `[zookeeper]`, `[mysql]`.

use serde::Deserialize;

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
    /// Lets the process start although Redis's `default` user is open
    /// (answers without a password): for a throwaway demo Redis only.
    /// Off (the default), the scheduler, the executor and the XXL-JOB
    /// gateway check each Redis of `url` at start and refuse to start
    /// (exit 64) when a connection without credentials reads the
    /// namespace's keys: anyone who reaches the port (a shell job
    /// included) could forge an admin session (docs/security.md).
    pub allow_open_default: bool,
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
            allow_open_default: false,
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
    /// The broker users of the scheduler nodes: the only senders whose
    /// group, job, trigger, alarm and audit events the persistence worker
    /// stores and the result monitor acts on (a message carries its sender
    /// as `user_id`, which RabbitMQ checks). Another sender's is
    /// dead-lettered (`forbidden`). Empty (the default): the process's own
    /// broker user, for a cluster whose processes share one. In the
    /// environment: a comma-separated list.
    #[serde(deserialize_with = "super::values::list_or_csv")]
    pub scheduler_users: Vec<String>,
    /// The broker user of a group's executors, with `{app}` standing for
    /// the group: the only sender (beside the scheduler's and the
    /// gateway's users) whose results and log lines for that group's jobs
    /// the monitor and the worker take. Another sender's are
    /// dead-lettered (`forbidden`).
    pub executor_user: String,
    /// The broker users of XXL-JOB gateways: they hand results and log
    /// lines back for every group they serve. In the environment: a
    /// comma-separated list.
    #[serde(deserialize_with = "super::values::list_or_csv")]
    pub gateway_users: Vec<String>,
}

impl Default for AmqpConfig {
    fn default() -> Self {
        AmqpConfig {
            url: "amqp://guest:guest@127.0.0.1:5672/%2f".into(),
            queue_type: "classic".into(),
            scheduler_users: Vec::new(),
            executor_user: "rondo-executor-{app}".into(),
            gateway_users: Vec::new(),
        }
    }
}

impl AmqpConfig {
    /// [`Self::scheduler_users`], or this process's own broker user.
    pub fn scheduler_users(&self) -> Vec<String> {
        if self.scheduler_users.is_empty() {
            vec![crate::amqp::user_of(&self.url)]
        } else {
            self.scheduler_users.clone()
        }
    }
}

#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ZkConfig {
    pub connect: String,
    /// A dead node is noticed after about this long.
    pub session_timeout_ms: u64,
    /// `user:password` of a ZooKeeper digest identity. Set: the nodes sign
    /// in with it and make every znode of the namespace readable and
    /// writable by that identity only. Empty (the default): znodes are
    /// open to anyone who reaches ZooKeeper, which a scheduler node allows
    /// on loopback only.
    pub auth: String,
}

impl Default for ZkConfig {
    fn default() -> Self {
        ZkConfig {
            connect: "127.0.0.1:2181".into(),
            session_timeout_ms: 6000,
            auth: String::new(),
        }
    }
}

/// `auth` shown as `***` when set: debug output never carries it.
impl std::fmt::Debug for ZkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZkConfig")
            .field("connect", &self.connect)
            .field("session_timeout_ms", &self.session_timeout_ms)
            .field("auth", &if self.auth.is_empty() { "" } else { "***" })
            .finish()
    }
}

impl ZkConfig {
    /// What a scheduler node checks before it connects: `auth` is
    /// `user:password` when set, and without it every host of `connect`
    /// is loopback (anyone who reaches the port may otherwise rewrite the
    /// term and the leader).
    pub fn check(&self) -> Result<(), String> {
        if !self.auth.is_empty() {
            let ok = self
                .auth
                .split_once(':')
                .is_some_and(|(user, password)| !user.is_empty() && !password.is_empty());
            if !ok {
                return Err("zookeeper.auth must be user:password".into());
            }
            return Ok(());
        }
        let hosts = self.connect.split('/').next().unwrap_or_default();
        for host in hosts.split(',').map(str::trim).filter(|h| !h.is_empty()) {
            if !super::values::is_loopback(host) {
                return Err(format!(
                    "zookeeper.connect names {host} and zookeeper.auth is empty: anyone who reaches it could rewrite the term and the leader; set zookeeper.auth (docs/security.md)"
                ));
            }
        }
        Ok(())
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

/// Config sections with a secret print it as `***`.
impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &crate::redact::urls(&self.url))
            .field("pool_size", &self.pool_size)
            .field("response_timeout_ms", &self.response_timeout_ms)
            .field("wait_replicas", &self.wait_replicas)
            .field("wait_timeout_ms", &self.wait_timeout_ms)
            .field("allow_open_default", &self.allow_open_default)
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
