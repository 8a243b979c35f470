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
    pub xxl_addresses: Option<Vec<String>>,
}

impl GroupSpec {
    pub fn validate(self, now_ms: i64) -> Result<Group, Error> {
        let app = self
            .app
            .ok_or_else(|| Error::invalid("app", "is required"))?;
        validate_app_name("app", &app)?;
        let title = self.title.unwrap_or_else(|| app.clone());
        check_len("title", &title, MAX_TEXT)?;
        let xxl_addresses = validate_xxl_addresses(self.xxl_addresses.unwrap_or_default())?;
        Ok(Group {
            app,
            title,
            updated_ms: now_ms,
            xxl_addresses,
        })
    }

    /// `self` as a change of `old`: a field left out keeps its value.
    pub fn validate_update(self, old: &Group, now_ms: i64) -> Result<Group, Error> {
        GroupSpec {
            app: Some(old.app.clone()),
            title: self.title.or_else(|| Some(old.title.clone())),
            xxl_addresses: self
                .xxl_addresses
                .or_else(|| Some(old.xxl_addresses.clone())),
        }
        .validate(now_ms)
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
