//! The entries appended last, kept decoded in memory. openraft reads each entry back soon after
//! it is appended: the leader once per follower it replicates to and once more to apply it, a
//! follower to apply it. Served from here, those reads need neither the disk nor decoding.
//!
//! Invariant: the cache holds a contiguous run of entries exactly as the log holds them, or
//! nothing. Appends extend it (an append that does not continue it starts it over), truncation
//! cuts its tail, purging and the byte budget drop its head. A read it cannot serve whole goes to
//! the segment files.

use std::collections::VecDeque;
use std::sync::Arc;

/// A contiguous run of log entries, oldest first, within a budget of encoded bytes.
#[derive(Debug)]
pub(crate) struct Recent<E> {
    /// Each entry with its encoded size.
    entries: VecDeque<(Arc<E>, usize)>,
    /// The log index of the first entry held.
    first: u64,
    /// Encoded bytes held.
    bytes: usize,
    /// Encoded bytes held at most; the oldest entries leave first.
    budget: usize,
}

impl<E> Recent<E> {
    pub(crate) fn new(budget: usize) -> Recent<E> {
        Recent {
            entries: VecDeque::new(),
            first: 0,
            bytes: 0,
            budget,
        }
    }

    /// The index after the last entry held.
    fn end(&self) -> u64 {
        self.first + self.entries.len() as u64
    }

    /// Records the entry at `index`, appended to the log with `size` encoded bytes.
    pub(crate) fn push(&mut self, index: u64, entry: E, size: usize) {
        if self.entries.is_empty() || index != self.end() {
            self.entries.clear();
            self.bytes = 0;
            self.first = index;
        }
        self.entries.push_back((Arc::new(entry), size));
        self.bytes += size;
        while self.bytes > self.budget && self.drop_oldest() {}
    }

    /// Forgets the oldest entry held; false when none is.
    fn drop_oldest(&mut self) -> bool {
        let Some((_, size)) = self.entries.pop_front() else {
            return false;
        };
        self.bytes -= size;
        self.first += 1;
        true
    }

    /// Forgets the entries from `index` on (the log was truncated there).
    pub(crate) fn truncate(&mut self, index: u64) {
        while !self.entries.is_empty() && self.end() > index {
            if let Some((_, size)) = self.entries.pop_back() {
                self.bytes -= size;
            }
        }
    }

    /// Forgets the entries up to and including `index` (the log was purged there).
    pub(crate) fn purge(&mut self, index: u64) {
        while self.first <= index && self.drop_oldest() {}
    }

    /// The entries from `start` to `end` (exclusive), if every one of them is held.
    pub(crate) fn get(&self, start: u64, end: u64) -> Option<Vec<Arc<E>>> {
        let end = end.max(start);
        if self.entries.is_empty() || start < self.first || end > self.end() {
            return None;
        }
        let from = usize::try_from(start - self.first).ok()?;
        let to = usize::try_from(end - self.first).ok()?;
        Some(
            self.entries
                .range(from..to)
                .map(|(e, _)| Arc::clone(e))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(recent: &Recent<u64>, start: u64, end: u64) -> Option<Vec<u64>> {
        recent
            .get(start, end)
            .map(|v| v.into_iter().map(|e| *e).collect())
    }

    /// Entries `i * 10` at the indexes `indexes`, one byte each.
    fn filled(indexes: std::ops::Range<u64>, budget: usize) -> Recent<u64> {
        let mut recent = Recent::new(budget);
        for i in indexes {
            recent.push(i, i * 10, 1);
        }
        recent
    }

    #[test]
    fn reads_within_the_run_are_served_and_others_are_not() {
        let recent = filled(5..10, 100);
        assert_eq!(held(&recent, 5, 10), Some(vec![50, 60, 70, 80, 90]));
        assert_eq!(held(&recent, 7, 9), Some(vec![70, 80]));
        assert_eq!(held(&recent, 8, 8), Some(vec![]));
        assert_eq!(held(&recent, 4, 6), None);
        assert_eq!(held(&recent, 9, 11), None);
        assert_eq!(held(&Recent::<u64>::new(100), 0, 0), None);
    }

    #[test]
    fn the_budget_drops_the_oldest_entries() {
        let recent = filled(0..10, 3);
        assert_eq!(held(&recent, 7, 10), Some(vec![70, 80, 90]));
        assert_eq!(held(&recent, 6, 10), None);
    }

    #[test]
    fn an_entry_over_the_budget_is_not_kept() {
        let mut recent = filled(0..3, 10);
        recent.push(3, 30, 11);
        assert_eq!(held(&recent, 3, 4), None);
        recent.push(4, 40, 1);
        assert_eq!(held(&recent, 4, 5), Some(vec![40]));
    }

    #[test]
    fn truncation_cuts_the_tail_and_new_entries_replace_it() {
        let mut recent = filled(0..6, 100);
        recent.truncate(4);
        assert_eq!(held(&recent, 3, 4), Some(vec![30]));
        assert_eq!(held(&recent, 3, 5), None);
        recent.push(4, 41, 1);
        assert_eq!(held(&recent, 2, 5), Some(vec![20, 30, 41]));
        recent.truncate(0);
        assert_eq!(held(&recent, 0, 1), None);
    }

    #[test]
    fn purging_drops_the_head() {
        let mut recent = filled(0..6, 100);
        recent.purge(2);
        assert_eq!(held(&recent, 3, 6), Some(vec![30, 40, 50]));
        assert_eq!(held(&recent, 2, 6), None);
        recent.purge(9);
        assert_eq!(held(&recent, 5, 6), None);
    }

    #[test]
    fn an_append_that_does_not_continue_the_run_starts_it_over() {
        let mut recent = filled(0..4, 100);
        recent.push(9, 90, 1);
        assert_eq!(held(&recent, 9, 10), Some(vec![90]));
        assert_eq!(held(&recent, 3, 4), None);
    }
}
