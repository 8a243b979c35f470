//! The cluster topology of `scripts/services-cluster.sh`: a 3-member
//! ZooKeeper ensemble (and, beside it, a Redis Cluster and a RabbitMQ
//! cluster), started once per test process, and the means to kill and
//! restart its members. Tests that kill members hold [`MemberLock`], so
//! they run one at a time across test processes: a member killed by one
//! test must not surprise another.

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The ensemble's connect string.
pub const ZK_ENSEMBLE: &str = "127.0.0.1:22181,127.0.0.1:22182,127.0.0.1:22183";

/// The RabbitMQ cluster's nodes, as one `amqp.url` list.
pub const RABBIT_CLUSTER: &str = "amqp://guest:guest@127.0.0.1:5681/%2f,amqp://guest:guest@127.0.0.1:5682/%2f,amqp://guest:guest@127.0.0.1:5683/%2f";

/// The Redis Cluster's nodes, as one `redis.url`: all six as seeds, so the
/// client finds a live one whichever is down; signed in as the tests'
/// admin, which `scripts/services-cluster.sh` makes on every node (Redis's
/// `default` user is off there as on the single Redis).
pub fn redis_cluster() -> String {
    let auth = match admin() {
        Some((user, password)) => format!("{user}:{password}@"),
        None => String::new(),
    };
    let nodes: Vec<String> = redis_ports()
        .iter()
        .map(|p| format!("127.0.0.1:{p}"))
        .collect();
    format!("redis+cluster://{auth}{}", nodes.join(","))
}

/// The Redis Cluster's node ports (masters and replicas, as they are
/// now): `REDIS_CLUSTER_PORTS` (as `scripts/services-cluster.sh` reads
/// it), else 7000 to 7005.
pub fn redis_ports() -> Vec<u16> {
    let ports = std::env::var("REDIS_CLUSTER_PORTS").unwrap_or_default();
    let ports: Vec<u16> = ports
        .split([' ', ','])
        .filter_map(|p| p.trim().parse().ok())
        .collect();
    if ports.is_empty() {
        vec![7000, 7001, 7002, 7003, 7004, 7005]
    } else {
        ports
    }
}

/// `(user, password)` of the tests' Redis admin, the same on every Redis of
/// the machine; `None` while the tests run as Redis's `default` user.
fn admin() -> Option<(String, String)> {
    rondo_core::testkit::redis_userinfo(&rondo_core::testkit::redis_admin_url())
}

/// The node on `port`, signed in as the tests' admin.
fn node_url(port: u16) -> String {
    match admin() {
        Some((user, password)) => format!("redis://{user}:{password}@127.0.0.1:{port}"),
        None => format!("redis://127.0.0.1:{port}"),
    }
}

/// The members' client ports, by member id 1..=3.
pub fn zk_port(member: u8) -> u16 {
    22180 + u16::from(member)
}

fn workspace_root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the testkit is in the workspace")
}

fn state_dir() -> PathBuf {
    let base = std::env::var("RONDO_SERVICES_DIR")
        .unwrap_or_else(|_| "/var/lib/rondo-services".to_owned());
    PathBuf::from(base).join("cluster")
}

/// Points `config` at the whole cluster topology: the Redis Cluster, the
/// ZooKeeper ensemble and the RabbitMQ cluster with quorum queues. Does not
/// start it: call [`up`] first.
pub fn use_cluster(config: &mut rondo_core::Config) {
    config.redis.url = redis_cluster();
    config.zookeeper.connect = ZK_ENSEMBLE.to_owned();
    config.amqp.url = RABBIT_CLUSTER.to_owned();
    config.amqp.queue_type = "quorum".to_owned();
}

/// Runs `scripts/services-cluster.sh up`: starts what does not answer and
/// waits until each cluster is whole. Idempotent; serialised within the
/// process.
pub fn up() {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = std::process::Command::new("bash")
        .arg(workspace_root().join("scripts/services-cluster.sh"))
        .arg("up")
        .current_dir(workspace_root())
        .output()
        .expect("running scripts/services-cluster.sh");
    assert!(
        out.status.success(),
        "scripts/services-cluster.sh up failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Held by a test that kills cluster members: an exclusive lock on a file
/// of the state directory, released when dropped (or when the process
/// dies).
pub struct MemberLock {
    _file: std::fs::File,
}

impl MemberLock {
    /// Waits for the lock (blocking: take it before starting a runtime's
    /// work, or from `spawn_blocking`).
    pub fn acquire() -> MemberLock {
        let dir = state_dir();
        std::fs::create_dir_all(&dir).expect("the cluster state directory");
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(dir.join("members.lock"))
            .expect("the member lock file");
        file.lock().expect("locking the member lock file");
        MemberLock { _file: file }
    }
}

/// `kill -9` of ZooKeeper member `member` (1..=3), as the script started
/// it.
pub fn kill_zk_member(member: u8) {
    kill_by_pidfile(&format!("zk{member}/zk.pid"));
}

/// `kill -9` of the process whose pid the script left in `pidfile`
/// (relative to the cluster's state directory).
fn kill_by_pidfile(pidfile: &str) {
    let path = state_dir().join(pidfile);
    let pid = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let status = std::process::Command::new("kill")
        .args(["-9", pid.trim()])
        .status()
        .expect("kill");
    assert!(
        status.success(),
        "kill -9 {} ({})",
        pid.trim(),
        path.display()
    );
}

/// `kill -9` of the Redis node on `port`, as the script started it.
pub fn kill_redis_node(port: u16) {
    kill_by_pidfile(&format!("redis-{port}/redis.pid"));
}

/// The port of the master serving `key`'s slot now, as the nodes that
/// answer say (`CLUSTER NODES` of the first one that does).
pub async fn redis_master_of(key: &str) -> Option<u16> {
    for port in redis_ports() {
        let Some(slot) = redis_cli(port, &["cluster", "keyslot", key]).await else {
            continue;
        };
        let slot: u16 = slot.parse().ok()?;
        let Some(text) = redis_cli(port, &["cluster", "nodes"]).await else {
            continue;
        };
        for line in text.lines() {
            let fields: Vec<&str> = line.split(' ').collect();
            let (Some(addr), Some(flags)) = (fields.get(1), fields.get(2)) else {
                continue;
            };
            if !flags.contains("master") || flags.contains("fail") {
                continue;
            }
            if serves_slot(line, slot) {
                return addr.split('@').next()?.rsplit(':').next()?.parse().ok();
            }
        }
        return None;
    }
    None
}

/// Whether a `CLUSTER NODES` line lists `slot` among its ranges.
fn serves_slot(line: &str, slot: u16) -> bool {
    line.split(' ').skip(8).any(|range| {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
    })
}

/// Whether the Redis node on `port` answers and calls itself a master
/// with the cluster whole (`cluster_state:ok`).
pub async fn redis_cluster_ok(port: u16) -> bool {
    redis_cli(port, &["cluster", "info"])
        .await
        .is_some_and(|t| t.contains("cluster_state:ok"))
}

/// Whether the Redis node on `port` answers and, if it is a replica, has
/// its master's data (a replica still syncing cannot take over).
pub async fn redis_node_synced(port: u16) -> bool {
    let Some(info) = redis_cli(port, &["info", "replication"]).await else {
        return false;
    };
    !info.contains("role:slave")
        || (info.contains("master_link_status:up") && info.contains("master_sync_in_progress:0"))
}

/// Waits until every Redis node answers, the cluster says it is whole, and
/// every replica has its master's data (a replica still syncing cannot take
/// over from the next master killed).
pub async fn until_redis_whole() {
    crate::eventually(
        "the redis cluster whole",
        Duration::from_secs(120),
        || async {
            for port in redis_ports() {
                if !redis_cluster_ok(port).await || !redis_node_synced(port).await {
                    return None;
                }
            }
            Some(())
        },
    )
    .await;
}

/// The hash slot of `key`.
pub async fn redis_slot_of(key: &str) -> u16 {
    for port in redis_ports() {
        if let Some(slot) = redis_cli(port, &["cluster", "keyslot", key]).await {
            return slot.parse().expect("CLUSTER KEYSLOT answers a number");
        }
    }
    panic!("no redis node answers CLUSTER KEYSLOT");
}

/// The ports of the masters serving slots now.
pub async fn redis_masters() -> Vec<u16> {
    let mut masters = Vec::new();
    for port in redis_ports() {
        let Some(info) = redis_cli(port, &["info", "replication"]).await else {
            continue;
        };
        if info.contains("role:master") {
            masters.push(port);
        }
    }
    masters
}

/// Moves hash slot `slot` from the master serving it to the master on
/// `to`, as `redis-cli --cluster reshard` does, but slowly: the slot is
/// marked importing on `to` and migrating on its master, its keys are
/// moved one at a time with `pause` between, then every master is told
/// the slot's new owner. Meanwhile clients get `ASK` for the keys already
/// moved (and `TRYAGAIN` for a command whose keys are split between the two).
/// Returns how many keys moved.
pub async fn migrate_redis_slot(slot: u16, to: u16, pause: Duration) -> usize {
    async fn conn(port: u16) -> redis::aio::MultiplexedConnection {
        redis::Client::open(node_url(port))
            .expect("a redis url")
            .get_multiplexed_async_connection()
            .await
            .expect("the redis node answers")
    }
    async fn id_of(c: &mut redis::aio::MultiplexedConnection) -> String {
        redis::cmd("CLUSTER")
            .arg("MYID")
            .query_async(c)
            .await
            .expect("CLUSTER MYID")
    }
    // The master that says it serves the slot.
    let mut from = None;
    for port in redis_masters().await {
        let nodes: String = redis::cmd("CLUSTER")
            .arg("NODES")
            .query_async(&mut conn(port).await)
            .await
            .expect("CLUSTER NODES");
        let me = nodes.lines().find(|l| l.contains("myself")).unwrap_or("");
        if serves_slot(me, slot) {
            from = Some(port);
        }
    }
    let from = from.unwrap_or_else(|| panic!("no master serves slot {slot}"));
    assert_ne!(from, to, "slot {slot} is on {to} already");
    // A move stopped midway (a panic, the test's runtime dropped) would leave
    // the slot open for the next run: close it on the way out.
    let open = SlotLeftOpen;
    let (mut src, mut dst) = (conn(from).await, conn(to).await);
    let (src_id, dst_id) = (id_of(&mut src).await, id_of(&mut dst).await);
    let setslot = |state: &str, node: &str| {
        let mut cmd = redis::cmd("CLUSTER");
        cmd.arg("SETSLOT").arg(slot).arg(state).arg(node);
        cmd
    };
    let () = setslot("IMPORTING", &src_id)
        .query_async(&mut dst)
        .await
        .expect("IMPORTING");
    let () = setslot("MIGRATING", &dst_id)
        .query_async(&mut src)
        .await
        .expect("MIGRATING");
    let mut moved = 0;
    loop {
        let keys: Vec<String> = redis::cmd("CLUSTER")
            .arg("GETKEYSINSLOT")
            .arg(slot)
            .arg(1)
            .query_async(&mut src)
            .await
            .expect("GETKEYSINSLOT");
        let Some(key) = keys.first() else {
            break;
        };
        let mut migrate = redis::cmd("MIGRATE");
        migrate.arg("127.0.0.1").arg(to).arg("").arg(0).arg(5_000);
        migrate.arg("REPLACE");
        // The target lets no one in without a user.
        if let Some((user, password)) = admin() {
            migrate.arg("AUTH2").arg(user).arg(password);
        }
        let _: redis::Value = migrate
            .arg("KEYS")
            .arg(key)
            .query_async(&mut src)
            .await
            .expect("MIGRATE");
        moved += 1;
        tokio::time::sleep(pause).await;
    }
    let () = setslot("NODE", &dst_id)
        .query_async(&mut dst)
        .await
        .expect("NODE on the importer");
    let () = setslot("NODE", &dst_id)
        .query_async(&mut src)
        .await
        .expect("NODE on the exporter");
    for port in redis_masters().await {
        if port != from && port != to {
            let mut c = conn(port).await;
            let () = setslot("NODE", &dst_id)
                .query_async(&mut c)
                .await
                .expect("NODE on a master");
        }
    }
    std::mem::forget(open);
    moved
}

/// Armed while [`migrate_redis_slot`] runs; dropped armed, it has
/// `services-cluster.sh up` finish the half-moved slot.
struct SlotLeftOpen;

impl Drop for SlotLeftOpen {
    fn drop(&mut self) {
        tracing::warn!("a slot move stopped midway: closing the slot (services-cluster.sh up)");
        let _ = std::process::Command::new("bash")
            .arg(workspace_root().join("scripts/services-cluster.sh"))
            .arg("up")
            .current_dir(workspace_root())
            .output();
    }
}

/// A command to the Redis node on `port`; `None` when it does not answer
/// within 2 s.
async fn redis_cli(port: u16, args: &[&str]) -> Option<String> {
    let ask = async {
        let client = redis::Client::open(node_url(port)).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let mut cmd = redis::cmd(args[0]);
        for a in &args[1..] {
            cmd.arg(*a);
        }
        cmd.query_async::<String>(&mut conn).await.ok()
    };
    tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .ok()
        .flatten()
}

/// `kill -9` of RabbitMQ node `r<node>@localhost` (1..=3): its Erlang VM,
/// as the script started it.
pub fn kill_rabbit_node(node: u8) {
    kill_by_pidfile(&format!("r{node}/rabbitmq.pid"));
}

/// Whether RabbitMQ node `node` accepts AMQP connections.
pub async fn rabbit_up(node: u8) -> bool {
    let port = 5680 + u16::from(node);
    tokio::time::timeout(
        Duration::from_secs(2),
        tokio::net::TcpStream::connect(("127.0.0.1", port)),
    )
    .await
    .is_ok_and(|c| c.is_ok())
}

/// What member `member` says it is (`leader`, `follower`), or `None` while
/// it does not answer.
pub async fn zk_mode(member: u8) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let ask = async {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", zk_port(member)))
            .await
            .ok()?;
        s.write_all(b"srvr").await.ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).await.ok()?;
        out.lines()
            .find_map(|l| l.strip_prefix("Mode: "))
            .map(str::to_owned)
    };
    tokio::time::timeout(Duration::from_secs(2), ask)
        .await
        .ok()
        .flatten()
}
