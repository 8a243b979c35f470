//! Signing the CLI in: `rondo login` trades a password for an API token
//! and keeps it in the credentials file, one entry per API URL:
//!
//! ```json
//! { "http://127.0.0.1:8600": { "token": "rondo_pat_…", "id": 3, "username": "ann", "expires_ms": 1790000000000 } }
//! ```
//!
//! The file (`RONDO_CREDENTIALS`, default `$XDG_CONFIG_HOME/rondo/` or
//! `~/.config/rondo/credentials.json`) is created with mode 0600 in a 0700
//! directory. Passwords are read from the environment when given there
//! (`RONDO_PASSWORD`, `RONDO_NEW_PASSWORD`, for scripts), otherwise from
//! the terminal without echo.

use std::io::{BufRead, Write};
use std::path::PathBuf;

use anyhow::{Context, bail};
use serde_json::{Map, Value, json};

use crate::Api;

/// Where the credentials live.
fn path() -> anyhow::Result<PathBuf> {
    if let Some(p) = std::env::var_os("RONDO_CREDENTIALS") {
        return Ok(PathBuf::from(p));
    }
    let base = match std::env::var_os("XDG_CONFIG_HOME") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".config"),
    };
    Ok(base.join("rondo").join("credentials.json"))
}

fn key(api: &str) -> String {
    api.trim_end_matches('/').to_owned()
}

fn read() -> Map<String, Value> {
    let Ok(path) = path() else {
        return Map::new();
    };
    std::fs::read_to_string(path)
        .ok()
        .and_then(|text| serde_json::from_str::<Map<String, Value>>(&text).ok())
        .unwrap_or_default()
}

fn write(all: &Map<String, Value>) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = path()?;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .with_context(|| format!("creating {}", dir.display()))?;
    }
    let tmp = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .with_context(|| format!("writing {}", tmp.display()))?;
    file.write_all(serde_json::to_string_pretty(all)?.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(path)
}

/// The token saved for `api`, if any.
pub fn saved_token(api: &str) -> Option<String> {
    read()
        .get(&key(api))
        .and_then(|e| e["token"].as_str())
        .map(str::to_owned)
}

/// A secret from `var`, or typed at the terminal without echo.
pub fn secret(var: &str, what: &str) -> anyhow::Result<String> {
    if let Ok(value) = std::env::var(var) {
        return Ok(value);
    }
    let stty = |arg: &str| {
        std::process::Command::new("stty")
            .arg(arg)
            .stdin(std::process::Stdio::inherit())
            .status()
            .is_ok_and(|s| s.success())
    };
    eprint!("{what}: ");
    std::io::stderr().flush().ok();
    let hidden = stty("-echo");
    let mut line = String::new();
    let read = std::io::stdin().lock().read_line(&mut line);
    if hidden {
        stty("echo");
        eprintln!();
    }
    read.context("reading the password")?;
    let value = line.trim_end_matches(['\n', '\r']).to_owned();
    if value.is_empty() {
        bail!("no {what} given (type it, or set {var})");
    }
    Ok(value)
}

/// Percent-encodes a query value.
pub fn query_escape(value: &str) -> String {
    value
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b':' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// The endpoints of the conversations below (shared with the check of the
/// CLI against the API's spec).
pub const LOGIN: &str = "/api/v1/auth/login";
pub const LOGOUT: &str = "/api/v1/auth/logout";
pub const PASSWORD: &str = "/api/v1/auth/password";
pub const TOKENS: &str = "/api/v1/tokens";

pub fn login_body(user: &str, password: &str) -> Value {
    json!({ "username": user, "password": password })
}

/// The token `rondo login` makes.
pub fn token_body(name: &str, days: u32) -> Value {
    json!({ "name": name, "expires_in_days": days, "read_only": false })
}

pub fn password_body(current: &str, new: &str) -> Value {
    json!({ "current_password": current, "new_password": new })
}

/// `rondo login`: a session, a new token from it, the session closed, the
/// token saved. A user whose password was moved from XXL-JOB sets a new
/// one first (from RONDO_NEW_PASSWORD or the terminal): until then the
/// session may make no token.
pub async fn login(api: &mut Api, user: &str, days: u32) -> anyhow::Result<(u16, Value)> {
    let password = secret("RONDO_PASSWORD", &format!("password for {user}"))?;
    api.token = None;
    let body = login_body(user, &password);
    let (status, who) = api.call(reqwest::Method::POST, LOGIN, Some(body)).await?;
    if status != 200 {
        return Ok((status, who));
    }
    let csrf = who["csrf_token"].as_str().unwrap_or_default().to_owned();
    match api.session.as_mut() {
        Some(session) => session.1 = csrf,
        None => bail!("the node answered the sign-in without a session cookie"),
    }
    if who["must_change_password"] == true {
        let prompt = format!(
            "new password for {user} (12 characters or more; the one moved from XXL-JOB must be replaced)"
        );
        let new = secret("RONDO_NEW_PASSWORD", &prompt)?;
        let body = password_body(&password, &new);
        let (status, answer) = api.call(reqwest::Method::PUT, PASSWORD, Some(body)).await?;
        if status != 204 {
            let _ = api.call(reqwest::Method::POST, LOGOUT, None).await;
            return Ok((status, answer));
        }
    }
    let host = hostname();
    let spec = token_body(&format!("rondo-cli@{host}"), days);
    let (status, made) = api.call(reqwest::Method::POST, TOKENS, Some(spec)).await?;
    // The session was only the way to the token.
    let _ = api.call(reqwest::Method::POST, LOGOUT, None).await;
    if status != 201 {
        return Ok((status, made));
    }
    let mut all = read();
    all.insert(
        key(&api.base),
        json!({
            "token": made["token"],
            "id": made["id"],
            "username": user,
            "expires_ms": made["expires_ms"],
        }),
    );
    let path = write(&all)?;
    Ok((
        200,
        json!({
            "username": user,
            "role": who["role"],
            "token_id": made["id"],
            "expires_ms": made["expires_ms"],
            "saved_to": path,
        }),
    ))
}

/// `rondo logout`: revokes the saved token and forgets it.
pub async fn logout(api: &mut Api) -> anyhow::Result<(u16, Value)> {
    let mut all = read();
    let Some(entry) = all.remove(&key(&api.base)) else {
        bail!("no saved token for {}", api.base);
    };
    let id = entry["id"].as_u64().unwrap_or_default();
    api.token = entry["token"].as_str().map(str::to_owned);
    let (status, answer) = api
        .call(reqwest::Method::DELETE, &format!("{TOKENS}/{id}"), None)
        .await?;
    // Revoked now, or already unusable (revoked, expired): forget it.
    if status < 300 || status == 401 || status == 404 {
        write(&all)?;
        return Ok((200, json!({ "revoked": status < 300, "token_id": id })));
    }
    Ok((status, answer))
}

/// `rondo password`: the caller's new password.
pub async fn change_password(api: &mut Api) -> anyhow::Result<(u16, Value)> {
    let current = secret("RONDO_PASSWORD", "current password")?;
    let new = secret("RONDO_NEW_PASSWORD", "new password")?;
    let body = password_body(&current, &new);
    api.call(reqwest::Method::PUT, PASSWORD, Some(body)).await
}

fn hostname() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "host".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_are_escaped() {
        assert_eq!(query_escape("job.create"), "job.create");
        assert_eq!(query_escape("trigger:1-2"), "trigger:1-2");
        assert_eq!(query_escape("a b&c"), "a%20b%26c");
    }
}
