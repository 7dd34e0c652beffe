//! GPU timestamp queries for timing recorded work (benchmarks): a query pool written by
//! [`crate::Recorder::write_timestamp`] and read back in nanoseconds after the submission.
//!
//! The recorder resets the pool inside its command buffer before the first write (no
//! `hostQueryReset` needed), so a pool's results belong to the last recorder that wrote it.

use std::sync::Arc;

use ash::vk;

use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError, VkResultExt};

struct Inner {
    device: Device,
    pool: vk::QueryPool,
    count: u32,
    family: u32,
    valid_mask: u64,
    period_ns: f64,
    id: u64,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // SAFETY: last owner; recorders keep a clone until their submission completed.
        unsafe { self.device.raw().destroy_query_pool(self.pool, None) };
    }
}

/// A pool of `count` timestamp queries for one queue. Cloning shares the pool.
#[derive(Clone)]
pub struct TimestampQueries {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for TimestampQueries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TimestampQueries({} on family {})",
            self.inner.count, self.inner.family
        )
    }
}

/// Valid timestamp bits of the queue family behind `queue` (0 = no timestamps).
pub fn timestamp_valid_bits(device: &Device, queue: QueueKind) -> u32 {
    let family = device.queue(queue).family;
    // SAFETY: valid instance and physical device.
    let families = unsafe {
        device
            .instance()
            .get_physical_device_queue_family_properties(device.physical_device())
    };
    families
        .get(family as usize)
        .map(|f| f.timestamp_valid_bits)
        .unwrap_or(0)
}

impl TimestampQueries {
    /// Creates `count` timestamp queries for recorders on `queue`. Fails clearly where the queue
    /// family writes no timestamps.
    pub fn new(device: &Device, queue: QueueKind, count: u32) -> Result<TimestampQueries> {
        let bits = timestamp_valid_bits(device, queue);
        let family = device.queue(queue).family;
        if bits == 0 {
            return Err(VkError::MissingFeature {
                device: device.name().to_string(),
                feature: format!("timestamps on queue family {family} ({queue:?} queue)"),
            });
        }
        let count = count.max(1);
        let ci = vk::QueryPoolCreateInfo::default()
            .query_type(vk::QueryType::TIMESTAMP)
            .query_count(count);
        // SAFETY: valid create info.
        let pool = unsafe { device.raw().create_query_pool(&ci, None) }.vk("vkCreateQueryPool")?;
        Ok(TimestampQueries {
            inner: Arc::new(Inner {
                device: device.clone(),
                pool,
                count,
                family,
                valid_mask: if bits >= 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                },
                period_ns: device.properties().limits.timestamp_period as f64,
                id: crate::resource::next_id(),
            }),
        })
    }

    pub fn count(&self) -> u32 {
        self.inner.count
    }
    pub(crate) fn raw(&self) -> vk::QueryPool {
        self.inner.pool
    }
    pub(crate) fn family(&self) -> u32 {
        self.inner.family
    }
    pub(crate) fn id(&self) -> u64 {
        self.inner.id
    }

    /// Every query's time in nanoseconds (device timestamp domain), `None` for queries not
    /// written (or not yet available). Read after the submission that wrote them completed.
    pub fn read_ns(&self) -> Result<Vec<Option<f64>>> {
        let n = self.inner.count as usize;
        // One [value, availability] element per query: ash passes the element count as the query
        // count and the element size as the stride.
        let mut data = vec![[0u64; 2]; n];
        // SAFETY: valid pool; `data` holds (value, availability) pairs for every query.
        let r = unsafe {
            self.inner.device.raw().get_query_pool_results(
                self.inner.pool,
                0,
                &mut data,
                vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
            )
        };
        match r {
            Ok(()) | Err(vk::Result::NOT_READY) => {}
            Err(e) => return Err(e).vk("vkGetQueryPoolResults"),
        }
        Ok(data
            .iter()
            .map(|p| {
                (p[1] != 0).then(|| (p[0] & self.inner.valid_mask) as f64 * self.inner.period_ns)
            })
            .collect())
    }

    /// Nanoseconds between queries `start` and `end` (handles counter wrap-around).
    pub fn elapsed_ns(&self, start: u32, end: u32) -> Result<f64> {
        let t = self.read_raw_pair(start, end)?;
        let ticks = t.1.wrapping_sub(t.0) & self.inner.valid_mask;
        Ok(ticks as f64 * self.inner.period_ns)
    }

    fn read_raw_pair(&self, a: u32, b: u32) -> Result<(u64, u64)> {
        let read = |q: u32| -> Result<u64> {
            if q >= self.inner.count {
                return Err(VkError::Other(format!(
                    "timestamp query {q} out of range ({} queries)",
                    self.inner.count
                )));
            }
            let mut data = [[0u64; 2]];
            // SAFETY: valid pool; one query with its availability word.
            let r = unsafe {
                self.inner.device.raw().get_query_pool_results(
                    self.inner.pool,
                    q,
                    &mut data,
                    vk::QueryResultFlags::TYPE_64 | vk::QueryResultFlags::WITH_AVAILABILITY,
                )
            };
            match r {
                Ok(()) | Err(vk::Result::NOT_READY) => {}
                Err(e) => return Err(e).vk("vkGetQueryPoolResults"),
            }
            if data[0][1] == 0 {
                return Err(VkError::Other(format!(
                    "timestamp query {q} has no result (not written, or its submission has not \
                     completed)"
                )));
            }
            Ok(data[0][0])
        };
        Ok((read(a)?, read(b)?))
    }
}
