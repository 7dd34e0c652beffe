//! The latency of a wait between the compute and the transfer queue: how long after one queue
//! signals a timeline semaphore the other queue, waiting for it, starts. The planner charges it
//! wherever a copy waits for a step or a step for a copy (`Bandwidth::handoff_s` in the
//! scheduler): on the H200 a part boundary alone costs about 6 µs of GPU time.

use std::time::{Duration, Instant};

use ash::vk;

use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::recorder::{Recorder, Submission};
use crate::sync::{SemaphoreSignal, SemaphoreWait, TimelineSemaphore};

/// Round trips timed (two hand-offs each).
const ROUNDS: u64 = 32;
/// Timed probes; the fastest is kept (one wall-clock reading can catch the host descheduled).
const REPEATS: u32 = 3;

/// Seconds one hand-off takes: `ROUNDS` round trips of empty submissions, compute then
/// transfer, each waiting on the GPU for the other's signal, all submitted behind a host signal
/// and timed from it to the last one's end. The fastest of a few. `None` where the device has
/// no transfer queue of its own (copies and compute then run in one queue's order).
pub fn probe_handoff(device: &Device) -> Result<Option<Duration>> {
    if !device.has_dedicated_transfer_queue() {
        return Ok(None);
    }
    let mut best: Option<Duration> = None;
    for _ in 0..REPEATS {
        let t = round_trips(device)?;
        best = Some(best.map_or(t, |b| b.min(t)));
    }
    Ok(best.map(|b| b / (2 * ROUNDS as u32)))
}

fn round_trips(device: &Device) -> Result<Duration> {
    let to_compute = TimelineSemaphore::new(device, 0)?;
    let to_transfer = TimelineSemaphore::new(device, 0)?;
    let mut subs: Vec<Submission> = Vec::with_capacity(2 * ROUNDS as usize);
    let submitted = (|| -> Result<()> {
        for k in 1..=ROUNDS {
            let compute = Recorder::new(device, QueueKind::Compute)?;
            subs.push(compute.submit(
                &[SemaphoreWait {
                    semaphore: to_compute.clone(),
                    value: k,
                    stage: vk::PipelineStageFlags::COMPUTE_SHADER,
                }],
                &[SemaphoreSignal {
                    semaphore: to_transfer.clone(),
                    value: k,
                }],
            )?);
            let transfer = Recorder::new(device, QueueKind::Transfer)?;
            subs.push(transfer.submit(
                &[SemaphoreWait {
                    semaphore: to_transfer.clone(),
                    value: k,
                    stage: vk::PipelineStageFlags::TRANSFER,
                }],
                &[SemaphoreSignal {
                    semaphore: to_compute.clone(),
                    value: k + 1,
                }],
            )?);
        }
        Ok(())
    })();
    // Whatever was submitted waits for the host's signal: give it, so nothing is left hanging.
    let t0 = Instant::now();
    to_compute.signal(1)?;
    submitted?;
    let done = to_compute.wait(ROUNDS + 1, 5_000_000_000)?;
    let elapsed = t0.elapsed();
    if !done {
        return Err(VkError::Stream(
            "the queue hand-off probe did not finish in 5 s".into(),
        ));
    }
    for s in subs {
        s.wait()?;
    }
    Ok(elapsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where the device has a transfer queue of its own the probe gives a positive time;
    /// lavapipe has one queue, and the probe says so.
    #[test]
    fn probe_names_a_time_or_no_transfer_queue() {
        let device = crate::testing::device();
        match probe_handoff(&device).expect("probe") {
            Some(t) => assert!(t > Duration::ZERO && t < Duration::from_millis(10), "{t:?}"),
            None => assert!(!device.has_dedicated_transfer_queue()),
        }
        crate::testing::assert_no_validation_messages(&device);
    }
}
