//! A binary heap with lazy deletion: the eviction and prefetch orders of the constructions. An
//! entry is a key captured when it was pushed; the caller says which entries still describe the
//! page's current state, and stale ones are dropped when they reach the top. Keys change on every
//! read of a page (its next use moves on), so a sorted set paid a node allocation, a removal and
//! an insertion per read; here a read is one push, and a removal is free.

use std::collections::BinaryHeap;

pub(crate) struct LazyHeap<K: Ord + Copy> {
    heap: BinaryHeap<K>,
}

impl<K: Ord + Copy> LazyHeap<K> {
    pub fn new() -> Self {
        LazyHeap {
            heap: BinaryHeap::new(),
        }
    }

    pub fn push(&mut self, k: K) {
        self.heap.push(k);
    }

    /// The greatest entry `valid` accepts (stale ones above it are dropped).
    pub fn peek(&mut self, valid: impl Fn(&K) -> bool) -> Option<K> {
        while let Some(&top) = self.heap.peek() {
            if valid(&top) {
                return Some(top);
            }
            self.heap.pop();
        }
        None
    }

    /// The greatest valid entry that `wanted` also accepts, among the `scan` greatest valid
    /// ones; else the greatest valid entry. The heap keeps every valid entry.
    pub fn find(
        &mut self,
        valid: impl Fn(&K) -> bool,
        wanted: impl Fn(&K) -> bool,
        scan: usize,
    ) -> Option<K> {
        let mut seen: Vec<K> = Vec::new();
        let mut found = None;
        while seen.len() < scan {
            let Some(top) = self.heap.pop() else {
                break;
            };
            if !valid(&top) {
                continue;
            }
            seen.push(top);
            if wanted(&top) {
                found = Some(top);
                break;
            }
        }
        let first = seen.first().copied();
        self.heap.extend(seen);
        found.or(first).or_else(|| self.peek(&valid))
    }

    /// Drops stale entries once they outnumber `live` (the count of valid ones) by far, so
    /// the heap stays proportional to what it describes.
    pub fn compact(&mut self, live: usize, valid: impl Fn(&K) -> bool) {
        if self.heap.len() > 4 * live + 64 {
            self.heap.retain(|k| valid(k));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_entries_never_surface() {
        let mut h = LazyHeap::new();
        for k in [3, 9, 5, 7] {
            h.push(k);
        }
        // 9 and 7 went stale.
        let valid = |k: &i32| *k != 9 && *k != 7;
        assert_eq!(h.peek(valid), Some(5));
        assert_eq!(h.find(valid, |k| *k < 4, 8), Some(3));
        // Nothing wanted within the scan: the greatest valid one.
        assert_eq!(h.find(valid, |k| *k > 100, 8), Some(5));
        // Compaction drops the stale entries once they are many.
        for k in 100..200 {
            h.push(k);
        }
        h.compact(2, |k| *k < 100 && valid(k));
        assert_eq!(h.heap.len(), 2);
        assert_eq!(h.peek(|_| true), Some(5));
    }
}
