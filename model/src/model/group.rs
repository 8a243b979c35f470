//! Executor groups: what a group is and the validation of what a user
//! sends for one.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::text::{MAX_TEXT, check_len, validate_app_name};
use crate::error::Error;

/// An executor group (XXL-JOB's `xxl_job_group`): the executors that share an
/// app name. Their addresses come from the registry, except for XXL-JOB
/// executors fed by hand (XXL-JOB's `address_type = 1`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Group {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub app: String,
    pub title: String,
    pub updated_ms: i64,
    /// Addresses of XXL-JOB executors (`xxl-job-core`) that serve this group
    /// without registering (XXL-JOB's manual address list): the XXL-JOB
    /// gateway treats each as registered and probes it with `/beat`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub xxl_addresses: Vec<String>,
    /// Served by the XXL-JOB gateway: its `xxl-job-core` executors may
    /// register (with the group's access token) and its `xxl_addresses` are
    /// called. Only an admin sets it; a rondo-native group is never the
    /// gateway's.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub xxl_gateway: bool,
    /// The group's XXL-JOB access tokens. Stored with the group (Redis, and
    /// MySQL for a rebuild) and read by the gateway; every API answer shows
    /// [`XxlAccess::masked`].
    #[serde(default, skip_serializing_if = "XxlAccess::is_empty")]
    pub xxl_access: XxlAccess,
}

/// A group's XXL-JOB access tokens (XXL-JOB 3.5 keeps one per group in
/// `xxl_job_group.access_token`): the one its executors send with every
/// call and are sent, and while they move to a new one, the one before.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct XxlAccess {
    /// The token (`***` in answers); empty: none set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub token: String,
    /// The token before, still taken (and sent to the executors that
    /// registered with it) until an admin ends the rotation (`***` in
    /// answers); empty: no rotation under way.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub previous: String,
    /// When the token was last set (ms since the epoch).
    #[serde(default)]
    pub changed_ms: i64,
}

impl std::fmt::Debug for XxlAccess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XxlAccess")
            .field("token", &mask(&self.token))
            .field("previous", &mask(&self.previous))
            .field("changed_ms", &self.changed_ms)
            .finish()
    }
}

fn mask(token: &str) -> &'static str {
    if token.is_empty() {
        ""
    } else {
        super::secrets::MASK
    }
}

impl XxlAccess {
    pub fn is_empty(&self) -> bool {
        self.token.is_empty() && self.previous.is_empty()
    }

    /// As every answer shows it: each token set as `***`.
    pub fn masked(&self) -> XxlAccess {
        XxlAccess {
            token: mask(&self.token).to_owned(),
            previous: mask(&self.previous).to_owned(),
            changed_ms: self.changed_ms,
        }
    }

    /// The tokens a call is taken with, the current one first.
    pub fn tokens(&self) -> impl Iterator<Item = &str> {
        [self.token.as_str(), self.previous.as_str()]
            .into_iter()
            .filter(|t| !t.is_empty())
    }
}

impl Group {
    /// The group as answers show it: its tokens masked.
    pub fn masked(mut self) -> Group {
        self.xxl_access = self.xxl_access.masked();
        self
    }
}

/// The shortest access token an admin may set (XXL-JOB has no rule; its
/// own default `default_token` is refused by name).
pub const MIN_XXL_TOKEN: usize = 8;

/// The longest access token (it travels as an HTTP header value).
pub const MAX_XXL_TOKEN: usize = 255;

/// Tokens that ship with XXL-JOB and so open every executor left at its
/// defaults: never taken as a group's token.
pub const STOCK_XXL_TOKENS: &[&str] = &["default_token"];

/// Checks an access token a group is given; the error names `field`.
pub fn validate_xxl_token(field: &str, token: &str) -> Result<(), Error> {
    if !(MIN_XXL_TOKEN..=MAX_XXL_TOKEN).contains(&token.len()) {
        return Err(Error::invalid(
            field,
            format!("must be {MIN_XXL_TOKEN} to {MAX_XXL_TOKEN} characters"),
        ));
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::invalid(
            field,
            "must be printable ASCII without spaces (it is sent as an HTTP header)",
        ));
    }
    if STOCK_XXL_TOKENS.contains(&token) {
        return Err(Error::invalid(
            field,
            "is XXL-JOB's stock token, which every executor left at its defaults accepts; choose another (or let rondo generate one)",
        ));
    }
    Ok(())
}

/// The most addresses a group's `xxl_addresses` holds.
pub const MAX_XXL_ADDRESSES: usize = 64;

/// A group as the API receives it.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupSpec {
    /// Required to create; unchangeable (an update may repeat it).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub app: Option<String>,
    /// Defaults to `app`.
    #[schema(max_length = 255)]
    pub title: Option<String>,
    /// XXL-JOB executor addresses fed by hand (`http://host:port/`, at
    /// most 64); default none. Executors that register need none of this.
    /// Only for a group served by the XXL-JOB gateway.
    pub xxl_addresses: Option<Vec<String>>,
    /// Served by the XXL-JOB gateway (default false). Admins only.
    pub xxl_gateway: Option<bool>,
}

impl GroupSpec {
    pub fn validate(self, now_ms: i64) -> Result<Group, Error> {
        let app = self
            .app
            .ok_or_else(|| Error::invalid("app", "is required"))?;
        validate_app_name("app", &app)?;
        let title = self.title.unwrap_or_else(|| app.clone());
        check_len("title", &title, MAX_TEXT)?;
        let xxl_gateway = self.xxl_gateway.unwrap_or(false);
        let xxl_addresses = validate_xxl_addresses(self.xxl_addresses.unwrap_or_default())?;
        if !xxl_gateway && !xxl_addresses.is_empty() {
            return Err(Error::invalid(
                "xxl_addresses",
                "only a group served by the XXL-JOB gateway (xxl_gateway) has XXL-JOB executor addresses",
            ));
        }
        Ok(Group {
            app,
            title,
            updated_ms: now_ms,
            xxl_addresses,
            xxl_gateway,
            xxl_access: XxlAccess::default(),
        })
    }

    /// `self` as a change of `old`: a field left out keeps its value, the
    /// access tokens are kept. A group that stops being the gateway's
    /// loses its address list.
    pub fn validate_update(self, old: &Group, now_ms: i64) -> Result<Group, Error> {
        let xxl_gateway = self.xxl_gateway.unwrap_or(old.xxl_gateway);
        let xxl_addresses = match self.xxl_addresses {
            Some(list) => Some(list),
            None if xxl_gateway => Some(old.xxl_addresses.clone()),
            None => None,
        };
        let group = GroupSpec {
            app: Some(old.app.clone()),
            title: self.title.or_else(|| Some(old.title.clone())),
            xxl_addresses,
            xxl_gateway: Some(xxl_gateway),
        }
        .validate(now_ms)?;
        Ok(Group {
            xxl_access: old.xxl_access.clone(),
            ..group
        })
    }
}

/// Checks a group's XXL-JOB executor addresses and writes each as kept
/// (ending in `/`), without duplicates.
fn validate_xxl_addresses(list: Vec<String>) -> Result<Vec<String>, Error> {
    if list.len() > MAX_XXL_ADDRESSES {
        return Err(Error::invalid(
            "xxl_addresses",
            format!("at most {MAX_XXL_ADDRESSES} addresses"),
        ));
    }
    let mut kept: Vec<String> = Vec::with_capacity(list.len());
    for (i, address) in list.iter().enumerate() {
        let address = normalize_xxl_address(address)
            .map_err(|why| Error::invalid(&format!("xxl_addresses[{i}]"), why))?;
        if !kept.contains(&address) {
            kept.push(address);
        }
    }
    Ok(kept)
}

/// An XXL-JOB executor's address as the gateway keeps it:
/// `http(s)://host[:port][/path]/`, without user, query or fragment.
pub fn normalize_xxl_address(address: &str) -> Result<String, String> {
    let text = address.trim();
    let rest = text
        .strip_prefix("http://")
        .or_else(|| text.strip_prefix("https://"))
        .ok_or("must be an http:// or https:// address")?;
    if text.len() > 255 {
        return Err("must be at most 255 characters".into());
    }
    let host = rest.split('/').next().unwrap_or_default();
    if host.is_empty() || host.starts_with(':') {
        return Err("has no host".into());
    }
    if let Some(bad) = rest
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '@' | '?' | '#' | '\\'))
    {
        return Err(format!("must not contain {bad:?}"));
    }
    let mut kept = text.to_owned();
    if !kept.ends_with('/') {
        kept.push('/');
    }
    Ok(kept)
}
