//! Staging ring: page-sized host-visible buffers, used in ticket order; buffer `(t-1) % n`
//! serves load `t` and may be refilled once load `t-n` has landed (transfer semaphore >= t-n).

use ash::vk;
use gpu_allocator::MemoryLocation;

use super::StagingMemory;
use crate::device::Device;
use crate::error::Result;
use crate::memory::MemoryCategory;
use crate::resource::Buffer;

pub(crate) struct StagingRing {
    buffers: Vec<Buffer>,
}

impl StagingRing {
    pub fn new(
        device: &Device,
        slots: u32,
        page_bytes: u64,
        memory: StagingMemory,
    ) -> Result<Self> {
        // System: host-cached system memory, so the ring does not take capped VRAM on a discrete
        // GPU. DeviceLocal: gpu-allocator's CpuToGpu prefers BAR memory; the counted allocator
        // then charges it to the cap as Staging.
        let location = match memory {
            StagingMemory::System => MemoryLocation::GpuToCpu,
            StagingMemory::DeviceLocal => MemoryLocation::CpuToGpu,
        };
        let buffers = (0..slots)
            .map(|i| {
                Buffer::new(
                    device,
                    &format!("stream staging {i}"),
                    page_bytes,
                    vk::BufferUsageFlags::TRANSFER_SRC,
                    location,
                    MemoryCategory::Staging,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(StagingRing { buffers })
    }

    pub fn len(&self) -> u64 {
        self.buffers.len() as u64
    }

    /// The buffer that serves load `ticket` (tickets start at 1).
    pub fn index_for(&self, ticket: u64) -> usize {
        ((ticket - 1) % self.len()) as usize
    }

    /// The load that last used `ticket`'s buffer (0 = none); it must have landed first.
    pub fn previous_user(&self, ticket: u64) -> u64 {
        ticket.saturating_sub(self.len())
    }

    pub fn buffer(&self, i: usize) -> &Buffer {
        &self.buffers[i]
    }

    pub fn device_local(&self) -> bool {
        self.buffers.iter().any(|b| b.is_device_local())
    }

    pub fn bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.size()).sum()
    }
}
