//! Submission: the final barrier that makes every write visible to the host and later work,
//! one `vkQueueSubmit` with timeline-semaphore waits/signals and a (recycled) fence, and the
//! in-flight [`Submission`] that holds the command buffer and every used resource until the
//! GPU is done.

use ash::vk;

use super::{Keep, Recorder};
use crate::device::Device;
use crate::error::{Result, VkResultExt};
use crate::sync::{SemaphoreSignal, SemaphoreWait};

impl Recorder {
    /// Ends recording and submits with GPU-side timeline waits/signals.
    pub fn submit(
        mut self,
        waits: &[SemaphoreWait],
        signals: &[SemaphoreSignal],
    ) -> Result<Submission> {
        let dev = self.device.raw().clone();
        self.end()?;
        let wait_sems: Vec<_> = waits.iter().map(|w| w.semaphore.raw()).collect();
        let wait_vals: Vec<_> = waits.iter().map(|w| w.value).collect();
        let wait_stages: Vec<_> = waits.iter().map(|w| w.stage).collect();
        let sig_sems: Vec<_> = signals.iter().map(|s| s.semaphore.raw()).collect();
        let sig_vals: Vec<_> = signals.iter().map(|s| s.value).collect();
        for w in waits {
            self.keep.push(Keep::Semaphore(w.semaphore.clone()));
        }
        for s in signals {
            self.keep.push(Keep::Semaphore(s.semaphore.clone()));
        }
        let mut tsi = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals)
            .signal_semaphore_values(&sig_vals);
        let cmds = [self.cmd];
        let si = vk::SubmitInfo::default()
            .wait_semaphores(&wait_sems)
            .wait_dst_stage_mask(&wait_stages)
            .command_buffers(&cmds)
            .signal_semaphores(&sig_sems)
            .push_next(&mut tsi);
        let fence = match self.device.inner.recycler.take_fence() {
            Some(f) => f,
            // SAFETY: valid create info.
            None => unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) }
                .vk("vkCreateFence")?,
        };
        let res = {
            let q = self.device.queue(self.queue).lock();
            // SAFETY: queue externally synchronized by the lock; command buffer is executable.
            unsafe { dev.queue_submit(*q, &[si], fence) }
        };
        if let Err(e) = res {
            // SAFETY: never submitted (the fence is still unsignaled).
            unsafe { dev.destroy_fence(fence, None) };
            return Err(e).vk("vkQueueSubmit");
        }
        let family = self.device.queue(self.queue).family;
        for img in self.initialized.drain(..) {
            img.mark_initialized();
        }
        let sub = Submission {
            device: self.device.clone(),
            fence,
            family,
            pool: self.pool,
            cmd: self.cmd,
            desc_pools: std::mem::take(&mut self.desc_pools),
            keep: std::mem::take(&mut self.keep),
            done: false,
        };
        // Ownership of the pool moved into the submission.
        self.pool = vk::CommandPool::null();
        Ok(sub)
    }

    /// Ends recording after a barrier that makes every write visible to the host (readback)
    /// and to later submissions.
    pub(super) fn end(&mut self) -> Result<()> {
        let dev = self.device.raw();
        let mb = vk::MemoryBarrier::default()
            .src_access_mask(self.work_access(false))
            .dst_access_mask(vk::AccessFlags::HOST_READ);
        // SAFETY: recording state.
        unsafe {
            dev.cmd_pipeline_barrier(
                self.cmd,
                self.work_stages(),
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[mb],
                &[],
                &[],
            );
            dev.end_command_buffer(self.cmd).vk("vkEndCommandBuffer")
        }
    }

    /// Submits without semaphores and waits for completion.
    pub fn submit_and_wait(self) -> Result<()> {
        self.submit(&[], &[])?.wait()
    }
}

/// Work in flight. Waiting (or dropping) releases the command buffer and kept resources.
pub struct Submission {
    device: Device,
    fence: vk::Fence,
    family: u32,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    desc_pools: Vec<vk::DescriptorPool>,
    keep: Vec<Keep>,
    done: bool,
}

impl Submission {
    /// Whether the GPU has finished this submission.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: valid fence.
        unsafe { self.device.raw().get_fence_status(self.fence) }.vk("vkGetFenceStatus")
    }

    /// Blocks until the GPU has finished this submission.
    pub fn wait(mut self) -> Result<()> {
        self.wait_inner()
    }

    fn wait_inner(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        // SAFETY: valid fence.
        unsafe {
            self.device
                .raw()
                .wait_for_fences(&[self.fence], true, u64::MAX)
        }
        .vk("vkWaitForFences")?;
        self.release();
        Ok(())
    }

    fn release(&mut self) {
        // SAFETY: the submission finished (or the device is lost); nothing uses these any more.
        unsafe {
            self.device.inner.recycler.give_back(
                self.device.raw(),
                self.family,
                Some((self.pool, self.cmd)),
                std::mem::take(&mut self.desc_pools),
                Some(self.fence),
            );
        }
        self.keep.clear();
        self.done = true;
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: valid fence; wait so resources are not freed while in use.
            let _ = unsafe {
                self.device
                    .raw()
                    .wait_for_fences(&[self.fence], true, u64::MAX)
            };
            self.release();
        }
    }
}
