//! Every Redis key, AMQP name and znode rondo uses, derived from the
//! namespace. Nothing else in the workspace spells a key or queue name.
//! (Over 500 lines on purpose: one list, each name with what it holds,
//! so a new key is written once and checked against the others here.)
//!
//! The namespace (default `rondo`) prefixes all three, so two clusters, or two
//! tests, share one Redis, one broker and one ZooKeeper without touching each
//! other.

/// The Redis key layout this build writes: every key of a job (its
/// definition, its index entries, its due entry) in its partition's hash
/// tag, definitions in one hash per partition (layout 3), the partition's
/// job ids in a bitmap (layout 4). Recorded under [`Names::layout`].
pub const LAYOUT: u32 = 4;

/// Names for one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    ns: String,
    partitions: u32,
    /// The durable queues are quorum queues (`amqp.queue_type`).
    quorum_queues: bool,
    /// The broker user this process publishes as: every message carries it
    /// as its AMQP `user_id`, which RabbitMQ checks against the connection,
    /// so a consumer knows who sent it. Empty: none set.
    publisher: String,
}

impl Names {
    pub fn new(namespace: &str, partitions: u32) -> Self {
        debug_assert!(partitions > 0);
        Names {
            ns: namespace.to_owned(),
            partitions,
            quorum_queues: false,
            publisher: String::new(),
        }
    }

    /// The same names, publishing as broker user `user`.
    pub fn with_publisher(mut self, user: &str) -> Self {
        self.publisher = user.to_owned();
        self
    }

    /// The broker user this process publishes as (`user_id`); `None` when
    /// not set.
    pub fn publisher(&self) -> Option<&str> {
        (!self.publisher.is_empty()).then_some(self.publisher.as_str())
    }

    /// The same names, with the durable queues declared as quorum queues
    /// (replicated over a RabbitMQ cluster) when `quorum` is true.
    pub fn with_quorum_queues(mut self, quorum: bool) -> Self {
        self.quorum_queues = quorum;
        self
    }

    /// Whether the durable queues are quorum queues.
    pub fn quorum_queues(&self) -> bool {
        self.quorum_queues
    }

    pub fn namespace(&self) -> &str {
        &self.ns
    }

    pub fn partitions(&self) -> u32 {
        self.partitions
    }

    /// The partition a job belongs to.
    pub fn partition_of(&self, job_id: u64) -> u32 {
        (job_id % u64::from(self.partitions)) as u32
    }

    // ---- Redis ----

    /// `ns:{pK}:due`: job id scored by its next fire (ms).
    pub fn due(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:due", self.ns)
    }

    /// `ns:{pK}:ring:<node>`: fires assigned to a node, `<job>:<fire_ms>`.
    pub fn ring(&self, p: u32, node: &str) -> String {
        format!("{}:{{p{p}}}:ring:{node}", self.ns)
    }

    /// A partition's misfires hash: per job, the fires it missed (a count
    /// and the latest occurrences).
    pub fn misfires(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:misfires", self.ns)
    }

    /// A partition's fixed-delay hash: per `FIX_DELAY` job, the instant of
    /// the scheduled fire whose ending armed its next fire.
    pub fn delays(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:delays", self.ns)
    }

    /// `ns:{pK}:lease:<node>`: the node's lease on its ring of the
    /// partition (its token, expiring): while it exists, only the node
    /// fires that ring; once it lapses, the node's standby takes the ring's
    /// coming fires (`lua/take_ring.lua`, which checks the lease in the
    /// same step).
    pub fn lease(&self, p: u32, node: &str) -> String {
        format!("{}:{{p{p}}}:lease:{node}", self.ns)
    }

    /// Prefix of every ring key of a partition (for scans).
    pub fn ring_prefix(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:ring:", self.ns)
    }

    /// `ns:{pK}:rings`: the nodes that have a ring in the partition, so the
    /// leader finds a dead node's rings without scanning the keyspace.
    pub fn ring_owners(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:rings", self.ns)
    }

    /// `ns:{pK}:inflight`: trigger ids published and not yet answered,
    /// scored by publish time (for lost-trigger detection).
    pub fn inflight(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:inflight", self.ns)
    }

    /// `ns:{pK}:inflight:data`: trigger id → the trigger (JSON).
    pub fn inflight_data(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:inflight:data", self.ns)
    }

    /// `ns:{pK}:retry`: retries waiting for their backoff, scored by due ms
    /// (member: the retry as JSON).
    pub fn retry(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:retry", self.ns)
    }

    /// `ns:{pK}:handled:<minute>`: the ids of the partition's triggers
    /// whose outcome the monitor has handled (reacted to, or found nothing
    /// to do), so a duplicate result is ignored; one set per minute of the
    /// triggers' `fire_ms` ([`Names::handled_minute`]), which expires whole.
    /// A member costs about half a key of its own. A minute, not an
    /// hour: a set is freed at once when it expires, and at 10 k fires/s
    /// over 4 partitions an hour's set would hold 9 M members.
    pub fn handled(&self, p: u32, fire_ms: i64) -> String {
        format!(
            "{}:{{p{p}}}:handled:{}",
            self.ns,
            Self::handled_minute(fire_ms)
        )
    }

    /// The minute a trigger's handled mark is kept under: minutes since the
    /// epoch of its `fire_ms` (which its result and its in-flight record
    /// carry), so every reader finds the same set.
    pub fn handled_minute(fire_ms: i64) -> i64 {
        fire_ms.div_euclid(60_000)
    }

    /// `ns:{pK}:term`: the leader term the partition accepts.
    pub fn term(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:term", self.ns)
    }

    /// `ns:{pK}:defs`: the definitions (JSON) of the partition's jobs, a
    /// hash keyed by the job id, in the partition's hash tag (beside the due
    /// set, so one transaction writes both on a Redis Cluster too). One
    /// hash per partition, not one key per job: many definitions come back
    /// in one `HMGET`, and a job costs no key of its own.
    pub fn defs(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:defs", self.ns)
    }

    /// `ns:{pK}:defs-ver`: a random token set anew in the transaction of
    /// every save and delete of a job in [`Names::defs`] (and once a
    /// rebuild has filled them), so the leader's claim reuses the
    /// definitions it parsed while the partition's token is the one it read
    /// before their bytes, and reads none of them again (random, not a
    /// counter: after a lost write or a flush, a counter could come back
    /// to a value the claim saw with other bytes).
    pub fn defs_version(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:defs-ver", self.ns)
    }

    /// `ns:{pK}:job-bits`: which jobs of the partition exist, a bitmap:
    /// bit [`Names::job_bit`]`(id)` is set while job `id` exists. Job ids
    /// come from one sequence and the partition is `id % partitions`, so
    /// the bitmaps are dense: a job costs one bit here, where a sorted set
    /// cost about 100 bytes (a page of the job list merges the
    /// partitions', see `store::index`).
    pub fn job_bits(&self, p: u32) -> String {
        format!("{}:{{p{p}}}:job-bits", self.ns)
    }

    /// A job's bit in its partition's [`Names::job_bits`]; the job id is
    /// `bit * partitions + partition`.
    pub fn job_bit(&self, job_id: u64) -> u64 {
        job_id / u64::from(self.partitions)
    }

    /// `ns:{pK}:job-ids`: where builds up to layout 3 kept the ids of the
    /// partition's jobs (a sorted set scored by the id); the leader moves
    /// them into [`Names::job_bits`] once.
    /// `ns:{pK}:group-job-ids:<app>`: the ids of a group's jobs in the
    /// partition, scored by the id.
    pub fn group_job_ids(&self, p: u32, app: &str) -> String {
        format!("{}:{{p{p}}}:group-job-ids:{app}", self.ns)
    }

    /// `ns:layout`: the key layout the namespace is in ([`LAYOUT`],
    /// recorded by its first leader).
    pub fn layout(&self) -> String {
        format!("{}:layout", self.ns)
    }

    /// `ns:job-ids`: every job id of the namespace in one sorted set, as
    /// builds before the per-partition layout kept it.
    /// `ns:group-job-ids:<app>`: a group's job ids in one sorted set, as
    /// builds before the per-partition layout kept them.
    /// `ns:jobs`: the plain set of job ids the earliest builds kept.
    /// `ns:group-jobs:<app>`: a group's plain set of job ids of the
    /// earliest builds.
    /// `ns:bootstrap`: the term of the leader rebuilding Redis from MySQL,
    /// while it does (an interrupted rebuild is resumed).
    pub fn bootstrap_marker(&self) -> String {
        format!("{}:bootstrap", self.ns)
    }

    /// `ns:seq:job`: the job id sequence.
    pub fn job_seq(&self) -> String {
        format!("{}:seq:job", self.ns)
    }

    /// `ns:groups`: hash of executor group app name to its definition.
    pub fn groups(&self) -> String {
        format!("{}:groups", self.ns)
    }

    /// `ns:alarm:channels`: hash of alarm channel name to its definition
    /// (with its signing secret: the scheduler's alone).
    pub fn alarm_channels(&self) -> String {
        format!("{}:alarm:channels", self.ns)
    }

    /// `ns:{alarm}:pending:<job>`: hash of the job's pending alarm (its
    /// lead failure, the count folded in). The alarm keys share one hash
    /// tag: the outbox's scripts touch several at once.
    pub fn alarm_pending(&self, job_id: u64) -> String {
        format!("{}{job_id}", self.alarm_pending_prefix())
    }

    pub fn alarm_pending_prefix(&self) -> String {
        format!("{}:{{alarm}}:pending:", self.ns)
    }

    /// `ns:{alarm}:sending:<job>`: a claimed alarm, while it is sent.
    pub fn alarm_sending(&self, job_id: u64) -> String {
        format!("{}{job_id}", self.alarm_sending_prefix())
    }

    pub fn alarm_sending_prefix(&self) -> String {
        format!("{}:{{alarm}}:sending:", self.ns)
    }

    /// `ns:{alarm}:seen:<job>`: the trigger ids folded into the job's
    /// alarms lately (each counted once); it expires.
    pub fn alarm_seen(&self, job_id: u64) -> String {
        format!("{}:{{alarm}}:seen:{job_id}", self.ns)
    }

    /// `ns:{alarm}:due`: job ids with a pending alarm, scored by when it
    /// is due (ms).
    pub fn alarm_due(&self) -> String {
        format!("{}:{{alarm}}:due", self.ns)
    }

    /// `ns:{alarm}:inflight`: job ids whose alarm a sender holds, scored by
    /// the end of its lease (ms).
    pub fn alarm_inflight(&self) -> String {
        format!("{}:{{alarm}}:inflight", self.ns)
    }

    /// `ns:{alarm}:last:<job>`: when the job's last alarm was claimed (ms),
    /// for the throttle; it expires with the throttle.
    pub fn alarm_last(&self, job_id: u64) -> String {
        format!("{}{job_id}", self.alarm_last_prefix())
    }

    pub fn alarm_last_prefix(&self) -> String {
        format!("{}:{{alarm}}:last:", self.ns)
    }

    /// `ns:registry:<app>`: executor ids scored by last heartbeat (ms).
    pub fn registry(&self, app: &str) -> String {
        format!("{}:registry:{app}", self.ns)
    }

    /// `ns:executor:<id>`: an executor's app, host, handlers, start time.
    pub fn executor(&self, id: &str) -> String {
        format!("{}:executor:{id}", self.ns)
    }

    /// `ns:dedupe:<group>:<trigger id>`: set once by the executor that runs
    /// a trigger of `group`. Under the group, so a Redis ACL user of one
    /// group's executors reaches that group's marks only (`~ns:dedupe:<app>:*`;
    /// an app name holds no `:`).
    pub fn dedupe(&self, group: &str, trigger_id: &str) -> String {
        format!("{}:dedupe:{group}:{trigger_id}", self.ns)
    }

    /// `ns:session:<sha256>`: a browser session, by the SHA-256 of its id
    /// (a hash: user, csrf, created_ms), expiring after the idle time.
    pub fn session(&self, id_hash: &str) -> String {
        format!("{}:session:{id_hash}", self.ns)
    }

    /// The sessions of one user (a set of id hashes), to end them together.
    pub fn user_sessions(&self, username: &str) -> String {
        format!("{}:sessions-of:{username}", self.ns)
    }

    /// `ns:{login}:login-failures:<kind>:<who>`: failed sign-ins in the
    /// current window, per `kind` (`user`, `addr`, or `pair`: a username
    /// from one address, hashed) and who. One hash tag for all of them:
    /// one script counts an attempt on all three, on a Redis Cluster too.
    pub fn login_failures(&self, kind: &str, who: &str) -> String {
        format!("{}:{{login}}:login-failures:{kind}:{who}", self.ns)
    }

    /// `ns:round:<job>`: the cluster-wide ROUND counter of a job.
    pub fn round_counter(&self, job_id: u64) -> String {
        format!("{}:round:{job_id}", self.ns)
    }

    /// `ns:lfu:<job>`: LEAST_FREQUENTLY_USED counts of a job, per executor.
    pub fn route_lfu(&self, job_id: u64) -> String {
        format!("{}:lfu:{job_id}", self.ns)
    }

    /// `ns:lru:<job>`: LEAST_RECENTLY_USED order of a job's executors.
    pub fn route_lru(&self, job_id: u64) -> String {
        format!("{}:lru:{job_id}", self.ns)
    }

    // ---- the XXL-JOB gateway (`xxl-gateway/README.md`) ----

    /// `ns:xxl:executors`: the rondo ids of the XXL-JOB executors the
    /// gateways serve, scored by their last registration (ms).
    pub fn xxl_executors(&self) -> String {
        format!("{}:xxl:executors", self.ns)
    }

    /// `ns:xxl:executor:<id>`: one XXL-JOB executor's record (a hash: app,
    /// address, incarnation, …).
    pub fn xxl_executor(&self, executor_id: &str) -> String {
        format!("{}:xxl:executor:{executor_id}", self.ns)
    }

    /// `ns:xxl:gateways`: gateway instances scored by their last sign of
    /// life (ms): whose hand-offs are still in progress.
    pub fn xxl_gateways(&self) -> String {
        format!("{}:xxl:gateways", self.ns)
    }

    /// `ns:xxl:run:<log id>`: a trigger handed to an XXL-JOB executor
    /// under that log id and not yet answered (JSON).
    pub fn xxl_run(&self, log_id: i64) -> String {
        format!("{}:xxl:run:{log_id}", self.ns)
    }

    /// `ns:xxl:claim:{ns:dedupe:<group>:<trigger id>}`: which hand-off
    /// sends a trigger (`<log id> <gateway instance>`). Its hash tag is the
    /// trigger's dedupe key, so one script changes both on a Redis Cluster.
    pub fn xxl_claim(&self, group: &str, trigger_id: &str) -> String {
        format!(
            "{}:xxl:claim:{{{}}}",
            self.ns,
            self.dedupe(group, trigger_id)
        )
    }

    /// `ns:xxl:departed`: XXL-JOB executors that left the fleet, scored by
    /// when, while runs they had still wait for their callback.
    pub fn xxl_departed(&self) -> String {
        format!("{}:xxl:departed", self.ns)
    }

    /// `ns:xxl:inflight:<executor id>`: `<log id>:<job id>` of the triggers
    /// handed to that XXL-JOB executor and not yet answered, scored by the
    /// hand-off (ms).
    pub fn xxl_inflight(&self, executor_id: &str) -> String {
        format!("{}:xxl:inflight:{executor_id}", self.ns)
    }

    /// `ns:xxl:kill:<trigger id>`: the gateway instance that carries out a
    /// kill of that trigger (every instance hears it).
    pub fn xxl_kill(&self, trigger_id: &str) -> String {
        format!("{}:xxl:kill:{trigger_id}", self.ns)
    }

    // ---- RabbitMQ ----

    /// Topic exchange for triggers; routing key [`Self::trigger_key`]. A
    /// topic exchange, so RabbitMQ's topic permissions can confine an
    /// executor's broker user to its own group's routing keys (it publishes
    /// only hand-backs).
    pub fn trigger_exchange(&self) -> String {
        format!("{}.triggers", self.ns)
    }

    /// The routing key of an executor's triggers: `<app>.<executor id>`
    /// (neither holds a dot, `*` or `#`: both are app names).
    pub fn trigger_key(&self, app: &str, executor_id: &str) -> String {
        format!("{app}.{executor_id}")
    }

    /// Direct exchange for kill / cancel messages.
    pub fn control_exchange(&self) -> String {
        format!("{}.control", self.ns)
    }

    /// Topic exchange for `job.*`, `group.*`, `trigger.*`, `result.*`, `log.*`.
    pub fn events_exchange(&self) -> String {
        format!("{}.events", self.ns)
    }

    /// Fanout exchange every queue dead-letters to.
    pub fn dead_exchange(&self) -> String {
        format!("{}.dlx", self.ns)
    }

    /// The durable queue of one executor.
    pub fn executor_queue(&self, app: &str, executor_id: &str) -> String {
        format!("{}.exec.{app}.{executor_id}", self.ns)
    }

    /// An executor's short-lived control queue (kill), bound to the control
    /// exchange with the executor id.
    pub fn control_queue(&self, executor_id: &str) -> String {
        format!("{}.ctl.{executor_id}", self.ns)
    }

    /// Every event, for the persistence worker.
    pub fn persist_queue(&self) -> String {
        format!("{}.persist", self.ns)
    }

    /// `result.*` events, for the scheduler's result monitor.
    pub fn monitor_queue(&self) -> String {
        format!("{}.monitor", self.ns)
    }

    /// Messages that could not be decoded or handled.
    pub fn dead_queue(&self) -> String {
        format!("{}.dead", self.ns)
    }

    // ---- ZooKeeper (paths under the chroot `/<ns>`) ----

    /// The chroot every znode lives under.
    pub fn zk_root(&self) -> String {
        format!("/{}", self.ns)
    }

    pub fn zk_nodes(&self) -> &'static str {
        "/nodes"
    }

    pub fn zk_node(&self, node: &str) -> String {
        format!("/nodes/{node}")
    }

    pub fn zk_election(&self) -> &'static str {
        "/election"
    }

    pub fn zk_election_prefix(&self) -> &'static str {
        "/election/n_"
    }

    pub fn zk_term(&self) -> &'static str {
        "/term"
    }

    pub fn zk_leader(&self) -> &'static str {
        "/leader"
    }
}

/// A ring member: `<job>:<fire_ms>`, or `<job>:<fire_ms>:m` for a misfire
/// fired now (`FIRE_ONCE_NOW`, trigger type `MISFIRE`).
pub fn ring_member(job_id: u64, fire_ms: i64) -> String {
    let mut member = String::new();
    write_ring_member(&mut member, job_id, fire_ms);
    member
}

/// Appends [`ring_member`]'s text to `out` (a buffer reused for many).
pub fn write_ring_member(out: &mut String, job_id: u64, fire_ms: i64) {
    use std::fmt::Write as _;
    let _ = write!(out, "{job_id}:{fire_ms}");
}

/// The suffix of a misfire's ring member.
pub const MISFIRE_SUFFIX: &str = ":m";

/// Parses a ring member back into `(job, fire_ms)`.
pub fn parse_ring_member(member: &str) -> Option<(u64, i64)> {
    let member = member.strip_suffix(MISFIRE_SUFFIX).unwrap_or(member);
    let (job, fire) = member.split_once(':')?;
    Some((job.parse().ok()?, fire.parse().ok()?))
}

/// Whether a ring member is a misfire fired now.
pub fn is_misfire_member(member: &str) -> bool {
    member.ends_with(MISFIRE_SUFFIX)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_claim_shares_its_triggers_dedupe_slot() {
        let names = super::Names::new("ns", 1);
        let claim = names.xxl_claim("billing", "7-1-0");
        let dedupe = names.dedupe("billing", "7-1-0");
        assert_eq!(claim, format!("ns:xxl:claim:{{{dedupe}}}"));
        // The slot of a key with a hash tag is the slot of the tag; the
        // dedupe key has none, so its slot is its own text's.
        let tag = &claim[claim.find('{').unwrap() + 1..claim.rfind('}').unwrap()];
        assert_eq!(tag, dedupe);
        assert!(!dedupe.contains('{'));
    }

    use super::*;

    #[test]
    fn keys_of_one_partition_share_a_hash_tag() {
        let n = Names::new("rondo", 16);
        assert_eq!(n.due(3), "rondo:{p3}:due");
        assert_eq!(n.ring(3, "a"), "rondo:{p3}:ring:a");
        assert_eq!(n.term(3), "rondo:{p3}:term");
        assert_eq!(n.ring_owners(3), "rondo:{p3}:rings");
        assert_eq!(n.defs(3), "rondo:{p3}:defs");
        assert_eq!(n.defs_version(3), "rondo:{p3}:defs-ver");
        assert_eq!(n.job_bits(3), "rondo:{p3}:job-bits");
        // Job 35 of 16 partitions: partition 3, bit 2 (2 * 16 + 3 = 35).
        assert_eq!((n.partition_of(35), n.job_bit(35)), (3, 2));
        assert_eq!(n.group_job_ids(3, "app"), "rondo:{p3}:group-job-ids:app");
        assert!(n.ring(3, "a").starts_with(&n.ring_prefix(3)));
        // Handled marks: one set per partition and minute of the fire.
        assert_eq!(n.handled(3, 120_000), "rondo:{p3}:handled:2");
        assert_eq!(n.handled(3, 179_999), "rondo:{p3}:handled:2");
        assert_eq!(n.handled(3, -1), "rondo:{p3}:handled:-1");
    }

    #[test]
    fn amqp_names_follow_the_design() {
        let n = Names::new("rondo", 16);
        assert_eq!(n.trigger_exchange(), "rondo.triggers");
        assert_eq!(n.trigger_key("billing", "billing-1"), "billing.billing-1");
        assert_eq!(n.executor_queue("app", "e1"), "rondo.exec.app.e1");
        assert_eq!(n.persist_queue(), "rondo.persist");
        assert_eq!(n.dead_queue(), "rondo.dead");
    }

    #[test]
    fn ring_members_round_trip() {
        assert_eq!(
            parse_ring_member(&ring_member(42, 1_700_000_000_123)),
            Some((42, 1_700_000_000_123))
        );
        assert_eq!(parse_ring_member("x:1"), None);
        assert_eq!(parse_ring_member("42:1700:m"), Some((42, 1700)));
        assert!(is_misfire_member("42:1700:m") && !is_misfire_member("42:1700"));
        assert_eq!(parse_ring_member("42:1700:x"), None);
        assert_eq!(parse_ring_member("1"), None);
    }

    #[test]
    fn partition_is_job_id_modulo() {
        let n = Names::new("rondo", 16);
        assert_eq!(n.partition_of(17), 1);
        assert_eq!(n.partition_of(16), 0);
    }
}
