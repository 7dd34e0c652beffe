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
    let in_order = |t: &[f64]| t.windows(2).all(|w| w[0] <= w[1]);
    let n = trace.steps.len();
    // On a simulated plan steps start in order and loads end in order: each page's interval is
    // then found by moving a cursor forward, not by a binary search per read (same result).
    let forward = in_order(&sim.step_start[..n]) && in_order(&sim.op_end[..schedule.ops.len()]);
    let mut cursor = vec![0usize; if forward { intervals.len() } else { 0 }];
    let mut prev = 0.0f64;
    for j in 0..n {
        let (s, e) = (sim.step_start[j], sim.step_end[j]);
        if s + EPS < prev {
            return bad(format!("step {j} starts before step {} ends", j.max(1) - 1));
        }
        prev = e;
        for &p in trace.pages(j) {
            let iv = &intervals[p as usize];
            // Intervals of a page are in time order; take the last one whose load finished by the start.
            let k = if forward {
                let c = &mut cursor[p as usize];
                while *c < iv.len() && iv[*c].1 <= s + EPS {
                    *c += 1;
                }
                *c
            } else {
                iv.partition_point(|x| x.1 <= s + EPS)
            };
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
    // Sweep of memory changes: resident and in-flight pages change when an op starts, activations
    // when a step starts. Ops start in queue order and steps in compute order, so on a simulated
    // plan both lists are already in time order and are merged as they are; else sorted first.
    let page = trace.page_bytes as i128;
    let ops = &schedule.ops;
    let op_ev = |i: usize| match ops[i] {
        Op::Load { .. } => (sim.op_start[i], page),
        Op::Evict { .. } => (sim.op_start[i], -page),
    };
    // Before the first step starts, the first step's activations (see `activation_at_step`).
    let step_ev = |j: usize| {
        let t = if j == 0 { 0.0 } else { sim.step_start[j] };
        (t, activation_at_step(trace, j) as i128)
    };
    // The lookup slot is held for the whole run.
    let base = trace.lookup_slots as i128 * page;
    let steps_in_order = n < 2 || (0.0 <= sim.step_start[1] && in_order(&sim.step_start[1..n]));
    if in_order(&sim.op_start[..ops.len()]) && steps_in_order {
        return sweep(base, (ops.len(), op_ev), (n, step_ev), cap);
    }
    let sorted = |mut ev: Vec<(f64, i128)>| {
        ev.sort_by(|a, b| a.0.total_cmp(&b.0));
        ev
    };
    let op_ev = sorted((0..ops.len()).map(op_ev).collect());
    let step_ev = sorted((0..n).map(step_ev).collect());
    sweep(
        base,
        (op_ev.len(), |i| op_ev[i]),
        (step_ev.len(), |j| step_ev[j]),
        cap,
    )
}

/// The peak of resident, in-flight and activation bytes: `base`, plus the ops' changes (a count
/// and the `i`th one's time and bytes), plus the activation bytes of the step that started last
/// (a count and the `j`th one's start and bytes); both in time order. The value holds on
/// [t, next t) and is checked against the cap once all of an instant's changes are in, so a
/// free and an allocation at one instant do not count twice.
fn sweep(
    base: i128,
    (n_ops, op): (usize, impl Fn(usize) -> (f64, i128)),
    (n_steps, step): (usize, impl Fn(usize) -> (f64, i128)),
    cap: u64,
) -> Result<u64, PlanError> {
    let mut peak = base;
    let mut check = |cur: i128, t: f64| {
        if t.is_nan() {
            return Err(PlanError::Invariant(
                "a simulated time is not a number".into(),
            ));
        }
        peak = peak.max(cur);
        if cur > cap as i128 {
            return Err(PlanError::Invariant(format!(
                "at t={t:.9} s resident + in-flight + activation bytes are {cur}, over the cap {cap}"
            )));
        }
        Ok(())
    };
    let (mut pages, mut act, mut i) = (base, 0i128, 0usize);
    // The ops of one instant (at least op `i`) at a time.
    let instant = |i: &mut usize, pages: &mut i128| {
        let (t, d) = op(*i);
        *pages += d;
        *i += 1;
        while *i < n_ops && op(*i).0 == t {
            *pages += op(*i).1;
            *i += 1;
        }
        t
    };
    for j in 0..n_steps {
        let (t, a) = step(j);
        while i < n_ops && op(i).0 < t {
            let t0 = instant(&mut i, &mut pages);
            check(pages + act, t0)?;
        }
        while i < n_ops && op(i).0 == t {
            pages += op(i).1;
            i += 1;
        }
        act = a;
        // A step that starts at the same instant replaces these activations before the check.
        if j + 1 < n_steps && step(j + 1).0 == t {
            continue;
        }
        check(pages + act, t)?;
    }
    while i < n_ops {
        let t0 = instant(&mut i, &mut pages);
        check(pages + act, t0)?;
    }
    Ok(peak as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::{uniform, UniformSpec};
    use crate::{plan, Bandwidth, Pipeline, Policy, Stage};

    /// The memory sweep as a plain sort: every change in one list by time, summed instant by
    /// instant; `Err` when an instant is over the cap.
    fn sorted_sweep(
        trace: &Trace,
        schedule: &Schedule,
        sim: &Simulation,
        cap: u64,
    ) -> Result<u64, ()> {
        let page = trace.page_bytes as i128;
        let mut ev: Vec<(f64, i128)> = schedule
            .ops
            .iter()
            .enumerate()
            .map(|(i, op)| match op {
                Op::Load { .. } => (sim.op_start[i], page),
                Op::Evict { .. } => (sim.op_start[i], -page),
            })
            .collect();
        ev.push((0.0, trace.steps[0].activation_bytes as i128));
        for j in 1..trace.steps.len() {
            let d = trace.steps[j].activation_bytes as i128
                - trace.steps[j - 1].activation_bytes as i128;
            ev.push((sim.step_start[j], d));
        }
        ev.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut cur, mut idx) = (trace.lookup_slots as i128 * page, 0);
        let mut peak = cur;
        while idx < ev.len() {
            let t = ev[idx].0;
            while idx < ev.len() && ev[idx].0 == t {
                cur += ev[idx].1;
                idx += 1;
            }
            peak = peak.max(cur);
            if cur > cap as i128 {
                return Err(());
            }
        }
        Ok(peak as u64)
    }

    /// The merged sweep (times in order) and the sorted one (times nudged out of order, within
    /// the validator's tolerance) agree with a plain sort, peak and cap alike.
    #[test]
    fn sweep_matches_a_plain_sort() {
        let profiles: Vec<_> = (0..3u64)
            .map(|m| {
                let spec = UniformSpec {
                    layers: 40,
                    bytes_per_layer: (300 + 200 * m) << 10,
                    compute_per_layer_s: (m + 1) as f64 * 1e-5,
                    activation_bytes: (40 - 10 * m) << 10,
                };
                uniform(&format!("m{m}"), 1 << 20, &spec)
            })
            .collect();
        let pipeline = Pipeline {
            stages: (0..3).map(|model| Stage { model, count: 2 }).collect(),
            repetitions: 2,
        };
        let mut x = 7u64;
        let mut below = |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n
        };
        for policy in [Policy::Planned, Policy::OnDemand, Policy::Lru] {
            let p = plan(
                &profiles,
                &pipeline,
                12 << 20,
                &Bandwidth::default(),
                policy,
            )
            .unwrap();
            let (trace, sched) = (&p.trace, &p.schedule);
            assert_eq!(
                validate(trace, sched, &p.sim, p.cap_bytes).ok(),
                Some(p.stats.peak_bytes)
            );
            for round in 0..200 {
                let mut sim = p.sim.clone();
                for _ in 0..1 + below(4) {
                    let nudge = -(below(9) as f64) * 1e-13;
                    if below(2) == 0 {
                        let i = below(sched.ops.len() as u64) as usize;
                        sim.op_start[i] += nudge;
                    } else {
                        let j = 1 + below(trace.steps.len() as u64 - 1) as usize;
                        sim.step_start[j] += nudge;
                    }
                }
                // At the plan's own peak, a nudge that overlaps a load with an evict goes over.
                let cap = if round % 2 == 0 {
                    p.cap_bytes
                } else {
                    p.stats.peak_bytes
                };
                match (
                    validate(trace, sched, &sim, cap),
                    sorted_sweep(trace, sched, &sim, cap),
                ) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(PlanError::Invariant(m)), Err(())) if m.contains("over the cap") => {}
                    // An earlier check (an op before its step ends, ...) refused the nudge.
                    (Err(PlanError::Invariant(m)), _) if !m.contains("over the cap") => {}
                    (a, b) => panic!("{policy:?} round {round}: {a:?} against {b:?}"),
                }
            }
        }
    }

    #[test]
    fn a_time_that_is_not_a_number_is_refused() {
        let profiles = [uniform(
            "m",
            1 << 20,
            &UniformSpec {
                layers: 8,
                bytes_per_layer: 1 << 20,
                compute_per_layer_s: 1e-5,
                activation_bytes: 0,
            },
        )];
        let pipeline = Pipeline {
            stages: vec![Stage { model: 0, count: 1 }],
            repetitions: 1,
        };
        let p = plan(
            &profiles,
            &pipeline,
            4 << 20,
            &Bandwidth::default(),
            Policy::OnDemand,
        )
        .unwrap();
        let mut sim = p.sim.clone();
        let last = sim.op_start.len() - 1;
        sim.op_start[last] = f64::NAN;
        let r = validate(&p.trace, &p.schedule, &sim, p.cap_bytes);
        assert!(matches!(r, Err(PlanError::Invariant(m)) if m.contains("not a number")));
    }
}
