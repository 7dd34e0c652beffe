//! Commands recorded once and emitted again into later command buffers ([`RecordedCommands`]):
//! a streamed model's step records the same dispatches on every run (its weights are read
//! through the page table, its activations sit in the same arena), so recording them anew per
//! run (checking arguments, writing descriptor sets, tracking resources) is pure host cost. A
//! capture keeps the commands as data ([`super::command::Command`]) with their descriptor sets,
//! which live in a [`CommandCache`]'s pools; emitting them again is a few `vkCmd*` calls each.
//!
//! Kept as data, not as a secondary command buffer: on the H200 (session 22, `texstream bench
//! commands`) executing a secondary added 1.45 µs of GPU time to each, more than a small
//! dispatch's own 2.8 µs, where data emitted into the primary costs the GPU nothing more.
//!
//! A recording holds no image layout transition. An arena image is discarded before each run
//! (another model shares its memory), so its transition from UNDEFINED must run again each
//! time: the recording lists the images it touches, and the recorder that emits it transitions
//! those not yet initialized first (where the step's own first use would have).

use foldhash::HashSet;
use std::sync::{Arc, Mutex};

use super::command::Command;
use super::hazard::Hazards;
use super::step_buffers::StepBuffers;
use super::{Keep, Recorder};
use crate::atlas::WeightAtlas;
use crate::device::Device;
use crate::error::{Result, VkError};
use crate::resource::Image;

/// What a recorder in capture mode collects instead of emitting.
#[derive(Default)]
pub(super) struct Capture {
    commands: Vec<Command>,
    reads: HashSet<u64>,
    writes: HashSet<u64>,
    images: Vec<Image>,
    image_ids: HashSet<u64>,
}

impl Capture {
    pub(super) fn note_command(&mut self, c: Command) {
        self.commands.push(c);
    }

    pub(super) fn note_access(&mut self, reads: &[u64], writes: &[u64]) {
        self.reads.extend(reads.iter().copied());
        self.writes.extend(writes.iter().copied());
    }

    pub(super) fn note_image(&mut self, image: &Image) {
        if self.image_ids.insert(image.id()) {
            self.images.push(image.clone());
        }
    }
}

/// The descriptor pools of a set of [`RecordedCommands`]; freed when the cache and every
/// recording from it (and so every submission that emitted one, which holds it) are gone.
struct CacheInner {
    device: Device,
    /// Moved into a capturing recorder while it records, so that one small recording does not
    /// take a pool of its own.
    desc_pools: Mutex<Vec<ash::vk::DescriptorPool>>,
}

impl Drop for CacheInner {
    fn drop(&mut self) {
        let pools = std::mem::take(&mut *self.desc_pools.lock().unwrap_or_else(|e| e.into_inner()));
        // SAFETY: every recording (and every submission that emitted one) is gone, so nothing
        // uses the descriptor sets.
        unsafe {
            self.device
                .inner
                .recycler
                .give_back(self.device.raw(), 0, None, pools, None)
        };
    }
}

/// Owns the descriptor pools of the recordings [`Recorder::capture`] makes for one user (a
/// streamed model).
#[derive(Clone)]
pub struct CommandCache {
    inner: Arc<CacheInner>,
}

impl CommandCache {
    pub fn new(device: &Device) -> CommandCache {
        CommandCache {
            inner: Arc::new(CacheInner {
                device: device.clone(),
                desc_pools: Mutex::new(Vec::new()),
            }),
        }
    }
}

/// Commands recorded once, emitted by [`Recorder::execute_recorded`] any number of times into
/// any recorder of a compute-capable queue, also while an earlier emission is still running.
pub struct RecordedCommands {
    _cache: Arc<CacheInner>,
    commands: Vec<Command>,
    _keep: Vec<Keep>,
    reads: Vec<u64>,
    writes: Vec<u64>,
    images: Vec<Image>,
    /// The weight atlas its dispatches bound (its descriptor sets name that atlas).
    weights: Option<WeightAtlas>,
    dispatches: u32,
    barriers: u32,
    /// The commands in command buffers of their own, made on first use: plain, and opening
    /// with a full barrier.
    pub(super) buffers: StepBuffers,
}

impl RecordedCommands {
    pub fn dispatch_count(&self) -> u32 {
        self.dispatches
    }

    pub(super) fn commands(&self) -> &[Command] {
        &self.commands
    }
    pub(super) fn reads(&self) -> &[u64] {
        &self.reads
    }
    pub(super) fn writes(&self) -> &[u64] {
        &self.writes
    }
    pub(super) fn barrier_count(&self) -> u32 {
        self.barriers
    }
}

impl Recorder {
    /// Records what `record` records, emits it here, and returns it for
    /// [`Recorder::execute_recorded`] later. On an error nothing is emitted.
    pub fn record_reusable<F>(
        &mut self,
        cache: &CommandCache,
        record: F,
    ) -> Result<Arc<RecordedCommands>>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        let commands = self.capture(cache, record)?;
        self.execute_recorded(&commands)?;
        Ok(commands)
    }

    /// Records what `record` records without emitting it anywhere. The weight atlas this
    /// recorder binds is bound there too; its descriptor sets come from `cache`'s pools.
    pub fn capture<F>(&self, cache: &CommandCache, record: F) -> Result<Arc<RecordedCommands>>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        let inner = &cache.inner;
        let desc_pools =
            std::mem::take(&mut *inner.desc_pools.lock().unwrap_or_else(|e| e.into_inner()));
        let mut rec = Recorder {
            device: self.device.clone(),
            queue: self.queue,
            usage: self.usage,
            // No command buffer: a capturing recorder emits nothing.
            pool: ash::vk::CommandPool::null(),
            cmd: ash::vk::CommandBuffer::null(),
            spare: Vec::new(),
            parts: Vec::new(),
            segments: Vec::new(),
            ended: Vec::new(),
            dirty: false,
            owed_barrier: false,
            step_buffers: false,
            desc_pools,
            keep: Vec::new(),
            hazards: Hazards::default(),
            initialized: Vec::new(),
            init_ids: Default::default(),
            weights: self.weights.clone(),
            reset_pools: Default::default(),
            dispatches: 0,
            barriers: 0,
            emit_time: std::time::Duration::ZERO,
            capture: Some(Capture::default()),
        };
        let recorded = record(&mut rec);
        // The descriptor pools go back to the cache whatever happened: sets of earlier
        // recordings live in them.
        *inner.desc_pools.lock().unwrap_or_else(|e| e.into_inner()) =
            std::mem::take(&mut rec.desc_pools);
        recorded?;
        let capture = rec.capture.take().unwrap_or_default();
        Ok(Arc::new(RecordedCommands {
            _cache: inner.clone(),
            commands: capture.commands,
            _keep: std::mem::take(&mut rec.keep),
            reads: capture.reads.into_iter().collect(),
            writes: capture.writes.into_iter().collect(),
            images: capture.images,
            weights: rec.weights.clone(),
            dispatches: rec.dispatches,
            barriers: rec.barriers,
            buffers: StepBuffers::default(),
        }))
    }

    /// Emits `commands` here: the images they use that are not initialized are transitioned
    /// first, and a barrier precedes them where their reads and writes conflict with work
    /// recorded before (their own barriers order them among themselves).
    pub fn execute_recorded(&mut self, commands: &Arc<RecordedCommands>) -> Result<()> {
        if self.capture.is_some() {
            return Err(VkError::Other(
                "recorded commands emitted inside a capture".into(),
            ));
        }
        if self.on_transfer_only_queue() {
            return Err(VkError::Other(
                "recorded commands emitted on the transfer queue".into(),
            ));
        }
        if let Some(w) = &commands.weights {
            if self.weights.as_ref().map(|a| a.image().id()) != Some(w.image().id()) {
                return Err(VkError::Other(
                    "recorded commands read another weight atlas than the one bound".into(),
                ));
            }
        }
        for image in &commands.images {
            self.ensure_initialized(image);
        }
        if self.step_buffers && self.add_step_buffer(commands)? {
            return Ok(());
        }
        self.access(&commands.reads, &commands.writes);
        let cmd = self.own_cmd();
        let dev = self.device.raw();
        let t0 = std::time::Instant::now();
        for c in &commands.commands {
            // SAFETY: recording state; every handle is kept alive by `commands`, held below
            // until this submission completes.
            unsafe { c.emit(dev, cmd) };
        }
        self.emit_time += t0.elapsed();
        self.keep.push(Keep::Recorded(commands.clone()));
        self.dispatches += commands.dispatches;
        self.barriers += commands.barriers;
        Ok(())
    }
}
