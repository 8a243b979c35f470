//! The broker connection and its confirm channel, opened on first use and
//! reopened lazily after a connection loss; the topology is declared on
//! every (re)open. Shared by the trigger path, the event publisher and
//! control messages, so a scheduler node holds one publishing connection
//! (the XXL-JOB gateway publishes its results and hand-backs on one too).

use lapin::{Channel, Connection};
use rondo_core::{Error, Names, amqp};
use tokio::sync::Mutex;

pub struct Link {
    amqp_url: String,
    pub(crate) names: Names,
    open: Mutex<Option<(Connection, Channel)>>,
    /// Publishes refused (`nack`) in a row on the open channel.
    refusals: amqp::RefusalStreak,
    /// Declares only what an executor declares (the XXL-JOB gateway's
    /// link: its broker user may not bind the persist and monitor queues).
    executor: bool,
}

impl Link {
    pub fn new(amqp_url: &str, names: Names) -> Link {
        Link {
            amqp_url: amqp_url.to_owned(),
            names,
            open: Mutex::new(None),
            refusals: amqp::RefusalStreak::default(),
            executor: false,
        }
    }

    /// A link that declares what an executor declares
    /// ([`amqp::declare_executor_topology`]).
    pub fn for_executor(amqp_url: &str, names: Names) -> Link {
        Link {
            executor: true,
            ..Link::new(amqp_url, names)
        }
    }

    /// The confirm channel, reopened if the connection dropped.
    pub async fn channel(&self) -> Result<Channel, Error> {
        let mut open = self.open.lock().await;
        if let Some((_, ch)) = open.as_ref()
            && ch.status().connected()
        {
            return Ok(ch.clone());
        }
        let conn = amqp::connect(&self.amqp_url, "rondo-dispatcher").await?;
        let ch = amqp::confirm_channel(&conn).await?;
        if self.executor {
            amqp::declare_executor_topology(&ch, &self.names).await?;
        } else {
            amqp::declare_topology(&ch, &self.names).await?;
        }
        *open = Some((conn, ch.clone()));
        Ok(ch)
    }

    /// Notes a publish's outcome on the channel from [`Link::channel`]:
    /// after [`amqp::RefusalStreak::LIMIT`] refusals in a row, the next
    /// call opens a new connection (to the next broker that answers).
    pub async fn note<T>(&self, outcome: &Result<T, Error>) {
        if self.refusals.note(outcome)
            && let Some((conn, _)) = self.open.lock().await.take()
        {
            tracing::warn!(
                refusals = amqp::RefusalStreak::LIMIT,
                "publishes refused in a row; opening a new broker connection"
            );
            let _ = conn.close(200, "publishes refused".into()).await;
        }
    }

    /// Closes the connection (after the publishes in flight).
    pub async fn close(&self) {
        if let Some((conn, _)) = self.open.lock().await.take() {
            let _ = conn.close(200, "shutdown".into()).await;
        }
    }
}
