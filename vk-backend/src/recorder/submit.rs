//! Submission: the final barrier that makes every write visible to the host and later work,
//! one `vkQueueSubmit` with timeline-semaphore waits/signals (per part where a recorder was cut)
//! and a (recycled) fence, and the
//! in-flight [`Submission`] that holds the command buffer and every used resource until the
//! GPU is done.

use ash::vk;

use super::{Keep, Recorder};
use crate::device::Device;
use crate::error::{Result, VkError, VkResultExt};
use crate::sync::{SemaphoreSignal, SemaphoreWait};

/// The command buffers of one part of a submission ([`Recorder::cut`]), in order, and the
/// semaphores that part waits for and signals.
pub(super) struct Part {
    cmds: Vec<vk::CommandBuffer>,
    waits: Vec<SemaphoreWait>,
    signals: Vec<SemaphoreSignal>,
}

/// The raw arrays of one `VkSubmitInfo` (kept alive while the infos point at them).
struct RawPart {
    cmds: Vec<vk::CommandBuffer>,
    wait_sems: Vec<vk::Semaphore>,
    wait_vals: Vec<u64>,
    wait_stages: Vec<vk::PipelineStageFlags>,
    sig_sems: Vec<vk::Semaphore>,
    sig_vals: Vec<u64>,
}

impl RawPart {
    fn new(
        cmds: Vec<vk::CommandBuffer>,
        waits: &[SemaphoreWait],
        signals: &[SemaphoreSignal],
    ) -> Self {
        RawPart {
            cmds,
            wait_sems: waits.iter().map(|w| w.semaphore.raw()).collect(),
            wait_vals: waits.iter().map(|w| w.value).collect(),
            wait_stages: waits.iter().map(|w| w.stage).collect(),
            sig_sems: signals.iter().map(|s| s.semaphore.raw()).collect(),
            sig_vals: signals.iter().map(|s| s.value).collect(),
        }
    }
}

impl Recorder {
    /// Ends the commands recorded so far as one part of the coming submission: on the GPU it
    /// starts once `waits` are reached and signals `signals` when it ends, while later parts
    /// may still wait for theirs. Later commands go to a new command buffer that begins with a
    /// full barrier (the parts run in queue order). One `vkQueueSubmit` still submits them all.
    pub fn cut(&mut self, waits: &[SemaphoreWait], signals: &[SemaphoreSignal]) -> Result<()> {
        if self.capture.is_some() {
            return Err(VkError::Other("a recorder cut while capturing".into()));
        }
        let cmds = self.close_segment()?;
        self.keep_semaphores(waits, signals);
        self.parts.push(Part {
            cmds,
            waits: waits.to_vec(),
            signals: signals.to_vec(),
        });
        // Paid by the next command, or by a recorded step's buffer opening with a barrier.
        self.owed_barrier = true;
        Ok(())
    }

    /// Ends the command buffer being recorded (the pool keeps it) and begins the next; returns
    /// the current part's command buffers in order, the ended one only if it holds commands.
    pub(super) fn close_segment(&mut self) -> Result<Vec<vk::CommandBuffer>> {
        // SAFETY: recording state.
        unsafe { self.device.raw().end_command_buffer(self.cmd) }.vk("vkEndCommandBuffer")?;
        let ended = std::mem::replace(&mut self.cmd, vk::CommandBuffer::null());
        // An ended buffer is kept in `ended` either way, so the pool gets it back.
        self.ended.push(ended);
        let mut cmds = std::mem::take(&mut self.segments);
        if std::mem::replace(&mut self.dirty, false) {
            cmds.push(ended);
        }
        self.cmd = self.begin_command_buffer()?;
        Ok(cmds)
    }

    /// Parts ended by [`Self::cut`] so far.
    pub fn part_count(&self) -> usize {
        self.parts.len()
    }

    fn keep_semaphores(&mut self, waits: &[SemaphoreWait], signals: &[SemaphoreSignal]) {
        for w in waits {
            self.keep.push(Keep::Semaphore(w.semaphore.clone()));
        }
        for s in signals {
            self.keep.push(Keep::Semaphore(s.semaphore.clone()));
        }
    }

    /// Ends recording and submits with GPU-side timeline waits/signals (those of the last part
    /// where the recorder was [cut](Self::cut)).
    pub fn submit(
        mut self,
        waits: &[SemaphoreWait],
        signals: &[SemaphoreSignal],
    ) -> Result<Submission> {
        let dev = self.device.raw().clone();
        self.end()?;
        self.keep_semaphores(waits, signals);
        let mut raw: Vec<RawPart> = self
            .parts
            .iter()
            .map(|p| RawPart::new(p.cmds.clone(), &p.waits, &p.signals))
            .collect();
        let mut last = std::mem::take(&mut self.segments);
        last.push(self.cmd);
        raw.push(RawPart::new(last, waits, signals));
        let mut timeline: Vec<_> = raw
            .iter()
            .map(|r| {
                vk::TimelineSemaphoreSubmitInfo::default()
                    .wait_semaphore_values(&r.wait_vals)
                    .signal_semaphore_values(&r.sig_vals)
            })
            .collect();
        let infos: Vec<_> = raw
            .iter()
            .zip(timeline.iter_mut())
            .map(|(r, tsi)| {
                vk::SubmitInfo::default()
                    .wait_semaphores(&r.wait_sems)
                    .wait_dst_stage_mask(&r.wait_stages)
                    .command_buffers(&r.cmds)
                    .signal_semaphores(&r.sig_sems)
                    .push_next(tsi)
            })
            .collect();
        let fence = match self.device.inner.recycler.take_fence() {
            Some(f) => f,
            // SAFETY: valid create info.
            None => unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) }
                .vk("vkCreateFence")?,
        };
        let res = {
            let q = self.device.queue(self.queue).lock();
            // SAFETY: queue externally synchronized by the lock; command buffers are executable.
            unsafe { dev.queue_submit(*q, &infos, fence) }
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
            cmds: self.take_command_buffers(),
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
        let cmd = self.own_cmd();
        let dev = self.device.raw();
        let mb = vk::MemoryBarrier::default()
            .src_access_mask(self.work_access(false))
            .dst_access_mask(vk::AccessFlags::HOST_READ);
        // SAFETY: recording state.
        unsafe {
            dev.cmd_pipeline_barrier(
                cmd,
                self.work_stages(),
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[mb],
                &[],
                &[],
            );
            dev.end_command_buffer(cmd).vk("vkEndCommandBuffer")
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
    cmds: Vec<vk::CommandBuffer>,
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
                Some((self.pool, std::mem::take(&mut self.cmds))),
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
