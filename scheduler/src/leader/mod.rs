//! Everything a node does while it leads, under one term.
//!
//! When the cluster makes this node leader with term *t*, [`Leader`] starts
//! the term's duties as one task set under a child token:
//!
//! * [`claim`]: the claim tick, with [`failover`] of dead nodes' rings and
//!   the [`bootstrap`] of an empty Redis before it, and [`assign`]ment of
//!   fires to live nodes;
//! * [`retry`]: dispatching the retries whose backoff passed;
//! * [`reaper`]: offline executors' queues and lost triggers.
//!
//! Every write they make to Redis is fenced by *t* (the claim, reassign,
//! retry and reaper scripts refuse a term the partition no longer accepts).
//! The token is cancelled when the role changes (the node steps down or a
//! newer term starts) and when any duty is refused with `StaleTerm`: then
//! the whole set stops, and the node tells the cluster, which resigns the
//! term. A duty that ends any other way is a bug, and fails the node.

pub mod assign;
pub mod bootstrap;
pub mod claim;
mod definitions;
pub mod failover;
mod fence;
pub mod reaper;
pub mod retry;

use std::sync::Arc;

use rondo_core::{Error, ErrorKind};
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::cluster::{ClusterView, Role};
use claim::Claimer;
use reaper::Reaper;
use retry::Retries;

/// The leader's duties, started and stopped together per term.
pub struct Leader {
    view: ClusterView,
    pub claimer: Arc<Claimer>,
    retries: Arc<Retries>,
    reaper: Arc<Reaper>,
}

/// How one term's duties ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    /// The role changed or the node is shutting down.
    Stopped,
    /// Redis refused the term: a newer leader exists.
    Refused,
    /// A duty ended on its own, failed or panicked.
    Failed(String),
}

impl Leader {
    pub fn new(
        view: ClusterView,
        claimer: Arc<Claimer>,
        retries: Arc<Retries>,
        reaper: Arc<Reaper>,
    ) -> Leader {
        Leader {
            view,
            claimer,
            retries,
            reaper,
        }
    }

    /// Leads whenever the cluster says so, until `shutdown`. `Err` when a
    /// duty failed (the node then stops: a core task failed).
    pub async fn run(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        let mut role = self.view.role.clone();
        let mut refused = None;
        loop {
            if shutdown.is_cancelled() {
                return Ok(());
            }
            let current = *role.borrow_and_update();
            if let Role::Leader { term } = current
                && refused != Some(term)
            {
                match self.lead(term, &mut role, &shutdown).await {
                    Ended::Stopped => {}
                    Ended::Refused => {
                        tracing::error!(
                            term,
                            "redis refused this term: a newer leader exists; stepping down"
                        );
                        refused = Some(term);
                        self.view.refused_term.send_replace(term);
                    }
                    Ended::Failed(why) => anyhow::bail!("leader duty of term {term} failed: {why}"),
                }
                continue;
            }
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                changed = role.changed() => if changed.is_err() {
                    shutdown.cancelled().await;
                    return Ok(());
                },
            }
        }
    }

    /// Runs the duties of `term` until the role changes, `shutdown`, or a
    /// duty ends; then stops the others and waits for them.
    async fn lead(
        &self,
        term: u64,
        role: &mut watch::Receiver<Role>,
        shutdown: &CancellationToken,
    ) -> Ended {
        let stop = shutdown.child_token();
        let mut duties = JoinSet::new();
        let span = |duty: &'static str| tracing::info_span!("leader", duty, term);
        duties.spawn(
            self.claimer
                .clone()
                .run(term, stop.clone())
                .instrument(span("claim")),
        );
        duties.spawn(
            self.retries
                .clone()
                .run(term, stop.clone())
                .instrument(span("retry")),
        );
        duties.spawn(
            self.reaper
                .clone()
                .run(term, stop.clone())
                .instrument(span("reaper")),
        );
        let mut ended = Ended::Stopped;
        tokio::select! {
            () = stop.cancelled() => {}
            _ = role.changed() => {}
            Some(first) = duties.join_next() => ended = ending(first, &stop),
        }
        stop.cancel();
        while let Some(other) = duties.join_next().await {
            let other = ending(other, &stop);
            if ended == Ended::Stopped {
                ended = other;
            }
        }
        ended
    }
}

/// What a duty's end means: a refusal, a failure, or a stop once `stop`
/// had fired (a duty returning `Ok` before that is a failure too).
fn ending(
    joined: Result<Result<(), Error>, tokio::task::JoinError>,
    stop: &CancellationToken,
) -> Ended {
    match joined {
        Ok(Ok(())) if stop.is_cancelled() => Ended::Stopped,
        Ok(Ok(())) => Ended::Failed("ended before its term did".into()),
        Ok(Err(e)) if e.kind == ErrorKind::StaleTerm => Ended::Refused,
        Ok(Err(e)) => Ended::Failed(e.to_string()),
        Err(e) => Ended::Failed(format!("panicked: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_duty_is_stopped_refused_or_failed_by_how_it_ended() {
        let stop = CancellationToken::new();
        let ok = || Ok(Ok(()));
        assert_eq!(
            ending(ok(), &stop),
            Ended::Failed("ended before its term did".into())
        );
        let stale = Error::new(ErrorKind::StaleTerm, "STALE_TERM");
        assert_eq!(ending(Ok(Err(stale)), &stop), Ended::Refused);
        let panicked = tokio::spawn(async { panic!("bug") }).await.map(|()| Ok(()));
        assert!(matches!(ending(panicked, &stop), Ended::Failed(why) if why.contains("panicked")));
        stop.cancel();
        assert_eq!(ending(ok(), &stop), Ended::Stopped);
    }
}
