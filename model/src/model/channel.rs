//! Alarm channels: the chat group bots and webhooks a job's failures go
//! to, defined once by an admin and named by jobs (`alarm_channels`).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::text::{MAX_URL, check_len, validate_app_name};
use crate::error::Error;
use crate::named::named_enum;

named_enum!(
    /// The message format (and signature) a channel's receiver takes.
    ChannelKind {
        /// rondo's JSON body (version 1), as `alarm_webhook` sends it.
        Json = "json",
        /// A Slack-style incoming webhook: `{"text": …}`.
        Slack = "slack",
        /// A DingTalk custom robot (钉钉), signed when it has a secret.
        DingTalk = "dingtalk",
        /// A WeCom group robot (企业微信); its key is in its URL.
        WeCom = "wecom",
        /// A Feishu custom bot (飞书), signed when it has a secret.
        Feishu = "feishu",
    }
);

impl ChannelKind {
    /// Whether the vendor signs its robots' messages with a secret.
    pub fn signs(self) -> bool {
        matches!(self, ChannelKind::DingTalk | ChannelKind::Feishu)
    }
}

/// The most bytes of a channel's template.
pub const MAX_TEMPLATE_BYTES: usize = 4096;

/// The most bytes of a channel's signing secret.
pub const MAX_CHANNEL_SECRET_BYTES: usize = 256;

/// The most channels one job names.
pub const MAX_JOB_CHANNELS: usize = 8;

/// The placeholders a template may hold, each replaced by the failure's
/// value.
pub const TEMPLATE_FIELDS: [&str; 12] = [
    "job_id",
    "job",
    "group",
    "handler",
    "trigger_id",
    "fire_time",
    "executor",
    "code",
    "msg",
    "retry_count",
    "failures",
    "link",
];

/// The template of a channel that sets none.
pub const DEFAULT_TEMPLATE: &str = "rondo alarm: job {job_id} ({job}) of {group} failed\n\
trigger {trigger_id} at {fire_time} on {executor}: code {code}\n{msg}\n\
failures in this alarm: {failures}\n{link}";

/// A channel as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AlarmChannel {
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: String,
    #[schema(value_type = ChannelKind)]
    pub kind: String,
    /// Where the message is posted (a robot's webhook URL).
    pub url: String,
    /// The signing secret (DingTalk's `SEC…`, Feishu's); never shown: an
    /// answer reads `***` when one is set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub secret: String,
    /// The message, with `{placeholders}`; empty: [`DEFAULT_TEMPLATE`].
    #[serde(default)]
    pub template: String,
    pub updated_ms: i64,
}

/// A channel as the API receives it.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AlarmChannelSpec {
    /// Required to create; unchangeable (an update may repeat it).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    pub name: Option<String>,
    /// Required to create.
    #[schema(value_type = Option<ChannelKind>)]
    pub kind: Option<String>,
    /// An http(s) URL; required to create.
    #[schema(max_length = 1024)]
    pub url: Option<String>,
    /// The robot's signing secret (DingTalk, Feishu only); `***` keeps the
    /// stored one, `""` removes it.
    #[schema(max_length = 256)]
    pub secret: Option<String>,
    /// The message, with `{job_id}`, `{job}`, `{group}`, `{handler}`,
    /// `{trigger_id}`, `{fire_time}`, `{executor}`, `{code}`, `{msg}`,
    /// `{retry_count}`, `{failures}` (this failure and those folded into
    /// its alarm) and `{link}` (the trigger in the console); empty: the
    /// default.
    #[schema(max_length = 4096)]
    pub template: Option<String>,
}

impl AlarmChannelSpec {
    /// The channel `self` makes (over `old`, when it changes one: a field
    /// left out keeps its value, `***` keeps the secret).
    pub fn validate(self, old: Option<&AlarmChannel>, now_ms: i64) -> Result<AlarmChannel, Error> {
        let name = match (self.name, old) {
            (Some(name), Some(old)) if name != old.name => {
                return Err(Error::invalid("name", "a channel's name cannot change"));
            }
            (Some(name), _) => name,
            (None, Some(old)) => old.name.clone(),
            (None, None) => return Err(Error::invalid("name", "is required")),
        };
        validate_app_name("name", &name)?;
        let kind = self
            .kind
            .or_else(|| old.map(|o| o.kind.clone()))
            .ok_or_else(|| Error::invalid("kind", "is required"))?;
        let parsed = ChannelKind::parse("kind", &kind)?;
        let url = self
            .url
            .or_else(|| old.map(|o| o.url.clone()))
            .ok_or_else(|| Error::invalid("url", "is required"))?;
        validate_url(&url)?;
        let secret = match self.secret {
            Some(s) if s == super::secrets::MASK => {
                old.map(|o| o.secret.clone()).unwrap_or_default()
            }
            Some(s) => s,
            None => old.map(|o| o.secret.clone()).unwrap_or_default(),
        };
        check_len("secret", &secret, MAX_CHANNEL_SECRET_BYTES)?;
        if !secret.is_empty() && !parsed.signs() {
            return Err(Error::invalid(
                "secret",
                format!("a {kind} channel signs nothing: only dingtalk and feishu take a secret"),
            ));
        }
        let template = self
            .template
            .or_else(|| old.map(|o| o.template.clone()))
            .unwrap_or_default();
        check_len("template", &template, MAX_TEMPLATE_BYTES)?;
        check_template(&template)?;
        Ok(AlarmChannel {
            name,
            kind: parsed.as_str().to_owned(),
            url,
            secret,
            template,
            updated_ms: now_ms,
        })
    }
}

impl AlarmChannel {
    /// `self` as an answer shows it: the secret as `***`.
    pub fn masked(mut self) -> AlarmChannel {
        if !self.secret.is_empty() {
            self.secret = super::secrets::MASK.to_owned();
        }
        self
    }
}

fn validate_url(url: &str) -> Result<(), Error> {
    check_len("url", url, MAX_URL)?;
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/') || r.contains(char::is_whitespace)) {
        return Err(Error::invalid("url", "must be an http:// or https:// URL"));
    }
    Ok(())
}

/// Every `{…}` of `template` names a known field.
fn check_template(template: &str) -> Result<(), Error> {
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        let Some(close) = after.find('}') else {
            return Err(Error::invalid("template", "a '{' is never closed"));
        };
        let field = &after[..close];
        if !TEMPLATE_FIELDS.contains(&field) {
            return Err(Error::invalid(
                "template",
                format!(
                    "{{{field}}} is not a field; the fields are {}",
                    TEMPLATE_FIELDS.map(|f| format!("{{{f}}}")).join(", ")
                ),
            ));
        }
        rest = &after[close + 1..];
    }
    Ok(())
}

/// `template` with each `{field}` replaced by `value(field)`.
pub fn render_template(template: &str, value: impl Fn(&str) -> String) -> String {
    let template = if template.is_empty() {
        DEFAULT_TEMPLATE
    } else {
        template
    };
    let mut out = String::with_capacity(template.len() + 64);
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) if TEMPLATE_FIELDS.contains(&&after[..close]) => {
                out.push_str(&value(&after[..close]));
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Checks a job's `alarm_channels`: names of channels, at most
/// [`MAX_JOB_CHANNELS`], none twice (whether each exists is the API's to
/// check).
pub fn validate_job_channels(names: &[String]) -> Result<(), Error> {
    if names.len() > MAX_JOB_CHANNELS {
        return Err(Error::invalid(
            "alarm_channels",
            format!("names {} channels; at most {MAX_JOB_CHANNELS}", names.len()),
        ));
    }
    for (i, name) in names.iter().enumerate() {
        validate_app_name("alarm_channels", name)?;
        if names[..i].contains(name) {
            return Err(Error::invalid(
                "alarm_channels",
                format!("names channel {name:?} twice"),
            ));
        }
    }
    Ok(())
}
