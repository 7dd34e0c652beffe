//! The lower bound of what a streamed session actually ran: the steps executed since the last
//! restart, across every plan switch, bounded as one trace.
//!
//! A plan's own bound covers the whole plan, future requests it predicted included; a plan cut
//! by a re-plan ran only part of it, and no share of its bound is the bound of that part. So the
//! executed steps (each with its plan's calibrated cost and pages) are concatenated into
//! segments (one per request, or [`MAX_STEPS`] steps, whichever ends first, so memory and the
//! time to bound them stay proportional to the work) and [`scheduler::lower_bound_trace`] runs
//! on each. A segment starts where the previous one's compute ended, with at most the slots,
//! the lookup slot and one copy in flight already loaded, so it takes at least its bound from
//! an empty atlas less that many page transfers (never less than its compute): the sum of
//! those credits bounds the whole.
use std::sync::Mutex;

use scheduler::{lower_bound_trace, Plan, Trace, TraceStep};

/// Steps and page references a segment holds at most (about 12 and 4 MiB).
pub const MAX_STEPS: usize = 1 << 18;
pub const MAX_REFS: usize = 1 << 20;

/// The executed steps since [`RanBound::restart`], bounded segment by segment; see the module
/// docs.
#[derive(Default)]
pub struct RanBound {
    steps: Vec<TraceStep>,
    refs: Vec<u32>,
    /// Where each step's references start (one more entry than steps once a step is in).
    ref_start: Vec<u32>,
    /// Credited bounds of the segments ended.
    folded_s: f64,
    /// (steps in the open segment, its credit) when last computed.
    cached: Mutex<Option<(usize, f64)>>,
}

impl RanBound {
    /// Adds global step `j` of `plan`, which just ran.
    pub fn ran(&mut self, plan: &Plan, j: usize) {
        let Some(&step) = plan.trace.steps.get(j) else {
            return;
        };
        if self.ref_start.is_empty() {
            self.ref_start.push(0);
        }
        self.steps.push(step);
        // A lookup step's pages (where its ids' rows lie) are not the plan's and are left out:
        // fewer references only lower the bound.
        self.refs.extend_from_slice(plan.trace.pages(j));
        self.ref_start.push(self.refs.len() as u32);
        if self.steps.len() >= MAX_STEPS || self.refs.len() >= MAX_REFS {
            self.end_segment(plan);
        }
    }

    /// Bounds the steps since the last segment ended and adds the credit to the sum (at the end
    /// of a request: reading the bound then costs nothing).
    pub fn end_segment(&mut self, plan: &Plan) {
        let steps = std::mem::take(&mut self.steps);
        let refs = std::mem::take(&mut self.refs);
        let ref_start = std::mem::take(&mut self.ref_start);
        self.folded_s += segment_credit(plan, steps, refs, ref_start);
        self.clear_segment();
    }

    /// The bound of every step since [`Self::restart`], `plan` being the one running (its slots
    /// and transfer model are the session's).
    pub fn bound_s(&self, plan: &Plan) -> f64 {
        let n = self.steps.len();
        let mut cached = self.cached.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((k, s)) = *cached {
            if k == n {
                return self.folded_s + s;
            }
        }
        let s = segment_credit(
            plan,
            self.steps.clone(),
            self.refs.clone(),
            self.ref_start.clone(),
        );
        *cached = Some((n, s));
        self.folded_s + s
    }

    /// Forgets every step so far (after calibration changed every step cost).
    pub fn restart(&mut self) {
        self.folded_s = 0.0;
        self.clear_segment();
    }

    fn clear_segment(&mut self) {
        self.steps.clear();
        self.refs.clear();
        self.ref_start.clear();
        *self.cached.get_mut().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// The bound of a segment of executed steps from an empty atlas, less the transfers of the
/// pages that may be loaded when it starts; never below its compute.
fn segment_credit(plan: &Plan, steps: Vec<TraceStep>, refs: Vec<u32>, ref_start: Vec<u32>) -> f64 {
    if steps.is_empty() {
        return 0.0;
    }
    let trace = match Trace::from_steps(&plan.trace, steps, refs, ref_start) {
        Ok(t) => t,
        Err(e) => {
            // Steps of the session's own plans: only a bug gets here.
            log::warn!("the executed steps do not form a trace: {e}");
            return 0.0;
        }
    };
    let lb = lower_bound_trace(&trace, plan.slots, &plan.bandwidth);
    let held = (plan.slots + trace.lookup_slots + 1) as f64;
    let warm = held * plan.bandwidth.transfer_s(plan.page_bytes);
    lb.compute_s.max(lb.bound_s - warm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler::{plan, Bandwidth, Pipeline, Policy, Profile, Stage, Step};

    /// A decoder of 24 one-page steps run four times under 6 slots: every run streams.
    fn decoding() -> Plan {
        let profile = Profile {
            model: "lm".into(),
            page_bytes: 1 << 20,
            total_pages: 24,
            steps: (0..24)
                .map(|k| Step {
                    name: format!("s{k}"),
                    pages: vec![k],
                    compute_s: 1e-5,
                    activation_bytes: 0,
                    lookup: false,
                })
                .collect(),
        };
        let pipeline = Pipeline {
            stages: vec![Stage { model: 0, count: 4 }],
            repetitions: 1,
        };
        let bw = Bandwidth {
            h2d_bytes_per_s: 16e9,
            per_transfer_s: 0.0,
            disk_bytes_per_s: None,
            reuse_lag_steps: 0,
            handoff_s: 0.0,
            first_read_bytes_per_s: None,
        };
        plan(&[profile], &pipeline, 6 << 20, &bw, Policy::Planned).unwrap()
    }

    #[test]
    fn what_ran_is_bounded_like_the_plan_less_the_pages_it_may_start_with() {
        let p = decoding();
        let t = p.bandwidth.transfer_s(p.page_bytes);
        let held = (p.slots + p.trace.lookup_slots + 1) as f64;
        let whole = p.stats.lower_bound.bound_s;
        let mut ran = RanBound::default();
        for j in 0..p.trace.steps.len() {
            ran.ran(&p, j);
        }
        // One segment of every step: the scheduler's own bound of the plan, less the credit.
        let one = ran.bound_s(&p);
        assert!(
            (one - (whole - held * t)).abs() < 1e-12,
            "{one} against {whole}"
        );
        // Ended in the middle (as at a request's end): each half credited the same way, so the
        // sum stays below the whole, and loses at most two more credits (the second half's, and
        // the pages the first half left that the second counts as loads again).
        let mut halves = RanBound::default();
        let n = p.trace.steps.len();
        for j in 0..n {
            halves.ran(&p, j);
            if j == n / 2 {
                halves.end_segment(&p);
            }
        }
        let two = halves.bound_s(&p);
        assert!(two <= whole + 1e-12, "{two} against {whole}");
        assert!(
            two >= whole - 3.0 * held * t - 1e-12,
            "{two} against {whole}"
        );
        // Restarting forgets what ran.
        halves.restart();
        assert_eq!(halves.bound_s(&p), 0.0);
    }
}
