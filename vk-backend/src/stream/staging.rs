//! Staging ring: page-sized host-visible buffers, used in ticket order; buffer `(t-1) % n`
//! serves load `t` and may be refilled once load `t-n` has landed (transfer semaphore >= t-n).

use super::StagingMemory;
use crate::conv;
use crate::device::Device;
use crate::error::Result;
use crate::memory::MemoryCategory;
use crate::resource::Buffer;

impl StagingMemory {
    /// Whether a staging ring in this memory is paid out of `device`'s memory cap (device-local
    /// memory: BAR on a discrete GPU, any host-visible memory on UMA).
    pub fn counts_against_cap(self, device: &Device) -> bool {
        let (_, location) = conv::staging_ring_buffer(self);
        device.memory().counts_against_cap(location)
    }

    /// What one ring buffer of `bytes` in this memory costs against `device`'s cap (0 where it
    /// does not count), from the driver's memory requirements, without allocating.
    pub fn ring_buffer_cost(self, device: &Device, bytes: u64) -> Result<u64> {
        if !self.counts_against_cap(device) {
            return Ok(0);
        }
        let (usage, _) = conv::staging_ring_buffer(self);
        Ok(Buffer::memory_requirements(device, bytes, usage)?.size)
    }
}

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
        let (usage, location) = conv::staging_ring_buffer(memory);
        let buffers = (0..slots)
            .map(|i| {
                Buffer::new(
                    device,
                    &format!("stream staging {i}"),
                    page_bytes,
                    usage,
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
