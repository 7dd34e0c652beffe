//! State shared by the engine and its threads: the first error of the run and counters.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::journal::TransferDone;
use crate::error::VkError;

/// Compute batch ends [`Shared::batch_end`] remembers: far more than are ever in flight.
const BATCH_ENDS_KEPT: usize = 4096;

#[derive(Default)]
pub(crate) struct Shared {
    failed: AtomicBool,
    /// The first error; later ones are logged and dropped.
    error: Mutex<Option<VkError>>,
    /// Text of the first error, kept for every later call that is refused.
    message: Mutex<Option<String>>,
    pub read_ns: AtomicU64,
    pub staging_wait_ns: AtomicU64,
    /// Time the transfer thread held a copy until its slot's last reader was submitted (the
    /// copy cannot wait on the GPU for a step not submitted yet).
    pub reader_submit_wait_ns: AtomicU64,
    pub transfer_submits: AtomicU64,
    /// Highest transfer value handed to `vkQueueSubmit` (copy or signal-only).
    submitted: Mutex<u64>,
    submitted_cv: Condvar,
    /// Highest compute value handed to `vkQueueSubmit`.
    compute_submitted: Mutex<u64>,
    compute_submitted_cv: Condvar,
    /// The last values of the newest submitted compute batches (ascending, at most
    /// [`BATCH_ENDS_KEPT`]) and the newest end dropped from them.
    batch_ends: Mutex<(VecDeque<u64>, u64)>,
    /// Copy submissions the transfer thread saw finish, not taken by the engine yet, and the
    /// transfer value every earlier one is reported up to.
    transfers_done: Mutex<(Vec<TransferDone>, u64)>,
}

impl Shared {
    /// Records an error; the run ends: threads stop reading and copying, but every issued load
    /// still signals its semaphore value so no GPU wait is left hanging.
    pub fn fail(&self, e: VkError) {
        let mut g = self.error.lock();
        if g.is_none() && !self.failed() {
            *self.message.lock() = Some(e.to_string());
            *g = Some(e);
        } else {
            log::warn!("stream: further error after the run failed: {e}");
        }
        self.failed.store(true, Ordering::Release);
    }

    pub fn failed(&self) -> bool {
        self.failed.load(Ordering::Acquire)
    }

    /// An error for calls made after the run failed.
    pub fn refused(&self) -> VkError {
        let msg = self
            .message
            .lock()
            .clone()
            .unwrap_or_else(|| "unknown error".into());
        VkError::Stream(format!("the run already failed: {msg}"))
    }

    /// Takes the first error (once).
    pub fn take_error(&self) -> Option<VkError> {
        self.error.lock().take()
    }

    /// The newest transfer value submitted so far.
    pub fn transfer_submitted(&self) -> u64 {
        *self.submitted.lock()
    }

    pub fn set_transfer_submitted(&self, value: u64) {
        let mut g = self.submitted.lock();
        *g = (*g).max(value);
        self.submitted_cv.notify_all();
    }

    /// Blocks until transfer value `value` has been submitted (not completed) or the run failed.
    /// Needed when transfers and compute share one queue: a compute batch submitted ahead of
    /// the copy it waits for would block that queue forever.
    pub fn wait_transfer_submitted(&self, value: u64) {
        let mut g = self.submitted.lock();
        while *g < value && !self.failed() {
            self.submitted_cv
                .wait_for(&mut g, Duration::from_millis(50));
        }
    }

    /// Records that a compute submission was submitted whose parts end at `part_ends`
    /// (ascending; the last is the submission's end). Each part signals its end.
    pub fn set_compute_submitted(&self, part_ends: &[u64]) {
        let Some(&value) = part_ends.last() else {
            return;
        };
        {
            let mut ends = self.batch_ends.lock();
            for &end in part_ends {
                if ends.0.back().is_none_or(|&e| e < end) {
                    ends.0.push_back(end);
                }
            }
            while ends.0.len() > BATCH_ENDS_KEPT {
                if let Some(e) = ends.0.pop_front() {
                    ends.1 = e;
                }
            }
        }
        let mut g = self.compute_submitted.lock();
        *g = (*g).max(value);
        self.compute_submitted_cv.notify_all();
    }

    /// The last value of the submitted compute part holding step value `value`: the value
    /// the compute semaphore reaches when that step is done (a part signals only at its
    /// end). `value` itself where its batch is not submitted or no longer remembered.
    pub fn batch_end(&self, value: u64) -> u64 {
        let ends = self.batch_ends.lock();
        if value <= ends.1 {
            return value;
        }
        let i = ends.0.partition_point(|&e| e < value);
        ends.0.get(i).copied().unwrap_or(value)
    }

    /// Blocks until compute value `value` has been submitted or the run failed. A copy into a
    /// slot waits on the GPU for the slot's last reader; the engine no longer submits that
    /// reader early for the copy's sake (small batches cost host time and GPU gaps), so the
    /// transfer thread holds the copy back until the reader's batch is submitted instead of
    /// submitting a wait that no submission signals yet.
    pub fn wait_compute_submitted(&self, value: u64) {
        let mut g = self.compute_submitted.lock();
        if *g >= value {
            return;
        }
        let t0 = std::time::Instant::now();
        while *g < value && !self.failed() {
            self.compute_submitted_cv
                .wait_for(&mut g, Duration::from_millis(50));
        }
        Shared::add(&self.reader_submit_wait_ns, t0.elapsed().as_nanos() as u64);
    }

    pub fn report_transfers(&self, mut done: Vec<TransferDone>, through: u64) {
        let mut g = self.transfers_done.lock();
        g.0.append(&mut done);
        g.1 = g.1.max(through);
    }

    /// Takes the finished copy submissions reported so far (in ticket order) and the value
    /// they are complete up to.
    pub fn take_transfers(&self) -> (Vec<TransferDone>, u64) {
        let mut g = self.transfers_done.lock();
        (std::mem::take(&mut g.0), g.1)
    }

    pub fn add(counter: &AtomicU64, v: u64) {
        counter.fetch_add(v, Ordering::Relaxed);
    }

    pub fn get(counter: &AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}
