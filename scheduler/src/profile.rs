//! Planner inputs: per-model load profiles, the pipeline, and the bandwidth model.
use serde::{Deserialize, Serialize};

/// A weight page, named by the model (index into the profile list) and its page index in that model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct PageRef {
    pub model: u32,
    pub page: u32,
}

/// One step of a model: typically one IR node that reads weights.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    pub name: String,
    /// Logical pages (indices within the model's weight space) this step reads. Order and duplicates
    /// do not matter.
    pub pages: Vec<u32>,
    /// Estimated compute time of the step, seconds.
    pub compute_s: f64,
    /// Bytes of activations live while this step runs (its liveness peak).
    pub activation_bytes: u64,
    /// A lookup of rows by run-time ids (a vocabulary embedding): it reads a data-dependent
    /// subset of its model's pages, not in `pages`. The runtime reads the resident ones in place
    /// and loads the others one at a time into one slot the plan leaves free
    /// ([`crate::Trace::lookup_slots`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub lookup: bool,
}

/// The load profile of one model: its steps in execution order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Profile {
    pub model: String,
    /// Bytes per weight page. All profiles of one plan must agree (one atlas, one page size).
    pub page_bytes: u64,
    /// Pages in the model's weight space; step page indices are below this.
    pub total_pages: u32,
    pub steps: Vec<Step>,
}

impl Profile {
    /// Bytes of all of this model's weight pages.
    pub fn weight_bytes(&self) -> u64 {
        self.total_pages as u64 * self.page_bytes
    }
    /// Sum of the steps' compute times.
    pub fn compute_s(&self) -> f64 {
        self.steps.iter().map(|s| s.compute_s).sum()
    }
    /// Scales every step's compute time so that a run takes `total_s`, keeping their
    /// proportions (calibration to a measured run). False, changing nothing, where the steps
    /// have no positive cost to scale.
    pub fn scale_compute_to(&mut self, total_s: f64) -> bool {
        let est = self.compute_s();
        if !(est > 0.0 && est.is_finite()) {
            return false;
        }
        let k = total_s / est;
        for s in &mut self.steps {
            s.compute_s *= k;
        }
        true
    }
}

/// One stage of a pipeline: `count` back-to-back runs of model `model` (fan-out).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    /// Index into the profile list.
    pub model: usize,
    /// Runs in a row (the expected fan-out); 0 skips the stage.
    pub count: u32,
}

/// Models in order, with fan-out, repeated `repetitions` times (e.g. once per camera frame).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pipeline {
    pub stages: Vec<Stage>,
    pub repetitions: u32,
}

/// Transfer cost model. A load of `b` bytes takes `per_transfer_s + b / rate` where the rate is
/// `h2d_bytes_per_s`, or `min(h2d, disk)` when pages come from disk: disk reads and host→device copies
/// are pipelined through the staging ring, so the slower stage sets the throughput.
///
/// `reuse_lag_steps` models a runtime that submits compute in batches: a copy into a slot waits
/// for the slot's last reader, and the runtime can only wait for a whole submission, so the copy
/// starts when the reader's batch ends: up to this many steps later, never later than the end of
/// the reader's model run (a run's end is waited for) or the step before the first step that needs
/// the copy (the runtime submits early there). 0 = a step-granular runtime.
///
/// `handoff_s` is the latency of a wait between the queues: a copy that waits for a step starts
/// this long after the step ends, and a step that waits for a copy this long after the copy
/// ends (a GPU semaphore signal reaching the other queue, and the part boundary the runtime
/// cuts there). Hidden where the waiting side is busy anyway; a schedule whose copies and steps
/// wait on each other in turn pays it twice a page.
///
/// `first_read_bytes_per_s` models a cold start from storage with a host mirror: each page is
/// read from disk once, into host memory, before its first copy can start; later copies of it
/// come from host memory. The reads run from the start, one after another at this rate, in the
/// order of the schedule's first loads (the engine's mirror fill), independent of the copies.
/// `None`: every page is in host memory already (a warm start).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Bandwidth {
    pub h2d_bytes_per_s: f64,
    pub per_transfer_s: f64,
    pub disk_bytes_per_s: Option<f64>,
    #[serde(default)]
    pub reuse_lag_steps: u32,
    #[serde(default)]
    pub handoff_s: f64,
    #[serde(default)]
    pub first_read_bytes_per_s: Option<f64>,
}

impl Bandwidth {
    /// Effective streaming rate, bytes/s.
    pub fn rate(&self) -> f64 {
        match self.disk_bytes_per_s {
            Some(d) => d.min(self.h2d_bytes_per_s),
            None => self.h2d_bytes_per_s,
        }
    }
    /// Seconds one transfer of `bytes` takes.
    pub fn transfer_s(&self, bytes: u64) -> f64 {
        self.per_transfer_s + bytes as f64 / self.rate()
    }
    /// Seconds reading `bytes` from disk takes on a cold start (0 when warm).
    pub fn first_read_s(&self, bytes: u64) -> f64 {
        match self.first_read_bytes_per_s {
            Some(r) if r > 0.0 => bytes as f64 / r,
            _ => 0.0,
        }
    }
}

impl Default for Bandwidth {
    /// Lavapipe-class copies (DESIGN.md §4: 11–17 GB/s), 20 µs per submitted transfer, pages in host RAM.
    fn default() -> Self {
        Bandwidth {
            h2d_bytes_per_s: 12e9,
            per_transfer_s: 20e-6,
            disk_bytes_per_s: None,
            reuse_lag_steps: 0,
            handoff_s: 0.0,
            first_read_bytes_per_s: None,
        }
    }
}
