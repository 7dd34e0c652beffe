//! Recorded steps as command buffers of their own: a [`RecordedCommands`] is recorded once
//! more into a primary command buffer (simultaneous use), and a recorder that has
//! [`Recorder::set_step_buffers`] on puts that buffer into its submission, between its own,
//! instead of emitting the commands again. Emitting costs the host the driver's `vkCmd*` work
//! for every dispatch of every run (on the H200 about 1.5 µs a dispatch, session 22); a
//! submitted buffer costs it nothing per dispatch. Each step keeps two buffers, one opening
//! with a full barrier, so the barriers fall where emission would have put them. But each
//! buffer costs the GPU (6.6 µs on an H100, session 43), so the stream engine leaves this off
//! by default.

use std::sync::{Arc, Mutex};

use ash::vk;

use super::command::Command;
use super::reuse::RecordedCommands;
use super::{Keep, Recorder};
use crate::device::Device;
use crate::error::{Result, VkError, VkResultExt};

/// One recorded step's commands in a command buffer of their own (and its pool).
struct StepBuffer {
    device: Device,
    family: u32,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
}

impl Drop for StepBuffer {
    fn drop(&mut self) {
        // SAFETY: the buffer's recording is dropped only when no submission holds it (every
        // submission that used it keeps the recording alive until it completes).
        unsafe { self.device.raw().destroy_command_pool(self.pool, None) };
    }
}

/// A recording's buffers, made on first use: `[plain, opening with a barrier]`.
#[derive(Default)]
pub(crate) struct StepBuffers {
    made: Mutex<[Option<StepBuffer>; 2]>,
}

/// Records `commands` into a buffer of their own, after `barrier` where given.
fn record_buffer(
    device: &Device,
    family: u32,
    barrier: Option<&Command>,
    commands: &[Command],
) -> Result<StepBuffer> {
    let dev = device.raw();
    // SAFETY: valid create info.
    let pool = unsafe {
        dev.create_command_pool(
            &vk::CommandPoolCreateInfo::default().queue_family_index(family),
            None,
        )
    }
    .vk("vkCreateCommandPool")?;
    // From here on the pool (and its buffer) is destroyed on every path.
    let mut buffer = StepBuffer {
        device: device.clone(),
        family,
        pool,
        cmd: vk::CommandBuffer::null(),
    };
    // SAFETY: valid allocate info; the pool is this buffer's.
    buffer.cmd = unsafe {
        dev.allocate_command_buffers(
            &vk::CommandBufferAllocateInfo::default()
                .command_pool(pool)
                .level(vk::CommandBufferLevel::PRIMARY)
                .command_buffer_count(1),
        )
    }
    .vk("vkAllocateCommandBuffers")?[0];
    // SAFETY: a fresh buffer; every handle the commands name is kept alive by their recording,
    // which owns this buffer.
    unsafe {
        dev.begin_command_buffer(
            buffer.cmd,
            &vk::CommandBufferBeginInfo::default()
                .flags(vk::CommandBufferUsageFlags::SIMULTANEOUS_USE),
        )
        .vk("vkBeginCommandBuffer")?;
        for c in barrier.into_iter().chain(commands) {
            c.emit(dev, buffer.cmd);
        }
        dev.end_command_buffer(buffer.cmd)
            .vk("vkEndCommandBuffer")?;
    }
    Ok(buffer)
}

impl StepBuffers {
    /// The buffer of `commands` for queue family `family` (opening with the full barrier
    /// `barrier` or not), recorded now if it is the first use. `None` where it was made for
    /// another family.
    fn buffer(
        &self,
        device: &Device,
        family: u32,
        barrier: Option<&Command>,
        commands: &[Command],
    ) -> Result<Option<vk::CommandBuffer>> {
        let mut made = self
            .made
            .lock()
            .map_err(|_| VkError::Other("a step buffer's lock was poisoned".into()))?;
        let slot = &mut made[barrier.is_some() as usize];
        if slot.is_none() {
            *slot = Some(record_buffer(device, family, barrier, commands)?);
        }
        Ok(slot.as_ref().filter(|b| b.family == family).map(|b| b.cmd))
    }
}

impl Recorder {
    /// Recorded steps from now on go into the submission as command buffers of their own
    /// (see the module docs) instead of being emitted into this recorder's. For recorders
    /// submitted once; a replay recorder emits them whatever this says.
    pub fn set_step_buffers(&mut self, on: bool) {
        self.step_buffers = on;
    }

    /// Puts `commands`' buffer into the current part after everything recorded so far (whose
    /// images `execute_recorded` has initialized); false where it cannot, and the caller emits
    /// the commands instead.
    pub(super) fn add_step_buffer(&mut self, commands: &Arc<RecordedCommands>) -> Result<bool> {
        if self.usage != vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT || self.capture.is_some() {
            return Ok(false);
        }
        let family = self.device.queue(self.queue).family;
        let barrier = (self.owed_barrier
            || self.hazards.conflicts(commands.reads(), commands.writes()))
        .then(|| self.full_barrier());
        let Some(cmd) =
            commands
                .buffers
                .buffer(&self.device, family, barrier.as_ref(), commands.commands())?
        else {
            return Ok(false);
        };
        if barrier.is_some() {
            self.owed_barrier = false;
            self.hazards.clear();
            self.barriers += 1;
        }
        self.hazards.note(commands.reads(), commands.writes());
        if self.dirty {
            // What this recorder holds so far runs before the step.
            let before = self.close_segment()?;
            self.segments = before;
        }
        self.segments.push(cmd);
        self.keep.push(Keep::Recorded(commands.clone()));
        self.dispatches += commands.dispatch_count();
        self.barriers += commands.barrier_count();
        Ok(true)
    }
}
