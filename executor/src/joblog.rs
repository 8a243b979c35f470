//! A run's log: the lines a handler writes with `ctx.log(..)`, timestamped
//! and numbered, buffered until the shipper publishes them as
//! `Event::Log` batches.
//!
//! Writing is cheap and never blocks on the broker: a line is pushed under a
//! short mutex. A line whose publish failed goes back to the front of the
//! buffer, so a broker outage delays lines but does not lose them. The buffer
//! is bounded: past [`MAX_PENDING_LINES`] new lines are counted and dropped,
//! and a marker line says how many were lost once there is room again.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use rondo_core::event::{LogLine, LogLines};
use rondo_core::model::secrets::Masker;
use tokio::sync::Notify;

/// Longest line kept; longer lines are cut at a character boundary.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024;
/// Lines waiting for the broker at most; more are dropped (and counted).
pub(crate) const MAX_PENDING_LINES: usize = 10_000;
/// Lines in one `Event::Log` (one AMQP message).
pub(crate) const LINES_PER_EVENT: usize = 500;

/// The buffer of lines not yet confirmed by the broker.
#[derive(Debug, Default)]
pub(crate) struct LogBuffer {
    pending: Vec<LogLine>,
    /// Sequence number of `pending[0]`.
    first_seq: u32,
    /// Lines refused since the last marker because the buffer was full.
    dropped: u64,
    closed: bool,
}

impl LogBuffer {
    /// Appends a line; returns whether a full event's worth is waiting.
    pub(crate) fn push(&mut self, ts_ms: i64, text: String) -> bool {
        if self.closed {
            return false;
        }
        if self.pending.len() >= MAX_PENDING_LINES {
            self.dropped += 1;
            return true;
        }
        if self.dropped > 0 {
            let marker = format!(
                "[rondo] {} log lines dropped: the log buffer was full",
                self.dropped
            );
            self.dropped = 0;
            self.pending.push(LogLine {
                ts_ms,
                text: marker,
            });
        }
        self.pending.push(LogLine { ts_ms, text });
        self.pending.len() >= LINES_PER_EVENT
    }

    /// Takes up to `max` lines from the front, with the sequence number of
    /// the first.
    pub(crate) fn take(&mut self, max: usize) -> Option<(u32, Vec<LogLine>)> {
        if self.pending.is_empty() {
            return None;
        }
        let n = self.pending.len().min(max);
        let lines: Vec<LogLine> = self.pending.drain(..n).collect();
        let seq = self.first_seq;
        self.first_seq += n as u32;
        Some((seq, lines))
    }

    /// Puts back lines whose publish failed, in front of newer lines.
    pub(crate) fn restore(&mut self, first_seq: u32, mut lines: Vec<LogLine>) {
        debug_assert_eq!(first_seq + lines.len() as u32, self.first_seq);
        lines.append(&mut self.pending);
        self.pending = lines;
        self.first_seq = first_seq;
    }

    /// Refuses further lines (the run has ended).
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }
}

/// A run's log, shared by the handler's context and the shipper.
#[derive(Clone, Debug)]
pub(crate) struct JobLog {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    trigger_id: String,
    job_id: u64,
    /// Hides the trigger's secret values in every line.
    masker: Masker,
    buffer: Mutex<LogBuffer>,
    /// Wakes the shipper early when a full event is waiting.
    full: Notify,
}

impl JobLog {
    #[cfg(test)]
    pub(crate) fn new(trigger_id: &str, job_id: u64) -> Self {
        Self::masking(trigger_id, job_id, Masker::default())
    }

    /// The log of `trigger`'s run: its secrets' values read `***` in every
    /// line.
    pub(crate) fn for_trigger(trigger: &rondo_core::Trigger) -> Self {
        Self::masking(
            &trigger.trigger_id,
            trigger.job_id,
            Masker::new(&trigger.secrets),
        )
    }

    fn masking(trigger_id: &str, job_id: u64, masker: Masker) -> Self {
        JobLog {
            shared: Arc::new(Shared {
                trigger_id: trigger_id.to_owned(),
                job_id,
                masker,
                buffer: Mutex::new(LogBuffer::default()),
                full: Notify::new(),
            }),
        }
    }

    fn buffer(&self) -> MutexGuard<'_, LogBuffer> {
        // A panic while holding this lock cannot leave the buffer half
        // written (every method is a few Vec operations), so keep using it.
        self.shared
            .buffer
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends a line stamped with the wall clock.
    pub(crate) fn push(&self, text: String) {
        let text = truncate(self.shared.masker.mask(text), MAX_LINE_BYTES);
        tracing::debug!(trigger_id = %self.shared.trigger_id, line = %text, "job log");
        let full = self.buffer().push(rondo_core::clock::now_ms(), text);
        if full {
            self.shared.full.notify_one();
        }
    }

    /// The next event's worth of lines, if any.
    pub(crate) fn take_event(&self) -> Option<LogLines> {
        let (first_seq, lines) = self.buffer().take(LINES_PER_EVENT)?;
        Some(LogLines {
            trigger_id: self.shared.trigger_id.clone(),
            job_id: self.shared.job_id,
            first_seq,
            lines,
        })
    }

    /// Puts back an event whose publish failed.
    pub(crate) fn restore(&self, event: LogLines) {
        self.buffer().restore(event.first_seq, event.lines);
    }

    /// Resolves when a full event is waiting (or was, since the last call).
    pub(crate) async fn full(&self) {
        self.shared.full.notified().await;
    }

    pub(crate) fn close(&self) {
        self.buffer().close();
    }

    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.buffer().is_empty()
    }

    /// Every pending line's text (the test helper's view).
    pub(crate) fn drain_texts(&self) -> Vec<String> {
        let mut texts = Vec::new();
        while let Some(event) = self.take_event() {
            texts.extend(event.lines.into_iter().map(|l| l.text));
        }
        texts
    }
}

/// Cuts `text` to at most `max` bytes at a character boundary, marking the cut.
pub(crate) fn truncate(text: String, max: usize) -> String {
    if text.len() <= max {
        return text;
    }
    rondo_core::model::clip(&text, max, "…")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[LogLine]) -> Vec<&str> {
        lines.iter().map(|l| l.text.as_str()).collect()
    }

    #[test]
    fn lines_are_numbered_in_batches() {
        let mut buf = LogBuffer::default();
        for i in 0..5 {
            buf.push(i, format!("l{i}"));
        }
        let (seq, lines) = buf.take(2).unwrap();
        assert_eq!((seq, texts(&lines)), (0, vec!["l0", "l1"]));
        let (seq, lines) = buf.take(10).unwrap();
        assert_eq!((seq, texts(&lines)), (2, vec!["l2", "l3", "l4"]));
        assert!(buf.take(10).is_none());
        buf.push(9, "l5".into());
        assert_eq!(buf.take(10).unwrap().0, 5);
    }

    #[test]
    fn failed_batches_go_back_in_front() {
        let mut buf = LogBuffer::default();
        buf.push(0, "a".into());
        buf.push(0, "b".into());
        let (seq, lines) = buf.take(10).unwrap();
        buf.push(0, "c".into());
        buf.restore(seq, lines);
        let (seq, lines) = buf.take(10).unwrap();
        assert_eq!((seq, texts(&lines)), (0, vec!["a", "b", "c"]));
    }

    #[test]
    fn push_reports_a_full_event() {
        let mut buf = LogBuffer::default();
        let fulls: Vec<bool> = (0..LINES_PER_EVENT)
            .map(|i| buf.push(0, i.to_string()))
            .collect();
        assert!(!fulls[LINES_PER_EVENT - 2]);
        assert!(fulls[LINES_PER_EVENT - 1]);
    }

    #[test]
    fn overflow_is_counted_and_marked() {
        let mut buf = LogBuffer::default();
        for i in 0..MAX_PENDING_LINES + 3 {
            buf.push(0, i.to_string());
        }
        let (_, lines) = buf.take(MAX_PENDING_LINES).unwrap();
        assert_eq!(lines.len(), MAX_PENDING_LINES);
        buf.push(0, "after".into());
        let (seq, lines) = buf.take(10).unwrap();
        assert_eq!(seq, MAX_PENDING_LINES as u32);
        assert_eq!(
            texts(&lines),
            vec![
                "[rondo] 3 log lines dropped: the log buffer was full",
                "after"
            ]
        );
    }

    #[test]
    fn closed_buffers_refuse_lines() {
        let mut buf = LogBuffer::default();
        buf.push(0, "a".into());
        buf.close();
        buf.push(0, "b".into());
        assert_eq!(texts(&buf.take(10).unwrap().1), vec!["a"]);
    }

    #[test]
    fn long_lines_are_cut_at_a_char_boundary() {
        assert_eq!(truncate("short".into(), 10), "short");
        let cut = truncate("é".repeat(10), 9);
        assert!(cut.len() <= 9 + '…'.len_utf8());
        assert!(cut.ends_with('…'));
        assert!(cut.starts_with("éé"));
    }

    #[test]
    fn job_log_events_carry_ids() {
        let log = JobLog::new("t-1", 7);
        log.push("hello".into());
        let event = log.take_event().unwrap();
        assert_eq!((event.trigger_id.as_str(), event.job_id), ("t-1", 7));
        assert_eq!(event.lines[0].text, "hello");
        assert!(log.is_empty());
    }
}
