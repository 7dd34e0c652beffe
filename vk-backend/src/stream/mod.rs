//! Streaming engine: drives the paged weight atlas's residency from a timeline, on the GPU.
//!
//! Data path: [`PageSource::read_page`] on I/O threads → a ring of page-sized host-visible
//! staging buffers → `vkCmdCopyBufferToImage` into an atlas layer on the transfer queue (the
//! compute queue where the device has no transfer-only family) → kernels read the page through
//! `fetch_weight` once the page table maps it. With [`StreamConfig::host_mirror`] every page is
//! read once into host-visible buffers, by threads that start at creation and run behind the
//! first loads, and each load copies from there once its page is in.
//!
//! Synchronization is GPU-side, through two timeline semaphores owned by the engine:
//! - the *transfer* semaphore: load number `t` (its [`LoadTicket`]) signals value `t`; loads are
//!   submitted in ticket order, so value `t` means every load up to `t` has landed;
//! - the *compute* semaphore: step number `s` (returned by [`StreamEngine::step`]) signals `s`
//!   at the end of the part of the compute batch that contains it.
//!
//! A compute batch is one `vkQueueSubmit` of several parts, each its own command buffer with
//! its own wait and signal ([`StreamConfig::steps_per_part`]). A part waits for the newest load
//! its steps need. A load into a slot waits for the compute value of the last step that read
//! the slot's previous page; the transfer thread submits it once that step's batch is
//! submitted, and a step that needs such a load starts a new part (on a shared queue, the
//! batch is submitted first instead), so a part never waits for itself. A copied page's
//! page-table entry is written with `vkCmdUpdateBuffer` in the copy's own transfer submission,
//! after the last step that read the entry while the page was resident before; evictions leave
//! entries alone (no step reads a page that is not resident), so the compute stream never
//! writes the table and needs no barrier for it. The CPU only
//! blocks when the staging ring is full (on the I/O dispatcher thread, in `vkWaitSemaphores`),
//! never per step.
//!
//! Logical page space: one global space for all models. Model `m`'s page `p` is logical page
//! `base(m) + p`, with bases laid out in source order; kernels of model `m` add
//! [`StreamEngine::weight_texel_base`] to their weight texel offsets.
//!
//! Queue families: the atlas and staging buffers are created with `VK_SHARING_MODE_CONCURRENT`
//! over the compute and transfer families when they differ (what `resource.rs` does for every
//! resource), so no ownership-transfer barriers are needed.

mod engine;
mod handoff;
mod io;
mod journal;
mod mirror;
mod residency;
mod shared;
mod staging;
mod timing;
mod transfer;

pub use engine::StreamEngine;
pub use handoff::probe_handoff;
pub use journal::{StreamEvent, MAX_EVENTS};
pub use mirror::MIRROR_BUFFER_BYTES;

use std::time::Duration;

use crate::layout::Precision;
pub use crate::types::StagingMemory;

/// Where one model's weight pages come from (the packed-model reader implements it with pread).
/// Called from several I/O threads at once.
pub trait PageSource: Send + Sync {
    /// Bytes per page; must equal the atlas page size.
    fn page_bytes(&self) -> usize;
    /// Number of pages of this model.
    fn page_count(&self) -> u32;
    /// Fills `dst` (exactly `page_bytes()` long) with page `page`'s texels in page order.
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()>;
    /// A name for error messages (e.g. the packed file's path).
    fn name(&self) -> String {
        String::from("model")
    }
    /// This model's compensated pages (see [`crate::atlas::COMPENSATED`]), as model-local
    /// page numbers.
    fn compensated_pages(&self) -> Vec<u32> {
        Vec::new()
    }
}

/// Engine geometry and tuning.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamConfig {
    /// Atlas page slots (layers); fixes the resident weight bytes.
    pub slots: u32,
    /// Page texel format.
    pub precision: Precision,
    /// Page height in texels; `None` = 1 MiB pages.
    pub page_height: Option<u32>,
    /// Page-sized staging buffers in the ring.
    pub staging_slots: u32,
    /// Threads calling [`PageSource::read_page`].
    pub io_threads: u32,
    /// Where the staging ring (or the host mirror) lives.
    pub staging_memory: StagingMemory,
    /// Read every page once into a host mirror the copies read directly, instead of reading
    /// each page into the staging ring when it is loaded (see `mirror.rs`). The ring and the
    /// I/O threads are then not created; one thread per core (at most 16, at least
    /// `io_threads`) fills the mirror in the background from creation on, in load order, and a
    /// load's copy waits for its own page only.
    pub host_mirror: bool,
    /// Steps recorded into one compute submission before it is submitted automatically.
    pub steps_per_batch: u32,
    /// Least steps in one part of a compute submission. A part has its own semaphore wait (its
    /// own steps' pages) and signal (the copies waiting for its steps' slots), so copies and
    /// compute overlap within one submission. A part is cut before a step that needs a newer
    /// page than the part waits for, or once a copy waits for one of its steps; at least
    /// `steps_per_batch` (the default) means one part per submission unless a copy forces a
    /// cut. Shorter parts let a step start before a page its batch needs later has landed; on
    /// an H100 parts of 4 cost the streamed host more in session 50's five processes, but
    /// session 51's 27 with parts of a batch spread as widely (1.09-1.61× the bound): the
    /// spread was the recording thread sharing the vCPU that takes the GPU's interrupts
    /// (session 52, `crate::placement`), so parts of 4 against parts of a batch is yet to be
    /// compared with the threads placed (BENCHMARKS.md, sessions 50-52).
    pub steps_per_part: u32,
    /// Most compute submissions in flight before the host waits for the oldest (`None`: no
    /// limit). Keeps the host at most this many batches ahead of the GPU: a diagnostic (held
    /// to the GPU's pace, the resident host recorded no slower, BENCHMARKS.md, session 51).
    /// Those waits count in the host's submitting time (`HostTime::submitting`), not in its
    /// recording.
    pub host_lead: Option<u32>,
    /// Most page copies in one transfer submission.
    pub max_loads_per_submit: u32,
    /// Write timestamp queries on both queues (busy / stall times in [`StreamStats`]).
    pub timestamps: bool,
    /// Put a step recorded once ([`crate::RecordedCommands`]) into the submission as its own
    /// command buffer rather than emitting its commands again
    /// ([`Recorder::set_step_buffers`](crate::Recorder::set_step_buffers)). Off by default: the
    /// host saves the driver's work per dispatch, but on an H100 each command buffer cost the
    /// GPU 6.6 µs (`texstream bench commands`), more than a small step's own work.
    pub step_buffers: bool,
}

impl Default for StreamConfig {
    fn default() -> Self {
        StreamConfig {
            slots: 16,
            precision: Precision::F16,
            page_height: None,
            staging_slots: 6,
            io_threads: 4,
            staging_memory: StagingMemory::System,
            host_mirror: false,
            steps_per_batch: 16,
            steps_per_part: 16,
            host_lead: None,
            max_loads_per_submit: 8,
            timestamps: true,
            step_buffers: false,
        }
    }
}

/// Host time the thread driving a [`StreamEngine`] spent in it, by part.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct HostTime {
    /// In `load` and `evict` (residency, page-table unmaps, handing the copy over).
    pub loads: Duration,
    /// In `step` around the step's own recording: page-table maps, residency, batch set-up.
    pub steps: Duration,
    /// In the steps' recording callbacks (the kernels' commands).
    pub recording: Duration,
    /// Of `recording`, in the driver calls that emitted recorded steps' commands again
    /// ([`crate::Recorder::emit_time`]); the rest is the recorder's own work.
    pub emitting: Duration,
    /// Ending compute batches, submitting them and retiring finished ones: the price of a
    /// submission, which shorter batches pay more often.
    pub submitting: Duration,
}

impl HostTime {
    pub fn add(&mut self, o: &HostTime) {
        self.loads += o.loads;
        self.steps += o.steps;
        self.recording += o.recording;
        self.emitting += o.emitting;
        self.submitting += o.submitting;
    }
}

/// Handle of one load: the transfer-semaphore value signalled once the page has landed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct LoadTicket(pub u64);

/// What a run did. GPU times come from timestamp queries and are `None` where the queue has no
/// timestamp support or timestamps were off.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StreamStats {
    pub pages_loaded: u64,
    pub bytes_streamed: u64,
    /// Pages dropped from a slot (explicit `evict` or a load over an occupied slot).
    pub evictions: u64,
    pub steps: u64,
    pub compute_submits: u64,
    /// Parts of compute submissions, each with its own wait and signal (see
    /// [`StreamConfig::steps_per_part`]).
    pub compute_parts: u64,
    /// Of the part boundaries, those a copy forced: the next step needed a copy that waits
    /// for a step of the part (the rest are cut where a part has enough steps and its next
    /// page has not landed). On a queue shared with the copies such a step submits the batch
    /// instead, and that submission is counted here.
    pub forced_cuts: u64,
    /// Waits for the oldest compute submission that [`StreamConfig::host_lead`] made (0
    /// without a limit): how often the host was held back to the GPU's pace.
    pub host_lead_waits: u64,
    pub transfer_submits: u64,
    /// Where the calling thread's time in the engine went.
    pub host: HostTime,
    /// Summed time inside `PageSource::read_page` over all I/O threads (or the host mirror's
    /// fill threads).
    pub read_time: Duration,
    /// Time the dispatcher blocked because every staging slot was still in use.
    pub staging_wait_time: Duration,
    /// Time the transfer thread held copies until their slots' last readers were submitted
    /// (a compute batch is submitted once its steps are recorded).
    pub reader_submit_wait: Duration,
    /// Whether the staging ring ended up in device-local memory (then counted against the cap).
    pub staging_device_local: bool,
    /// Bytes of the staging ring.
    pub staging_bytes: u64,
    /// Bytes of the host mirror (0 without one), and the wall time it took to fill. The fill
    /// runs in the background: read before it has ended ([`StreamEngine::counters`] during a
    /// cold start's first requests), `mirror_fill` and `read_time` are its times so far; at
    /// [`StreamEngine::finish`] they are final (a fill still running then is stopped).
    pub host_mirror_bytes: u64,
    pub mirror_fill: Duration,
    /// The part of `mirror_fill` after the engine's creation returned: the fill behind the
    /// run's first requests.
    pub mirror_fill_behind: Duration,
    /// Wall-clock time of one page's copy from the host mirror, probed at creation (`None`
    /// without a mirror).
    pub copy_probe: Option<Duration>,
    /// Latency of a wait between the compute and transfer queues, probed at creation
    /// ([`probe_handoff`]; `None` where they are one queue).
    pub handoff_probe: Option<Duration>,
    /// GPU time the transfer queue spent on the page copies it timed (a submission goes
    /// untimed when every timestamp pair is still in flight).
    pub transfer_busy: Option<Duration>,
    /// Pages those timed copies carried: `transfer_busy` over this is a copy's time.
    pub transfer_timed_pages: u64,
    /// GPU time compute batches ran, excluding the time they waited for transfers.
    pub compute_busy: Option<Duration>,
    /// Estimated GPU time compute sat ready but waited for a page transfer: per batch,
    /// `max(0, end of the newest transfer it needs - max(end of the previous batch, its start))`.
    pub compute_stall: Option<Duration>,
    /// Host wall time from engine creation to `finish`.
    pub wall: Duration,
}
