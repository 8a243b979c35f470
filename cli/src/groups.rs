//! `rondo group …`: executor groups.

use clap::Subcommand;
use reqwest::Method as M;
use serde_json::{Map, Value, json};

use crate::call::Call;

#[derive(Subcommand)]
pub(crate) enum GroupCmd {
    Create {
        app: String,
        #[arg(long)]
        title: Option<String>,
        /// An XXL-JOB executor fed by hand (`http://host:port/`), served by
        /// the XXL-JOB gateway as if it registered (repeat for more).
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
    },
    Delete {
        app: String,
    },
    /// Live executors of the group.
    Executors {
        app: String,
    },
}

/// The call of a `group` command.
pub(crate) fn request(cmd: &GroupCmd) -> Call {
    match cmd {
        GroupCmd::Create {
            app,
            title,
            xxl_addresses,
        } => (
            M::POST,
            "/api/v1/groups".into(),
            Some(json!({ "app": app, "title": title, "xxl_addresses": xxl_addresses })),
        ),
        GroupCmd::List => (M::GET, "/api/v1/groups".into(), None),
        GroupCmd::Get { app } => (M::GET, format!("/api/v1/groups/{app}"), None),
        GroupCmd::Update {
            app,
            title,
            xxl_addresses,
            no_xxl_addresses,
        } => {
            let mut change = Map::new();
            if let Some(title) = title {
                change.insert("title".into(), json!(title));
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
    }
}
