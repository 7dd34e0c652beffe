//! Timestamp queries for one queue: a ring of (start, end) query pairs, host-reset before reuse
//! (`hostQueryReset`), read back once the submission that wrote them has completed.

use ash::vk;

use crate::device::{Device, QueueKind};
use crate::error::{Result, VkResultExt};

/// A GPU time interval in nanoseconds (device timestamp domain), with the user's key.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Span {
    pub key: u64,
    pub start_ns: f64,
    pub end_ns: f64,
}

pub(crate) struct QueryRing {
    device: Device,
    pool: vk::QueryPool,
    pairs: u32,
    /// key of the submission using each pair, `None` = free.
    used: Vec<Option<u64>>,
    next: u32,
    period_ns: f64,
    mask: u64,
    pub spans: Vec<Span>,
}

impl QueryRing {
    /// `None` when the queue cannot write timestamps or host query reset is missing.
    pub fn new(device: &Device, queue: QueueKind, pairs: u32) -> Result<Option<QueryRing>> {
        let family = device.queue(queue).family;
        // SAFETY: valid physical device.
        let fams = unsafe {
            device
                .instance()
                .get_physical_device_queue_family_properties(device.physical_device())
        };
        let bits = fams
            .get(family as usize)
            .map(|f| f.timestamp_valid_bits)
            .unwrap_or(0);
        if bits == 0 || !device.features().host_query_reset {
            return Ok(None);
        }
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(pairs * 2);
        // SAFETY: valid create info.
        let pool = unsafe { device.raw().create_query_pool(&ci, None) }.vk("vkCreateQueryPool")?;
        // SAFETY: hostQueryReset is enabled; nothing uses the pool yet.
        unsafe { device.raw().reset_query_pool(pool, 0, pairs * 2) };
        let mask = if bits >= 64 {
            u64::MAX
        } else {
            (1u64 << bits) - 1
        };
        Ok(Some(QueryRing {
            device: device.clone(),
            pool,
            pairs,
            used: vec![None; pairs as usize],
            next: 0,
            period_ns: device.properties().limits.timestamp_period as f64,
            mask,
            spans: Vec::new(),
        }))
    }

    /// Takes a free pair for submission `key` (none free: this submission goes untimed).
    pub fn begin(&mut self, cmd: vk::CommandBuffer, key: u64) -> Option<u32> {
        let i = self.next;
        if self.used[i as usize].is_some() {
            return None;
        }
        self.next = (self.next + 1) % self.pairs;
        self.used[i as usize] = Some(key);
        // SAFETY: recording state; the pair was reset on the host and is not in use.
        unsafe {
            self.device.raw().cmd_write_timestamp(
                cmd,
                vk::PipelineStageFlags::TOP_OF_PIPE,
                self.pool,
                2 * i,
            )
        };
        Some(i)
    }

    pub fn end(&mut self, cmd: vk::CommandBuffer, pair: Option<u32>) {
        if let Some(i) = pair {
            // SAFETY: recording state; pair taken by `begin` in the same command buffer.
            unsafe {
                self.device.raw().cmd_write_timestamp(
                    cmd,
                    vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                    self.pool,
                    2 * i + 1,
                )
            };
        }
    }

    /// Reads back every pair whose submission key is <= `completed` and frees it.
    pub fn harvest(&mut self, completed: u64) {
        for i in 0..self.pairs {
            let Some(key) = self.used[i as usize] else {
                continue;
            };
            if key > completed {
                continue;
            }
            let mut data = [0u64; 2];
            // SAFETY: the submission that wrote the pair completed; no WAIT flag needed.
            let r = unsafe {
                self.device.raw().get_query_pool_results(
                    self.pool,
                    2 * i,
                    &mut data,
                    vk::QueryResultFlags::TYPE_64,
                )
            };
            if r.is_ok() {
                let (a, b) = (data[0] & self.mask, data[1] & self.mask);
                self.spans.push(Span {
                    key,
                    start_ns: a as f64 * self.period_ns,
                    end_ns: b.max(a) as f64 * self.period_ns,
                });
            }
            // SAFETY: the pair is no longer used by any pending command.
            unsafe { self.device.raw().reset_query_pool(self.pool, 2 * i, 2) };
            self.used[i as usize] = None;
        }
    }
}

impl Drop for QueryRing {
    fn drop(&mut self) {
        // SAFETY: owners harvest (wait for) their submissions before dropping the ring.
        unsafe { self.device.raw().destroy_query_pool(self.pool, None) };
    }
}
