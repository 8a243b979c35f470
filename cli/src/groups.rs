//! `rondo group …`: executor groups.

use clap::Subcommand;
use reqwest::Method as M;
use serde_json::{Map, Value, json};

use crate::call::{Call, Secret};

#[derive(Subcommand)]
pub(crate) enum GroupCmd {
    Create {
        app: String,
        #[arg(long)]
        title: Option<String>,
        /// Served by the XXL-JOB gateway: its xxl-job-core executors may
        /// register, with the group's access token (`rondo group xxl-token`).
        #[arg(long)]
        xxl_gateway: bool,
        /// An XXL-JOB executor fed by hand (`http://host:port/`), served by
        /// the XXL-JOB gateway as if it registered (repeat for more; needs
        /// --xxl-gateway).
        #[arg(long = "xxl-address")]
        xxl_addresses: Vec<String>,
    },
    List,
    Get {
        app: String,
    },
    /// Changes the given fields only.
    Update {
        app: String,
        #[arg(long)]
        title: Option<String>,
        /// Replaces the XXL-JOB executors fed by hand (repeat for more).
        #[arg(long = "xxl-address")]
        xxl_addresses: Vec<String>,
        /// No XXL-JOB executors fed by hand.
        #[arg(long, conflicts_with = "xxl_addresses")]
        no_xxl_addresses: bool,
        /// Served by the XXL-JOB gateway from now on (admins).
        #[arg(long)]
        xxl_gateway: bool,
        /// No longer served by the XXL-JOB gateway: its XXL-JOB executors
        /// leave and its address list goes (admins).
        #[arg(long, conflicts_with = "xxl_gateway")]
        no_xxl_gateway: bool,
    },
    /// Sets the group's XXL-JOB access token (admins): generated and shown
    /// once, or with --set read from RONDO_XXL_TOKEN or the terminal. The
    /// token is never shown again.
    XxlToken {
        app: String,
        /// The token its executors already send (`xxl.job.accessToken`),
        /// from RONDO_XXL_TOKEN or typed at the terminal; without it, one
        /// is generated.
        #[arg(long)]
        set: bool,
        /// Keep taking the token it had (and sending it to the executors
        /// that registered with it) until --end-rotation.
        #[arg(long, conflicts_with = "end_rotation")]
        keep_previous: bool,
        /// The previous token is no longer taken.
        #[arg(long, conflicts_with = "set")]
        end_rotation: bool,
    },
    Delete {
        app: String,
    },
    /// Live executors of the group.
    Executors {
        app: String,
    },
}

/// The call of a `group` command (`secret` reads a token given by hand).
pub(crate) fn request(cmd: &GroupCmd, secret: Secret<'_>) -> anyhow::Result<Call> {
    Ok(match cmd {
        GroupCmd::Create {
            app,
            title,
            xxl_gateway,
            xxl_addresses,
        } => (
            M::POST,
            "/api/v1/groups".into(),
            Some(json!({
                "app": app, "title": title, "xxl_gateway": xxl_gateway,
                "xxl_addresses": xxl_addresses,
            })),
        ),
        GroupCmd::List => (M::GET, "/api/v1/groups".into(), None),
        GroupCmd::Get { app } => (M::GET, format!("/api/v1/groups/{app}"), None),
        GroupCmd::Update {
            app,
            title,
            xxl_addresses,
            no_xxl_addresses,
            xxl_gateway,
            no_xxl_gateway,
        } => {
            let mut change = Map::new();
            if let Some(title) = title {
                change.insert("title".into(), json!(title));
            }
            if *xxl_gateway || *no_xxl_gateway {
                change.insert("xxl_gateway".into(), json!(xxl_gateway));
            }
            if *no_xxl_addresses || !xxl_addresses.is_empty() {
                change.insert("xxl_addresses".into(), json!(xxl_addresses));
            }
            (
                M::PUT,
                format!("/api/v1/groups/{app}"),
                Some(Value::Object(change)),
            )
        }
        GroupCmd::Delete { app } => (M::DELETE, format!("/api/v1/groups/{app}"), None),
        GroupCmd::Executors { app } => (M::GET, format!("/api/v1/groups/{app}/executors"), None),
        GroupCmd::XxlToken {
            app,
            end_rotation: true,
            ..
        } => (
            M::DELETE,
            format!("/api/v1/groups/{app}/xxl-token/previous"),
            None,
        ),
        GroupCmd::XxlToken {
            app,
            set,
            keep_previous,
            ..
        } => {
            let mut body = Map::new();
            if *set {
                let token = secret("RONDO_XXL_TOKEN", "access token")?;
                body.insert("token".into(), json!(token.trim()));
            }
            body.insert("keep_previous".into(), json!(keep_previous));
            (
                M::POST,
                format!("/api/v1/groups/{app}/xxl-token"),
                Some(Value::Object(body)),
            )
        }
    })
}
