//! A browser over TCP against a node's API: keeps the session cookie, the
//! CSRF token and the device cookie a sign-in sets, and sends them back as
//! a browser would.

use reqwest::Method;
use reqwest::header::HeaderMap;
use serde_json::{Value, json};

/// One browser: its cookies, its CSRF token, where it says it is.
pub struct Browser {
    pub http: reqwest::Client,
    pub base: String,
    /// The session cookie, `name=value`.
    pub cookie: Option<String>,
    pub csrf: Option<String>,
    /// The device cookie (`rondo_device=…`) of its last sign-in: a new
    /// browser has none.
    pub device: Option<String>,
    /// Sent as `X-Forwarded-For` (a node that trusts the test's loopback
    /// as a proxy takes it as the client's address).
    pub from: Option<String>,
    /// Sends `X-Rondo-Background: 1`, as the console's polling does.
    pub background: bool,
}

impl Browser {
    pub fn new(addr: std::net::SocketAddr) -> Browser {
        Browser {
            http: reqwest::Client::new(),
            base: format!("http://{addr}"),
            cookie: None,
            csrf: None,
            device: None,
            from: None,
            background: false,
        }
    }

    /// A request, with the CSRF token when `csrf`: its status and JSON.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        csrf: bool,
    ) -> (u16, Value) {
        let (status, body, _) = self.send_full(method, path, body, csrf).await;
        (status, body)
    }

    /// A request: its status, JSON and headers.
    pub async fn send_full(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
        csrf: bool,
    ) -> (u16, Value, HeaderMap) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        let cookies: Vec<&str> = [&self.cookie, &self.device]
            .into_iter()
            .filter_map(|c| c.as_deref())
            .collect();
        if !cookies.is_empty() {
            req = req.header("cookie", cookies.join("; "));
        }
        if let (true, Some(token)) = (csrf, &self.csrf) {
            req = req.header("x-csrf-token", token);
        }
        if let Some(from) = &self.from {
            req = req.header("x-forwarded-for", from);
        }
        if self.background {
            req = req.header("x-rondo-background", "1");
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("the node answers");
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        let text = resp.text().await.unwrap_or_default();
        let json = serde_json::from_str(&text).unwrap_or(Value::Null);
        (status, json, headers)
    }

    /// Signs in; on success keeps the session cookie, the CSRF token and
    /// the device cookie.
    pub async fn login(&mut self, user: &str, password: &str) -> (u16, Value) {
        let body = json!({ "username": user, "password": password });
        let (status, answer, headers) = self
            .send_full(Method::POST, "/api/v1/auth/login", Some(body), false)
            .await;
        if status == 200 {
            for set in headers.get_all("set-cookie") {
                let set = set.to_str().expect("a cookie of ASCII").to_owned();
                for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
                    assert!(set.contains(attribute), "{set}");
                }
                // `name=value`, as the browser sends it back.
                let pair = set
                    .split(';')
                    .next()
                    .expect("the cookie's value")
                    .to_owned();
                if pair.contains("rondo_device=") {
                    self.device = Some(pair);
                } else {
                    self.cookie = Some(pair);
                }
            }
            assert!(self.device.is_some(), "a device cookie");
            self.csrf = answer["csrf_token"].as_str().map(str::to_owned);
        }
        (status, answer)
    }

    /// The status of `GET /api/v1/auth/me`.
    pub async fn me(&self) -> u16 {
        self.send(Method::GET, "/api/v1/auth/me", None, false)
            .await
            .0
    }
}
