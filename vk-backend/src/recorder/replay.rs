//! A command buffer recorded once and submitted again for every run (Vulkan's answer to CUDA
//! graphs): when a model's dispatches do not change between runs, only the bytes in its
//! host-visible input buffers do, and re-recording every dispatch is pure host cost.

use ash::vk;

use super::{Keep, Recorder};
use crate::device::Device;
use crate::error::{Result, VkError, VkResultExt};

/// Recorded commands that can be submitted any number of times, one run at a time. Holds the
/// command buffer, its descriptor sets and every resource it uses.
pub struct Replay {
    device: Device,
    queue: crate::device::QueueKind,
    family: u32,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    /// The pool's other command buffers (unused), given back with it.
    spare: Vec<vk::CommandBuffer>,
    desc_pools: Vec<vk::DescriptorPool>,
    keep: Vec<Keep>,
    fence: vk::Fence,
    /// Submitted and not yet waited for (a wait that failed).
    in_flight: bool,
    dispatches: u32,
    barriers: u32,
}

impl Recorder {
    /// Ends a recorder made by [`Recorder::new_replay`] and keeps its commands for
    /// [`Replay::submit_and_wait`]. Refused when the commands take an image from UNDEFINED:
    /// replayed, that transition would discard the image's contents on every run (state a
    /// model keeps between runs among them). Run the work once through a one-time recorder
    /// first; every image it touches is then initialized.
    pub fn finish_replay(mut self) -> Result<Replay> {
        if !self.parts.is_empty() || !self.segments.is_empty() {
            return Err(VkError::Other(
                "a replayed command buffer cannot be recorded in parts".into(),
            ));
        }
        if !self.initialized.is_empty() {
            return Err(VkError::Other(format!(
                "a replayed command buffer would initialize {} images on every run (run the work once first)",
                self.initialized.len()
            )));
        }
        self.end()?;
        let dev = self.device.raw();
        // SAFETY: valid create info.
        let fence = unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) }
            .vk("vkCreateFence")?;
        let replay = Replay {
            device: self.device.clone(),
            queue: self.queue,
            family: self.device.queue(self.queue).family,
            pool: self.pool,
            cmd: std::mem::replace(&mut self.cmd, vk::CommandBuffer::null()),
            spare: std::mem::take(&mut self.spare),
            desc_pools: std::mem::take(&mut self.desc_pools),
            keep: std::mem::take(&mut self.keep),
            fence,
            in_flight: false,
            dispatches: self.dispatches,
            barriers: self.barriers,
        };
        // Ownership of the pool moved into the replay.
        self.pool = vk::CommandPool::null();
        Ok(replay)
    }
}

impl Replay {
    pub fn dispatch_count(&self) -> u32 {
        self.dispatches
    }

    /// The memory barriers between the commands (each waits for all work before it).
    pub fn barrier_count(&self) -> u32 {
        self.barriers
    }

    /// Whether every image the commands use is still initialized: an image discarded since
    /// (an arena handed to another model) needs its transition recorded again.
    pub fn is_current(&self) -> bool {
        self.keep.iter().all(|k| match k {
            Keep::Image(i) => i.is_initialized(),
            _ => true,
        })
    }

    /// Submits the commands and waits for the GPU to finish them.
    pub fn submit_and_wait(&mut self) -> Result<()> {
        if !self.is_current() {
            return Err(VkError::Other(
                "a replayed command buffer uses an image discarded since it was recorded".into(),
            ));
        }
        let dev = self.device.raw();
        let cmds = [self.cmd];
        let si = vk::SubmitInfo::default().command_buffers(&cmds);
        {
            let q = self.device.queue(self.queue).lock();
            // SAFETY: queue externally synchronized by the lock; the command buffer is
            // executable and not pending (every submit below is waited for before returning).
            unsafe { dev.queue_submit(*q, &[si], self.fence) }.vk("vkQueueSubmit")?;
        }
        self.in_flight = true;
        // SAFETY: valid fence, signaled by the submit above.
        unsafe {
            dev.wait_for_fences(&[self.fence], true, u64::MAX)
                .vk("vkWaitForFences")?;
            self.in_flight = false;
            dev.reset_fences(&[self.fence]).vk("vkResetFences")
        }
    }
}

impl Drop for Replay {
    fn drop(&mut self) {
        let dev = self.device.raw();
        // SAFETY: a submit whose wait failed is waited for again, so nothing is freed in use;
        // then nothing uses these.
        unsafe {
            if self.in_flight {
                let _ = dev.wait_for_fences(&[self.fence], true, u64::MAX);
            }
            self.device.inner.recycler.give_back(
                dev,
                self.family,
                Some((
                    self.pool,
                    [self.cmd].into_iter().chain(self.spare.drain(..)).collect(),
                )),
                std::mem::take(&mut self.desc_pools),
                Some(self.fence),
            );
        }
        self.keep.clear();
    }
}
