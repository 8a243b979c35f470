//! Issue 47, attack 8: an operator aims an `http` job, and the job's alarm
//! webhook, at a service on the scheduler's and executor's own machine,
//! bound to `0.0.0.0`, through the host's own non-loopback address (here
//! 192.0.2.2) rather than loopback, which the rule refused already.
//!
//! The destination rule refuses the host's own addresses unless an allow
//! entry names the address itself: a range that holds it (the operator's
//! "internal network") does not open it (`docs/security.md`, "Where a job
//! and an alarm may connect").

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rondo_core::auth::Role;
use rondo_testkit::{Api, Cluster, World, eventually};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The host's own non-loopback IPv4 address, from the kernel's local
/// addresses. A machine without one cannot show the attack: the test says
/// so and fails rather than pass on nothing.
fn own_address() -> Ipv4Addr {
    let own = rondo_core::destination::local::read();
    own.ranges()
        .iter()
        .filter(|range| range.bits() == 32)
        .find_map(|range| match range.addr() {
            IpAddr::V4(v4) if !v4.is_loopback() => Some(v4),
            _ => None,
        })
        .unwrap_or_else(|| {
            panic!("this machine has no non-loopback IPv4 address ({own:?}): the attack cannot be tried here")
        })
}

/// A service on `0.0.0.0` that counts the connections it gets and answers
/// each `200 ok`; its port.
async fn service(connections: Arc<AtomicUsize>) -> u16 {
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            connections.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                let _ = sock.read(&mut buf).await;
                let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
                let _ = sock.write_all(answer.as_bytes()).await;
            });
        }
    });
    port
}

/// Starts an in-process executor of group `app` with the built-in
/// handlers and `executor.http_allow = allow`.
fn executor(cluster: &mut Cluster, app: &str, allow: &[String]) {
    cluster.world.config.executor.app = app.into();
    cluster.world.config.executor.http_allow = allow.to_vec();
    cluster.start_executor(&format!("{app}-1"), rondo_executor::builtin::register);
}

/// The handle code and message of a trigger, once stored.
async fn outcome(db: &sqlx::MySqlPool, trigger_id: &str) -> (i32, String) {
    eventually(
        "the run's result in MySQL",
        Duration::from_secs(20),
        || async {
            let row: Option<(Option<i32>, Option<String>)> =
                sqlx::query_as("SELECT handle_code, handle_msg FROM job_log WHERE trigger_id = ?")
                    .bind(trigger_id)
                    .fetch_optional(db)
                    .await
                    .ok()?;
            let (code, msg) = row?;
            Some((code?, msg.unwrap_or_default()))
        },
    )
    .await
}

/// Creates an `http` job of `group` to `url` as `api`'s user and triggers
/// it; the trigger id.
async fn run_http(api: &Api, group: &str, url: &str, webhook: &str) -> String {
    let spec = json!({ "group": group, "handler": "http", "params": url,
                       "alarm_webhook": webhook });
    let (status, job) = api.post("/api/v1/jobs", spec).await;
    assert_eq!(status, 201, "{job}");
    api.trigger_now(job["id"].as_u64().unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_and_alarms_cannot_reach_this_host_through_its_own_address() {
    let own = own_address();
    let network = format!("{own}/24");
    let mut world = World::new("dest").await;
    // The webhook client may reach the host's network, as an operator
    // would allow for internal hooks; that is not "this machine".
    world.config.alarm.webhook_allow = vec![network.clone()];
    world.config.alarm.retries = 0;
    let mut cluster = Cluster::new(world);
    // `dest`: the defaults; `lan`: the host's network allowed; `named`:
    // the host's address itself allowed (the control: the service is
    // reachable that way).
    executor(&mut cluster, "dest", &[]);
    executor(&mut cluster, "lan", std::slice::from_ref(&network));
    executor(&mut cluster, "named", &[own.to_string()]);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let admin = cluster.api(node);
    for app in ["dest", "lan", "named"] {
        let (status, answer) = admin.post("/api/v1/groups", json!({ "app": app })).await;
        assert_eq!(status, 201, "{answer}");
        eventually("the group's executor", Duration::from_secs(10), || async {
            let (_, live) = admin.get(&format!("/api/v1/groups/{app}/executors")).await;
            (live.as_array()?.len() == 1).then_some(())
        })
        .await;
    }
    let connections = Arc::new(AtomicUsize::new(0));
    let port = service(connections.clone()).await;
    let url = format!("http://{own}:{port}/");
    let hook = format!("http://{own}:{port}/alarm");

    // The attacker: an operator of the three groups.
    let token = cluster
        .world
        .user("mallory", Role::Operator, &["dest", "lan", "named"], false)
        .await;
    let mallory = Api::new(cluster.addr(node)).with_token(&token);
    let by_default = run_http(&mallory, "dest", &url, &hook).await;
    let through_network = run_http(&mallory, "lan", &url, "").await;
    let named = run_http(&mallory, "named", &url, "").await;

    let db = cluster.db().clone();
    // The control first: the address itself allowed, the run reaches the
    // service and succeeds.
    let (code, msg) = outcome(&db, &named).await;
    assert_eq!(code, 200, "the named address is reached: {msg}");
    // By default, and with the host's network allowed, the run is refused
    // as an address of this host.
    let refused = format!("destination refused: {own} is an address of this host");
    for trigger_id in [&by_default, &through_network] {
        let (code, msg) = outcome(&db, trigger_id).await;
        assert_eq!(code, 500, "{msg}");
        assert!(msg.contains(&refused), "{trigger_id}: {msg}");
    }
    // The failed run's alarm: its webhook to the host's own address is
    // refused though the host's network is allowed.
    let (status, alarm) = eventually("the alarm's outcome", Duration::from_secs(20), || async {
        let row: Option<(Option<i32>, Option<String>)> =
            sqlx::query_as("SELECT alarm_status, alarm_msg FROM job_log WHERE trigger_id = ?")
                .bind(&by_default)
                .fetch_optional(&db)
                .await
                .ok()?;
        let (status, msg) = row?;
        status
            .filter(|s| *s == 2 || *s == 3)
            .map(|s| (s, msg.unwrap_or_default()))
    })
    .await;
    assert_eq!(status, 3, "{alarm}");
    assert!(
        alarm.contains("destination refused") && alarm.contains("is an address of this host"),
        "{alarm}"
    );
    assert_eq!(
        connections.load(Ordering::SeqCst),
        1,
        "the service was reached by the control run only"
    );
    cluster.stop().await;
}
