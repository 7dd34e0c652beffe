//! Commands recorded once into a secondary command buffer and executed again from any later
//! primary one ([`RecordedCommands`]): a streamed model's step records the same dispatches on
//! every run (its weights are read through the page table, its activations sit in the same
//! arena), so recording them again per run is pure host cost. A [`CommandCache`] owns the
//! command pool and descriptor pools its recordings come from.
//!
//! A recording holds no image layout transition. An arena image is discarded before each run
//! (another model shares its memory), so its transition from UNDEFINED must run again each
//! time: the recording lists the images it touches, and the primary recorder transitions the
//! ones not yet initialized just before executing it (where the step's own first dispatch
//! would have).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use ash::vk;

use super::hazard::Hazards;
use super::{Keep, Recorder};
use crate::atlas::WeightAtlas;
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError, VkResultExt};
use crate::resource::Image;

/// What a recorder in capture mode collects beside its commands.
#[derive(Default)]
pub(super) struct Capture {
    reads: HashSet<u64>,
    writes: HashSet<u64>,
    images: Vec<Image>,
    image_ids: HashSet<u64>,
}

impl Capture {
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

/// The pools a set of [`RecordedCommands`] are allocated from; freed when the cache and every
/// recording from it (and so every submission executing one) are gone.
struct CacheInner {
    device: Device,
    family: u32,
    pool: vk::CommandPool,
    /// Descriptor pools the recordings' sets come from (moved into a capturing recorder while
    /// it records, so that one step does not take a pool of its own).
    desc_pools: Mutex<Vec<vk::DescriptorPool>>,
}

impl Drop for CacheInner {
    fn drop(&mut self) {
        let dev = self.device.raw();
        let pools = std::mem::take(&mut *self.desc_pools.lock().unwrap_or_else(|e| e.into_inner()));
        // SAFETY: every recording (and every submission that executes one, which holds it) is
        // gone, so nothing uses the command buffers or descriptor sets.
        unsafe {
            dev.destroy_command_pool(self.pool, None);
            self.device
                .inner
                .recycler
                .give_back(dev, self.family, None, pools, None);
        }
    }
}

/// Owns the pools of the recordings [`Recorder::record_reusable`] makes for one user (a
/// streamed model). Record from one thread at a time.
#[derive(Clone)]
pub struct CommandCache {
    inner: Arc<CacheInner>,
}

impl CommandCache {
    /// A cache for recordings executed on `queue`'s family.
    pub fn new(device: &Device, queue: QueueKind) -> Result<CommandCache> {
        let family = device.queue(queue).family;
        // SAFETY: valid create info.
        let pool = unsafe {
            device.raw().create_command_pool(
                &vk::CommandPoolCreateInfo::default().queue_family_index(family),
                None,
            )
        }
        .vk("vkCreateCommandPool")?;
        Ok(CommandCache {
            inner: Arc::new(CacheInner {
                device: device.clone(),
                family,
                pool,
                desc_pools: Mutex::new(Vec::new()),
            }),
        })
    }
}

/// A secondary command buffer recorded once, executed by [`Recorder::execute_recorded`] any
/// number of times, also while an earlier execution is still running (simultaneous use).
pub struct RecordedCommands {
    _cache: Arc<CacheInner>,
    cmd: vk::CommandBuffer,
    _keep: Vec<Keep>,
    reads: Vec<u64>,
    writes: Vec<u64>,
    images: Vec<Image>,
    /// The weight atlas its dispatches bound (its descriptor sets name that atlas).
    weights: Option<WeightAtlas>,
    dispatches: u32,
    barriers: u32,
}

impl RecordedCommands {
    pub fn dispatch_count(&self) -> u32 {
        self.dispatches
    }
}

/// How [`Recorder::capture`] records.
#[derive(Debug, Clone, Copy)]
pub struct CaptureOptions {
    /// Whether the recording may be executed again while an earlier execution of it is still
    /// pending (`SIMULTANEOUS_USE`). A streamed model's step can be: a fast model's next run is
    /// recorded while the GPU still runs the last one.
    pub simultaneous: bool,
}

impl Default for CaptureOptions {
    fn default() -> Self {
        CaptureOptions { simultaneous: true }
    }
}

impl Recorder {
    /// Records what `record` records into a new secondary command buffer from `cache`, executes
    /// it here, and returns it for [`Recorder::execute_recorded`] later. The weight atlas this
    /// recorder binds is bound there too. On an error nothing is executed.
    pub fn record_reusable<F>(
        &mut self,
        cache: &CommandCache,
        record: F,
    ) -> Result<Arc<RecordedCommands>>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        let commands = self.capture(cache, CaptureOptions::default(), record)?;
        self.execute_recorded(&commands)?;
        Ok(commands)
    }

    /// Records what `record` records into a new secondary command buffer from `cache` without
    /// executing it. The weight atlas this recorder binds is bound there too.
    pub fn capture<F>(
        &self,
        cache: &CommandCache,
        opts: CaptureOptions,
        record: F,
    ) -> Result<Arc<RecordedCommands>>
    where
        F: FnOnce(&mut Recorder) -> Result<()>,
    {
        let inner = &cache.inner;
        if inner.family != self.device.queue(self.queue).family {
            return Err(VkError::Other(
                "a command cache of another queue family".into(),
            ));
        }
        let dev = self.device.raw();
        let usage = if opts.simultaneous {
            vk::CommandBufferUsageFlags::SIMULTANEOUS_USE
        } else {
            vk::CommandBufferUsageFlags::empty()
        };
        // SAFETY (block): the cache's pool is used from this thread only (CommandCache's
        // contract); valid infos.
        let cmd = unsafe {
            let cmd = dev
                .allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(inner.pool)
                        .level(vk::CommandBufferLevel::SECONDARY)
                        .command_buffer_count(1),
                )
                .vk("vkAllocateCommandBuffers")?[0];
            let inheritance = vk::CommandBufferInheritanceInfo::default();
            dev.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(usage)
                    .inheritance_info(&inheritance),
            )
            .vk("vkBeginCommandBuffer")?;
            cmd
        };
        let desc_pools =
            std::mem::take(&mut *inner.desc_pools.lock().unwrap_or_else(|e| e.into_inner()));
        let mut sec = Recorder {
            device: self.device.clone(),
            queue: self.queue,
            // The pool is the cache's: never handed to the recycler.
            pool: vk::CommandPool::null(),
            cmd,
            desc_pools,
            keep: Vec::new(),
            hazards: Hazards::default(),
            initialized: Vec::new(),
            init_ids: Default::default(),
            weights: self.weights.clone(),
            reset_pools: Default::default(),
            dispatches: 0,
            barriers: 0,
            capture: Some(Capture::default()),
        };
        let recorded = record(&mut sec);
        // The descriptor pools go back to the cache whatever happened: sets of earlier
        // recordings live in them.
        *inner.desc_pools.lock().unwrap_or_else(|e| e.into_inner()) =
            std::mem::take(&mut sec.desc_pools);
        recorded?;
        // SAFETY: recording state; no render pass.
        unsafe { dev.end_command_buffer(cmd) }.vk("vkEndCommandBuffer")?;
        let capture = sec.capture.take().unwrap_or_default();
        Ok(Arc::new(RecordedCommands {
            _cache: inner.clone(),
            cmd,
            _keep: std::mem::take(&mut sec.keep),
            reads: capture.reads.into_iter().collect(),
            writes: capture.writes.into_iter().collect(),
            images: capture.images,
            weights: sec.weights.clone(),
            dispatches: sec.dispatches,
            barriers: sec.barriers,
        }))
    }

    /// Executes `commands` here: the images they use that are not initialized are transitioned
    /// first, and a barrier precedes them where their reads and writes conflict with work
    /// recorded before.
    pub fn execute_recorded(&mut self, commands: &Arc<RecordedCommands>) -> Result<()> {
        self.execute_recorded_all(std::slice::from_ref(commands))
    }

    /// Executes every recording of `all` with one `vkCmdExecuteCommands`, as
    /// [`Recorder::execute_recorded`] does one: the barrier before them covers their conflicts
    /// with earlier work, not with each other, so each must order itself against the ones
    /// before it (by beginning with [`Recorder::barrier`]) where they conflict.
    pub fn execute_recorded_all(&mut self, all: &[Arc<RecordedCommands>]) -> Result<()> {
        if self.capture.is_some() {
            return Err(VkError::Other(
                "recorded commands executed inside a recording".into(),
            ));
        }
        let bound = self.weights.as_ref().map(|a| a.image().id());
        if all.iter().any(|c| {
            c.weights
                .as_ref()
                .is_some_and(|w| Some(w.image().id()) != bound)
        }) {
            return Err(VkError::Other(
                "recorded commands read another weight atlas than the one bound".into(),
            ));
        }
        for c in all {
            for image in &c.images {
                self.ensure_initialized(image);
            }
        }
        if let [one] = all {
            self.access(&one.reads, &one.writes);
        } else {
            let reads: Vec<u64> = all.iter().flat_map(|c| c.reads.iter().copied()).collect();
            let writes: Vec<u64> = all.iter().flat_map(|c| c.writes.iter().copied()).collect();
            self.access(&reads, &writes);
        }
        let cmds: Vec<vk::CommandBuffer> = all.iter().map(|c| c.cmd).collect();
        // SAFETY: recording state; the secondaries are executable, recorded for this queue
        // family, and kept alive below until this submission completes. One recorded without
        // simultaneous use must not be pending elsewhere (the validation layer checks).
        unsafe { self.device.raw().cmd_execute_commands(self.cmd, &cmds) };
        for c in all {
            self.keep.push(Keep::Recorded(c.clone()));
            self.dispatches += c.dispatches;
            self.barriers += c.barriers;
        }
        Ok(())
    }
}
