//! The `rondo` command line's shared part: the client of the admin API
//! with its credentials, and how an answer is printed and exits. The
//! `rondo` binary (main.rs) and the importer (`rondo-import`) build on it.
//! It links the model (`rondo-model`) and an HTTP client, nothing that
//! reaches a service directly.

// The CLI's job is to print.
#![allow(clippy::print_stdout)]

pub mod credentials;

use std::process::ExitCode;

use anyhow::Context;
use serde_json::Value;

/// Which cluster a command talks to, and as whom: the arguments every
/// `rondo` binary takes.
#[derive(clap::Args)]
pub struct Target {
    /// Base URL of any scheduler node's admin API.
    #[arg(long, env = "RONDO_API", default_value = "http://127.0.0.1:8600")]
    pub api: String,
    /// API token (`rondo_pat_…`); default: the one `rondo login` saved.
    #[arg(long, env = "RONDO_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

impl Target {
    /// A client of the API with these credentials.
    pub fn api(&self) -> Api {
        Api::new(&self.api, self.token.clone())
    }
}

/// A client of one scheduler node's admin API, with its credentials.
pub struct Api {
    pub(crate) base: String,
    http: reqwest::Client,
    /// Sent as `Authorization: Bearer …`.
    pub(crate) token: Option<String>,
    /// A browser session's cookie and CSRF token (`rondo login` only).
    pub(crate) session: Option<(String, String)>,
}

impl Api {
    /// A client of `base` sending `token`, else the token `rondo login`
    /// saved for `base`.
    pub fn new(base: &str, token: Option<String>) -> Api {
        Api {
            base: base.to_owned(),
            http: reqwest::Client::new(),
            token: token.or_else(|| credentials::saved_token(base)),
            session: None,
        }
    }

    /// The API's base URL.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// One call: its status and JSON answer (or its text as a string).
    pub async fn call(
        &mut self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let url = format!("{}{path}", self.base.trim_end_matches('/'));
        let mut req = self.http.request(method, &url);
        if let Some(token) = &self.token {
            req = req.bearer_auth(token);
        }
        if let Some((cookie, csrf)) = &self.session {
            req = req
                .header("cookie", format!("rondo_session={cookie}"))
                .header("x-csrf-token", csrf);
        }
        if let Some(b) = body {
            req = req.json(&b);
        }
        let resp = req.send().await.with_context(|| format!("calling {url}"))?;
        let status = resp.status().as_u16();
        if let Some(cookie) = resp
            .headers()
            .get("set-cookie")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("rondo_session="))
            .and_then(|v| v.split(';').next())
        {
            self.session = Some((cookie.to_owned(), String::new()));
        }
        let text = resp.text().await?;
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        Ok((status, value))
    }
}

/// Prints an answer and says how the process exits: a success's JSON on
/// stdout (0); an API error's JSON on stderr, 2 for bad input, no
/// credentials or a missing right, 1 otherwise; a failure to call, 1.
pub fn finish(outcome: anyhow::Result<(u16, Value)>, api: &str) -> ExitCode {
    match outcome {
        Ok((status, value)) if status < 300 => {
            if !value.is_null() {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&value).unwrap_or_default()
                );
            }
            ExitCode::SUCCESS
        }
        Ok((status, value)) => {
            eprintln!(
                "{}",
                serde_json::to_string_pretty(&value).unwrap_or_default()
            );
            if status == 401 {
                eprintln!(
                    "rondo: not signed in to {}: run `rondo login --user NAME`, or set RONDO_TOKEN",
                    api
                );
            }
            ExitCode::from(if (400..500).contains(&status) { 2 } else { 1 })
        }
        Err(e) => {
            eprintln!("rondo: {e:#}");
            ExitCode::FAILURE
        }
    }
}
