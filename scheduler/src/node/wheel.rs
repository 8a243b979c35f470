//! The in-memory wheel of a node: fires ordered by the millisecond they are
//! due. XXL-JOB's ring has 60 one-second slots; rondo keeps one slot per
//! millisecond that has fires (a sorted map), so a fire is released at its
//! instant and the wheel costs nothing for empty milliseconds.
//!
//! Pure data structure: the firing loop in `firing` owns the clock.

use std::collections::BTreeMap;

/// Fires keyed by the millisecond they are due.
#[derive(Debug)]
pub struct Wheel<T> {
    slots: BTreeMap<i64, Vec<T>>,
    len: usize,
}

impl<T> Default for Wheel<T> {
    fn default() -> Self {
        Wheel {
            slots: BTreeMap::new(),
            len: 0,
        }
    }
}

impl<T> Wheel<T> {
    pub fn insert(&mut self, due_ms: i64, item: T) {
        self.slots.entry(due_ms).or_default().push(item);
        self.len += 1;
    }

    /// The earliest due instant, if any.
    pub fn next_due(&self) -> Option<i64> {
        self.slots.keys().next().copied()
    }

    /// Takes every fire due at or before `now_ms`, earliest first (fires of
    /// one millisecond in insertion order).
    pub fn pop_due(&mut self, now_ms: i64) -> Vec<(i64, T)> {
        let later = self.slots.split_off(&(now_ms + 1));
        let due = std::mem::replace(&mut self.slots, later);
        let mut out = Vec::new();
        for (ms, items) in due {
            out.extend(items.into_iter().map(|i| (ms, i)));
        }
        self.len -= out.len();
        debug_assert_eq!(self.len, self.slots.values().map(Vec::len).sum::<usize>());
        out
    }

    /// Takes at most `max` of the fires due at or before `now_ms`, earliest
    /// first; the rest stay, in order.
    pub fn pop_due_at_most(&mut self, now_ms: i64, max: usize) -> Vec<(i64, T)> {
        let mut out = Vec::new();
        while out.len() < max {
            let Some(mut slot) = self.slots.first_entry() else {
                break;
            };
            if *slot.key() > now_ms {
                break;
            }
            let ms = *slot.key();
            let room = max - out.len();
            if slot.get().len() <= room {
                out.extend(slot.remove().into_iter().map(|i| (ms, i)));
            } else {
                out.extend(slot.get_mut().drain(..room).map(|i| (ms, i)));
            }
        }
        self.len -= out.len();
        out
    }

    pub fn len(&self) -> usize {
        self.len
    }

    /// Drops every fire.
    pub fn clear(&mut self) {
        self.slots.clear();
        self.len = 0;
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_wheel_has_nothing_due() {
        let mut w: Wheel<u32> = Wheel::default();
        assert_eq!(w.next_due(), None);
        assert!(w.pop_due(i64::MAX - 1).is_empty());
        assert!(w.is_empty());
    }

    #[test]
    fn releases_at_the_exact_millisecond() {
        let mut w = Wheel::default();
        w.insert(1_001, "b");
        w.insert(1_000, "a");
        w.insert(1_002, "c");
        assert_eq!(w.next_due(), Some(1_000));
        assert_eq!(w.pop_due(999), vec![]);
        assert_eq!(w.pop_due(1_000), vec![(1_000, "a")]);
        assert_eq!(w.pop_due(1_001), vec![(1_001, "b")]);
        assert_eq!(w.len(), 1);
        assert_eq!(w.next_due(), Some(1_002));
    }

    #[test]
    fn late_pop_takes_everything_overdue_in_order() {
        let mut w = Wheel::default();
        for (ms, v) in [(5, 'e'), (1, 'a'), (3, 'c'), (3, 'd'), (2, 'b'), (9, 'z')] {
            w.insert(ms, v);
        }
        let got: Vec<char> = w.pop_due(5).into_iter().map(|(_, v)| v).collect();
        assert_eq!(got, vec!['a', 'b', 'c', 'd', 'e']);
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn many_fires_in_one_millisecond_all_come_out() {
        let mut w = Wheel::default();
        for i in 0..10_000 {
            w.insert(7, i);
        }
        let out = w.pop_due(7);
        assert_eq!(out.len(), 10_000);
        assert!(out.iter().map(|(_, i)| *i).eq(0..10_000));
        assert!(w.is_empty());
    }

    #[test]
    fn a_bounded_pop_takes_the_earliest_and_leaves_the_rest_in_order() {
        let mut w = Wheel::default();
        for (ms, v) in [(1, 'a'), (1, 'b'), (1, 'c'), (2, 'd'), (3, 'e'), (9, 'z')] {
            w.insert(ms, v);
        }
        let take = |w: &mut Wheel<char>, max| -> String {
            w.pop_due_at_most(5, max)
                .into_iter()
                .map(|(_, v)| v)
                .collect()
        };
        assert_eq!(take(&mut w, 2), "ab");
        assert_eq!(w.len(), 4);
        assert_eq!(w.next_due(), Some(1));
        assert_eq!(take(&mut w, 2), "cd");
        assert_eq!(take(&mut w, 0), "");
        assert_eq!(take(&mut w, 10), "e");
        assert_eq!(w.len(), 1, "not due yet");
        assert_eq!(w.pop_due_at_most(9, 10), vec![(9, 'z')]);
        assert!(w.is_empty());
    }

    #[test]
    fn pop_at_extreme_instants_does_not_overflow() {
        let mut w = Wheel::default();
        w.insert(i64::MAX - 1, 1);
        assert_eq!(w.pop_due(i64::MAX - 1).len(), 1);
    }
}
