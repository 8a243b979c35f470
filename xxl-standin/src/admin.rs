//! The client side towards the admins: POST `<admin>/api/<name>` to each
//! admin in order until one answers `{"code":200,…}`.

use std::time::Duration;

use serde_json::Value;

use crate::config::Generation;

/// Why one admin did not take a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// It answered, but not with code 200 (the answer, or its HTTP status).
    Refused(String),
    /// No answer: connection refused, timeout, a body that is not JSON.
    Error(String),
}

/// The result of one request tried on the admins in order.
#[derive(Debug, Default)]
pub struct Delivery {
    pub ok: bool,
    /// The admins tried before one took it (all of them when `!ok`).
    pub failures: Vec<Failure>,
}

#[derive(Clone, Debug)]
pub struct AdminClient {
    http: reqwest::Client,
    bases: Vec<String>,
    token: String,
    appname: String,
    generation: Generation,
}

impl AdminClient {
    /// `bases` are the admins' `/api` URLs without a trailing slash.
    pub fn new(
        generation: Generation,
        bases: Vec<String>,
        token: String,
        appname: String,
        timeout: Duration,
    ) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout)
            .build()?;
        Ok(AdminClient {
            http,
            bases,
            token,
            appname,
            generation,
        })
    }

    pub async fn post(&self, api: &str, body: &str) -> Delivery {
        let mut delivery = Delivery::default();
        for base in &self.bases {
            match self.post_one(&format!("{base}/{api}"), body).await {
                Ok(()) => {
                    delivery.ok = true;
                    break;
                }
                Err(failure) => {
                    tracing::info!(%base, api, ?failure, "admin did not take the request");
                    delivery.failures.push(failure);
                }
            }
        }
        delivery
    }

    async fn post_one(&self, url: &str, body: &str) -> Result<(), Failure> {
        let mut request = self
            .http
            .post(url)
            .header("Content-Type", "application/json;charset=UTF-8")
            .body(body.to_owned());
        // 2.x sends the token only when one is set; 3.x always sends its
        // headers, 3.5 with the appname.
        if self.generation != Generation::V2 || !self.token.is_empty() {
            request = request.header("XXL-JOB-ACCESS-TOKEN", &self.token);
        }
        if self.generation == Generation::V35 {
            request = request.header("XXL-JOB-APPNAME", &self.appname);
        }
        let response = request
            .send()
            .await
            .map_err(|e| Failure::Error(e.to_string()))?;
        let status = response.status();
        let text = response
            .text()
            .await
            .map_err(|e| Failure::Error(e.to_string()))?;
        if !status.is_success() {
            return Err(Failure::Refused(format!("StatusCode({status}) invalid")));
        }
        let answer: Value = serde_json::from_str(&text)
            .map_err(|_| Failure::Error(format!("response content invalid({text})")))?;
        if answer.get("code").and_then(Value::as_i64) == Some(200) {
            Ok(())
        } else {
            Err(Failure::Refused(text))
        }
    }
}
