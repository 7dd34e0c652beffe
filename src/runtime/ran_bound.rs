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
        self.refs.extend_from_slice(plan.trace.pages(j));
        self.ref_start.push(self.refs.len() as u32);
        if self.steps.len() >= MAX_STEPS || self.refs.len() >= MAX_REFS {
            self.end_segment(plan);
        }
    }

    /// Bounds the steps since the last segment ended and adds the credit to the sum (at the end
    /// of a request: reading the bound then costs nothing).
    pub fn end_segment(&mut self, plan: &Plan) {
        self.folded_s += self.segment_s(plan);
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
        let s = self.segment_s(plan);
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

    /// The open segment's bound from an empty atlas, less the transfers of the pages that may be
    /// loaded when it starts; never below its compute.
    fn segment_s(&self, plan: &Plan) -> f64 {
        if self.steps.is_empty() {
            return 0.0;
        }
        let trace = match Trace::from_steps(
            &plan.trace,
            self.steps.clone(),
            self.refs.clone(),
            self.ref_start.clone(),
        ) {
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
}
