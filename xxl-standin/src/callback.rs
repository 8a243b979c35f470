//! The callback thread: job threads queue their results; one task sends
//! everything pending in one `/api/callback`, admins in order. A batch no
//! admin took goes to `<log-path>/callbacklogs/`, which a retry task re-sends
//! every `--callback-retry-interval-ms`.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};
use tracing::{info, warn};

use crate::admin::{AdminClient, Failure};
use crate::config::Generation;
use crate::joblog::{LogDir, RunLog, append_line, now_ms};
use crate::wire::{Callback, callback_body};

/// The producer side, shared by the job threads.
#[derive(Clone, Debug)]
pub struct CallbackQueue {
    tx: Arc<Mutex<Option<UnboundedSender<Callback>>>>,
}

impl CallbackQueue {
    pub fn new() -> (Self, UnboundedReceiver<Callback>) {
        let (tx, rx) = unbounded_channel();
        let queue = CallbackQueue {
            tx: Arc::new(Mutex::new(Some(tx))),
        };
        (queue, rx)
    }

    pub fn push(&self, callback: Callback) {
        let tx = self.tx.lock().unwrap_or_else(PoisonError::into_inner);
        match tx.as_ref().map(|tx| tx.send(callback)) {
            Some(Ok(())) => {}
            _ => warn!("callback queue closed, a callback is dropped"),
        }
    }

    /// No more callbacks: the sender drains what is queued, then ends.
    pub fn close(&self) {
        self.tx
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
    }
}

/// The consumer side: sends batches and retries failed ones from files.
pub struct Callbacker {
    pub generation: Generation,
    pub admin: AdminClient,
    pub logs: LogDir,
}

impl Callbacker {
    /// Sends what is queued until the queue is closed and empty.
    pub async fn run(self: Arc<Self>, mut rx: UnboundedReceiver<Callback>) {
        while let Some(first) = rx.recv().await {
            let mut batch = vec![first];
            while let Ok(more) = rx.try_recv() {
                batch.push(more);
            }
            self.deliver(batch).await;
        }
        info!("callback thread stopped");
    }

    /// Re-sends the failed-callback files, now and every `every`.
    pub async fn retry_forever(self: Arc<Self>, every: Duration) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            ticks.tick().await;
            self.retry_files().await;
        }
    }

    async fn deliver(&self, batch: Vec<Callback>) {
        let body = callback_body(self.generation, &batch);
        let delivery = self.admin.post("callback", &body).await;
        for failure in &delivery.failures {
            let line = match failure {
                Failure::Refused(answer) => {
                    format!("<br>----------- xxl-job job callback fail, callbackResult:{answer}")
                }
                Failure::Error(e) => {
                    format!("<br>----------- xxl-job job callback error, errorMsg:{e}")
                }
            };
            self.append_to_runs(&batch, &line);
        }
        if delivery.ok {
            self.append_to_runs(&batch, "<br>----------- xxl-job job callback finish.");
        } else {
            self.keep_for_retry(&batch);
        }
    }

    fn append_to_runs(&self, batch: &[Callback], msg: &str) {
        for c in batch {
            let log = RunLog::new(
                self.logs.run_log(c.log_date_time, c.log_id),
                "xxl-job, executor TriggerCallbackThread".into(),
            );
            log.log(
                "com.xxl.job.core.thread.TriggerCallbackThread#callbackLog",
                197,
                msg,
            );
        }
    }

    fn keep_for_retry(&self, batch: &[Callback]) {
        let file = self
            .logs
            .failed_callbacks()
            .join(format!("xxl-job-callback-{}.log", now_ms()));
        let written = serde_json::to_string(batch)
            .map_err(std::io::Error::other)
            .and_then(|line| append_line(&file, &line));
        match written {
            Ok(()) => {
                warn!(file = %file.display(), count = batch.len(), "callback failed on every admin, kept for retry")
            }
            Err(e) => warn!(error = %e, "callback failed and could not be kept: lost"),
        }
    }

    async fn retry_files(&self) {
        let Ok(entries) = std::fs::read_dir(self.logs.failed_callbacks()) else {
            return;
        };
        let mut files: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        files.sort();
        for file in files {
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            if let Err(e) = std::fs::remove_file(&file) {
                warn!(file = %file.display(), error = %e, "failed-callback file not removed, skipped");
                continue;
            }
            let mut batch = Vec::new();
            for line in text.lines().filter(|l| !l.trim().is_empty()) {
                match serde_json::from_str::<Vec<Callback>>(line) {
                    Ok(callbacks) => batch.extend(callbacks),
                    Err(e) => {
                        warn!(file = %file.display(), error = %e, "bad failed-callback line dropped")
                    }
                }
            }
            if !batch.is_empty() {
                info!(file = %file.display(), count = batch.len(), "retrying failed callbacks");
                self.deliver(batch).await;
            }
        }
    }
}
