//! The validator every plan passes through: slot discipline, residency at step start, and the cap at
//! every instant, checked on the simulated times.
use crate::{Op, PlanError, Schedule, Simulation, Trace};

/// Memory attributed to activations over time: the activation peak of the step that started last
/// (before the first step starts, the first step's). A step's inputs are outputs of earlier steps, so
/// while step `j` waits for transfers the live set is contained in step `j-1`'s.
fn activation_at_step(trace: &Trace, j: usize) -> u64 {
    trace.steps[j].activation_bytes
}

/// Checks the plan's invariants; returns the peak of resident + in-flight + activation bytes.
///
/// - every op is legal in order: a load goes to an empty slot below `slots` and its page is not
///   resident elsewhere; an evict names the slot's current page;
/// - every step's pages were loaded before it starts and stay until it ends;
/// - ops and steps respect their ordering (one op at a time, one step at a time, `after_step`);
/// - resident + in-flight + activation bytes ≤ `cap` at every instant.
pub fn validate(
    trace: &Trace,
    schedule: &Schedule,
    sim: &Simulation,
    cap: u64,
) -> Result<u64, PlanError> {
    let bad = |m: String| Err(PlanError::Invariant(m));
    const EPS: f64 = 1e-12;
    let slots = schedule.slots as usize;
    let mut occupant: Vec<Option<u32>> = vec![None; slots];
    let mut slot_of: Vec<Option<u32>> = vec![None; trace.total_pages as usize];
    // Residency intervals per page: (load start, load end, evict time).
    let mut intervals: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); trace.total_pages as usize];
    let mut prev_end = 0.0f64;
    for (i, op) in schedule.ops.iter().enumerate() {
        let (s, e) = (sim.op_start[i], sim.op_end[i]);
        if s + EPS < prev_end {
            return bad(format!(
                "op {i} starts at {s} before op {} ends at {prev_end}",
                i.max(1) - 1
            ));
        }
        if let Some(d) = op.after_step() {
            if s + EPS < sim.step_end[d as usize] {
                return bad(format!("op {i} starts before its step {d} ends"));
            }
        }
        prev_end = e;
        match *op {
            Op::Load { page, slot, .. } => {
                let (p, k) = (page as usize, slot as usize);
                if k >= slots {
                    return bad(format!("op {i} loads into slot {k} of {slots}"));
                }
                if p >= slot_of.len() {
                    return bad(format!("op {i} loads unknown page {p}"));
                }
                if let Some(o) = occupant[k] {
                    return bad(format!(
                        "op {i} loads page {p} into slot {k} still holding page {o}"
                    ));
                }
                if let Some(k2) = slot_of[p] {
                    return bad(format!(
                        "op {i} loads page {p} already resident in slot {k2}"
                    ));
                }
                occupant[k] = Some(page);
                slot_of[p] = Some(slot);
                intervals[p].push((s, e, f64::INFINITY));
            }
            Op::Evict { page, slot, .. } => {
                let (p, k) = (page as usize, slot as usize);
                if k >= slots || occupant[k] != Some(page) {
                    return bad(format!(
                        "op {i} evicts page {p} from slot {k}, which does not hold it"
                    ));
                }
                occupant[k] = None;
                slot_of[p] = None;
                if let Some(last) = intervals[p].last_mut() {
                    last.2 = s;
                }
            }
        }
    }
    let mut prev = 0.0f64;
    for j in 0..trace.steps.len() {
        let (s, e) = (sim.step_start[j], sim.step_end[j]);
        if s + EPS < prev {
            return bad(format!("step {j} starts before step {} ends", j.max(1) - 1));
        }
        prev = e;
        for &p in trace.pages(j) {
            let iv = &intervals[p as usize];
            // Intervals of a page are in time order; take the last one whose load finished by the start.
            let k = iv.partition_point(|x| x.1 <= s + EPS);
            let ok = k > 0 && iv[k - 1].2 + EPS >= e;
            if !ok {
                let r = trace.page_ref(p);
                let st = &trace.steps[j];
                return bad(format!(
                    "step {j} (model {} step {}) needs page {}:{} resident over [{s:.9}, {e:.9}] but it is not",
                    st.model, st.step, r.model, r.page
                ));
            }
        }
    }
    // Sweep of memory changes. At equal times frees apply before allocations, so an evict and a load at
    // the same instant do not count twice; the value holds on [t, next t).
    let page = trace.page_bytes as i128;
    let mut ev: Vec<(f64, i128)> = Vec::with_capacity(schedule.ops.len() + 2 * trace.steps.len());
    for (i, op) in schedule.ops.iter().enumerate() {
        let t = sim.op_start[i];
        match op {
            Op::Load { .. } => ev.push((t, page)),
            Op::Evict { .. } => ev.push((t, -page)),
        }
    }
    if let Some(first) = trace.steps.first() {
        ev.push((0.0, first.activation_bytes as i128));
    }
    for j in 1..trace.steps.len() {
        let d = activation_at_step(trace, j) as i128 - activation_at_step(trace, j - 1) as i128;
        ev.push((sim.step_start[j], d));
    }
    ev.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    // The lookup slot is held for the whole run.
    let mut cur: i128 = trace.lookup_slots as i128 * page;
    let mut peak: i128 = cur;
    let mut idx = 0;
    while idx < ev.len() {
        let t = ev[idx].0;
        while idx < ev.len() && ev[idx].0 == t {
            cur += ev[idx].1;
            idx += 1;
        }
        peak = peak.max(cur);
        if cur > cap as i128 {
            return bad(format!(
                "at t={t:.9} s resident + in-flight + activation bytes are {cur}, over the cap {cap}"
            ));
        }
    }
    Ok(peak as u64)
}
