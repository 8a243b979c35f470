//! A small JSON client of a node's admin API.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;
use serde_json::Value;

#[derive(Clone)]
pub(crate) struct Api {
    base: String,
    http: reqwest::Client,
    /// Sent as `Authorization: Bearer …`.
    token: String,
}

impl Api {
    pub fn new(addr: SocketAddr, token: &str) -> Api {
        Api {
            token: token.to_owned(),
            base: format!("http://{addr}"),
            http: reqwest::Client::builder()
                .timeout(Duration::from_secs(30))
                .pool_max_idle_per_host(256)
                .build()
                .expect("an http client without TLS builds"),
        }
    }

    /// POSTs `body`; returns the status and the JSON answer (Null if empty).
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<(u16, Value)> {
        let resp = self
            .http
            .post(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .json(body)
            .send()
            .await
            .with_context(|| format!("POST {}{path}", self.base))?;
        let status = resp.status().as_u16();
        let text = resp.text().await.unwrap_or_default();
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, json))
    }

    /// GETs a JSON document; an error unless the status is 2xx.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        let resp = self
            .http
            .get(format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .timeout(Duration::from_secs(5))
            .send()
            .await
            .with_context(|| format!("GET {}{path}", self.base))?;
        let status = resp.status();
        if !status.is_success() {
            bail!("GET {}{path}: {status}", self.base);
        }
        resp.json()
            .await
            .with_context(|| format!("GET {}{path}: not JSON", self.base))
    }

    /// The node's `GET /api/v1/cluster`, if it answers.
    pub async fn cluster(&self) -> Option<Value> {
        self.get("/api/v1/cluster").await.ok()
    }

    /// `POST /api/v1/cluster/stats/reset`: whether the node reset its
    /// histograms.
    pub async fn reset_stats(&self) -> bool {
        self.post("/api/v1/cluster/stats/reset", &Value::Null)
            .await
            .is_ok_and(|(status, _)| (200..300).contains(&status))
    }
}

/// A latency summary as the nodes report it (`{count,p50,p99,max}`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    pub count: u64,
    pub p50: i64,
    pub p99: i64,
    pub max: i64,
}

impl Latency {
    /// Reads `{count,p50,p99,max}`; `None` if absent.
    pub fn from_json(value: &Value) -> Option<Latency> {
        Some(Latency {
            count: value.get("count")?.as_u64()?,
            p50: value.get("p50")?.as_i64()?,
            p99: value.get("p99")?.as_i64()?,
            max: value.get("max")?.as_i64()?,
        })
    }

    /// Nearest-rank p50, p99 and max of a sample.
    pub fn of(sample: &mut [i64]) -> Latency {
        if sample.is_empty() {
            return Latency::default();
        }
        sample.sort_unstable();
        let n = sample.len();
        let rank = |p: f64| sample[((p * n as f64).ceil() as usize).clamp(1, n) - 1];
        Latency {
            count: n as u64,
            p50: rank(0.50),
            p99: rank(0.99),
            max: sample[n - 1],
        }
    }

    /// Summaries of several nodes as one: the count-weighted mean of the
    /// p50s, the largest p99 and the largest max (the percentiles of the
    /// union are not recoverable from summaries; the max of p99 is an upper
    /// bound of the union's p99).
    pub fn combine(parts: &[Latency]) -> Latency {
        let count: u64 = parts.iter().map(|l| l.count).sum();
        if count == 0 {
            return Latency::default();
        }
        let weighted: f64 = parts
            .iter()
            .map(|l| l.p50 as f64 * l.count as f64)
            .sum::<f64>()
            / count as f64;
        Latency {
            count,
            p50: weighted.round() as i64,
            p99: parts
                .iter()
                .filter(|l| l.count > 0)
                .map(|l| l.p99)
                .max()
                .unwrap_or(0),
            max: parts.iter().map(|l| l.max).max().unwrap_or(0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut s: Vec<i64> = (1..=100).rev().collect();
        assert_eq!(
            Latency::of(&mut s),
            Latency {
                count: 100,
                p50: 50,
                p99: 99,
                max: 100
            }
        );
        assert_eq!(Latency::of(&mut []), Latency::default());
    }

    #[test]
    fn summaries_combine_conservatively() {
        let a = Latency {
            count: 300,
            p50: 2,
            p99: 10,
            max: 40,
        };
        let b = Latency {
            count: 100,
            p50: 6,
            p99: 30,
            max: 35,
        };
        let c = Latency::combine(&[a, b, Latency::default()]);
        assert_eq!((c.count, c.p50, c.p99, c.max), (400, 3, 30, 40));
    }
}
