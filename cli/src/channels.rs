//! `rondo channel …`: alarm channels (chat group bots and webhooks).

use clap::{Args, Subcommand};
use reqwest::Method as M;
use serde_json::{Map, Value, json};

use crate::call::{Call, Secret};

#[derive(Subcommand)]
pub(crate) enum ChannelCmd {
    List,
    Get {
        name: String,
    },
    /// Defines a channel (admins).
    Create {
        name: String,
        #[command(flatten)]
        fields: ChannelArgs,
    },
    /// Changes the given fields only (admins).
    Update {
        name: String,
        #[command(flatten)]
        fields: ChannelArgs,
    },
    Delete {
        name: String,
    },
}

#[derive(Args)]
pub(crate) struct ChannelArgs {
    /// dingtalk, wecom, feishu, slack or json.
    #[arg(long)]
    kind: Option<String>,
    /// The robot's webhook URL.
    #[arg(long)]
    url: Option<String>,
    /// Sign with the robot's secret (DingTalk, Feishu), read from
    /// RONDO_CHANNEL_SECRET or typed (never a command-line argument).
    #[arg(long)]
    secret: bool,
    /// Remove the signing secret.
    #[arg(long, conflicts_with = "secret")]
    no_secret: bool,
    /// The message, with {job_id}, {job}, {group}, {handler}, {trigger_id},
    /// {fire_time}, {executor}, {code}, {msg}, {retry_count} and {link}
    /// ("" for the default).
    #[arg(long)]
    template: Option<String>,
}

impl ChannelArgs {
    fn body(&self, secret: Secret<'_>) -> anyhow::Result<Map<String, Value>> {
        let mut m = Map::new();
        if let Some(kind) = &self.kind {
            m.insert("kind".into(), json!(kind));
        }
        if let Some(url) = &self.url {
            m.insert("url".into(), json!(url));
        }
        if self.secret {
            m.insert(
                "secret".into(),
                json!(secret(
                    "RONDO_CHANNEL_SECRET",
                    "the robot's signing secret"
                )?),
            );
        } else if self.no_secret {
            m.insert("secret".into(), json!(""));
        }
        if let Some(template) = &self.template {
            m.insert("template".into(), json!(template));
        }
        Ok(m)
    }
}

/// The call of a `channel` command.
pub(crate) fn request(cmd: &ChannelCmd, secret: Secret<'_>) -> anyhow::Result<Call> {
    Ok(match cmd {
        ChannelCmd::List => (M::GET, "/api/v1/alarm-channels".into(), None),
        ChannelCmd::Get { name } => (M::GET, format!("/api/v1/alarm-channels/{name}"), None),
        ChannelCmd::Create { name, fields } => {
            let mut body = fields.body(secret)?;
            body.insert("name".into(), json!(name));
            (
                M::POST,
                "/api/v1/alarm-channels".into(),
                Some(Value::Object(body)),
            )
        }
        ChannelCmd::Update { name, fields } => (
            M::PUT,
            format!("/api/v1/alarm-channels/{name}"),
            Some(Value::Object(fields.body(secret)?)),
        ),
        ChannelCmd::Delete { name } => (M::DELETE, format!("/api/v1/alarm-channels/{name}"), None),
    })
}
