//! Timeline semaphores (Vulkan 1.2 core): GPU-side ordering between transfer and compute.

use std::sync::Arc;

use ash::vk;

use crate::device::Device;
use crate::error::{Result, VkResultExt};

struct Inner {
    device: Device,
    sem: vk::Semaphore,
}

/// A timeline semaphore; clone to share.
#[derive(Clone)]
pub struct TimelineSemaphore {
    inner: Arc<Inner>,
}

impl TimelineSemaphore {
    pub fn new(device: &Device, initial: u64) -> Result<Self> {
        let mut tci = vk::SemaphoreTypeCreateInfo::default()
            .semaphore_type(vk::SemaphoreType::TIMELINE)
            .initial_value(initial);
        let ci = vk::SemaphoreCreateInfo::default().push_next(&mut tci);
        // SAFETY: valid create info; timelineSemaphore is enabled at device creation.
        let sem = unsafe { device.raw().create_semaphore(&ci, None) }.vk("vkCreateSemaphore")?;
        Ok(TimelineSemaphore {
            inner: Arc::new(Inner {
                device: device.clone(),
                sem,
            }),
        })
    }

    pub fn raw(&self) -> vk::Semaphore {
        self.inner.sem
    }

    /// Current counter value.
    pub fn value(&self) -> Result<u64> {
        // SAFETY: valid timeline semaphore.
        unsafe {
            self.inner
                .device
                .raw()
                .get_semaphore_counter_value(self.inner.sem)
        }
        .vk("vkGetSemaphoreCounterValue")
    }

    /// Blocks until the counter reaches `value` or `timeout_ns` passes; returns false on timeout.
    pub fn wait(&self, value: u64, timeout_ns: u64) -> Result<bool> {
        let sems = [self.inner.sem];
        let vals = [value];
        let wi = vk::SemaphoreWaitInfo::default()
            .semaphores(&sems)
            .values(&vals);
        // SAFETY: valid semaphore.
        match unsafe { self.inner.device.raw().wait_semaphores(&wi, timeout_ns) } {
            Ok(()) => Ok(true),
            Err(vk::Result::TIMEOUT) => Ok(false),
            Err(e) => Err(e).vk("vkWaitSemaphores"),
        }
    }

    /// Signals `value` from the host.
    pub fn signal(&self, value: u64) -> Result<()> {
        let si = vk::SemaphoreSignalInfo::default()
            .semaphore(self.inner.sem)
            .value(value);
        // SAFETY: valid semaphore; value must be greater than the current one (checked by Vulkan).
        unsafe { self.inner.device.raw().signal_semaphore(&si) }.vk("vkSignalSemaphore")
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: last owner; submissions that reference it hold clones until complete.
        unsafe { self.device.raw().destroy_semaphore(self.sem, None) };
    }
}

/// Makes a submission wait (GPU-side) for `semaphore >= value` before `stage`.
#[derive(Clone)]
pub struct SemaphoreWait {
    pub semaphore: TimelineSemaphore,
    pub value: u64,
    pub stage: vk::PipelineStageFlags,
}

/// Makes a submission set `semaphore = value` when it completes.
#[derive(Clone)]
pub struct SemaphoreSignal {
    pub semaphore: TimelineSemaphore,
    pub value: u64,
}
