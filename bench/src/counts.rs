//! What a window cost the services in operations, from their own counters:
//! Redis commands and the requests they came in (`INFO stats`:
//! `total_commands_processed`, `total_reads_processed` — one read of a
//! client's socket is one round trip, a pipeline's commands arrive in one),
//! and RabbitMQ's messages published, routed to queues, delivered and acked
//! (the broker's global counters, through `rabbitmqctl eval`). Divided by
//! the fires of the window they say what one fire takes. Redis's memory in
//! use and its keys (`INFO memory`, `INFO keyspace`) say what each fire
//! leaves behind: their growth over a window of steady load is the marks
//! kept per fire until they expire (dedupe and handled marks), a shrink
//! counts as none.
//!
//! Both are whole-service counters: they count everything on the machine's
//! Redis and broker during the window, which is the bench's cluster alone
//! while a step measures. A counter that cannot be read (a Redis Cluster's
//! several nodes, `rabbitmqctl` missing or not permitted) is left out.

use std::collections::BTreeMap;
use std::time::Duration;

use rondo_core::Config;
use serde::Serialize;

/// The counters at one instant.
#[derive(Debug, Clone, Default)]
pub(crate) struct Counters(BTreeMap<&'static str, u64>);

/// Operations per fire over a window.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PerFire {
    /// Counter → its increase over the window ÷ the window's fires.
    pub per_fire: BTreeMap<String, f64>,
}

impl PerFire {
    /// `name 1.23, …` for markdown, or `n/a`.
    pub fn line(&self) -> String {
        if self.per_fire.is_empty() {
            return "n/a".to_owned();
        }
        self.per_fire
            .iter()
            .map(|(name, n)| format!("{name} {n:.2}"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

impl Counters {
    /// Reads every counter it can (single Redis only).
    pub async fn take(config: &Config) -> Counters {
        let mut counters = BTreeMap::new();
        if matches!(config.redis.cluster_seeds(), Ok(None))
            && let Some(stats) = redis_stats(&config.redis.url).await
        {
            counters.extend(stats);
        }
        if !config.amqp.url.contains(',')
            && let Some(rabbit) = rabbit_counters().await
        {
            counters.extend(rabbit);
        }
        Counters(counters)
    }

    /// The increase of each counter since `earlier`, ÷ `fires`.
    pub fn per_fire(&self, earlier: &Counters, fires: u64) -> PerFire {
        let fires = fires.max(1) as f64;
        PerFire {
            per_fire: self
                .0
                .iter()
                .filter_map(|(name, now)| {
                    let then = earlier.0.get(name)?;
                    Some(((*name).to_owned(), now.saturating_sub(*then) as f64 / fires))
                })
                .collect(),
        }
    }
}

/// `INFO stats` counters of the Redis at `url`.
async fn redis_stats(url: &str) -> Option<BTreeMap<&'static str, u64>> {
    let read = async {
        let client = redis::Client::open(url).ok()?;
        let mut conn = client.get_multiplexed_async_connection().await.ok()?;
        let info: String = redis::cmd("INFO")
            .arg("stats")
            .arg("memory")
            .arg("keyspace")
            .query_async(&mut conn)
            .await
            .ok()?;
        Some(parse_redis_stats(&info))
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()
}

fn parse_redis_stats(info: &str) -> BTreeMap<&'static str, u64> {
    const WANTED: [(&str, &str); 3] = [
        ("total_commands_processed", "redis commands"),
        ("total_reads_processed", "redis requests (round trips)"),
        ("used_memory", "redis bytes kept"),
    ];
    let mut out = BTreeMap::new();
    for line in info.lines() {
        let Some((key, value)) = line.trim().split_once(':') else {
            continue;
        };
        // `db0:keys=12,expires=3,avg_ttl=0`: the keys of every database.
        if key.starts_with("db")
            && let Some(keys) = value
                .split(',')
                .find_map(|kv| kv.strip_prefix("keys="))
                .and_then(|n| n.parse::<u64>().ok())
        {
            *out.entry("redis keys kept").or_insert(0) += keys;
            continue;
        }
        if let Some((_, name)) = WANTED.iter().find(|(k, _)| *k == key)
            && let Ok(n) = value.parse()
        {
            out.insert(*name, n);
        }
    }
    out
}

/// RabbitMQ's global AMQP 0-9-1 counters, summed over queue types.
async fn rabbit_counters() -> Option<BTreeMap<&'static str, u64>> {
    let run = tokio::process::Command::new("su")
        .args([
            "-s",
            "/bin/sh",
            "rabbitmq",
            "-c",
            "cd /var/lib/rabbitmq && HOME=/var/lib/rabbitmq /usr/lib/rabbitmq/bin/rabbitmqctl \
             -n rabbit@localhost -q eval 'rabbit_global_counters:overview().'",
        ])
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(20), run)
        .await
        .ok()?
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let parsed = parse_rabbit_counters(&text);
    (!parsed.is_empty()).then_some(parsed)
}

/// Sums `name => n` of the counters wanted over every map they appear in
/// (the protocol's, each queue type's).
fn parse_rabbit_counters(text: &str) -> BTreeMap<&'static str, u64> {
    const WANTED: [(&str, &str); 4] = [
        ("messages_received_total", "amqp messages published"),
        ("messages_routed_total", "amqp queue copies routed"),
        ("messages_delivered_total", "amqp messages delivered"),
        ("messages_acknowledged_total", "amqp messages acked"),
    ];
    let mut out = BTreeMap::new();
    for item in text.split([',', '{', '}', '\n']) {
        let Some((key, value)) = item.split_once("=>") else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        if let Some((_, name)) = WANTED.iter().find(|(k, _)| *k == key)
            && let Ok(n) = value.parse::<u64>()
        {
            *out.entry(*name).or_insert(0) += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redis_stats_are_read_from_info() {
        let info = "# Stats\r\ntotal_connections_received:12\r\ntotal_commands_processed:345\r\n\
                    total_reads_processed:67\r\ntotal_writes_processed:66\r\n\
                    # Memory\r\nused_memory:1048576\r\nused_memory_human:1.00M\r\n\
                    # Keyspace\r\ndb0:keys=12,expires=3,avg_ttl=0\r\ndb1:keys=5,expires=0,avg_ttl=0\r\n";
        let stats = parse_redis_stats(info);
        assert_eq!(stats["redis commands"], 345);
        assert_eq!(stats["redis requests (round trips)"], 67);
        assert_eq!(stats["redis bytes kept"], 1_048_576);
        assert_eq!(stats["redis keys kept"], 17);
        assert_eq!(stats.len(), 4);
    }

    #[test]
    fn rabbit_counters_are_summed_over_queue_types() {
        let text = "#{[{protocol,amqp091}] =>\n      #{consumers => 7,messages_confirmed_total => 10,\n        \
                    messages_received_total => 11,messages_routed_total => 20},\n  \
                    [{protocol,amqp091},{queue_type,rabbit_classic_queue}] =>\n      \
                    #{messages_acknowledged_total => 5,\n        messages_delivered_total => 6,\n        \
                    messages_redelivered_total => 1},\n  \
                    [{protocol,amqp091},{queue_type,rabbit_quorum_queue}] =>\n      \
                    #{messages_acknowledged_total => 2,\n        messages_delivered_total => 3}}\n";
        let c = parse_rabbit_counters(text);
        assert_eq!(c["amqp messages published"], 11);
        assert_eq!(c["amqp queue copies routed"], 20);
        assert_eq!(c["amqp messages delivered"], 9);
        assert_eq!(c["amqp messages acked"], 7);
    }

    #[test]
    fn per_fire_divides_the_increase() {
        let before = Counters(BTreeMap::from([("redis commands", 100), ("gone", 1)]));
        let after = Counters(BTreeMap::from([("redis commands", 400), ("new", 9)]));
        let p = after.per_fire(&before, 100);
        assert_eq!(p.per_fire.len(), 1);
        assert_eq!(p.per_fire["redis commands"], 3.0);
    }
}
