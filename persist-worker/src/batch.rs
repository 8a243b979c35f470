//! The batch being assembled from deliveries: its events, when it must be
//! written, and which delivery tag acknowledges it.
//!
//! Deliveries arrive in delivery-tag order. Each one is either added here or
//! dead-lettered (and acked on its own) before the next is looked at, so
//! after a commit every unacked tag up to [`Batch::ack_tag`] belongs to this
//! batch, and one `basic.ack(multiple)` acknowledges exactly the batch.
//! Deliveries the consumer has buffered but not handed over have larger
//! tags and are not touched.

use std::time::Duration;

use rondo_core::Event;
use tokio::time::Instant;

#[derive(Debug, Default)]
pub(crate) struct Batch {
    events: Vec<Event>,
    /// For each event, the delivery tag of the message that carried it.
    tags: Vec<u64>,
    deliveries: usize,
    ack_tag: Option<u64>,
    opened_at: Option<Instant>,
}

impl Batch {
    /// Adds a decoded delivery (possibly with no events: it still needs its ack).
    pub fn push(&mut self, tag: u64, events: Vec<Event>, now: Instant) {
        debug_assert!(self.ack_tag.is_none_or(|t| t < tag), "tags must grow");
        self.tags.extend(std::iter::repeat_n(tag, events.len()));
        self.events.extend(events);
        self.deliveries += 1;
        self.ack_tag = Some(tag);
        self.opened_at.get_or_insert(now);
    }

    pub fn is_empty(&self) -> bool {
        self.deliveries == 0
    }

    /// Full once it holds `batch_size` events (a delivery is never split, so
    /// a batch may overshoot by one delivery's events).
    pub fn is_full(&self, batch_size: usize) -> bool {
        self.events.len() >= batch_size.max(1)
    }

    /// When the batch must be written even if not full.
    pub fn deadline(&self, linger: Duration) -> Option<Instant> {
        self.opened_at.map(|at| at + linger)
    }

    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The delivery tag of the event at `index`.
    pub fn tag_of(&self, index: usize) -> u64 {
        self.tags[index]
    }

    pub fn deliveries(&self) -> usize {
        self.deliveries
    }

    /// The tag to ack with `multiple = true` once the batch is committed.
    pub fn ack_tag(&self) -> Option<u64> {
        self.ack_tag
    }

    /// Empties the batch after it was acked.
    pub fn clear(&mut self) {
        *self = Batch::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: u64) -> Event {
        Event::JobDeleted {
            id,
            at_ms: 1,
            last: None,
        }
    }

    #[test]
    fn fills_by_events_and_remembers_the_last_tag() {
        let now = Instant::now();
        let mut batch = Batch::default();
        assert!(batch.is_empty());
        assert_eq!(batch.deadline(Duration::from_millis(50)), None);
        batch.push(3, vec![event(1), event(2)], now);
        batch.push(5, vec![], now + Duration::from_millis(10));
        assert!(!batch.is_full(3));
        batch.push(6, vec![event(3)], now + Duration::from_millis(20));
        assert!(batch.is_full(3));
        assert_eq!(batch.ack_tag(), Some(6));
        assert_eq!(batch.deliveries(), 3);
        assert_eq!(
            (batch.tag_of(0), batch.tag_of(1), batch.tag_of(2)),
            (3, 3, 6)
        );
    }

    #[test]
    fn the_deadline_counts_from_the_first_delivery() {
        let now = Instant::now();
        let mut batch = Batch::default();
        batch.push(1, vec![event(1)], now);
        batch.push(2, vec![event(2)], now + Duration::from_millis(40));
        assert_eq!(
            batch.deadline(Duration::from_millis(50)),
            Some(now + Duration::from_millis(50))
        );
        batch.clear();
        assert!(batch.is_empty());
        assert_eq!(batch.ack_tag(), None);
        assert_eq!(batch.deadline(Duration::from_millis(50)), None);
    }

    #[test]
    fn an_empty_delivery_still_needs_an_ack() {
        let mut batch = Batch::default();
        batch.push(9, vec![], Instant::now());
        assert!(!batch.is_empty());
        assert!(batch.events().is_empty());
        assert_eq!(batch.ack_tag(), Some(9));
    }
}
