//! The `planned` policy's core: aggressive prefetch. Whenever the transfer engine is free it loads the
//! missing page with the soonest next use, into a free slot or in place of the resident page with the
//! farthest next use (MIN), but only if that page is needed later than the one loaded. This runs
//! across model and repetition boundaries, so the next model streams in under the current one's tail
//! and pages reused soonest (e.g. by the next frame) stay resident.
use crate::lazy_heap::{LazyHeap, Ranking, SCAN_SLOTS};
use crate::trace::NEVER;
use crate::{Bandwidth, Op, Schedule, Trace};
use std::cmp::Reverse;

/// Builds the aggressive-prefetch schedule by an event-driven run with the estimated times. The caller
/// guarantees every step's page count fits in `slots`.
///
/// # Panics
/// If a step reads more pages than `slots` ([`crate::plan`] checks this via the minimum feasible cap).
pub fn prefetch_schedule(trace: &Trace, slots: u32, bw: &Bandwidth) -> Schedule {
    prefetch_schedule_within(trace, slots, bw, f64::INFINITY)
}

/// [`prefetch_schedule`] that evicts for a prefetch only when the page brought in is needed
/// within `lead_s` of estimated compute time from the current step: a page prefetched far ahead
/// evicts pages that are then reloaded before it is used, so an unbounded lead trades extra
/// loads for the last fraction of overlap.
pub fn prefetch_schedule_within(
    trace: &Trace,
    slots: u32,
    bw: &Bandwidth,
    lead_s: f64,
) -> Schedule {
    prefetch_schedule_ranked(trace, slots, bw, lead_s, SCAN_SLOTS)
}

/// [`prefetch_schedule_within`], ranking victims by a scan of the slots up to `scan_slots` slots.
pub(crate) fn prefetch_schedule_ranked(
    trace: &Trace,
    slots: u32,
    bw: &Bandwidth,
    lead_s: f64,
    scan_slots: u32,
) -> Schedule {
    let n = trace.steps.len();
    // Estimated start of each step if nothing stalled.
    let mut start_est = Vec::with_capacity(n + 1);
    let mut acc = 0.0;
    for s in &trace.steps {
        start_est.push(acc);
        acc += s.compute_s;
    }
    start_est.push(acc);
    let np = trace.total_pages as usize;
    let load_s = bw.transfer_s(trace.page_bytes);
    let mut nu: Vec<u32> = trace.first_use.clone();
    let mut last_used: Vec<Option<u32>> = vec![None; np];
    let mut slot_of: Vec<Option<u32>> = vec![None; np];
    let mut ready: Vec<f64> = vec![0.0; np];
    let mut load_op: Vec<u32> = vec![0; np];
    let mut free: Vec<u32> = (0..slots).rev().collect();
    let mut occupant: Vec<u32> = vec![NEVER; slots as usize];
    let lu_key = |l: Option<u32>| l.map_or(0u64, |v| v as u64 + 1);
    // Resident pages by (next use, older last use first); missing pages with a future use by next
    // use, the soonest first. Entries go stale as pages are read, loaded and evicted.
    let mut resident: Ranking<(u32, Reverse<u64>, u32)> = Ranking::with_scan(slots, scan_slots);
    let mut missing: LazyHeap<Reverse<(u32, u32)>> = LazyHeap::new();
    for p in 0..np as u32 {
        if nu[p as usize] != NEVER {
            missing.push(Reverse((nu[p as usize], p)));
        }
    }
    let mut sched = Schedule {
        slots,
        ops: Vec::new(),
        step_wait: vec![None; n],
    };
    let (mut f, mut t_c, mut t_x) = (0usize, 0.0f64, 0.0f64);
    // A decision refused because every resident page is needed no later than the candidate (at
    // step `refused`; NEVER: nothing to load) stays refused until a read moves a resident page's
    // next use past it: until a load, the candidate and the other resident pages stay as they
    // are. Most decisions on a cyclic workload are such refusals, one per step; this skips them.
    let mut refused: Option<u32> = None;
    while f < n {
        let pages = trace.pages(f);
        // End time of step f if all its pages are issued, and the load it then waits for.
        let mut start = Some(t_c);
        let mut wait = None;
        for &p in pages {
            let pu = p as usize;
            if slot_of[pu].is_none() {
                start = None;
                break;
            }
            start = start.map(|a| a.max(ready[pu]));
            wait = wait.max(Some(load_op[pu]));
        }
        let end_f = start.map(|a| a + trace.steps[f].compute_s);
        let e = match end_f {
            Some(e) if e <= t_x => e,
            _ => {
                // Transfer decision at t_x: every step before f has finished by now.
                if !(refused.is_some() && end_f.is_some()) {
                    refused = None;
                    let candidate = missing
                        .peek(|Reverse((n, v))| {
                            slot_of[*v as usize].is_none() && nu[*v as usize] == *n
                        })
                        .map(|Reverse(k)| k);
                    if candidate.is_none() {
                        refused = Some(NEVER);
                    }
                    if let Some((cn, c)) = candidate {
                        let slot = if let Some(s) = free.pop() {
                            Some(s)
                        } else if let Some((vn, _, v)) = resident.best(
                            &occupant,
                            |v| {
                                let vu = v as usize;
                                Some((nu[vu], Reverse(lu_key(last_used[vu])), v))
                            },
                            |k| {
                                let v = k.2 as usize;
                                slot_of[v].is_some()
                                    && nu[v] == k.0
                                    && lu_key(last_used[v]) == k.1 .0
                            },
                        ) {
                            // Evict only a page needed later than the one we bring in (and never
                            // one of step f), and only for a page needed within the lead.
                            let soon = (cn as usize) < n
                                && start_est[cn as usize] - start_est[f] <= lead_s;
                            if vn <= cn {
                                refused = Some(cn);
                            }
                            if vn > cn && vn != f as u32 && soon {
                                let vu = v as usize;
                                let s = slot_of[vu].take().unwrap_or(0);
                                sched.ops.push(Op::Evict {
                                    page: v,
                                    slot: s,
                                    after_step: last_used[vu],
                                });
                                if vn != NEVER {
                                    missing.push(Reverse((vn, v)));
                                }
                                Some(s)
                            } else {
                                None
                            }
                        } else {
                            None
                        };
                        if let Some(s) = slot {
                            let cu = c as usize;
                            slot_of[cu] = Some(s);
                            occupant[s as usize] = c;
                            load_op[cu] = sched.ops.len() as u32;
                            sched.ops.push(Op::Load {
                                page: c,
                                slot: s,
                                after_step: None,
                            });
                            t_x += load_s;
                            ready[cu] = t_x;
                            resident.update(|| (nu[cu], Reverse(lu_key(last_used[cu])), c));
                            continue;
                        }
                    }
                }
                // Nothing worth loading now: idle until step f ends, and run it (nothing it
                // depends on changed). It is schedulable, since a missing page of step f would
                // have been the candidate and would fit (cap checked).
                let Some(e) = end_f else {
                    unreachable!("step {f} cannot run: its pages exceed the slots")
                };
                t_x = t_x.max(e);
                e
            }
        };
        sched.step_wait[f] = wait;
        for r in trace.ref_range(f) {
            let p = trace.refs[r];
            let pu = p as usize;
            nu[pu] = trace.next_use[r];
            last_used[pu] = Some(f as u32);
            resident.update(|| (nu[pu], Reverse(lu_key(last_used[pu])), p));
            if refused.is_some_and(|cn| nu[pu] > cn) {
                refused = None;
            }
        }
        let live = slots as usize - free.len();
        resident.compact(live, |k| {
            let v = k.2 as usize;
            slot_of[v].is_some() && nu[v] == k.0 && lu_key(last_used[v]) == k.1 .0
        });
        missing.compact(np - live, |Reverse((n, v))| {
            slot_of[*v as usize].is_none() && nu[*v as usize] == *n
        });
        t_c = e;
        f += 1;
    }
    sched
}
