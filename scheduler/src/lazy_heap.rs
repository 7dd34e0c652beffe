//! A binary heap with lazy deletion: the eviction and prefetch orders of the constructions. An
//! entry is a key captured when it was pushed; the caller says which entries still describe the
//! page's current state, and stale ones are dropped when they reach the top. Keys change on every
//! read of a page (its next use moves on), so a sorted set paid a node allocation, a removal and
//! an insertion per read; here a read is one push, and a removal is free.

use crate::trace::NEVER;
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

    /// Drops stale entries once they outnumber `live` (the count of valid ones) by far, so
    /// the heap stays proportional to what it describes.
    pub fn compact(&mut self, live: usize, valid: impl Fn(&K) -> bool) {
        if self.heap.len() > 4 * live + 64 {
            self.heap.retain(|k| valid(k));
        }
    }
}

/// Up to this many slots, [`Ranking`] scans the slots instead of keeping a heap.
pub(crate) const SCAN_SLOTS: u32 = 16;

/// The resident pages ranked by a key the construction derives from its own state (a victim
/// order). With few slots a choice scans the slots' current keys, so a read costs nothing; on
/// a few hundred steps of four slots the heap's push per read and pop per stale entry were most
/// of a construction's time. With many slots it is a [`LazyHeap`], where a read is one push.
/// Both give the same choices: the heap's greatest valid entry is the greatest current key of a
/// resident page, since every change of a resident page's key pushes it.
pub(crate) struct Ranking<K: Ord + Copy> {
    /// `None`: scan.
    heap: Option<LazyHeap<K>>,
}

impl<K: Ord + Copy> Ranking<K> {
    /// A ranking of `slots` slots that scans them up to `scan_slots` (the constructions pass
    /// [`SCAN_SLOTS`]; their tests compare both ways).
    pub fn with_scan(slots: u32, scan_slots: u32) -> Self {
        Ranking {
            heap: (slots > scan_slots).then(LazyHeap::new),
        }
    }

    /// A resident page's key changed (it was loaded or read); `key` is its new one.
    pub fn update(&mut self, key: impl FnOnce() -> K) {
        if let Some(h) = &mut self.heap {
            h.push(key());
        }
    }

    /// The greatest key: over the `occupants` (pages in slots, [`NEVER`] for an empty one) that
    /// `key` gives one for, or the heap's greatest `valid` entry.
    pub fn best(
        &mut self,
        occupants: &[u32],
        key: impl Fn(u32) -> Option<K>,
        valid: impl Fn(&K) -> bool,
    ) -> Option<K> {
        match &mut self.heap {
            Some(h) => h.peek(valid),
            None => occupants
                .iter()
                .filter(|&&v| v != NEVER)
                .filter_map(|&v| key(v))
                .max(),
        }
    }

    /// [`LazyHeap::compact`]; nothing to do when scanning.
    pub fn compact(&mut self, live: usize, valid: impl Fn(&K) -> bool) {
        if let Some(h) = &mut self.heap {
            h.compact(live, valid);
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
        // Compaction drops the stale entries once they are many.
        for k in 100..200 {
            h.push(k);
        }
        h.compact(2, |k| *k < 100 && valid(k));
        assert_eq!(h.heap.len(), 2);
        assert_eq!(h.peek(|_| true), Some(5));
    }

    /// A random workload of up to 40 pages a model, steps reading up to 4 of them.
    fn random_trace(seed: u64) -> crate::Trace {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut below = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        let profiles: Vec<crate::Profile> = (0..1 + below(3))
            .map(|m| {
                let total = 1 + below(40) as u32;
                crate::Profile {
                    model: format!("m{m}"),
                    page_bytes: 1000,
                    total_pages: total,
                    steps: (0..1 + below(30))
                        .map(|k| crate::Step {
                            name: format!("s{k}"),
                            pages: (0..below(5)).map(|_| below(total as u64) as u32).collect(),
                            compute_s: below(5) as f64 * 1e-4,
                            activation_bytes: 0,
                            lookup: false,
                        })
                        .collect(),
                }
            })
            .collect();
        let pipeline = crate::Pipeline {
            stages: (0..1 + below(4))
                .map(|_| crate::Stage {
                    model: below(profiles.len() as u64) as usize,
                    count: 1 + below(3) as u32,
                })
                .collect(),
            repetitions: 1 + below(3) as u32,
        };
        crate::Trace::build(&profiles, &pipeline).expect("a valid random workload")
    }

    /// Scanning the slots and keeping a heap choose the same victims, below and above
    /// [`SCAN_SLOTS`], in every construction.
    #[test]
    fn scan_and_heap_rank_alike() {
        use crate::paging::{demand_schedule_ranked, Eviction, Issue};
        use crate::prefetch::prefetch_schedule_ranked;
        let bw = crate::Bandwidth {
            h2d_bytes_per_s: 4e6,
            ..Default::default()
        };
        for seed in 0..300 {
            let trace = random_trace(seed);
            let widest = trace.ref_start.windows(2).map(|w| w[1] - w[0]).max();
            let least = widest.unwrap_or(0).max(1);
            for slots in [
                least,
                least + 1,
                least + 3,
                2 * SCAN_SLOTS,
                trace.total_pages,
            ] {
                let slots = slots.max(least);
                let evictions = [
                    Eviction::Min,
                    Eviction::Lru,
                    Eviction::MinCool { lag: 1 },
                    Eviction::MinCool { lag: 6 },
                    // Past the slots, as min-cool-deep's lag is.
                    Eviction::MinCool { lag: 40 },
                ];
                for ev in evictions {
                    for issue in [Issue::Early, Issue::OnDemand] {
                        let scan = demand_schedule_ranked(&trace, slots, ev, issue, u32::MAX);
                        let heap = demand_schedule_ranked(&trace, slots, ev, issue, 0);
                        assert_eq!(scan, heap, "seed {seed}, {slots} slots, {ev:?} {issue:?}");
                    }
                }
                for lead in [f64::INFINITY, 3e-4, 1e-3] {
                    let scan = prefetch_schedule_ranked(&trace, slots, &bw, lead, u32::MAX);
                    let heap = prefetch_schedule_ranked(&trace, slots, &bw, lead, 0);
                    assert_eq!(scan, heap, "seed {seed}, {slots} slots, lead {lead}");
                }
            }
        }
    }
}
