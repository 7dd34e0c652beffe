//! Demand paging over the trace: Belady's MIN (farthest next use) or LRU eviction, with loads issued
//! either as early as the evicted page allows ("early") or only once the previous step ended ("on demand").
use crate::lazy_heap::{Ranking, SCAN_SLOTS};
use crate::trace::NEVER;
use crate::{Op, Schedule, Trace};
use std::cmp::Reverse;

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

/// Resident pages `MinCool` looks through, farthest next use first, before it settles for the
/// farthest (bounds its cost where many slots hold recently read pages).
const COOL_SCAN: usize = 256;
// A page has at most two valid entries in the heap (one pushed before an eviction and the same
// key again at its reload), so the scan covers every resident page when the ranking scans the
// slots instead: both ways choose the same victims.
const _: () = assert!(COOL_SCAN >= 2 * SCAN_SLOTS as usize);

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
    let mut by_next: Ranking<(u32, Reverse<u64>, u32)> = Ranking::with_scan(slots, scan_slots);
    let mut by_last: Ranking<Reverse<(u64, u32)>> = Ranking::with_scan(slots, scan_slots);
    let mut lru_key: Vec<u64> = vec![0; np];
    let min_like = !matches!(eviction, Eviction::Lru);
    let mut sched = Schedule {
        slots,
        ops: Vec::new(),
        step_wait: vec![None; n],
    };
    for j in 0..n {
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
                    Eviction::MinCool { lag } => by_next
                        .best_wanted(
                            &occupant,
                            next_key,
                            next_valid,
                            |&(next, _, v)| {
                                next as usize != j
                                    && last_used[v as usize]
                                        .is_none_or(|l| l as usize + (lag as usize) < j)
                            },
                            COOL_SCAN,
                        )
                        .map(|k| k.2),
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
                by_next.update(|| (nu[pu], Reverse(lu_key(last_used[pu])), p));
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
            if min_like {
                by_next.update(|| (nu[pu], Reverse(lu_key(last_used[pu])), p));
            } else {
                lru_key[pu] = lu_key(last_used[pu]);
                by_last.update(|| Reverse((lru_key[pu], p)));
            }
        }
        let live = slots as usize - free.len();
        if min_like {
            by_next.compact(live, |k| {
                let v = k.2 as usize;
                slot_of[v].is_some() && nu[v] == k.0 && lu_key(last_used[v]) == k.1 .0
            });
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
