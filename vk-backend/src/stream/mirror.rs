//! Host mirror: every page of every source read once, at engine creation, into host-visible
//! buffers that the copy engine reads directly, so a load is a GPU copy and nothing else.
//!
//! Without it each load reads its page into the staging ring on an I/O thread. On an H200 a
//! 1 MiB page took 0.2-0.3 ms to read that way (from the page cache, four to eight threads), so
//! the reads and not the copies bounded a model streaming tens of GiB a request. The mirror is
//! for discrete GPUs, where this memory is system RAM and not device memory; where host-visible
//! memory is device memory (UMA) its bytes count against the cap like any staging.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{PageSource, StagingMemory};
use crate::atlas::WeightAtlas;
use crate::conv;
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::memory::MemoryCategory;
use crate::recorder::Recorder;
use crate::resource::Buffer;

/// Pages the copy-rate probe copies (at most; fewer where the atlas or the models are smaller).
const PROBE_PAGES: u32 = 128;

/// Bytes of one mirror buffer (fewer, larger buffers; small enough for any allocation limit).
pub const MIRROR_BUFFER_BYTES: u64 = 64 << 20;

pub(crate) struct HostMirror {
    buffers: Vec<Buffer>,
    pages_per_buffer: u64,
    page_bytes: u64,
    /// Summed read time over the threads that filled it.
    pub fill_read: Duration,
    /// Wall time of the fill.
    pub fill_wall: Duration,
}

/// Pages per mirror buffer for `page_bytes`.
pub(crate) fn pages_per_buffer(page_bytes: u64) -> u64 {
    (MIRROR_BUFFER_BYTES / page_bytes.max(1)).max(1)
}

impl StagingMemory {
    /// What a host mirror of `pages` pages of `page_bytes` in this memory costs against
    /// `device`'s cap (0 where it does not count), without allocating.
    pub fn mirror_cost(self, device: &Device, page_bytes: u64, pages: u64) -> Result<u64> {
        let per = pages_per_buffer(page_bytes);
        let (full, rest) = (pages / per, pages % per);
        let mut cost = full * self.ring_buffer_cost(device, per * page_bytes)?;
        if rest > 0 {
            cost += self.ring_buffer_cost(device, rest * page_bytes)?;
        }
        Ok(cost)
    }
}

impl HostMirror {
    /// Allocates the mirror for `sources` (global page `bases[m] + p` is model `m`'s page `p`)
    /// and reads every page into it on `threads` threads.
    pub fn fill(
        device: &Device,
        sources: &[Arc<dyn PageSource>],
        bases: &[u32],
        page_bytes: u64,
        memory: StagingMemory,
        threads: u32,
    ) -> Result<HostMirror> {
        let started = Instant::now();
        let total: u64 = sources.iter().map(|s| s.page_count() as u64).sum();
        let per = pages_per_buffer(page_bytes);
        let (usage, location) = conv::staging_ring_buffer(memory);
        let buffers = (0..total.div_ceil(per))
            .map(|i| {
                let pages = per.min(total - i * per);
                Buffer::new(
                    device,
                    &format!("host mirror {i}"),
                    pages * page_bytes,
                    usage,
                    location,
                    MemoryCategory::Staging,
                )
            })
            .collect::<Result<Vec<_>>>()?;
        // Buffers are the unit of work: one thread maps and fills a buffer at a time.
        let next = AtomicUsize::new(0);
        let read_ns = std::sync::atomic::AtomicU64::new(0);
        let fill_one = |i: usize| -> Result<()> {
            buffers[i].with_mapped(|m| -> Result<()> {
                let first = i as u64 * per;
                for (k, dst) in m.chunks_exact_mut(page_bytes as usize).enumerate() {
                    let global = first + k as u64;
                    let m = bases.partition_point(|&b| b as u64 <= global) - 1;
                    let page = (global - bases[m] as u64) as u32;
                    let src = &sources[m];
                    let t0 = Instant::now();
                    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        src.read_page(page, dst)
                    }))
                    .unwrap_or_else(|_| Err(std::io::Error::other("the page source panicked")));
                    read_ns.fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
                    res.map_err(|source| VkError::PageRead {
                        model: m as u32,
                        name: src.name(),
                        page,
                        source,
                    })?;
                }
                Ok(())
            })?
        };
        let results: Vec<Result<()>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads.max(1))
                .map(|_| {
                    scope.spawn(|| -> Result<()> {
                        loop {
                            let i = next.fetch_add(1, Ordering::Relaxed);
                            if i >= buffers.len() {
                                return Ok(());
                            }
                            fill_one(i)?;
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(VkError::Stream("a host mirror thread panicked".into()))
                    })
                })
                .collect()
        });
        results.into_iter().collect::<Result<Vec<()>>>()?;
        Ok(HostMirror {
            buffers,
            pages_per_buffer: per,
            page_bytes,
            fill_read: Duration::from_nanos(read_ns.into_inner()),
            fill_wall: started.elapsed(),
        })
    }

    /// The buffer and byte offset holding global page `global`.
    pub fn locate(&self, global: u32) -> Option<(&Buffer, u64)> {
        let g = global as u64;
        let b = self.buffers.get((g / self.pages_per_buffer) as usize)?;
        Some((b, g % self.pages_per_buffer * self.page_bytes))
    }

    pub fn bytes(&self) -> u64 {
        self.buffers.iter().map(|b| b.size()).sum()
    }

    /// Wall-clock time one page takes to copy from the mirror into `atlas`, on the transfer
    /// queue: up to [`PROBE_PAGES`] pages into the empty atlas's first slots in one submission,
    /// after a warm-up one (called before any load, so no slot holds a page yet). The engine's
    /// transfer model needs this where the transfer queue's timestamps cannot be trusted: on an
    /// H200 they put a page at 7.6 µs, 138 GB/s, above what PCIe can carry.
    pub fn probe_copy(&self, device: &Device, atlas: &WeightAtlas) -> Result<Option<Duration>> {
        let total = self.buffers.len() as u64 * self.pages_per_buffer;
        let n = (PROBE_PAGES as u64).min(atlas.slots() as u64).min(total) as u32;
        if n == 0 {
            return Ok(None);
        }
        let copy = |pages: u32| -> Result<Duration> {
            let mut rec = Recorder::new(device, QueueKind::Transfer)?;
            for p in 0..pages {
                let (buffer, offset) = self
                    .locate(p)
                    .ok_or_else(|| VkError::Stream(format!("the mirror has no page {p}")))?;
                rec.upload_page(atlas, buffer, offset, p)?;
            }
            let t0 = Instant::now();
            rec.submit_and_wait()?;
            Ok(t0.elapsed())
        };
        copy(n.min(4))?;
        Ok(Some(copy(n)? / n))
    }

    pub fn device_local(&self) -> bool {
        self.buffers.iter().any(|b| b.is_device_local())
    }
}
