//! Timestamp queries for one queue: a ring of (start, end) query pairs, host-reset before reuse
//! (`hostQueryReset`), read back once the submission that wrote them has completed.

use std::time::Instant;

use ash::vk;

use crate::device::{Device, QueueKind};
use crate::error::{Result, VkResultExt};
use crate::recorder::Recorder;

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

/// The offset from `base`'s clock (ns since `base`) to `queue`'s timestamp clock:
/// `gpu_ns = cpu_ns + offset`. A timestamp written by an otherwise empty submission is taken to
/// fall midway between the submit and the CPU's return from its fence wait; of a few tries the
/// tightest round trip wins (its error is at most half of it, tens of microseconds). `None` when
/// the queue cannot write timestamps.
pub(crate) fn clock_offset(
    device: &Device,
    queue: QueueKind,
    base: Instant,
) -> Result<Option<f64>> {
    let Some(mut ring) = QueryRing::new(device, queue, 1)? else {
        return Ok(None);
    };
    let mut best: Option<(f64, f64)> = None;
    for _ in 0..5 {
        let mut rec = Recorder::new(device, queue)?;
        let pair = ring.begin(rec.command_buffer(), 1);
        ring.end(rec.command_buffer(), pair);
        let t0 = base.elapsed().as_nanos() as f64;
        rec.submit_and_wait()?;
        let t1 = base.elapsed().as_nanos() as f64;
        ring.harvest(u64::MAX);
        if let Some(span) = ring.spans.pop() {
            let round_trip = t1 - t0;
            if best.is_none_or(|(rt, _)| round_trip < rt) {
                best = Some((round_trip, span.start_ns - (t0 + t1) / 2.0));
            }
        }
    }
    Ok(best.map(|(_, offset)| offset))
}

/// One timed compute batch, in the queue's timestamp clock (ns).
#[derive(Debug, Clone, Copy)]
pub(crate) struct BatchTiming {
    pub span: Span,
    /// When the last load it waits for landed (0 = it waits for none).
    pub landed_ns: f64,
    /// When the CPU submitted it, where the clocks could be related.
    pub submitted_ns: Option<f64>,
}

/// Busy and stall of compute batches, fed one at a time in submission order. Busy is each
/// batch's span after its pages landed. Stall is how long the GPU had the batch (submitted,
/// previous batch finished) but waited for its pages. Without a submit time only the batch's
/// own start is known, and a driver that writes the start timestamp after the semaphore wait
/// then shows no stall: an undercount, never an invented one.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct StallMeter {
    prev_end: Option<f64>,
}

impl StallMeter {
    /// (busy, stall) of the next batch, in ns.
    pub fn add(&mut self, b: &BatchTiming) -> (f64, f64) {
        let s = &b.span;
        let ready = match b.submitted_ns {
            Some(t) => self.prev_end.map_or(t, |p| p.max(t)),
            None => self.prev_end.map_or(s.start_ns, |p| p.max(s.start_ns)),
        };
        let stall = (b.landed_ns.min(s.end_ns) - ready).max(0.0);
        let busy = (s.end_ns - s.start_ns.max(b.landed_ns)).max(0.0);
        self.prev_end = Some(s.end_ns);
        (busy, stall)
    }
}

impl Drop for QueryRing {
    fn drop(&mut self) {
        // SAFETY: owners harvest (wait for) their submissions before dropping the ring.
        unsafe { self.device.raw().destroy_query_pool(self.pool, None) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (busy, stall) of batches in submission order.
    fn busy_and_stall(batches: &[BatchTiming]) -> (f64, f64) {
        let mut meter = StallMeter::default();
        batches.iter().fold((0.0, 0.0), |(busy, stall), b| {
            let (b, s) = meter.add(b);
            (busy + b, stall + s)
        })
    }

    fn batch(start: f64, end: f64, landed: f64, submitted: Option<f64>) -> BatchTiming {
        BatchTiming {
            span: Span {
                key: 0,
                start_ns: start,
                end_ns: end,
            },
            landed_ns: landed,
            submitted_ns: submitted,
        }
    }

    #[test]
    fn stall_is_the_wait_for_pages_after_the_gpu_had_the_batch() {
        // Start timestamp after the semaphore wait (whole-submission waits): submitted at 10,
        // previous batch ended at 20, pages landed at 50, batch ran 50..60.
        let b = [
            batch(0.0, 20.0, 0.0, Some(0.0)),
            batch(50.0, 60.0, 50.0, Some(10.0)),
        ];
        assert_eq!(busy_and_stall(&b), (30.0, 30.0));
        // Start timestamp before the wait: same stall, busy only after the landing.
        let b = [
            batch(0.0, 20.0, 0.0, Some(0.0)),
            batch(21.0, 60.0, 50.0, Some(10.0)),
        ];
        assert_eq!(busy_and_stall(&b), (30.0, 30.0));
        // The CPU submitted after the pages landed: an idle GPU, but no stall.
        let b = [
            batch(0.0, 20.0, 0.0, Some(0.0)),
            batch(55.0, 60.0, 50.0, Some(55.0)),
        ];
        assert_eq!(busy_and_stall(&b), (25.0, 0.0));
        // The pages landed while the previous batch still ran.
        let b = [
            batch(0.0, 20.0, 0.0, Some(0.0)),
            batch(20.0, 30.0, 15.0, Some(5.0)),
        ];
        assert_eq!(busy_and_stall(&b), (30.0, 0.0));
        // No clock mapping: the wait before the start timestamp is the only one visible.
        let b = [batch(0.0, 20.0, 0.0, None), batch(21.0, 60.0, 50.0, None)];
        assert_eq!(busy_and_stall(&b), (30.0, 29.0));
        let b = [batch(0.0, 20.0, 0.0, None), batch(50.0, 60.0, 50.0, None)];
        assert_eq!(busy_and_stall(&b), (30.0, 0.0));
    }
}
