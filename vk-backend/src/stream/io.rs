//! I/O side: a dispatcher thread hands loads to the staging ring in ticket order (blocking in
//! `vkWaitSemaphores` only while the ring is full), and a pool of I/O threads reads pages from
//! their [`PageSource`] straight into the mapped staging buffers.

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

use super::shared::Shared;
use super::staging::StagingRing;
use super::PageSource;
use crate::error::{Result, VkError};
use crate::sync::TimelineSemaphore;

/// One load, as issued by the engine.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LoadReq {
    pub ticket: u64,
    pub model: u32,
    pub page: u32,
    pub slot: u32,
    /// Compute value the copy must wait for (last reader of the slot's old page; 0 = none).
    pub compute_wait: u64,
}

/// Where a load's bytes wait for their copy.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Staged {
    /// Staging ring buffer `i`.
    Ring(usize),
    /// The host mirror, at the page's own place.
    Mirror,
}

/// A load whose bytes are in staging (or that was skipped / failed), for the transfer thread.
pub(crate) struct ReadDone {
    pub req: LoadReq,
    pub staging: Staged,
    /// `true` when the page is in the staging buffer and should be copied.
    pub ready: bool,
}

pub(crate) struct IoThreads {
    pub handles: Vec<JoinHandle<()>>,
}

pub(crate) fn spawn(
    requests: Receiver<LoadReq>,
    done: Sender<ReadDone>,
    ring: Arc<StagingRing>,
    sources: Arc<Vec<Arc<dyn PageSource>>>,
    transfer_sem: TimelineSemaphore,
    shared: Arc<Shared>,
    io_threads: u32,
) -> Result<IoThreads> {
    let (io_tx, io_rx) = crossbeam_channel::unbounded::<(LoadReq, usize)>();
    let mut handles = Vec::new();
    let spawn_err = |e: std::io::Error| VkError::Stream(format!("cannot start a thread: {e}"));
    for i in 0..io_threads.max(1) {
        let (rx, tx) = (io_rx.clone(), done.clone());
        let (ring, sources, shared) = (ring.clone(), sources.clone(), shared.clone());
        let h = std::thread::Builder::new()
            .name(format!("texstream-io-{i}"))
            .spawn(move || io_worker(rx, tx, ring, sources, shared))
            .map_err(spawn_err)?;
        handles.push(h);
    }
    drop(io_rx);
    let h = std::thread::Builder::new()
        .name("texstream-stage".into())
        .spawn(move || dispatcher(requests, io_tx, done, ring, transfer_sem, shared))
        .map_err(spawn_err)?;
    handles.push(h);
    Ok(IoThreads { handles })
}

fn dispatcher(
    requests: Receiver<LoadReq>,
    io: Sender<(LoadReq, usize)>,
    done: Sender<ReadDone>,
    ring: Arc<StagingRing>,
    transfer_sem: TimelineSemaphore,
    shared: Arc<Shared>,
) {
    for req in requests {
        let index = ring.index_for(req.ticket);
        let staging = Staged::Ring(index);
        let skip = |done: &Sender<ReadDone>| {
            let _ = done.send(ReadDone {
                req,
                staging,
                ready: false,
            });
        };
        if shared.failed() {
            skip(&done);
            continue;
        }
        let prev = ring.previous_user(req.ticket);
        if let Err(e) = wait_landed(&transfer_sem, prev, &shared) {
            shared.fail(e);
            skip(&done);
            continue;
        }
        if io.send((req, index)).is_err() {
            // Every I/O thread is gone (panicked): end the run, still signal the ticket.
            shared.fail(VkError::Stream("the I/O threads stopped".into()));
            skip(&done);
        }
    }
}

/// Blocks until load `value` has landed (its staging buffer is free again).
fn wait_landed(sem: &TimelineSemaphore, value: u64, shared: &Shared) -> Result<()> {
    if value == 0 || sem.value()? >= value {
        return Ok(());
    }
    let t0 = Instant::now();
    // Wait for the submission first: a host wait that starts before its signal is submitted
    // trips the validation layer's timeline tracking (and gains nothing).
    shared.wait_transfer_submitted(value);
    if shared.failed() {
        return Ok(());
    }
    // Bounded waits so a wedged device shows up in the log instead of a silent hang.
    while !sem.wait(value, Duration::from_secs(5).as_nanos() as u64)? {
        log::warn!("stream: still waiting for load {value} to land (staging ring full)");
    }
    Shared::add(&shared.staging_wait_ns, t0.elapsed().as_nanos() as u64);
    Ok(())
}

fn io_worker(
    rx: Receiver<(LoadReq, usize)>,
    done: Sender<ReadDone>,
    ring: Arc<StagingRing>,
    sources: Arc<Vec<Arc<dyn PageSource>>>,
    shared: Arc<Shared>,
) {
    for (req, index) in rx {
        let staging = Staged::Ring(index);
        let mut ready = false;
        if !shared.failed() {
            let src = &sources[req.model as usize];
            let t0 = Instant::now();
            let n = src.page_bytes();
            let res = ring.buffer(index).with_mapped(|m| match m.get_mut(..n) {
                // A panicking source must not lose the ticket (the GPU would wait forever).
                Some(dst) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    src.read_page(req.page, dst)
                }))
                .unwrap_or_else(|_| Err(std::io::Error::other("the page source panicked"))),
                None => Err(std::io::Error::other("staging buffer smaller than a page")),
            });
            Shared::add(&shared.read_ns, t0.elapsed().as_nanos() as u64);
            match res {
                Ok(Ok(())) => ready = true,
                Ok(Err(source)) => shared.fail(VkError::PageRead {
                    model: req.model,
                    name: src.name(),
                    page: req.page,
                    source,
                }),
                Err(e) => shared.fail(e),
            }
        }
        let _ = done.send(ReadDone {
            req,
            staging,
            ready,
        });
    }
}
