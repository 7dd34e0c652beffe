//! Command recorder: many dispatches and copies in one command buffer, barriers inserted only
//! where a hazard exists, one submit with timeline-semaphore waits/signals, one fence per submit.
//!
//! One file per concern, as in wgpu-hal's command encoder:
//! - `hazard.rs`: which resources were read and written since the last barrier, barriers, and
//!   the UNDEFINED → GENERAL transition of an image's first use;
//! - `descriptors.rs`: descriptor pools (recycled) and descriptor-set writes;
//! - `variant.rs`: which pipeline variant a dispatch's tensors and bound atlas need;
//! - `dispatch.rs`: compute dispatches and their arguments ([`Arg`]);
//! - `copy.rs`: buffer, image and tensor copies, in-stream buffer updates and clears;
//! - `weights.rs`: binding the weight atlas, page uploads and page-table updates;
//! - `timestamp.rs`: timestamp writes;
//! - `submit.rs`: ending, submitting, and the in-flight [`Submission`];
//! - `replay.rs`: a command buffer recorded once and submitted again per run ([`Replay`]);
//! - `command.rs`: a command as data, emitted at once or kept by a capture;
//! - `reuse.rs`: commands recorded once and emitted again into later command buffers
//!   ([`RecordedCommands`], a streamed model's steps);
//! - `step_buffers.rs`: such commands recorded once more into command buffers of their own,
//!   submitted between the recorder's own instead of emitted into them.

mod command;
mod copy;
mod descriptors;
mod dispatch;
mod hazard;
mod replay;
mod reuse;
mod step_buffers;
mod submit;
mod timestamp;
mod variant;
mod weights;

pub use dispatch::Arg;
pub use hazard::Access;
pub use replay::Replay;
pub use reuse::{CommandCache, RecordedCommands};
pub use submit::Submission;

use foldhash::{HashSet, HashSetExt};
use std::sync::Arc;

use ash::vk;

use crate::atlas::WeightAtlas;
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkResultExt};
use crate::pipeline::Pipeline;
use crate::resource::{Buffer, Image};
use crate::sync::TimelineSemaphore;
use crate::tensor::{Tensor, TensorStorage};
use crate::timestamps::TimestampQueries;
use hazard::Hazards;

/// A resource the recorded commands use, held until the submission completes.
enum Keep {
    Image(#[allow(dead_code)] Image),
    Buffer(#[allow(dead_code)] Buffer),
    Pipeline(#[allow(dead_code)] Arc<Pipeline>),
    Atlas(#[allow(dead_code)] WeightAtlas),
    Semaphore(#[allow(dead_code)] TimelineSemaphore),
    Timestamps(#[allow(dead_code)] TimestampQueries),
    Recorded(#[allow(dead_code)] Arc<RecordedCommands>),
}

/// Records work for one queue. Submit with [`Recorder::submit`] (returns a [`Submission`]) or
/// [`Recorder::submit_and_wait`]. Resources used are kept alive until the submission completes.
pub struct Recorder {
    device: Device,
    queue: QueueKind,
    usage: vk::CommandBufferUsageFlags,
    pool: vk::CommandPool,
    /// The command buffer being recorded.
    cmd: vk::CommandBuffer,
    /// Command buffers of the pool not in use.
    spare: Vec<vk::CommandBuffer>,
    /// Parts ended by [`Recorder::cut`], each submitted with its own waits and signals before
    /// the current one.
    parts: Vec<submit::Part>,
    /// The current part's command buffers before `cmd`, in submission order: this recorder's
    /// own, ended, and recorded steps' buffers ([`Recorder::set_step_buffers`]).
    segments: Vec<vk::CommandBuffer>,
    /// This pool's command buffers ended before `cmd` (the pool gets them back).
    ended: Vec<vk::CommandBuffer>,
    /// Whether `cmd` holds any command (an empty one is not submitted).
    dirty: bool,
    /// A full barrier owed before the next command ([`Recorder::cut`]): emitted with it, or
    /// taken over by a recorded step's buffer that opens with one.
    owed_barrier: bool,
    /// Recorded steps go into the submission as command buffers of their own.
    step_buffers: bool,
    desc_pools: Vec<vk::DescriptorPool>,
    keep: Vec<Keep>,
    hazards: Hazards,
    /// Images transitioned UNDEFINED -> GENERAL in this recorder.
    initialized: Vec<Image>,
    init_ids: HashSet<u64>,
    weights: Option<WeightAtlas>,
    /// Timestamp pools reset in this command buffer.
    reset_pools: HashSet<u64>,
    dispatches: u32,
    barriers: u32,
    /// Time spent in the driver calls that emit recorded steps' commands again
    /// ([`Recorder::execute_recorded`]): what the driver costs, apart from this recorder's own
    /// hazard tracking.
    emit_time: std::time::Duration,
    /// Set while recording reusable commands ([`Recorder::record_reusable`]): accesses and
    /// images are collected there, and no image is transitioned.
    capture: Option<reuse::Capture>,
}

impl Recorder {
    pub fn new(device: &Device, queue: QueueKind) -> Result<Recorder> {
        Self::begin(device, queue, vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT)
    }

    /// A recorder whose commands become a [`Replay`] ([`Recorder::finish_replay`]): submitted
    /// once per run instead of recorded again.
    pub fn new_replay(device: &Device, queue: QueueKind) -> Result<Recorder> {
        Self::begin(device, queue, vk::CommandBufferUsageFlags::empty())
    }

    fn begin(
        device: &Device,
        queue: QueueKind,
        usage: vk::CommandBufferUsageFlags,
    ) -> Result<Recorder> {
        let dev = device.raw();
        let family = device.queue(queue).family;
        // SAFETY: valid create info.
        let (pool, spare) = match device.inner.recycler.take_commands(family) {
            Some(c) => c,
            None => unsafe {
                device.inner.recycler.count_created_pool();
                let pool = dev
                    .create_command_pool(
                        &vk::CommandPoolCreateInfo::default()
                            .queue_family_index(family)
                            .flags(vk::CommandPoolCreateFlags::TRANSIENT),
                        None,
                    )
                    .vk("vkCreateCommandPool")?;
                (pool, Vec::new())
            },
        };
        let mut rec = Recorder {
            device: device.clone(),
            queue,
            usage,
            pool,
            cmd: vk::CommandBuffer::null(),
            spare,
            parts: Vec::new(),
            segments: Vec::new(),
            ended: Vec::new(),
            dirty: false,
            owed_barrier: false,
            step_buffers: false,
            desc_pools: Vec::new(),
            keep: Vec::new(),
            hazards: Hazards::default(),
            initialized: Vec::new(),
            init_ids: HashSet::new(),
            weights: None,
            reset_pools: HashSet::new(),
            dispatches: 0,
            barriers: 0,
            emit_time: std::time::Duration::ZERO,
            capture: None,
        };
        // On error the recorder's drop gives the pool back.
        rec.cmd = rec.begin_command_buffer()?;
        Ok(rec)
    }

    /// Takes a spare command buffer of the pool (or allocates one) and begins it.
    fn begin_command_buffer(&mut self) -> Result<vk::CommandBuffer> {
        let dev = self.device.raw();
        let cmd = match self.spare.pop() {
            Some(c) => c,
            // SAFETY: valid allocate info; the pool is this recorder's.
            None => unsafe {
                dev.allocate_command_buffers(
                    &vk::CommandBufferAllocateInfo::default()
                        .command_pool(self.pool)
                        .level(vk::CommandBufferLevel::PRIMARY)
                        .command_buffer_count(1),
                )
            }
            .vk("vkAllocateCommandBuffers")?[0],
        };
        // SAFETY: the buffer is in the initial state (fresh, or its pool was reset).
        let begun = unsafe {
            dev.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default().flags(self.usage),
            )
        };
        if let Err(e) = begun {
            self.spare.push(cmd);
            return Err(e).vk("vkBeginCommandBuffer");
        }
        Ok(cmd)
    }

    /// Every command buffer of the pool (recorded parts, the current one, spares), for giving
    /// the pool back.
    fn take_command_buffers(&mut self) -> Vec<vk::CommandBuffer> {
        self.parts.clear();
        self.segments.clear();
        let mut all = std::mem::take(&mut self.ended);
        if self.cmd != vk::CommandBuffer::null() {
            all.push(self.cmd);
            self.cmd = vk::CommandBuffer::null();
        }
        all.append(&mut self.spare);
        all
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
    /// The raw command buffer (for kernels needing commands the recorder does not wrap), with
    /// any barrier the recorder owes already in it.
    pub fn command_buffer(&mut self) -> vk::CommandBuffer {
        self.own_cmd()
    }

    /// The command buffer, about to receive a command: pays an owed barrier first.
    fn own_cmd(&mut self) -> vk::CommandBuffer {
        if self.capture.is_none() {
            if self.owed_barrier {
                self.owed_barrier = false;
                self.barrier();
            }
            self.dirty = true;
        }
        self.cmd
    }
    pub fn dispatch_count(&self) -> u32 {
        self.dispatches
    }
    pub fn barrier_count(&self) -> u32 {
        self.barriers
    }
    /// Time so far in the driver calls that emitted recorded steps' commands again.
    pub fn emit_time(&self) -> std::time::Duration {
        self.emit_time
    }

    /// Transitions `image` to GENERAL now if no recorder has yet; for images that are later
    /// written by raw commands on another queue (the stream engine's transfer copies).
    pub fn init_image(&mut self, image: &Image) {
        self.keep_image(image);
    }

    /// Whether this recorder records for a transfer-only queue (no shader stages there).
    fn on_transfer_only_queue(&self) -> bool {
        self.queue == QueueKind::Transfer && self.device.has_dedicated_transfer_queue()
    }

    /// Keeps a tensor's storage alive (initializing an image on first use); returns its id.
    fn keep_tensor(&mut self, t: &Tensor) -> u64 {
        match t.storage() {
            TensorStorage::Image(i) => self.keep_image(i),
            TensorStorage::Buffer(b) => self.keep_buffer(b),
        }
    }

    /// Emits `c` into the command buffer, or keeps it while capturing.
    fn emit(&mut self, c: command::Command) {
        if let Some(capture) = &mut self.capture {
            capture.note_command(c);
            return;
        }
        let cmd = self.own_cmd();
        // SAFETY: recording state; the caller keeps every handle `c` names alive.
        unsafe { c.emit(self.device.raw(), cmd) }
    }

    fn keep_image(&mut self, i: &Image) -> u64 {
        self.ensure_initialized(i);
        self.keep.push(Keep::Image(i.clone()));
        i.id()
    }

    fn keep_buffer(&mut self, b: &Buffer) -> u64 {
        self.keep.push(Keep::Buffer(b.clone()));
        b.id()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Only reached un-submitted (or after submit moved the pool out).
        let cmds = self.take_command_buffers();
        let commands = (self.pool != vk::CommandPool::null()).then_some((self.pool, cmds));
        let family = self.device.queue(self.queue).family;
        // SAFETY: the command buffer was never submitted.
        unsafe {
            self.device.inner.recycler.give_back(
                self.device.raw(),
                family,
                commands,
                std::mem::take(&mut self.desc_pools),
                None,
            );
        }
    }
}
