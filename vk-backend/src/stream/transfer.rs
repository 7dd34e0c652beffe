//! Transfer submissions: a thread that takes staged pages, puts them back in ticket order, and
//! submits `vkCmdCopyBufferToImage` into atlas layers on the transfer queue. Each submission
//! waits (GPU side) for the compute value of the slots' last readers and signals the transfer
//! semaphore with its highest ticket. After a failure, tickets are still signalled by empty
//! submissions so nothing waiting on them hangs.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use ash::vk;
use crossbeam_channel::Receiver;

use super::io::{ReadDone, Staged};
use super::journal::TransferDone;
use super::mirror::HostMirror;
use super::shared::Shared;
use super::staging::StagingRing;
use super::timing::QueryRing;
use crate::atlas::WeightAtlas;
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError, VkResultExt};
use crate::layout::PAGE_WIDTH;
use crate::sync::TimelineSemaphore;

/// How often the thread reports finished copies while some are in flight.
const REPORT_EVERY: Duration = Duration::from_millis(5);
/// Timestamp pairs of copy submissions. A pair is free again once the report after its
/// submission read it; with 64 the H100's assistant (a submission every 50 µs or so) sent 7%
/// of its pages (12% under `lru`) in untimed submissions between two reports.
const TRANSFER_TIMESTAMP_PAIRS: u32 = 256;

pub(crate) struct TransferCtx {
    pub device: Device,
    /// Its image receives the copies; its page table the copied pages' entries.
    pub atlas: WeightAtlas,
    pub page_height: u32,
    /// Pages per atlas layer ([`crate::WeightAtlas::slot_origin`]).
    pub pages_per_layer: u32,
    /// Where loads' bytes wait: the staging ring, or the host mirror.
    pub ring: Option<Arc<StagingRing>>,
    pub mirror: Option<Arc<HostMirror>>,
    /// First global page of each model (the mirror is indexed by global page).
    pub bases: Vec<u32>,
    pub transfer_sem: TimelineSemaphore,
    pub compute_sem: TimelineSemaphore,
    pub shared: Arc<Shared>,
    pub max_batch: usize,
    pub timestamps: bool,
    /// The engine's clock: submission times are reported on it.
    pub started: std::time::Instant,
}

pub(crate) fn spawn(ctx: TransferCtx, rx: Receiver<ReadDone>) -> Result<JoinHandle<()>> {
    std::thread::Builder::new()
        .name("texstream-transfer".into())
        .spawn(move || {
            let _placed = ctx.device.placement().place_current_thread();
            Submitter::new(ctx).run(rx)
        })
        .map_err(|e| VkError::Stream(format!("cannot start the transfer thread: {e}")))
}

/// A copy submission in flight: its tickets, the compute value it waits for, and when it was
/// handed to the queue (ns on the engine's clock).
#[derive(Debug, Clone, Copy)]
struct Submitted {
    first: u64,
    last: u64,
    compute_wait: u64,
    submitted_ns: f64,
}

struct Submitter {
    ctx: TransferCtx,
    pool: vk::CommandPool,
    free: Vec<vk::CommandBuffer>,
    /// Submitted command buffers with the fence their submission signals, oldest first.
    busy: VecDeque<(vk::CommandBuffer, vk::Fence)>,
    /// Unsignaled fences ready for the next submission.
    free_fences: Vec<vk::Fence>,
    timing: Option<QueryRing>,
    /// Every copy submission not reported finished yet, in order.
    ranges: VecDeque<Submitted>,
    /// Highest value submitted for signalling.
    submitted: u64,
}

impl Submitter {
    fn new(ctx: TransferCtx) -> Submitter {
        let dev = ctx.device.raw();
        let family = ctx.device.queue(QueueKind::Transfer).family;
        let ci = vk::CommandPoolCreateInfo::default()
            .queue_family_index(family)
            .flags(vk::CommandPoolCreateFlags::RESET_COMMAND_BUFFER);
        // SAFETY: valid create info. Without a pool the thread still signals tickets (failed run).
        let pool = match unsafe { dev.create_command_pool(&ci, None) } {
            Ok(p) => p,
            Err(e) => {
                ctx.shared.fail(VkError::Vk {
                    call: "vkCreateCommandPool",
                    result: e,
                });
                vk::CommandPool::null()
            }
        };
        let timing = if ctx.timestamps {
            match QueryRing::new(&ctx.device, QueueKind::Transfer, TRANSFER_TIMESTAMP_PAIRS) {
                Ok(t) => t,
                Err(e) => {
                    log::warn!("stream: no transfer timestamps: {e}");
                    None
                }
            }
        } else {
            None
        };
        Submitter {
            ctx,
            pool,
            free: Vec::new(),
            busy: VecDeque::new(),
            free_fences: Vec::new(),
            timing,
            ranges: VecDeque::new(),
            submitted: 0,
        }
    }

    fn run(mut self, rx: Receiver<ReadDone>) {
        let mut pending: BTreeMap<u64, ReadDone> = BTreeMap::new();
        let mut next = 1u64;
        let mut open = true;
        while open || pending.contains_key(&next) {
            // While copies are in flight, wake up now and then to report the finished ones
            // (the engine's live GPU times and event log wait for them).
            let received = if self.busy.is_empty() {
                rx.recv().map_err(|_| true)
            } else {
                rx.recv_timeout(REPORT_EVERY)
                    .map_err(|e| e.is_disconnected())
            };
            match received {
                Ok(d) => {
                    pending.insert(d.req.ticket, d);
                }
                Err(disconnected) => open = !disconnected,
            }
            while let Ok(d) = rx.try_recv() {
                pending.insert(d.req.ticket, d);
            }
            while let Some(first) = pending.get(&next) {
                // The first copy's slot reader must be submitted before the copy can wait for
                // it; the copy then waits for the end of the reader's part, which is when the
                // compute semaphore says the reader is done anyway.
                let reader = first.req.compute_wait;
                self.ctx.shared.wait_compute_submitted(reader);
                let mut wait = self.ctx.shared.batch_end(reader);
                // What the GPU has finished: a copy whose slot's reader is done waits for
                // nothing, so copies that fell behind their readers go out together instead
                // of one submission (and one queue hand-off) a part.
                let done = self.ctx.compute_sem.value().unwrap_or(0);
                let mut batch: Vec<ReadDone> = Vec::new();
                while batch.len() < self.ctx.max_batch.max(1) {
                    // A later copy joins only if that wait covers its own reader, or its
                    // reader has finished (the wait then grows to the finished value, already
                    // signalled). It never names a compute part that waits for a copy of this
                    // submission: a step needing a copy issued while the first copy's reader
                    // was in the open part goes into a new part (or, on a shared queue, makes
                    // the engine submit the batch first; `held_from`), a copy issued after
                    // that part was cut is needed only by later parts, and a finished part
                    // waits for nothing.
                    match pending.get(&next) {
                        Some(d) if batch.is_empty() || d.req.compute_wait <= wait => {}
                        Some(d) if d.req.compute_wait <= done => wait = wait.max(done),
                        _ => break,
                    }
                    if let Some(d) = pending.remove(&next) {
                        batch.push(d);
                    }
                    next += 1;
                }
                self.submit(batch, wait);
            }
            self.recycle();
        }
        if let Some(&gap) = pending.keys().next() {
            // A ticket never arrived (a thread died): signal past it so nothing hangs.
            self.ctx.shared.fail(VkError::Stream(format!(
                "load {next} never reached the transfer thread (next staged: {gap})"
            )));
            let last = *pending.keys().next_back().unwrap_or(&gap);
            self.signal_only(last);
        }
        self.shutdown()
    }

    /// Records and submits the copies of `batch` (consecutive tickets), waiting for compute
    /// value `wait` (submitted already).
    fn submit(&mut self, batch: Vec<ReadDone>, wait: u64) {
        let Some(last) = batch.last().map(|d| d.req.ticket) else {
            return;
        };
        let copies: Vec<&ReadDone> = if self.ctx.shared.failed() {
            Vec::new()
        } else {
            batch.iter().filter(|d| d.ready).collect()
        };
        if copies.is_empty() || self.pool == vk::CommandPool::null() {
            self.signal_only(last);
            return;
        }
        // A page from the host mirror may still be being read by its background fill.
        if let Err(e) = self.wait_mirrored(&copies) {
            self.ctx.shared.fail(e);
            self.signal_only(last);
            return;
        }
        if self.ctx.shared.failed() {
            self.signal_only(last);
            return;
        }
        match self.record_and_submit(&copies, wait, last) {
            Ok(()) => {
                Shared::add(&self.ctx.shared.transfer_submits, 1);
            }
            Err(e) => {
                self.ctx.shared.fail(e);
                self.signal_only(last);
            }
        }
    }

    fn command_buffer(&mut self) -> Result<vk::CommandBuffer> {
        if let Some(c) = self.free.pop() {
            return Ok(c);
        }
        let ai = vk::CommandBufferAllocateInfo::default()
            .command_pool(self.pool)
            .level(vk::CommandBufferLevel::PRIMARY)
            .command_buffer_count(1);
        // SAFETY: valid pool owned by this thread.
        let v = unsafe { self.ctx.device.raw().allocate_command_buffers(&ai) }
            .vk("vkAllocateCommandBuffers")?;
        Ok(v[0])
    }

    /// Blocks until the host mirror holds the pages of `copies` that come from it; fails with
    /// the first one's read error ([`VkError::PageRead`]).
    fn wait_mirrored(&self, copies: &[&ReadDone]) -> Result<()> {
        let Some(mirror) = &self.ctx.mirror else {
            return Ok(());
        };
        for d in copies {
            if let (Staged::Mirror, Some(base)) =
                (d.staging, self.ctx.bases.get(d.req.model as usize))
            {
                mirror.wait_page(base + d.req.page)?;
            }
        }
        Ok(())
    }

    /// The buffer and offset holding `d`'s bytes.
    fn source(&self, d: &ReadDone) -> Option<(vk::Buffer, u64)> {
        match d.staging {
            Staged::Ring(i) => Some((self.ctx.ring.as_ref()?.buffer(i).raw(), 0)),
            Staged::Mirror => {
                let global = self.ctx.bases.get(d.req.model as usize)? + d.req.page;
                let (b, offset) = self.ctx.mirror.as_ref()?.locate(global)?;
                Some((b.raw(), offset))
            }
        }
    }

    fn record_and_submit(&mut self, copies: &[&ReadDone], wait: u64, signal: u64) -> Result<()> {
        let sources = copies
            .iter()
            .map(|d| {
                self.source(d).ok_or_else(|| {
                    VkError::Stream(format!("load {} has no staged bytes", d.req.ticket))
                })
            })
            .collect::<Result<Vec<_>>>()?;
        // Each copied page's table entry is written after the copies, in the same submission:
        // a step that reads the page waits for this submission's signal, which makes both
        // visible, and the copy already waits for the last step that read the old entry (see
        // `StreamEngine::load`). The compute stream never writes the table, so it needs no
        // barrier for it.
        let entries: Vec<(u32, Option<u32>)> = copies
            .iter()
            .map(|d| {
                (
                    self.ctx.bases[d.req.model as usize] + d.req.page,
                    Some(d.req.slot),
                )
            })
            .collect();
        let table_writes = self.ctx.atlas.table_writes(&entries)?;
        let table = self.ctx.atlas.page_table_buffer().raw();
        let cmd = self.command_buffer()?;
        let dev = self.ctx.device.raw().clone();
        let img = self.ctx.atlas.image().raw();
        // One queue for both: submission order plus this barrier orders the copies after the
        // compute steps submitted before them (`submit` holds a copy back until its slot's last
        // reader is submitted), so no semaphore wait is needed. Old validation layers
        // also mis-track timeline waits between submissions of one queue.
        let shared_queue = !self.ctx.device.has_dedicated_transfer_queue();
        let src_stages = if shared_queue {
            vk::PipelineStageFlags::TRANSFER | vk::PipelineStageFlags::COMPUTE_SHADER
        } else {
            vk::PipelineStageFlags::TRANSFER
        };
        // SAFETY: cmd is free (its last submission completed) and owned by this thread.
        let recorded = unsafe {
            dev.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            )
            .vk("vkBeginCommandBuffer")
            .map(|()| {
                let pair = self.timing.as_mut().and_then(|t| t.begin(cmd, signal));
                // Orders these copies after earlier copies on this queue into the same slot (WAW).
                let mut seen = Vec::new();
                for (i, d) in copies.iter().enumerate() {
                    if i == 0 || seen.contains(&d.req.slot) {
                        let mb = vk::MemoryBarrier::default()
                            .src_access_mask(vk::AccessFlags::TRANSFER_WRITE)
                            .dst_access_mask(vk::AccessFlags::TRANSFER_WRITE);
                        dev.cmd_pipeline_barrier(
                            cmd,
                            src_stages,
                            vk::PipelineStageFlags::TRANSFER,
                            vk::DependencyFlags::empty(),
                            &[mb],
                            &[],
                            &[],
                        );
                    }
                    seen.push(d.req.slot);
                    let k = self.ctx.pages_per_layer;
                    let (layer, row) = (d.req.slot / k, d.req.slot % k * self.ctx.page_height);
                    let region = vk::BufferImageCopy::default()
                        .buffer_offset(0)
                        .buffer_row_length(PAGE_WIDTH)
                        .buffer_image_height(self.ctx.page_height)
                        .image_subresource(vk::ImageSubresourceLayers {
                            aspect_mask: vk::ImageAspectFlags::COLOR,
                            mip_level: 0,
                            base_array_layer: layer,
                            layer_count: 1,
                        })
                        .image_offset(vk::Offset3D {
                            x: 0,
                            y: row as i32,
                            z: 0,
                        })
                        .image_extent(vk::Extent3D {
                            width: PAGE_WIDTH,
                            height: self.ctx.page_height,
                            depth: 1,
                        });
                    let (src, offset) = sources[i];
                    dev.cmd_copy_buffer_to_image(
                        cmd,
                        src,
                        img,
                        vk::ImageLayout::GENERAL,
                        &[region.buffer_offset(offset)],
                    );
                }
                for w in &table_writes {
                    dev.cmd_update_buffer(cmd, table, w.offset, &w.bytes);
                }
                if let Some(t) = self.timing.as_mut() {
                    t.end(cmd, pair);
                }
            })
            .and_then(|()| dev.end_command_buffer(cmd).vk("vkEndCommandBuffer"))
        };
        if let Err(e) = recorded {
            // SAFETY: never submitted.
            unsafe {
                let _ = dev.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty());
            }
            self.free.push(cmd);
            return Err(e);
        }
        // On a dedicated queue each batch also waits for the previous batch's signal: a
        // semaphore signal only covers its own batch, so without it a later batch with a smaller
        // compute wait (or an empty signal-only batch) could raise the value while an earlier
        // batch's copies were still pending, and compute would read pages that had not landed.
        let mut wait_sems = Vec::with_capacity(2);
        let mut wait_vals = Vec::with_capacity(2);
        if !shared_queue {
            if wait > 0 {
                wait_sems.push(self.ctx.compute_sem.raw());
                wait_vals.push(wait);
            }
            if self.submitted > 0 {
                wait_sems.push(self.ctx.transfer_sem.raw());
                wait_vals.push(self.submitted);
            }
        }
        let wait_stages = vec![vk::PipelineStageFlags::TRANSFER; wait_sems.len()];
        let sig_sems = [self.ctx.transfer_sem.raw()];
        let sig_vals = [signal];
        let mut tsi = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals)
            .signal_semaphore_values(&sig_vals);
        let cmds = [cmd];
        let si = vk::SubmitInfo::default()
            .wait_semaphores(&wait_sems)
            .wait_dst_stage_mask(&wait_stages)
            .command_buffers(&cmds)
            .signal_semaphores(&sig_sems)
            .push_next(&mut tsi);
        // The command buffer is reused once this fence signals (not the semaphore value: a
        // fence is what every layer and driver tracks command buffer completion by).
        let fence = match self.free_fences.pop() {
            Some(f) => f,
            // SAFETY: valid create info.
            None => match unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) } {
                Ok(f) => f,
                Err(e) => {
                    // SAFETY: never submitted.
                    unsafe {
                        let _ = dev.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty());
                    }
                    self.free.push(cmd);
                    return Err(VkError::Vk {
                        call: "vkCreateFence (transfer)",
                        result: e,
                    });
                }
            },
        };
        let submitted_ns = self.ctx.started.elapsed().as_nanos() as f64;
        let res = {
            let q = self.ctx.device.queue(QueueKind::Transfer).lock();
            // SAFETY: queue externally synchronized by its lock; cmd is executable.
            unsafe { dev.queue_submit(*q, &[si], fence) }
        };
        match res {
            Ok(()) => {
                self.ranges.push_back(Submitted {
                    first: copies[0].req.ticket,
                    last: signal,
                    compute_wait: wait,
                    submitted_ns,
                });
                self.submitted = signal;
                self.ctx.shared.set_transfer_submitted(signal);
                self.busy.push_back((cmd, fence));
                Ok(())
            }
            Err(e) => {
                self.free_fences.push(fence);
                // SAFETY: never submitted.
                unsafe {
                    let _ = dev.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty());
                }
                self.free.push(cmd);
                Err(VkError::Vk {
                    call: "vkQueueSubmit (transfer)",
                    result: e,
                })
            }
        }
    }

    /// Signals `value` with an empty submission (keeps queue order, so it lands after earlier
    /// copies); falls back to a host signal if even that fails.
    fn signal_only(&mut self, value: u64) {
        if value <= self.submitted {
            return;
        }
        let sig_sems = [self.ctx.transfer_sem.raw()];
        let sig_vals = [value];
        // After the previous batch (see record_and_submit): an empty batch's signal covers no
        // earlier work by itself.
        let after_previous = self.ctx.device.has_dedicated_transfer_queue() && self.submitted > 0;
        let wait_sems = [self.ctx.transfer_sem.raw()];
        let wait_vals = [self.submitted];
        let wait_stages = [vk::PipelineStageFlags::ALL_COMMANDS];
        let n_wait = usize::from(after_previous);
        let mut tsi = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals[..n_wait])
            .signal_semaphore_values(&sig_vals);
        let si = vk::SubmitInfo::default()
            .wait_semaphores(&wait_sems[..n_wait])
            .wait_dst_stage_mask(&wait_stages[..n_wait])
            .signal_semaphores(&sig_sems)
            .push_next(&mut tsi);
        let res = {
            let q = self.ctx.device.queue(QueueKind::Transfer).lock();
            // SAFETY: queue externally synchronized by its lock.
            unsafe {
                self.ctx
                    .device
                    .raw()
                    .queue_submit(*q, &[si], vk::Fence::null())
            }
        };
        if let Err(e) = res {
            log::error!("stream: empty signal submission failed ({e}); signalling from the host");
            if let Err(e) = self.ctx.transfer_sem.signal(value) {
                log::error!("stream: host signal failed too: {e}");
            }
        }
        self.submitted = value;
        self.ctx.shared.set_transfer_submitted(value);
    }

    /// Returns command buffers whose submission has completed to the free list.
    fn recycle(&mut self) {
        let dev = self.ctx.device.raw().clone();
        while let Some(&(cmd, fence)) = self.busy.front() {
            // A zero-timeout wait rather than vkGetFenceStatus: validation layers retire a
            // fence's submission on a wait, and flagged the reset below as "in use" after a
            // status query on the H200 (VUID-vkResetFences-pFences-01123).
            // SAFETY: valid fence.
            if unsafe { dev.wait_for_fences(&[fence], true, 0) }.is_err() {
                break;
            }
            self.busy.pop_front();
            // SAFETY: the submission using cmd and fence completed.
            unsafe {
                let _ = dev.reset_command_buffer(cmd, vk::CommandBufferResetFlags::empty());
                if dev.reset_fences(&[fence]).is_ok() {
                    self.free_fences.push(fence);
                } else {
                    dev.destroy_fence(fence, None);
                }
            }
            self.free.push(cmd);
        }
        // Read after the fences: every submission retired above is covered.
        let done = self.ctx.transfer_sem.value().unwrap_or(0);
        self.report(done);
    }

    /// Reports the copy submissions finished up to transfer value `done` to the engine.
    fn report(&mut self, done: u64) {
        if let Some(t) = self.timing.as_mut() {
            t.harvest(done);
        }
        let mut finished = Vec::new();
        while let Some(&sub) = self.ranges.front() {
            if sub.last > done {
                break;
            }
            self.ranges.pop_front();
            let span = self.timing.as_mut().and_then(|t| {
                let i = t.spans.iter().position(|s| s.key == sub.last)?;
                Some(t.spans.swap_remove(i))
            });
            finished.push(TransferDone {
                first_ticket: sub.first,
                last_ticket: sub.last,
                span,
                compute_wait: sub.compute_wait,
                submitted_ns: sub.submitted_ns,
            });
        }
        if let Some(t) = self.timing.as_mut() {
            // Spans of signal-only values (none are timed) or of submissions already reported.
            t.spans.retain(|s| s.key > done);
        }
        self.ctx.shared.report_transfers(finished, done);
    }

    /// Waits for everything submitted, then frees the pool.
    fn shutdown(mut self) {
        if self.submitted > 0 {
            loop {
                match self
                    .ctx
                    .transfer_sem
                    .wait(self.submitted, Duration::from_secs(5).as_nanos() as u64)
                {
                    Ok(true) => break,
                    Ok(false) => log::warn!(
                        "stream: waiting for transfer value {} at shutdown",
                        self.submitted
                    ),
                    Err(e) => {
                        // Device lost: nothing will complete; free after an idle wait.
                        self.ctx.shared.fail(e);
                        let _ = self.ctx.device.wait_idle();
                        break;
                    }
                }
            }
        }
        self.report(u64::MAX);
        self.timing = None;
        let dev = self.ctx.device.raw();
        for (_, fence) in self.busy.drain(..) {
            // SAFETY: waits (bounded) so the fence is not destroyed in use; a lost device
            // reports an error at once.
            unsafe {
                let _ =
                    dev.wait_for_fences(&[fence], true, Duration::from_secs(5).as_nanos() as u64);
                dev.destroy_fence(fence, None);
            }
        }
        for fence in self.free_fences.drain(..) {
            // SAFETY: unsignaled and unused.
            unsafe { dev.destroy_fence(fence, None) };
        }
        if self.pool != vk::CommandPool::null() {
            // SAFETY: every submission from this pool completed.
            unsafe { dev.destroy_command_pool(self.pool, None) };
        }
    }
}
