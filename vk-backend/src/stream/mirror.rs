//! Host mirror: every page of every source read once into host-visible buffers that the copy
//! engine reads directly, so a load is a GPU copy and nothing else.
//!
//! Without it each load reads its page into the staging ring on an I/O thread. On an H200 a
//! 1 MiB page took 0.2-0.3 ms to read that way (from the page cache, four to eight threads), so
//! the reads and not the copies bounded a model streaming tens of GiB a request. The mirror is
//! for discrete GPUs, where this memory is system RAM and not device memory; where host-visible
//! memory is device memory (UMA) its bytes count against the cap like any staging.
//!
//! The buffers are allocated when the engine is created, so the cap sees all of them at once,
//! but the pages are read behind it: background threads that outlive [`HostMirror::start`]
//! fill them page by page, in the order the run first loads them (the plan's loads, then every
//! other page in model and page order), and a page a load asks for before its turn goes to the
//! front. Whatever copies from the mirror (the transfer thread, [`HostMirror::probe_copy`])
//! first waits for exactly the pages it copies ([`HostMirror::wait_page`]), so a cold start's
//! first request runs while the rest of the mirror is still being read. On an H200 reading the
//! whole 2.8 GB mirror before the engine opened took 2.55 s of a 6.10 s cold start.

use std::collections::VecDeque;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex};

use super::{PageSource, StagingMemory};
use crate::atlas::WeightAtlas;
use crate::conv;
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::memory::MemoryCategory;
use crate::recorder::Recorder;
use crate::resource::Buffer;

/// Page copies the copy-rate probe times: the fill's first pages, at most one a slot, taken in turn.
const PROBE_PAGES: u32 = 128;
/// Timed probe submissions; the fastest counts.
const PROBE_REPEATS: u32 = 3;

/// Bytes of one mirror buffer (fewer, larger buffers; small enough for any allocation limit).
pub const MIRROR_BUFFER_BYTES: u64 = 64 << 20;

pub(crate) struct HostMirror {
    fill: Arc<Fill>,
    /// The fill threads, joined by [`Self::stop`].
    threads: Mutex<Vec<JoinHandle<()>>>,
}

/// What the fill threads share with the mirror's readers.
struct Fill {
    buffers: Vec<Buffer>,
    /// Each buffer's mapped bytes, written by the fill threads (see [`Fill::read`]).
    mapped: Vec<Mapping>,
    sources: Arc<Vec<Arc<dyn PageSource>>>,
    /// First global page of each source.
    bases: Vec<u32>,
    page_bytes: u64,
    pages_per_buffer: u64,
    state: Mutex<FillState>,
    /// Notified when a page is read (or fails) and when the last fill thread ends.
    changed: Condvar,
    /// Set by [`HostMirror::stop`]: the threads end after the pages they are reading.
    cancel: AtomicBool,
    /// Summed time inside `read_page` over the fill threads.
    read_ns: AtomicU64,
    started: Instant,
}

/// Where one page of the mirror stands.
enum Page {
    /// Not taken by a fill thread yet.
    Waiting,
    Reading,
    Ready,
    /// Its read failed: the error's kind and text (every load of the page gets its own
    /// `io::Error`, which is not `Clone`).
    Failed(std::io::ErrorKind, String),
}

struct FillState {
    /// By global page.
    pages: Vec<Page>,
    /// Global pages in fill order; `next` is the first one no thread has looked at.
    order: Vec<u32>,
    next: usize,
    /// Pages that loads asked for while they were still waiting: read before `order`'s next.
    urgent: VecDeque<u32>,
    /// Fill threads still running, and the fill's wall time once the last one ended.
    running: u32,
    wall: Option<Duration>,
}

/// A buffer's persistent host mapping.
struct Mapping {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping belongs to a `Buffer` that `Fill::buffers` keeps alive beside it, and its
// bytes are only written through `Fill::read`, one page by the one thread that claimed it.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

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
    /// and starts reading every page into it on `threads` background threads: first the global
    /// pages of `first_loads` (the order the run first loads them; repeats and pages out of
    /// range are skipped), then the others in global page order, which is model order, then
    /// page order. Returns once the threads run; see [`Self::wait_page`].
    pub fn start(
        device: &Device,
        sources: Arc<Vec<Arc<dyn PageSource>>>,
        bases: &[u32],
        page_bytes: u64,
        memory: StagingMemory,
        threads: u32,
        first_loads: &[u32],
    ) -> Result<HostMirror> {
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
        let mapped = buffers
            .iter()
            .map(|b| {
                b.with_mapped(|m| {
                    NonNull::new(m.as_mut_ptr()).map(|ptr| Mapping { ptr, len: m.len() })
                })?
                .ok_or_else(|| VkError::Stream(format!("`{}` has no mapping", b.name())))
            })
            .collect::<Result<Vec<_>>>()?;
        let mut order = Vec::with_capacity(total as usize);
        let mut queued = vec![false; total as usize];
        let all = 0..total as u32;
        for g in first_loads.iter().copied().chain(all) {
            if let Some(q) = queued.get_mut(g as usize).filter(|q| !**q) {
                *q = true;
                order.push(g);
            }
        }
        let threads = threads.max(1);
        let fill = Arc::new(Fill {
            buffers,
            mapped,
            sources,
            bases: bases.to_vec(),
            page_bytes,
            pages_per_buffer: per,
            state: Mutex::new(FillState {
                pages: (0..total).map(|_| Page::Waiting).collect(),
                order,
                next: 0,
                urgent: VecDeque::new(),
                running: threads,
                wall: None,
            }),
            changed: Condvar::new(),
            cancel: AtomicBool::new(false),
            read_ns: AtomicU64::new(0),
            started: Instant::now(),
        });
        let mirror = HostMirror {
            fill: fill.clone(),
            threads: Mutex::new(Vec::new()),
        };
        for i in 0..threads {
            let f = fill.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("texstream-mirror-{i}"))
                .spawn(move || fill_thread(&f));
            match spawned {
                Ok(h) => mirror.threads.lock().push(h),
                Err(e) => {
                    // The threads not started never end: take them off the count, then stop
                    // the others (dropping the mirror joins them).
                    let mut s = fill.state.lock();
                    s.running -= threads - i;
                    drop(s);
                    return Err(VkError::Stream(format!(
                        "cannot start a host mirror thread: {e}"
                    )));
                }
            }
        }
        Ok(mirror)
    }

    /// The buffer and byte offset holding global page `global` (call [`Self::wait_page`]
    /// before copying from there).
    pub fn locate(&self, global: u32) -> Option<(&Buffer, u64)> {
        let f = &*self.fill;
        let g = global as u64;
        let b = f.buffers.get((g / f.pages_per_buffer) as usize)?;
        Some((b, g % f.pages_per_buffer * f.page_bytes))
    }

    /// Blocks (on a condition variable) until global page `global` is in the mirror. Its read's
    /// error, a panic in its source included, comes back as [`VkError::PageRead`]; a page the
    /// fill stopped before reading (see [`Self::stop`]) fails too. A page still waiting for
    /// its turn goes to the front of the fill.
    pub fn wait_page(&self, global: u32) -> Result<()> {
        let f = &*self.fill;
        let mut s = f.state.lock();
        let mut asked = false;
        loop {
            match s.pages.get(global as usize) {
                None => {
                    return Err(VkError::Stream(format!(
                        "the host mirror has no page {global}"
                    )))
                }
                Some(Page::Ready) => return Ok(()),
                Some(Page::Failed(kind, msg)) => {
                    let e = std::io::Error::new(*kind, msg.clone());
                    return Err(f.page_error(global, e));
                }
                Some(Page::Waiting | Page::Reading) if s.running == 0 => {
                    return Err(VkError::Stream(format!(
                        "the host mirror fill stopped before global page {global} was read"
                    )))
                }
                Some(Page::Waiting) if !asked => {
                    s.urgent.push_back(global);
                    asked = true;
                }
                Some(_) => {}
            }
            f.changed.wait(&mut s);
        }
    }

    /// Moves global page `global` to the front of the fill if no thread has taken it yet (a
    /// load of it was issued).
    pub fn want(&self, global: u32) {
        let mut s = self.fill.state.lock();
        if matches!(s.pages.get(global as usize), Some(Page::Waiting)) {
            s.urgent.push_back(global);
        }
    }

    /// Stops the fill after the pages being read and joins its threads; waiting for a page it
    /// did not read then fails. Idempotent.
    pub fn stop(&self) {
        self.fill.cancel.store(true, Ordering::Release);
        let handles = std::mem::take(&mut *self.threads.lock());
        for h in handles {
            if h.join().is_err() {
                log::warn!("stream: a host mirror thread panicked");
            }
        }
    }

    /// Summed time inside `PageSource::read_page` over the fill threads: of the whole fill
    /// once it has ended, of the pages read so far while it runs.
    pub fn fill_read(&self) -> Duration {
        Duration::from_nanos(self.fill.read_ns.load(Ordering::Relaxed))
    }

    /// Wall time of the fill: from its start to the end of its last thread once it has ended
    /// (every page read, or stopped), the time so far while it still runs.
    pub fn fill_wall(&self) -> Duration {
        let s = self.fill.state.lock();
        s.wall.unwrap_or_else(|| self.fill.started.elapsed())
    }

    /// How much of [`Self::fill_wall`] came after `t` (e.g. the engine's creation).
    pub fn fill_after(&self, t: Instant) -> Duration {
        (self.fill.started + self.fill_wall()).saturating_duration_since(t)
    }

    pub fn bytes(&self) -> u64 {
        self.fill.buffers.iter().map(|b| b.size()).sum()
    }

    /// Wall-clock time one page takes to copy from the mirror into `atlas`, on the transfer
    /// queue: [`PROBE_PAGES`] page copies into the empty atlas's slots in one submission, the
    /// fastest of [`PROBE_REPEATS`], after a warm-up one (called before any load, so no slot
    /// holds a page yet). The engine's transfer model needs this where the transfer queue's
    /// timestamps cannot be trusted: on an H200 they put a page at 7.6 µs, 138 GB/s, above what
    /// PCIe can carry. As many copies whatever the slots (the pages and slots are taken in
    /// turn): the submission's own cost (its submit and fence wait) shared by a cap's 12 copies
    /// put a page at 49-60 µs on an H100 whose copies took 21 µs a page (session 43).
    ///
    /// It copies the first pages of the fill's order, so it waits for those only. A page that
    /// cannot be read skips the probe (`None`): its error belongs to the load that needs it.
    pub fn probe_copy(&self, device: &Device, atlas: &WeightAtlas) -> Result<Option<Duration>> {
        let pages: Vec<u32> = {
            let s = self.fill.state.lock();
            let n = (PROBE_PAGES as usize)
                .min(atlas.slots() as usize)
                .min(s.order.len());
            s.order[..n].to_vec()
        };
        if pages.is_empty() {
            return Ok(None);
        }
        let copy = |copies: usize| -> Result<Duration> {
            let mut rec = Recorder::new(device, QueueKind::Transfer)?;
            for (slot, &g) in pages.iter().cycle().take(copies).enumerate() {
                self.wait_page(g)?;
                let (buffer, offset) = self
                    .locate(g)
                    .ok_or_else(|| VkError::Stream(format!("the mirror has no page {g}")))?;
                rec.upload_page(atlas, buffer, offset, slot as u32 % atlas.slots().max(1))?;
            }
            let t0 = Instant::now();
            rec.submit_and_wait()?;
            Ok(t0.elapsed())
        };
        let n = PROBE_PAGES;
        // The fastest of a few timed submissions: one wall-clock reading can catch the host
        // descheduled (an H200 run once read 128.6 µs a page where the others read 36-41,
        // and planned that whole session as if transfers were three times slower).
        let timed = |_| -> Result<Duration> {
            let mut best = copy(n as usize)?;
            for _ in 1..PROBE_REPEATS {
                best = best.min(copy(n as usize)?);
            }
            Ok(best)
        };
        match copy(4).and_then(timed) {
            Ok(t) => Ok(Some(t / n)),
            Err(e @ VkError::PageRead { .. }) => {
                log::warn!("stream: no copy probe: {e}");
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    pub fn device_local(&self) -> bool {
        self.fill.buffers.iter().any(|b| b.is_device_local())
    }
}

impl Drop for HostMirror {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Fill {
    /// The source index and model-local page of global page `global`.
    fn model_page(&self, global: u32) -> (usize, u32) {
        let m = self
            .bases
            .partition_point(|&b| b <= global)
            .saturating_sub(1);
        (m, global - self.bases.get(m).copied().unwrap_or(0))
    }

    fn page_error(&self, global: u32, source: std::io::Error) -> VkError {
        let (m, page) = self.model_page(global);
        VkError::PageRead {
            model: m as u32,
            name: self.sources.get(m).map_or_else(String::new, |s| s.name()),
            page,
            source,
        }
    }

    /// The next page to read (marked `Reading`), or `None` once every page is taken or the
    /// fill was stopped.
    fn claim(&self) -> Option<u32> {
        let mut s = self.state.lock();
        if self.cancel.load(Ordering::Acquire) {
            return None;
        }
        let s = &mut *s;
        while let Some(g) = s.urgent.pop_front().or_else(|| {
            let g = s.order.get(s.next).copied();
            s.next += usize::from(g.is_some());
            g
        }) {
            let p = &mut s.pages[g as usize];
            if matches!(p, Page::Waiting) {
                *p = Page::Reading;
                return Some(g);
            }
        }
        None
    }

    /// Reads global page `global`, which this thread claimed, into its place in the mirror.
    fn read(&self, global: u32) -> std::io::Result<()> {
        let (m, page) = self.model_page(global);
        let src = self
            .sources
            .get(m)
            .ok_or_else(|| std::io::Error::other("no source for the page"))?;
        let g = global as u64;
        let map = self
            .mapped
            .get((g / self.pages_per_buffer) as usize)
            .ok_or_else(|| std::io::Error::other("the page lies past the mirror"))?;
        let (offset, len) = (
            (g % self.pages_per_buffer * self.page_bytes) as usize,
            self.page_bytes as usize,
        );
        if offset + len > map.len {
            return Err(std::io::Error::other(
                "the page lies past its mirror buffer",
            ));
        }
        // SAFETY: the range lies inside the buffer's persistent mapping (checked above), which
        // lives as long as `self.buffers`. This thread claimed the page (Waiting -> Reading
        // under the lock), so no other thread writes these bytes, and nothing reads them before
        // the page is marked ready: the host never reads the mirror, and the GPU copies a page
        // only after `HostMirror::wait_page` saw it ready (through the same lock).
        let dst = unsafe { std::slice::from_raw_parts_mut(map.ptr.as_ptr().add(offset), len) };
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| src.read_page(page, dst)))
            .unwrap_or_else(|_| Err(std::io::Error::other("the page source panicked")))
    }

    /// Records how reading `global` went and wakes the waiters.
    fn done(&self, global: u32, res: std::io::Result<()>) {
        let mut s = self.state.lock();
        s.pages[global as usize] = match res {
            Ok(()) => Page::Ready,
            Err(e) => Page::Failed(e.kind(), e.to_string()),
        };
        self.changed.notify_all();
    }
}

/// One fill thread: reads pages in fill order until none is left or the fill is stopped.
fn fill_thread(fill: &Fill) {
    /// Ends the thread's part even if it unwinds: a page it left `Reading` fails, and the last
    /// thread out records the wall time, so no waiter sleeps forever.
    struct Exit<'a> {
        fill: &'a Fill,
        reading: Option<u32>,
    }
    impl Drop for Exit<'_> {
        fn drop(&mut self) {
            let mut s = self.fill.state.lock();
            if let Some(p) = self.reading.and_then(|g| s.pages.get_mut(g as usize)) {
                if matches!(p, Page::Reading) {
                    let msg = "the host mirror thread reading it panicked".to_string();
                    *p = Page::Failed(std::io::ErrorKind::Other, msg);
                }
            }
            s.running = s.running.saturating_sub(1);
            if s.running == 0 {
                s.wall = Some(self.fill.started.elapsed());
            }
            self.fill.changed.notify_all();
        }
    }
    let mut exit = Exit {
        fill,
        reading: None,
    };
    while let Some(g) = fill.claim() {
        exit.reading = Some(g);
        let t0 = Instant::now();
        let res = fill.read(g);
        fill.read_ns
            .fetch_add(t0.elapsed().as_nanos() as u64, Ordering::Relaxed);
        fill.done(g, res);
        exit.reading = None;
    }
}
