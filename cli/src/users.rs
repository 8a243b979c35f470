//! `rondo user …` and `rondo token …`: users (admins) and API tokens.

use clap::Subcommand;
use reqwest::Method as M;
use serde_json::{Map, Value, json};

use crate::call::{Call, Secret};

#[derive(Subcommand)]
pub(crate) enum UserCmd {
    List,
    Get {
        username: String,
    },
    /// Creates a user; the password is prompted (or `RONDO_NEW_PASSWORD`).
    Create {
        username: String,
        /// admin, operator or viewer.
        #[arg(long, default_value = "viewer")]
        role: String,
        /// A group granted (repeat for more).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Shorthand for `--role admin`.
        #[arg(long)]
        admin: bool,
        /// Create the user disabled (it cannot sign in until enabled).
        #[arg(long)]
        disabled: bool,
        /// A user moved from XXL-JOB: its `xxl_job_user.password` (an MD5
        /// or a SHA-256, in hex) instead of a new password; the first
        /// sign-in with the XXL-JOB password replaces it (`rondo import
        /// xxl-job` does this for you).
        #[arg(long)]
        xxl_password_hash: Option<String>,
    },
    /// Changes what is given.
    Update {
        username: String,
        #[arg(long)]
        role: Option<String>,
        /// The groups granted, replacing the old list (repeat).
        #[arg(long = "group")]
        groups: Vec<String>,
        /// Grant no group at all.
        #[arg(long, conflicts_with = "groups")]
        no_groups: bool,
        #[arg(long, conflicts_with = "disable")]
        enable: bool,
        #[arg(long)]
        disable: bool,
        /// Set a new password (prompted, or `RONDO_NEW_PASSWORD`).
        #[arg(long)]
        reset_password: bool,
    },
    Delete {
        username: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum TokenCmd {
    List {
        /// An admin: one user's tokens.
        #[arg(long)]
        user: Option<String>,
    },
    /// A new token, printed once.
    Create {
        name: String,
        #[arg(long, default_value_t = 90)]
        days: u32,
        #[arg(long)]
        read_only: bool,
    },
    Revoke {
        id: u64,
    },
}

/// The call of a `user` command (a new password comes from `secret`).
pub(crate) fn user(cmd: &UserCmd, secret: Secret<'_>) -> anyhow::Result<Call> {
    Ok(match cmd {
        UserCmd::List => (M::GET, "/api/v1/users".into(), None),
        UserCmd::Get { username } => (M::GET, format!("/api/v1/users/{username}"), None),
        UserCmd::Create {
            username,
            role,
            groups,
            admin,
            disabled,
            xxl_password_hash,
        } => {
            let role = if *admin { "admin" } else { role.as_str() };
            let mut body = json!({
                "username": username,
                "role": role,
                "groups": groups,
                "enabled": !disabled,
            });
            match xxl_password_hash {
                Some(hex) => body["xxl_password_hash"] = json!(hex),
                None => {
                    body["password"] = json!(secret("RONDO_NEW_PASSWORD", "new user's password")?);
                }
            }
            (M::POST, "/api/v1/users".into(), Some(body))
        }
        UserCmd::Update {
            username,
            role,
            groups,
            no_groups,
            enable,
            disable,
            reset_password,
        } => {
            let mut m = Map::new();
            if let Some(role) = role {
                m.insert("role".into(), role.clone().into());
            }
            if !groups.is_empty() || *no_groups {
                m.insert("groups".into(), json!(groups));
            }
            if *enable || *disable {
                m.insert("enabled".into(), (*enable).into());
            }
            if *reset_password {
                let p = secret("RONDO_NEW_PASSWORD", "new password")?;
                m.insert("password".into(), p.into());
            }
            (
                M::PUT,
                format!("/api/v1/users/{username}"),
                Some(Value::Object(m)),
            )
        }
        UserCmd::Delete { username } => (M::DELETE, format!("/api/v1/users/{username}"), None),
    })
}

/// The call of a `token` command.
pub(crate) fn token(cmd: &TokenCmd) -> Call {
    match cmd {
        TokenCmd::List { user } => {
            let q = user
                .as_ref()
                .map(|u| format!("?user={u}"))
                .unwrap_or_default();
            (M::GET, format!("/api/v1/tokens{q}"), None)
        }
        TokenCmd::Create {
            name,
            days,
            read_only,
        } => (
            M::POST,
            "/api/v1/tokens".into(),
            Some(json!({ "name": name, "expires_in_days": days, "read_only": read_only })),
        ),
        TokenCmd::Revoke { id } => (M::DELETE, format!("/api/v1/tokens/{id}"), None),
    }
}
