//! Demand paging over the trace: Belady's MIN (farthest next use) or LRU eviction, with loads issued
//! either as early as the evicted page allows ("early") or only once the previous step ended ("on demand").
use crate::lazy_heap::{LazyHeap, Ranking, SCAN_SLOTS};
use crate::trace::NEVER;
use crate::{Op, Schedule, Trace};
use std::cmp::Reverse;
use std::collections::VecDeque;

/// Which page to evict when a slot is needed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eviction {
    /// Farthest next use (ties: least recently used). Fewest loads for uniform pages.
    Min,
    /// Farthest next use among pages not read in the `lag` steps before the step that needs the
    /// slot (the farthest overall where every page is that recent). Under a runtime that submits
    /// compute in batches (see [`crate::Bandwidth`]), a copy over a page read just now waits for
    /// that reader's whole batch; MIN on a cyclic workload evicts exactly those pages.
    MinCool { lag: u32 },
    /// Least recently used.
    Lru,
}

/// A MIN victim's key: next use, older last use first (`Reverse` of it), page.
type NextKey = (u32, Reverse<u64>, u32);

/// `MinCool`'s candidates where the slots are ranked by a heap: the resident pages not read in
/// the `lag` steps before the current one, farthest next use first. A page turns cool `lag`
/// steps after its last read, so reads queue up in step order and move to the heap as they
/// age. Looking instead through the farthest-next-use order for the first cool page went past
/// hundreds of just-read pages an eviction on a streaming decoder (MIN's order puts them first):
/// 0.8 and 1.2 s of `planned`'s 1.3 s plan of the 1.34 B assistant-scale request at a quarter
/// (session 27), against 0.06 s for MIN itself.
struct CoolPages {
    lag: usize,
    /// (step, page) of every read, in step order.
    warming: VecDeque<(u32, u32)>,
    heap: LazyHeap<NextKey>,
}

impl CoolPages {
    fn new(lag: u32) -> Self {
        CoolPages {
            lag: lag as usize,
            warming: VecDeque::new(),
            heap: LazyHeap::new(),
        }
    }

    /// Whether a page last read in `last` is cool in step `j`.
    fn is_cool(&self, last: Option<u32>, j: usize) -> bool {
        last.is_none_or(|l| l as usize + self.lag < j)
    }

    /// Moves the reads that turned cool by step `j` to the heap: `key` gives the page's key
    /// where that read is still its last and it is resident.
    fn advance(&mut self, j: usize, key: impl Fn(u32, u32) -> Option<NextKey>) {
        while let Some(&(step, page)) = self.warming.front() {
            if step as usize + self.lag >= j {
                break;
            }
            self.warming.pop_front();
            if let Some(k) = key(step, page) {
                self.heap.push(k);
            }
        }
    }

    /// The cool page with the farthest next use, unless the current step `j` needs it (then
    /// every cool page is needed now: next uses are at least `j`).
    fn best(&mut self, j: usize, valid: impl Fn(&NextKey) -> bool) -> Option<NextKey> {
        self.heap.peek(valid).filter(|k| k.0 as usize != j)
    }
}

/// When a load may start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Issue {
    /// As soon as the transfer engine and the evicted page's last reader allow: prefetch in need order.
    Early,
    /// Not before the previous step has finished: load at first use.
    OnDemand,
}

/// Builds the demand-paging schedule with `slots` slots. The caller guarantees every step's page count
/// fits in `slots`.
///
/// # Panics
/// If a step reads more pages than `slots` ([`crate::plan`] checks this via the minimum feasible cap).
pub fn demand_schedule(trace: &Trace, slots: u32, eviction: Eviction, issue: Issue) -> Schedule {
    demand_schedule_ranked(trace, slots, eviction, issue, SCAN_SLOTS)
}

/// [`demand_schedule`], ranking victims by a scan of the slots up to `scan_slots` slots.
pub(crate) fn demand_schedule_ranked(
    trace: &Trace,
    slots: u32,
    eviction: Eviction,
    issue: Issue,
    scan_slots: u32,
) -> Schedule {
    let n = trace.steps.len();
    let np = trace.total_pages as usize;
    let mut nu: Vec<u32> = trace.first_use.clone();
    let mut last_used: Vec<Option<u32>> = vec![None; np];
    let mut slot_of: Vec<Option<u32>> = vec![None; np];
    let mut load_op: Vec<u32> = vec![0; np];
    let mut free: Vec<u32> = (0..slots).rev().collect();
    let mut occupant: Vec<u32> = vec![NEVER; slots as usize];
    // MIN: the greatest (next use, older last use first, page). LRU: the least (last use, page),
    // where a page the current step reads counts as used last (u64::MAX: never a victim).
    let lu_key = |l: Option<u32>| l.map_or(0u64, |v| v as u64 + 1);
    let mut by_next: Ranking<NextKey> = Ranking::with_scan(slots, scan_slots);
    // MinCool's cool pages where the slots are ranked by a heap (a scan looks at every slot).
    let mut cool = match eviction {
        Eviction::MinCool { lag } if slots > scan_slots => Some(CoolPages::new(lag)),
        _ => None,
    };
    let mut by_last: Ranking<Reverse<(u64, u32)>> = Ranking::with_scan(slots, scan_slots);
    let mut lru_key: Vec<u64> = vec![0; np];
    let min_like = !matches!(eviction, Eviction::Lru);
    let mut sched = Schedule {
        slots,
        ops: Vec::new(),
        step_wait: vec![None; n],
    };
    for j in 0..n {
        // Reads that turned cool by this step join MinCool's heap, where still the page's last
        // read and the page resident (the queue holds `lag` steps of reads at most).
        if let Some(c) = &mut cool {
            c.advance(j, |step, v| {
                let vu = v as usize;
                (slot_of[vu].is_some() && last_used[vu] == Some(step))
                    .then(|| (nu[vu], Reverse(lu_key(last_used[vu])), v))
            });
        }
        let pages = trace.pages(j);
        if pages.is_empty() {
            // Nothing to load, wait for or update (its step_wait stays None).
            continue;
        }
        if eviction == Eviction::Lru {
            // Pages of this step are in use now; they must not be picked as victims.
            for &p in pages {
                if slot_of[p as usize].is_some() {
                    lru_key[p as usize] = u64::MAX;
                }
            }
        }
        let mut first_op_of_step = true;
        for &p in pages {
            let pu = p as usize;
            if slot_of[pu].is_some() {
                continue;
            }
            let after = match issue {
                Issue::OnDemand if first_op_of_step => j.checked_sub(1).map(|x| x as u32),
                _ => None,
            };
            first_op_of_step = false;
            let slot = if let Some(s) = free.pop() {
                s
            } else {
                let next_valid = |k: &(u32, Reverse<u64>, u32)| {
                    let v = k.2 as usize;
                    slot_of[v].is_some() && nu[v] == k.0 && lu_key(last_used[v]) == k.1 .0
                };
                let next_key = |v: u32| {
                    let vu = v as usize;
                    Some((nu[vu], Reverse(lu_key(last_used[vu])), v))
                };
                let victim = match eviction {
                    Eviction::Min => by_next.best(&occupant, next_key, next_valid).map(|k| k.2),
                    // The farthest next use among pages not read in the `lag` steps before
                    // this one and not read by it; else the farthest overall.
                    Eviction::MinCool { lag } => {
                        let wanted = match &mut cool {
                            Some(c) => c.best(j, next_valid),
                            None => occupant
                                .iter()
                                .filter(|&&v| v != NEVER)
                                .filter_map(|&v| next_key(v))
                                .filter(|&(next, _, v)| {
                                    next as usize != j
                                        && last_used[v as usize]
                                            .is_none_or(|l| l as usize + (lag as usize) < j)
                                })
                                .max(),
                        };
                        wanted
                            .or_else(|| by_next.best(&occupant, next_key, next_valid))
                            .map(|k| k.2)
                    }
                    // A page the current step reads (key u64::MAX) is never the victim.
                    Eviction::Lru => by_last
                        .best(
                            &occupant,
                            |v| {
                                let key = lru_key[v as usize];
                                (key != u64::MAX).then_some(Reverse((key, v)))
                            },
                            |Reverse((key, v))| {
                                slot_of[*v as usize].is_some() && lru_key[*v as usize] == *key
                            },
                        )
                        .map(|Reverse((_, v))| v),
                };
                let Some(v) = victim else {
                    unreachable!("no slots: the caller checked the cap")
                };
                let vu = v as usize;
                let s = slot_of[vu].take().unwrap_or(0);
                let evict_after = match (last_used[vu], after) {
                    (Some(a), Some(b)) => Some(a.max(b)),
                    (a, b) => a.or(b),
                };
                sched.ops.push(Op::Evict {
                    page: v,
                    slot: s,
                    after_step: evict_after,
                });
                s
            };
            slot_of[pu] = Some(slot);
            occupant[slot as usize] = p;
            load_op[pu] = sched.ops.len() as u32;
            sched.ops.push(Op::Load {
                page: p,
                slot,
                after_step: after,
            });
            if min_like {
                let key = (nu[pu], Reverse(lu_key(last_used[pu])), p);
                by_next.update(|| key);
                // A page loaded cool enters the heap now: the read that cooled it may have
                // aged while the page was out.
                if let Some(c) = cool.as_mut().filter(|c| c.is_cool(last_used[pu], j)) {
                    c.heap.push(key);
                }
            } else {
                lru_key[pu] = u64::MAX;
            }
        }
        sched.step_wait[j] = pages.iter().map(|&p| load_op[p as usize]).max();
        // Step j done: advance next uses and last uses of its pages.
        for r in trace.ref_range(j) {
            let p = trace.refs[r];
            let pu = p as usize;
            nu[pu] = trace.next_use[r];
            last_used[pu] = Some(j as u32);
            if let Some(c) = &mut cool {
                c.warming.push_back((j as u32, p));
            }
            if min_like {
                by_next.update(|| (nu[pu], Reverse(lu_key(last_used[pu])), p));
            } else {
                lru_key[pu] = lu_key(last_used[pu]);
                by_last.update(|| Reverse((lru_key[pu], p)));
            }
        }
        let live = slots as usize - free.len();
        if min_like {
            let valid = |k: &NextKey| {
                let v = k.2 as usize;
                slot_of[v].is_some() && nu[v] == k.0 && lu_key(last_used[v]) == k.1 .0
            };
            by_next.compact(live, valid);
            if let Some(c) = &mut cool {
                c.heap.compact(live, valid);
            }
        } else {
            by_last.compact(live, |Reverse((key, v))| {
                slot_of[*v as usize].is_some() && lru_key[*v as usize] == *key
            });
        }
    }
    sched
}

/// The fewest page loads any plan can make with `slots` slots: the count of Belady's MIN.
pub fn min_loads(trace: &Trace, slots: u32) -> u64 {
    demand_schedule(trace, slots, Eviction::Min, Issue::Early).loads()
}
