//! Discrete-event simulator with two resources: the transfer engine (ops in order) and the compute
//! queue (steps in order). Gives start/end times, per-step stalls and the makespan of any schedule.
use crate::{Bandwidth, Op, PlanError, Schedule, Trace};
use serde::Serialize;

/// Simulated timing of a schedule. All times in seconds from 0.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Simulation {
    pub op_start: Vec<f64>,
    pub op_end: Vec<f64>,
    pub step_start: Vec<f64>,
    pub step_end: Vec<f64>,
    /// Time step `j` waited for transfers after the compute queue was free (`start - previous end`).
    pub stalls: Vec<f64>,
    /// Latest end of any step or op.
    pub makespan_s: f64,
    pub total_stall_s: f64,
    /// Busy time of the transfer engine.
    pub transfer_busy_s: f64,
    /// Under a batching runtime (`Bandwidth::reuse_lag_steps`), the steps whose compute batch is
    /// submitted early because a copy they need waits for a step of that same batch. The
    /// simulation charges the copy's wait, not the extra submission.
    pub forced_submits: u64,
}

/// Simulates `schedule` over the steps of `trace` with transfer times from `bw`.
///
/// A load starts at max(end of the previous op, end of its `after_step`) and lasts
/// `bw.transfer_s(page_bytes)`; an evict the same with zero duration. Step `j` starts at max(end of
/// step `j-1`, end of op `step_wait[j]`). Returns [`PlanError::Deadlock`] if an op waits for a step that
/// waits for that op or a later one. With `bw.reuse_lag_steps`, an op's `after_step` moves to the end
/// of the reader's batch, and `bw.handoff_s` is added to the end an op or step waits for on the
/// other queue (see [`Bandwidth`]). On a cold start (`bw.first_read_bytes_per_s`), a page's first
/// load also waits for its read from disk, the reads one after another from time 0 in the order
/// of the first loads.
pub fn simulate_schedule(
    trace: &Trace,
    schedule: &Schedule,
    bw: &Bandwidth,
) -> Result<Simulation, PlanError> {
    let n = trace.steps.len();
    if schedule.step_wait.len() != n {
        return Err(PlanError::Invalid(format!(
            "schedule has {} step waits for {} steps",
            schedule.step_wait.len(),
            n
        )));
    }
    let ops = &schedule.ops;
    let load_s = bw.transfer_s(trace.page_bytes);
    let handoff = bw.handoff_s.max(0.0);
    let mut sim = Simulation {
        op_start: vec![0.0; ops.len()],
        op_end: vec![0.0; ops.len()],
        step_start: vec![0.0; n],
        step_end: vec![0.0; n],
        stalls: vec![0.0; n],
        ..Default::default()
    };
    let lagged = reuse_lag(trace, schedule, bw.reuse_lag_steps);
    let read_done = first_reads(trace, schedule, bw.first_read_s(trace.page_bytes));
    let (mut i, mut j) = (0usize, 0usize);
    let (mut t_op, mut t_step) = (0.0f64, 0.0f64);
    // Ops come in need order, so one forced submission per step is counted once this way.
    let mut last_forced = None;
    while i < ops.len() || j < n {
        let mut progressed = false;
        while i < ops.len() {
            let dep = ops[i].after_step().map(|d| d as usize);
            if let Some(d) = dep {
                if d >= n {
                    return Err(PlanError::Invalid(format!(
                        "op {i} waits for step {d} of {n}"
                    )));
                }
            }
            if let (Some(d), Some(l)) = (dep, lagged.as_ref()) {
                if let Some(step) = l.forced(i, d) {
                    if last_forced != Some(step) {
                        sim.forced_submits += 1;
                        last_forced = Some(step);
                    }
                }
            }
            let dep = dep.map(|d| lagged.as_ref().map_or(d, |l| l.after(i, d)));
            if let Some(d) = dep {
                if d >= j {
                    break;
                }
            }
            let start = dep.map_or(t_op, |d| t_op.max(sim.step_end[d] + handoff));
            let start = read_done.as_ref().map_or(start, |r| start.max(r[i]));
            let dur = match ops[i] {
                Op::Load { .. } => load_s,
                Op::Evict { .. } => 0.0,
            };
            sim.op_start[i] = start;
            t_op = start + dur;
            sim.op_end[i] = t_op;
            sim.transfer_busy_s += dur;
            i += 1;
            progressed = true;
        }
        while j < n {
            let w = schedule.step_wait[j].map(|w| w as usize);
            if let Some(w) = w {
                if w >= ops.len() {
                    return Err(PlanError::Invalid(format!(
                        "step {j} waits for op {w} of {}",
                        ops.len()
                    )));
                }
                if w >= i {
                    break;
                }
            }
            let start = w.map_or(t_step, |w| t_step.max(sim.op_end[w] + handoff));
            sim.stalls[j] = start - t_step;
            sim.step_start[j] = start;
            t_step = start + trace.steps[j].compute_s;
            sim.step_end[j] = t_step;
            j += 1;
            progressed = true;
        }
        if !progressed {
            return Err(PlanError::Deadlock { op: i, step: j });
        }
    }
    sim.makespan_s = t_op.max(t_step);
    sim.total_stall_s = sim.stalls.iter().sum();
    Ok(sim)
}

/// On a cold start (`read_s` > 0): per op, when the disk read its load waits for ends (the
/// `k`-th page loaded for the first time is read by `(k + 1) * read_s`; 0 for every other op).
fn first_reads(trace: &Trace, schedule: &Schedule, read_s: f64) -> Option<Vec<f64>> {
    if read_s <= 0.0 {
        return None;
    }
    let mut read = vec![false; trace.total_pages as usize];
    let mut k = 0u64;
    let done = schedule
        .ops
        .iter()
        .map(|op| match *op {
            Op::Load { page, .. } => match read.get_mut(page as usize) {
                Some(r) if !*r => {
                    *r = true;
                    k += 1;
                    k as f64 * read_s
                }
                _ => 0.0,
            },
            Op::Evict { .. } => 0.0,
        })
        .collect();
    Some(done)
}

/// Where each op's wait for a step really ends under a batching runtime; see [`Bandwidth`].
struct ReuseLag {
    lag: usize,
    /// First step that waits for op `i` (or a later op), `n` where none does.
    need: Vec<usize>,
    /// Last step of the model run holding step `j`.
    run_end: Vec<usize>,
}

impl ReuseLag {
    /// The step op `i`, which waits for step `d`, effectively waits for.
    fn after(&self, i: usize, d: usize) -> usize {
        let before_need = self.need[i].saturating_sub(1);
        d.max((d + self.lag).min(self.run_end[d]).min(before_need))
    }

    /// The step that submits its batch early for op `i` (waiting for step `d`): the first step
    /// needing the op, where the reader's batch would otherwise still be open.
    fn forced(&self, i: usize, d: usize) -> Option<usize> {
        let batch_end = (d + self.lag).min(self.run_end[d]);
        let need = self.need[i];
        (need < self.run_end.len() && need > d && need <= batch_end).then_some(need)
    }
}

fn reuse_lag(trace: &Trace, schedule: &Schedule, lag: u32) -> Option<ReuseLag> {
    if lag == 0 {
        return None;
    }
    let n = trace.steps.len();
    let need = schedule.first_waits(n);
    let mut run_end = vec![0usize; n];
    for k in (0..n).rev() {
        run_end[k] = if k + 1 < n && trace.steps[k + 1].step != 0 {
            run_end[k + 1]
        } else {
            k
        };
    }
    Some(ReuseLag {
        lag: lag as usize,
        need,
        run_end,
    })
}
