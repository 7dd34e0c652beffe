//! The stream engine: issues loads and evictions in plan order, records compute steps into
//! batched submissions, and wires the two timeline semaphores between them.

use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use ash::vk;
use crossbeam_channel::Sender;

use super::io::{self, LoadReq, ReadDone, Staged};
use super::journal::{BatchInfo, IssuedLoad, Journal, StreamEvent};
use super::mirror::HostMirror;
use super::residency::Residency;
use super::shared::Shared;
use super::staging::StagingRing;
use super::timing::QueryRing;
use super::transfer::{self, TransferCtx};
use super::{LoadTicket, PageSource, StreamConfig, StreamStats};
use crate::atlas::{AtlasConfig, WeightAtlas};
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::recorder::{Recorder, Submission};
use crate::sync::{SemaphoreSignal, SemaphoreWait, TimelineSemaphore};

/// Consecutive 5-second waits without progress on either queue after which a run is declared
/// stuck (two minutes).
const STUCK_WAITS: u32 = 24;

/// The compute batch being recorded: one `vkQueueSubmit`, recorded in parts.
struct Batch {
    rec: Recorder,
    /// Steps in every part.
    steps: u32,
    /// The part being recorded.
    part: Part,
    /// Parts already cut from `rec`, in order.
    cut: Vec<Part>,
}

/// A run of a batch's steps with its own semaphore wait and signal ([`Recorder::cut`]): it
/// starts on the GPU once its own pages have landed (not every page of the batch), and a copy
/// waiting for one of its readers starts when it ends (not when the batch ends). The journal
/// times each part as one compute batch.
struct Part {
    /// Newest load (transfer value) any step of the part needs.
    wait: u64,
    /// Compute value of the last step (0 = no step yet).
    last: u64,
    steps: u32,
    pair: Option<u32>,
    /// Key of its timestamp pair (the first compute value it was opened for).
    key: u64,
    /// Steps per model label, in recording order (for the journal).
    models: Vec<(Option<u32>, u32)>,
    /// The first load whose copy waits for a step of this part.
    awaited_from: Option<u64>,
}

/// Threads that fill the host mirror: every core up to 16 (the fill is a one-time read of
/// every page, 2.6 GB/s on four threads of the H200's host), at least the I/O threads.
fn mirror_fill_threads(io_threads: u32) -> u32 {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    cores.min(16).max(io_threads)
}

/// Where the engine sends a load.
enum Feed {
    /// To the I/O dispatcher, which reads the page into the staging ring.
    Io(Sender<LoadReq>),
    /// Straight to the transfer thread: the page is in the host mirror.
    Mirror(Sender<ReadDone>),
    /// Shut down.
    Closed,
}

/// Streams weight pages into a [`WeightAtlas`] while compute steps run; see the module docs.
///
/// Drive it in plan order: `load` / `evict` calls for the operations before step k, then
/// `step(needs_k, record)`. Finish with [`StreamEngine::finish`], which returns the first error
/// of the run (I/O, device, plan) or the statistics. Dropping an unfinished engine shuts it
/// down the same way and discards the result.
pub struct StreamEngine {
    device: Device,
    config: StreamConfig,
    atlas: WeightAtlas,
    sources: Arc<Vec<Arc<dyn PageSource>>>,
    bases: Vec<u32>,
    transfer_sem: TimelineSemaphore,
    compute_sem: TimelineSemaphore,
    shared: Arc<Shared>,
    feed: Feed,
    /// The host mirror loads copy from, while its background fill runs and after.
    mirror: Option<Arc<HostMirror>>,
    io_threads: Vec<JoinHandle<()>>,
    transfer_thread: Option<JoinHandle<()>>,
    residency: Residency,
    next_ticket: u64,
    next_value: u64,
    open: Option<Batch>,
    /// Compute value of the last submitted batch.
    submitted: u64,
    /// First ticket whose copy waits for a step of the open batch (the transfer thread holds
    /// it, and every later ticket, until the batch is submitted).
    held_from: Option<u64>,
    inflight: VecDeque<(u64, Submission)>,
    timing: Option<QueryRing>,
    /// What completed, timed: live GPU totals and the event log.
    journal: Journal,
    /// The model the steps being recorded belong to (see [`Self::label_steps`]).
    label: Option<u32>,
    stats: StreamStats,
    started: Instant,
    finished: bool,
}

impl StreamEngine {
    /// Creates the atlas (`config.slots` pages), the staging ring and the threads. `sources[m]`
    /// is model `m`; every source's page size must equal the atlas page size.
    pub fn new(
        device: &Device,
        config: StreamConfig,
        sources: Vec<Arc<dyn PageSource>>,
    ) -> Result<StreamEngine> {
        Self::with_load_order(device, config, sources, &[])
    }

    /// [`Self::new`] for a run that will first load the pages `first_loads` names (model,
    /// page), in that order (its plan's loads): a host mirror reads them first, then every
    /// other page in model and page order. Pages out of range are skipped.
    pub fn with_load_order(
        device: &Device,
        config: StreamConfig,
        sources: Vec<Arc<dyn PageSource>>,
        first_loads: &[(u32, u32)],
    ) -> Result<StreamEngine> {
        let bad = |m: String| Err(VkError::Stream(m));
        if sources.is_empty() {
            return bad("no page sources (models) given".into());
        }
        if config.staging_slots == 0 || config.steps_per_batch == 0 || config.steps_per_part == 0 {
            return bad(
                "staging_slots, steps_per_batch and steps_per_part must be at least 1".into(),
            );
        }
        let mut bases = Vec::with_capacity(sources.len());
        let mut total: u64 = 0;
        for s in &sources {
            bases.push(total as u32);
            total += s.page_count() as u64;
            if total > u32::MAX as u64 {
                return bad("more than 2^32 logical pages".into());
            }
        }
        let atlas = WeightAtlas::new(
            device,
            AtlasConfig {
                slots: config.slots,
                precision: config.precision,
                page_height: config.page_height,
                logical_pages: total.max(1) as u32,
            },
        )?;
        for (s, &base) in sources.iter().zip(&bases) {
            let pages: Vec<u32> = s.compensated_pages().iter().map(|p| p + base).collect();
            atlas.mark_compensated(&pages)?;
        }
        let page_bytes = atlas.page_bytes();
        if total * atlas.texels_per_page() as u64 > u32::MAX as u64 + 1 {
            return bad(format!(
                "{total} pages of {} texels exceed the 32-bit weight texel index",
                atlas.texels_per_page()
            ));
        }
        for (m, s) in sources.iter().enumerate() {
            if s.page_bytes() as u64 != page_bytes {
                return bad(format!(
                    "model {m} (`{}`) has {}-byte pages, the atlas has {page_bytes}-byte pages",
                    s.name(),
                    s.page_bytes()
                ));
            }
        }
        // The transfer queue writes the atlas with raw copies in layout GENERAL: transition it
        // once here, on the compute queue.
        let mut rec = Recorder::new(device, QueueKind::Compute)?;
        rec.init_image(atlas.image());
        rec.submit_and_wait()?;

        let sources = Arc::new(sources);
        // Either a host mirror, filled from now on behind the run, or a staging ring that I/O
        // threads fill per load.
        let (ring, mirror) = if config.host_mirror {
            let first: Vec<u32> = first_loads
                .iter()
                .filter(|&&(m, p)| sources.get(m as usize).is_some_and(|s| p < s.page_count()))
                .map(|&(m, p)| bases[m as usize] + p)
                .collect();
            let m = HostMirror::start(
                device,
                sources.clone(),
                &bases,
                page_bytes,
                config.staging_memory,
                mirror_fill_threads(config.io_threads),
                &first,
            )?;
            (None, Some(Arc::new(m)))
        } else {
            let r = StagingRing::new(
                device,
                config.staging_slots,
                page_bytes,
                config.staging_memory,
            )?;
            (Some(Arc::new(r)), None)
        };
        let copy_probe = match &mirror {
            Some(m) => m.probe_copy(device, &atlas)?,
            None => None,
        };
        let handoff_probe = super::probe_handoff(device)?;
        let transfer_sem = TimelineSemaphore::new(device, 0)?;
        let compute_sem = TimelineSemaphore::new(device, 0)?;
        let shared = Arc::new(Shared::default());
        let timing = if config.timestamps {
            QueryRing::new(device, QueueKind::Compute, 256)?
        } else {
            None
        };
        let stats = StreamStats {
            staging_device_local: ring.as_ref().is_some_and(|r| r.device_local())
                || mirror.as_ref().is_some_and(|m| m.device_local()),
            staging_bytes: ring.as_ref().map_or(0, |r| r.bytes()),
            host_mirror_bytes: mirror.as_ref().map_or(0, |m| m.bytes()),
            copy_probe,
            handoff_probe,
            ..Default::default()
        };
        let (req_tx, req_rx) = crossbeam_channel::unbounded();
        let (done_tx, done_rx) = crossbeam_channel::unbounded();
        let mut engine = StreamEngine {
            device: device.clone(),
            config,
            atlas: atlas.clone(),
            sources: sources.clone(),
            bases,
            transfer_sem: transfer_sem.clone(),
            compute_sem: compute_sem.clone(),
            shared: shared.clone(),
            feed: Feed::Closed,
            mirror: mirror.clone(),
            io_threads: Vec::new(),
            transfer_thread: None,
            residency: Residency::new(config.slots),
            next_ticket: 1,
            next_value: 1,
            open: None,
            submitted: 0,
            held_from: None,
            inflight: VecDeque::new(),
            journal: Journal::new(None, false, false),
            timing,
            label: None,
            stats,
            started: Instant::now(),
            finished: false,
        };
        if engine.timing.is_some() {
            let offset = super::timing::clock_offset(device, QueueKind::Compute, engine.started)?;
            engine.journal = Journal::new(offset, true, config.timestamps);
        } else {
            engine.journal = Journal::new(None, false, config.timestamps);
        }
        // From here on a failure shuts the threads down through Drop.
        engine.transfer_thread = Some(transfer::spawn(
            TransferCtx {
                device: device.clone(),
                atlas: atlas.clone(),
                page_height: atlas.page_height(),
                pages_per_layer: atlas.pages_per_layer(),
                ring: ring.clone(),
                mirror: mirror.clone(),
                bases: engine.bases.clone(),
                transfer_sem: transfer_sem.clone(),
                compute_sem,
                shared: shared.clone(),
                max_batch: config.max_loads_per_submit.max(1) as usize,
                timestamps: config.timestamps,
                started: engine.started,
            },
            done_rx,
        )?);
        match ring {
            Some(ring) => {
                let threads = io::spawn(
                    req_rx,
                    done_tx,
                    ring,
                    sources,
                    transfer_sem,
                    shared,
                    config.io_threads,
                );
                engine.io_threads = threads?.handles;
                engine.feed = Feed::Io(req_tx);
            }
            None => engine.feed = Feed::Mirror(done_tx),
        }
        Ok(engine)
    }

    /// The atlas kernels read through `fetch_weight` (bind it with `Recorder::use_weights`;
    /// batches the engine records have it bound already).
    pub fn atlas(&self) -> &WeightAtlas {
        &self.atlas
    }

    pub fn config(&self) -> StreamConfig {
        self.config
    }

    /// First logical page of model `model` in the global page space.
    pub fn page_base(&self, model: u32) -> Result<u32> {
        self.bases
            .get(model as usize)
            .copied()
            .ok_or_else(|| self.no_model(model))
    }

    /// Add this to model `model`'s weight texel offsets in its kernels' push constants.
    pub fn weight_texel_base(&self, model: u32) -> Result<u32> {
        Ok(self.page_base(model)? * self.atlas.texels_per_page())
    }

    /// The transfer timeline semaphore (value t = load t has landed).
    pub fn transfer_semaphore(&self) -> &TimelineSemaphore {
        &self.transfer_sem
    }

    /// The compute timeline semaphore (value s = step s has finished).
    pub fn compute_semaphore(&self) -> &TimelineSemaphore {
        &self.compute_sem
    }

    fn no_model(&self, model: u32) -> VkError {
        VkError::Stream(format!(
            "model {model} out of range ({} models)",
            self.bases.len()
        ))
    }

    fn check(&self) -> Result<()> {
        if self.finished {
            return Err(VkError::Stream("the engine has finished".into()));
        }
        if self.shared.failed() {
            return Err(self.shared.refused());
        }
        Ok(())
    }

    /// Ends the run with `e`: later calls are refused and `finish` returns it.
    fn fail(&self, e: VkError) -> VkError {
        let msg = e.to_string();
        self.shared.fail(e);
        VkError::Stream(msg)
    }

    fn check_page(&self, model: u32, page: u32) -> Result<()> {
        let src = self
            .sources
            .get(model as usize)
            .ok_or_else(|| self.no_model(model))?;
        if page >= src.page_count() {
            return Err(VkError::Stream(format!(
                "model {model} (`{}`) has {} pages, page {page} requested",
                src.name(),
                src.page_count()
            )));
        }
        Ok(())
    }

    fn batch(&mut self) -> Result<&mut Batch> {
        if self.open.is_none() {
            let mut rec = Recorder::new(&self.device, QueueKind::Compute)?;
            rec.use_weights(&self.atlas);
            rec.set_step_buffers(self.config.step_buffers);
            // A full barrier first: its first scope is everything earlier on the queue, so the
            // batch's first steps see what the previous batch's last steps wrote (a semaphore
            // wait orders only the copies). On a shared queue it also orders the copies this
            // batch needs, submitted before it (see `flush`), in place of the semaphore wait.
            rec.barrier();
            let part = self.new_part(&mut rec);
            self.open = Some(Batch {
                rec,
                steps: 0,
                part,
                cut: Vec::new(),
            });
        }
        self.open
            .as_mut()
            .ok_or_else(|| VkError::Stream("no open batch".into()))
    }

    /// A part opened at the current position of `rec` (its timestamp pair begins there).
    fn new_part(&mut self, rec: &mut Recorder) -> Part {
        let key = self.next_value;
        let pair = self
            .timing
            .as_mut()
            .and_then(|t| t.begin(rec.command_buffer(), key));
        Part {
            wait: 0,
            last: 0,
            steps: 0,
            pair,
            key,
            models: Vec::new(),
            awaited_from: None,
        }
    }

    /// The semaphore wait a part needs for its pages (none on a shared queue, where the
    /// batch is submitted after its copies and a barrier orders them).
    fn part_waits(&self, wait: u64) -> Vec<SemaphoreWait> {
        if wait > 0 && self.device.has_dedicated_transfer_queue() {
            vec![SemaphoreWait {
                semaphore: self.transfer_sem.clone(),
                value: wait,
                stage: vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER,
            }]
        } else {
            Vec::new()
        }
    }

    /// Ends the open batch's current part before a step that needs load `wait`: always where
    /// that load (or an earlier one: copies land in ticket order) waits for a step of the part,
    /// which would otherwise wait for itself through the transfer queue; and, once the part
    /// has `steps_per_part` steps, where the step needs a newer page than the part waits for
    /// that has not landed yet, or a later copy waits for the part.
    /// Returns whether a copy forced the cut (the step needs it or a later one).
    fn cut_part_before(&mut self, wait: u64) -> Result<bool> {
        let per_part = self.config.steps_per_part;
        let Some(b) = self.open.as_ref() else {
            return Ok(false);
        };
        let p = &b.part;
        let needed = p.awaited_from.is_some_and(|t| t <= wait);
        let mut worth = p.steps >= per_part && (wait > p.wait || p.awaited_from.is_some());
        if worth && !needed && p.awaited_from.is_none() {
            // A part boundary costs the GPU about 6 us (H200, `texstream bench commands`): cut
            // for a newer page only where it has not landed yet.
            worth = wait > self.transfer_sem.value().unwrap_or(0);
        }
        if p.steps == 0 || !(needed || worth) {
            return Ok(false);
        }
        let Some(mut b) = self.open.take() else {
            return Ok(false);
        };
        if let Some(t) = self.timing.as_mut() {
            t.end(b.rec.command_buffer(), b.part.pair);
        }
        let waits = self.part_waits(b.part.wait);
        let signals = [SemaphoreSignal {
            semaphore: self.compute_sem.clone(),
            value: b.part.last,
        }];
        let res = b.rec.cut(&waits, &signals);
        let part = self.new_part(&mut b.rec);
        b.cut.push(std::mem::replace(&mut b.part, part));
        self.open = Some(b);
        res.map(|()| needed).map_err(|e| self.fail(e))
    }

    /// Counts a boundary (`scope`: a part, or on a shared queue a batch) that the next step's
    /// newest load `wait` forced, and logs which page and which waiting load, for offline
    /// analysis (trace level).
    fn forced_boundary(
        &mut self,
        newest: Option<(u32, u32)>,
        wait: u64,
        waiting: Option<u64>,
        scope: &str,
    ) {
        self.stats.forced_cuts += 1;
        if let (Some((m, p)), Some(a)) = (newest, waiting) {
            log::trace!(
                target: "texstream_vk::stream_cuts",
                "forced cut before step value {}: model {m} page {p} is load {wait} ({} loads ago); load {a} waits for the {scope}",
                self.next_value,
                self.next_ticket - wait
            );
        }
    }

    /// The compute value a load of `model`'s `page` into `slot` would wait for: the slot's last
    /// reader, or the last reader of the page's previous stay, whichever is newer.
    pub fn copy_would_wait_for(&self, model: u32, page: u32, slot: u32) -> Result<u64> {
        Ok(self
            .residency
            .last_read(slot)?
            .max(self.residency.last_read_of_evicted((model, page))))
    }

    /// The slot holding `model`'s `page`, if it is resident (loaded or loading).
    pub fn slot_of(&self, model: u32, page: u32) -> Option<u32> {
        self.residency.slot_of((model, page))
    }

    /// Drops whatever page `slot` holds (the slot's memory is reused by the next load into it).
    /// Its page-table entry is left as it is: no step reads a page that is not resident, and
    /// the page's next load rewrites the entry.
    pub fn evict(&mut self, slot: u32) -> Result<()> {
        let t0 = Instant::now();
        let res = self.evict_slot(slot);
        self.stats.host.loads += t0.elapsed();
        res
    }

    fn evict_slot(&mut self, slot: u32) -> Result<()> {
        self.check()?;
        let after = self.residency.last_read(slot)?;
        if let Some(id) = self.residency.evict(slot)? {
            self.stats.evictions += 1;
            self.journal.evicted(id.0, id.1, slot, after);
        }
        Ok(())
    }

    /// Starts loading `model`'s `page` into `slot` (evicting what it holds). Returns at once;
    /// the copy waits on the GPU for the last step that read the slot's old page.
    pub fn load(&mut self, model: u32, page: u32, slot: u32) -> Result<LoadTicket> {
        let t0 = Instant::now();
        let res = self.load_page(model, page, slot);
        self.stats.host.loads += t0.elapsed();
        res
    }

    fn load_page(&mut self, model: u32, page: u32, slot: u32) -> Result<LoadTicket> {
        self.check()?;
        self.check_page(model, page)?;
        if let Some(other) = self.residency.slot_of((model, page)) {
            return Err(VkError::Stream(format!(
                "model {model} page {page} is already resident in slot {other}"
            )));
        }
        // The copy overwrites the slot after its old page's last reader, and the transfer queue
        // rewrites this page's table entry (with the copy) after the last step that read the
        // entry while the page was resident before.
        let wait = self.copy_would_wait_for(model, page, slot)?;
        self.evict_slot(slot)?;
        let ticket = self.next_ticket;
        if wait > self.submitted {
            // The old page's last reader is in the open batch. The transfer thread holds the
            // copy until that batch is submitted; a step that needs this load (or a later one:
            // copies land in ticket order) makes `step` submit the batch first.
            self.held_from.get_or_insert(ticket);
            if let Some(b) = self.open.as_mut() {
                if wait >= b.part.key {
                    b.part.awaited_from.get_or_insert(ticket);
                }
            }
        }
        self.residency.fill((model, page), slot, ticket)?;
        let req = LoadReq {
            ticket,
            model,
            page,
            slot,
            compute_wait: wait,
        };
        if let Some(m) = &self.mirror {
            m.want(self.bases[model as usize] + page);
        }
        let sent = match &self.feed {
            Feed::Io(tx) => tx.send(req).is_ok(),
            Feed::Mirror(tx) => tx
                .send(ReadDone {
                    req,
                    staging: Staged::Mirror,
                    ready: true,
                })
                .is_ok(),
            Feed::Closed => false,
        };
        if !sent {
            return Err(self.fail(VkError::Stream("the I/O dispatcher stopped".into())));
        }
        self.journal.load_issued(IssuedLoad {
            ticket,
            model,
            page,
            slot,
            reader: wait,
            issued_ns: self.started.elapsed().as_nanos() as f64,
        });
        self.next_ticket += 1;
        self.stats.pages_loaded += 1;
        self.stats.bytes_streamed += self.atlas.page_bytes();
        Ok(LoadTicket(ticket))
    }

    /// Records one step: maps the pages in `needs` (model, page) that are not mapped yet, then
    /// calls `record` to add the step's dispatches (the atlas is bound). Every page the step
    /// reads must be listed. Returns the step's compute value (see [`Self::wait_step`]).
    pub fn step<F>(&mut self, needs: &[(u32, u32)], record: F) -> Result<u64>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        let t0 = Instant::now();
        let before = self.stats.host;
        let res = self.record_step(needs, record);
        // The step's own part: what recording and submitting took is counted there.
        let inner = (self.stats.host.recording - before.recording)
            + (self.stats.host.submitting - before.submitting);
        self.stats.host.steps += t0.elapsed().saturating_sub(inner);
        res
    }

    fn record_step<F>(&mut self, needs: &[(u32, u32)], record: F) -> Result<u64>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        self.check()?;
        let mut slots = Vec::with_capacity(needs.len());
        let mut wait = 0;
        let mut newest = None;
        for &(m, p) in needs {
            self.check_page(m, p)?;
            let Some(n) = self.residency.need((m, p)) else {
                return Err(self.fail(VkError::Stream(format!(
                    "step {} reads model {m} page {p}, which is not resident (load it first)",
                    self.stats.steps
                ))));
            };
            slots.push(n.slot);
            if n.ticket > wait {
                newest = Some((m, p));
            }
            wait = wait.max(n.ticket);
        }
        if self.held_from.is_some_and(|t| wait >= t) && !self.device.has_dedicated_transfer_queue()
        {
            // The step needs a copy that waits for a step of the open batch. On one queue the
            // copy must be submitted before the batch that needs it, and after the one it
            // waits for: submit the batch. With a transfer queue of its own, a new part of
            // the batch waits for the copy instead (`cut_part_before`); the transfer thread
            // submits the copy once the whole batch is submitted.
            if self.open.is_some() {
                self.forced_boundary(newest, wait, self.held_from, "batch");
            }
            self.flush()?;
        }
        let awaited = self.open.as_ref().and_then(|b| b.part.awaited_from);
        if self.cut_part_before(wait)? {
            self.forced_boundary(newest, wait, awaited, "part");
        }
        let value = self.next_value;
        let label = self.label;
        let mut recording = Duration::ZERO;
        let mut emitting = Duration::ZERO;
        let res = self.batch().and_then(|b| {
            let t0 = Instant::now();
            let e0 = b.rec.emit_time();
            let recorded = record(&mut b.rec);
            recording = t0.elapsed();
            emitting = b.rec.emit_time().saturating_sub(e0);
            recorded?;
            let p = &mut b.part;
            p.wait = p.wait.max(wait);
            p.last = value;
            p.steps += 1;
            match p.models.last_mut() {
                Some((m, n)) if *m == label => *n += 1,
                _ => p.models.push((label, 1)),
            }
            b.steps += 1;
            Ok(b.steps)
        });
        self.stats.host.recording += recording;
        self.stats.host.emitting += emitting;
        let steps = res.map_err(|e| self.fail(e))?;
        self.next_value += 1;
        for s in slots {
            self.residency.mark_read(s, value);
        }
        self.stats.steps += 1;
        if steps >= self.config.steps_per_batch {
            self.flush()?;
        }
        Ok(value)
    }

    /// Records commands that are not a step (a run's input copies) into the open batch: they
    /// run before the steps recorded after them and read no weight page.
    pub fn record<F>(&mut self, record: F) -> Result<()>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        self.check()?;
        let t0 = Instant::now();
        let res = self.batch().and_then(|b| record(&mut b.rec));
        self.stats.host.recording += t0.elapsed();
        res.map_err(|e| self.fail(e))
    }

    /// Records commands that are not a step (a run's output copies) after every step so far
    /// and submits them; returns the compute value that signals their end (for
    /// [`Self::wait_step`]).
    pub fn record_and_submit<F>(&mut self, record: F) -> Result<u64>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        self.record(record)?;
        self.flush()?;
        Ok(self.submitted)
    }

    /// Submits the open compute batch (no CPU wait).
    pub fn flush(&mut self) -> Result<()> {
        let Some(b) = self.open.take() else {
            return Ok(());
        };
        let t0 = Instant::now();
        let res = self.submit_batch(b);
        self.stats.host.submitting += t0.elapsed();
        res
    }

    fn submit_batch(&mut self, mut b: Batch) -> Result<()> {
        if self.shared.failed() {
            return Err(self.shared.refused());
        }
        if b.part.last == 0 {
            // A part of page-table updates only still signals, to keep values in order.
            b.part.last = self.next_value;
            self.next_value += 1;
        }
        if let Some(t) = self.timing.as_mut() {
            t.end(b.rec.command_buffer(), b.part.pair);
        }
        let parts: Vec<Part> = b.cut.drain(..).chain([b.part]).collect();
        if !self.device.has_dedicated_transfer_queue() {
            // One queue runs in submission order: the copies this batch waits for must be
            // submitted first (a CPU wait for the page reads, not for the GPU).
            let wait = parts.iter().map(|p| p.wait).max().unwrap_or(0);
            self.shared.wait_transfer_submitted(wait);
            if self.shared.failed() {
                return Err(self.shared.refused());
            }
        }
        let last = parts.last().map_or(0, |p| p.last);
        let waits = self.part_waits(parts.last().map_or(0, |p| p.wait));
        let signals = [SemaphoreSignal {
            semaphore: self.compute_sem.clone(),
            value: last,
        }];
        let submitted_at = self.started.elapsed().as_nanos() as f64;
        let sub = b.rec.submit(&waits, &signals).map_err(|e| self.fail(e))?;
        self.submitted = last;
        self.held_from = None;
        let ends: Vec<u64> = parts.iter().map(|p| p.last).collect();
        self.shared.set_compute_submitted(&ends);
        for p in parts {
            self.journal.batch_submitted(BatchInfo {
                key: p.key,
                last: p.last,
                wait: p.wait,
                submitted_ns: submitted_at,
                models: p.models,
                timed: p.pair.is_some(),
            });
        }
        self.inflight.push_back((last, sub));
        self.stats.compute_submits += 1;
        self.stats.compute_parts += ends.len() as u64;
        self.retire()?;
        self.keep_host_lead()
    }

    /// Waits for the oldest compute submissions until at most `StreamConfig::host_lead` are in
    /// flight (nothing without a limit).
    fn keep_host_lead(&mut self) -> Result<()> {
        let Some(lead) = self.config.host_lead else {
            return Ok(());
        };
        while self.inflight.len() > lead.max(1) as usize {
            let Some(&(last, _)) = self.inflight.front() else {
                break;
            };
            self.stats.host_lead_waits += 1;
            self.wait_step(last)?;
            if self.inflight.front().is_some_and(|(l, _)| *l == last) {
                if let Some((_, sub)) = self.inflight.pop_front() {
                    sub.wait().map_err(|e| self.fail(e))?;
                }
            }
        }
        Ok(())
    }

    /// Releases finished compute submissions and brings the journal up to date
    /// (non-blocking).
    fn retire(&mut self) -> Result<()> {
        let done = self.compute_sem.value().ok();
        while let Some((last, sub)) = self.inflight.front() {
            // A submission whose last value has not signalled is still running: its fence is
            // not asked (on the H200 each fence query is a `poll` system call).
            let running = done.is_some_and(|d| *last > d);
            if running || !sub.is_complete().map_err(|e| self.fail(e))? {
                break;
            }
            self.inflight.pop_front();
        }
        self.journal_update(done.unwrap_or(0), false);
        Ok(())
    }

    /// Feeds the journal what finished up to compute value `done`.
    fn journal_update(&mut self, done: u64, final_pass: bool) {
        let now = self.started.elapsed().as_nanos() as f64;
        if let Some(t) = self.timing.as_mut() {
            t.harvest(done);
            self.journal.compute_spans(std::mem::take(&mut t.spans));
        }
        let (transfers, through) = self.shared.take_transfers();
        self.journal.transfers_done(transfers, through, now);
        self.journal.resolve(done, now, final_pass);
        let t = self.journal.totals();
        let d = |s: Option<f64>| s.map(Duration::from_secs_f64);
        self.stats.transfer_busy = d(t.transfer_busy_s);
        self.stats.transfer_timed_pages = t.transfer_timed_pages;
        self.stats.compute_busy = d(t.compute_busy_s);
        self.stats.compute_stall = d(t.compute_stall_s);
    }

    /// Labels the steps recorded from now on as model `model`'s (for the journal's compute
    /// events; `None` = unlabelled).
    pub fn label_steps(&mut self, model: Option<u32>) {
        self.label = model;
    }

    /// Brings the live counters and the event log up to what the GPU has finished (without
    /// waiting for anything).
    pub fn refresh(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        self.retire()
    }

    /// Takes the events logged since the last call (oldest first within each kind; see
    /// [`StreamEvent`]) and how many older ones the bounded log dropped meanwhile.
    pub fn take_events(&mut self) -> (Vec<StreamEvent>, u64) {
        self.journal.take_events()
    }

    /// Seconds since the engine started: the clock of [`StreamEvent`]s.
    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    /// Blocks until step `value` has finished on the GPU (submits it first if needed), e.g.
    /// before reading back an output the step wrote.
    pub fn wait_step(&mut self, value: u64) -> Result<()> {
        self.check()?;
        if value > self.submitted {
            self.flush()?;
        }
        // A GPU that makes no progress at all on either queue for this long is stuck (a wait
        // cycle between the queues, or a lost device that does not say so): fail the run with
        // the values involved instead of hanging the caller.
        let mut last = (
            self.compute_sem.value().unwrap_or(0),
            self.transfer_sem.value().unwrap_or(0),
        );
        let mut idle_waits = 0u32;
        while !self
            .compute_sem
            .wait(value, Duration::from_secs(5).as_nanos() as u64)
            .map_err(|e| self.fail(e))?
        {
            let now = (
                self.compute_sem.value().unwrap_or(0),
                self.transfer_sem.value().unwrap_or(0),
            );
            idle_waits = if now == last { idle_waits + 1 } else { 0 };
            last = now;
            log::warn!(
                "stream: still waiting for step value {value} (compute at {}, transfer at {})",
                now.0,
                now.1
            );
            if idle_waits >= STUCK_WAITS {
                let e = VkError::Stream(format!(
                    "the GPU made no progress for {} s: waiting for compute value {value}, compute \
                     at {}, transfer at {} of {} submitted",
                    STUCK_WAITS * 5,
                    now.0,
                    now.1,
                    self.shared.transfer_submitted()
                ));
                return Err(self.fail(e));
            }
        }
        // A run that failed while this wait went on signalled its remaining loads without
        // copying them (so that no GPU wait hangs): the steps waited for may have read pages
        // that never arrived, so their results are not handed out.
        self.check()?;
        self.retire()
    }

    /// Whether an I/O or device error has stopped the engine (every later call fails).
    pub fn failed(&self) -> bool {
        self.shared.failed()
    }

    /// The counters so far (loads, bytes, evictions, steps, submits); GPU times are only
    /// known at [`Self::finish`]. The host mirror's fill times are read now: while the fill
    /// still runs they are its times so far.
    pub fn counters(&self) -> StreamStats {
        let mut stats = self.stats.clone();
        self.mirror_times(&mut stats);
        stats.reader_submit_wait =
            Duration::from_nanos(Shared::get(&self.shared.reader_submit_wait_ns));
        stats
    }

    /// Puts the host mirror's fill times (so far) into `stats`.
    fn mirror_times(&self, stats: &mut StreamStats) {
        if let Some(m) = &self.mirror {
            stats.read_time = m.fill_read();
            stats.mirror_fill = m.fill_wall();
            stats.mirror_fill_behind = m.fill_after(self.started);
        }
    }

    /// Ends the run: submits what is open, waits for every load and step, joins the threads and
    /// returns the statistics, or the first error of the run.
    pub fn finish(mut self) -> Result<StreamStats> {
        self.shutdown()?;
        Ok(self.stats.clone())
    }

    fn shutdown(&mut self) -> Result<()> {
        if self.finished {
            return Ok(());
        }
        let flushed = if self.shared.failed() {
            // Nothing of a failed run's open batch is needed; dropping it frees it unsubmitted.
            self.open = None;
            Ok(())
        } else {
            self.flush()
        };
        self.finished = true;
        // Closing the request channel ends the dispatcher, then the I/O threads, then the
        // transfer thread (after it has signalled every ticket).
        self.feed = Feed::Closed;
        for h in self.io_threads.drain(..) {
            if h.join().is_err() {
                self.shared
                    .fail(VkError::Stream("an I/O thread panicked".into()));
            }
        }
        if let Some(Err(_)) = self.transfer_thread.take().map(|h| h.join()) {
            self.shared
                .fail(VkError::Stream("the transfer thread panicked".into()));
        }
        // No copy is left to wait for a page: the fill stops after the pages being read (it
        // ended long before on a run that outlived it).
        if let Some(m) = &self.mirror {
            m.stop();
        }
        while let Some((_, sub)) = self.inflight.pop_front() {
            if let Err(e) = sub.wait() {
                self.shared.fail(e);
            }
        }
        self.journal_update(u64::MAX, true);
        self.timing = None;
        self.stats.transfer_submits = Shared::get(&self.shared.transfer_submits);
        let mut stats = std::mem::take(&mut self.stats);
        self.mirror_times(&mut stats);
        self.stats = stats;
        self.stats.read_time += Duration::from_nanos(Shared::get(&self.shared.read_ns));
        self.stats.staging_wait_time =
            Duration::from_nanos(Shared::get(&self.shared.staging_wait_ns));
        self.stats.reader_submit_wait =
            Duration::from_nanos(Shared::get(&self.shared.reader_submit_wait_ns));
        self.stats.wall = self.started.elapsed();
        match self.shared.take_error() {
            Some(e) => Err(e),
            None => flushed,
        }
    }
}

impl Drop for StreamEngine {
    fn drop(&mut self) {
        // A dropped run needs no more pages: stop the mirror's fill first, so the copies still
        // queued fail at once (their pages not read) instead of waiting for the disk.
        if let (false, Some(m)) = (self.finished, &self.mirror) {
            m.stop();
        }
        if let Err(e) = self.shutdown() {
            log::warn!("stream engine dropped after an error: {e}");
        }
    }
}
