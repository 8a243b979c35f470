//! `[executor]`: the Rust executor's settings.

use serde::Deserialize;

use super::values::list_or_csv;

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
    /// Addresses the `http` handler may reach though the destination rule
    /// refuses them (loopback, link-local: the cloud metadata services,
    /// private, shared, unique-local, and IANA's other special-purpose
    /// ranges): ranges (`10.1.0.0/16`, `fd00::/8`) or single addresses
    /// (`192.168.1.20`). This host's own addresses are opened only by an
    /// entry naming the address itself. Empty by default: a job reaches
    /// only public addresses of other hosts. Judged on the resolved
    /// address, at every redirect. In the environment: comma-separated.
    #[serde(deserialize_with = "list_or_csv")]
    pub http_allow: Vec<String>,
    /// Variables of this process's environment that shell and script jobs
    /// also get. A job starts from an empty environment: `PATH`, `HOME`,
    /// `LANG` (as this process has them), the trigger's `RONDO_*` values,
    /// and only the names listed here, so the executor's own credentials
    /// (`RONDO_REDIS_URL`, `RONDO_AMQP_URL`…) never reach a job. A name
    /// starting with `RONDO_` is refused. In the environment:
    /// comma-separated.
    #[serde(deserialize_with = "list_or_csv")]
    pub job_env: Vec<String>,
    /// An OS user that shell and script jobs run as (its uid, its groups,
    /// its `HOME`, from `/`), so a job cannot read the executor's files;
    /// empty: the executor's own user. The executor must run as root to
    /// switch (the job keeps no capability and `no_new_privs` is set),
    /// which it checks at start. `http` and `demo` run inside the executor and are not
    /// affected.
    pub run_as: String,
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
            http_allow: Vec::new(),
            job_env: Vec::new(),
            run_as: String::new(),
        }
    }
}
