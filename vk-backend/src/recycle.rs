//! Reuse of per-submission objects: command pools (with their command buffers), descriptor
//! pools and fences of finished submissions are reset and handed to the next [`Recorder`].
//!
//! Creating them for every submission was the dominant host cost of streamed runs, which submit
//! once per step when a load must wait for the step before it (see `StreamEngine::load`).
//!
//! [`Recorder`]: crate::Recorder

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use ash::vk;

/// At most this many objects of each kind are kept; more are destroyed.
const KEEP: usize = 64;

/// Reset objects ready for reuse, owned by the device (destroyed before it).
#[derive(Default)]
pub(crate) struct Recycler {
    inner: Mutex<Free>,
    /// Command pools created because none was free: each new pool's first recordings touch
    /// fresh driver memory.
    pools_created: AtomicU64,
}

#[derive(Default)]
struct Free {
    /// (queue family, pool, its primary command buffers: one, or more where a submission was
    /// recorded in parts).
    commands: Vec<(u32, vk::CommandPool, Vec<vk::CommandBuffer>)>,
    descriptor_pools: Vec<vk::DescriptorPool>,
    fences: Vec<vk::Fence>,
}

impl Recycler {
    fn free(&self) -> std::sync::MutexGuard<'_, Free> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A reset command pool of `family` and its command buffers (at least one), if one is free.
    pub fn take_commands(&self, family: u32) -> Option<(vk::CommandPool, Vec<vk::CommandBuffer>)> {
        let mut f = self.free();
        let i = f.commands.iter().position(|c| c.0 == family)?;
        let (_, pool, cmd) = f.commands.swap_remove(i);
        Some((pool, cmd))
    }

    /// Counts a command pool created because [`Self::take_commands`] had none.
    pub fn count_created_pool(&self) {
        self.pools_created.fetch_add(1, Ordering::Relaxed);
    }

    /// Command pools created so far.
    pub fn pools_created(&self) -> u64 {
        self.pools_created.load(Ordering::Relaxed)
    }

    pub fn take_descriptor_pool(&self) -> Option<vk::DescriptorPool> {
        self.free().descriptor_pools.pop()
    }

    pub fn take_fence(&self) -> Option<vk::Fence> {
        self.free().fences.pop()
    }

    /// Takes back the objects of a finished submission, resetting them (or destroys them when
    /// enough are kept or a reset fails).
    ///
    /// # Safety
    /// Nothing the GPU still executes may use them.
    pub unsafe fn give_back(
        &self,
        dev: &ash::Device,
        family: u32,
        commands: Option<(vk::CommandPool, Vec<vk::CommandBuffer>)>,
        descriptor_pools: Vec<vk::DescriptorPool>,
        fence: Option<vk::Fence>,
    ) {
        let mut f = self.free();
        if let Some((pool, cmds)) = commands {
            let reset = dev.reset_command_pool(pool, vk::CommandPoolResetFlags::empty());
            if reset.is_ok() && f.commands.len() < KEEP && !cmds.is_empty() {
                f.commands.push((family, pool, cmds));
            } else {
                dev.destroy_command_pool(pool, None);
            }
        }
        for p in descriptor_pools {
            let reset = dev.reset_descriptor_pool(p, vk::DescriptorPoolResetFlags::empty());
            if reset.is_ok() && f.descriptor_pools.len() < KEEP {
                f.descriptor_pools.push(p);
            } else {
                dev.destroy_descriptor_pool(p, None);
            }
        }
        if let Some(fence) = fence {
            let reset = dev.reset_fences(&[fence]);
            if reset.is_ok() && f.fences.len() < KEEP {
                f.fences.push(fence);
            } else {
                dev.destroy_fence(fence, None);
            }
        }
    }

    /// Destroys everything kept.
    ///
    /// # Safety
    /// The device is idle.
    pub unsafe fn destroy(&self, dev: &ash::Device) {
        let mut f = self.free();
        for (_, pool, _) in f.commands.drain(..) {
            dev.destroy_command_pool(pool, None);
        }
        for p in f.descriptor_pools.drain(..) {
            dev.destroy_descriptor_pool(p, None);
        }
        for fence in f.fences.drain(..) {
            dev.destroy_fence(fence, None);
        }
    }
}
