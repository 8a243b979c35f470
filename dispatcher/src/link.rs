//! The broker connection and its confirm channel, opened on first use and
//! reopened lazily after a connection loss; the topology is declared on
//! every (re)open. Shared by the trigger path, the event publisher and
//! control messages, so a scheduler node holds one publishing connection.

use lapin::{Channel, Connection};
use rondo_core::{Error, Names, amqp};
use tokio::sync::Mutex;

pub(crate) struct Link {
    amqp_url: String,
    pub(crate) names: Names,
    open: Mutex<Option<(Connection, Channel)>>,
}

impl Link {
    pub(crate) fn new(amqp_url: &str, names: Names) -> Link {
        Link {
            amqp_url: amqp_url.to_owned(),
            names,
            open: Mutex::new(None),
        }
    }

    /// The confirm channel, reopened if the connection dropped.
    pub(crate) async fn channel(&self) -> Result<Channel, Error> {
        let mut open = self.open.lock().await;
        if let Some((_, ch)) = open.as_ref()
            && ch.status().connected()
        {
            return Ok(ch.clone());
        }
        let conn = amqp::connect(&self.amqp_url, "rondo-dispatcher").await?;
        let ch = amqp::confirm_channel(&conn).await?;
        amqp::declare_topology(&ch, &self.names).await?;
        *open = Some((conn, ch.clone()));
        Ok(ch)
    }

    /// Closes the connection (after the publishes in flight).
    pub(crate) async fn close(&self) {
        if let Some((conn, _)) = self.open.lock().await.take() {
            let _ = conn.close(200, "shutdown".into()).await;
        }
    }
}
