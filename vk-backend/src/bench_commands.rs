//! Command benchmark: a chain of small dependent dispatches (the shape of a decode step: each
//! reads the previous one's output) recorded into the submission on every run, against the same
//! chain captured once ([`RecordedCommands`]) and emitted into each run's submission, one
//! capture per dispatch (as the stream engine keeps one per step) or one for the whole chain.
//! Reports the host time to put a run's chain into its submission and the GPU time per dispatch
//! (timestamps). The captured chain is also emitted in parts of a submission ([`Recorder::cut`]),
//! each with its own semaphore signal, as the stream engine cuts its batches: what a part costs
//! the host (cut and submit) and the GPU; and each capture submitted as a command buffer of its
//! own instead of emitted (what that saves the host, what it costs the GPU). Backs `texstream
//! bench commands`.

use std::sync::Arc;
use std::time::Instant;

use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::kernels::{unary_into, UnaryOp};
use crate::layout::Precision;
use crate::recorder::{CommandCache, RecordedCommands, Recorder};
use crate::sync::{SemaphoreSignal, TimelineSemaphore};
use crate::tensor::Tensor;
use crate::testing::Rng;
use crate::timestamps::TimestampQueries;

/// What to run.
#[derive(Debug, Clone)]
pub struct CommandsConfig {
    /// Dispatches in the chain (rounded up to an even number, so that it ends in the tensor it
    /// began from).
    pub dispatches: u32,
    /// Timed runs per way (the median is reported), after one untimed run.
    pub runs: u32,
    /// Elements of each tensor (small: the dispatches are launch-bound, as a decode step's are).
    pub elems: usize,
    pub precision: Precision,
}

impl Default for CommandsConfig {
    fn default() -> Self {
        CommandsConfig {
            dispatches: 512,
            runs: 20,
            elems: 4096,
            precision: Precision::F16,
        }
    }
}

/// One way of recording the chain, timed.
#[derive(Debug, Clone)]
pub struct CommandsRow {
    pub way: &'static str,
    /// Median host microseconds to record one run's chain (the secondaries' one-time
    /// recording not included).
    pub host_us: f64,
    /// Median host microseconds of `vkQueueSubmit` for the run (every part).
    pub submit_us: f64,
    /// Median GPU microseconds per dispatch.
    pub gpu_us_per_dispatch: f64,
    /// Largest difference of the chain's output from the first way's.
    pub max_abs_diff: f32,
}

#[derive(Debug, Clone)]
pub struct CommandsReport {
    pub device: String,
    pub dispatches: u32,
    pub runs: u32,
    pub rows: Vec<CommandsRow>,
}

/// How the chain's commands reach a run's submission: recorded into it (`None`), or captured
/// `Some(n)` dispatches at a time and emitted, or each capture submitted as a command buffer of
/// its own (`true`, [`Recorder::set_step_buffers`]); and in parts of `Some(k)` dispatches
/// (each its own semaphore signal) or one part.
const WAYS: [(&str, Option<u32>, Option<u32>, bool); 9] = [
    ("recorded every run", None, None, false),
    ("captured per dispatch, emitted", Some(1), None, false),
    ("captured per 16 dispatches, emitted", Some(16), None, false),
    (
        "captured once for the chain, emitted",
        Some(u32::MAX),
        None,
        false,
    ),
    (
        "captured per dispatch, in parts of 4",
        Some(1),
        Some(4),
        false,
    ),
    (
        "captured per dispatch, in parts of 1",
        Some(1),
        Some(1),
        false,
    ),
    (
        "captured per dispatch, a command buffer each",
        Some(1),
        None,
        true,
    ),
    (
        "captured per 16 dispatches, a command buffer each",
        Some(16),
        None,
        true,
    ),
    (
        "captured per dispatch, a command buffer each, in parts of 4",
        Some(1),
        Some(4),
        true,
    ),
];

/// Records dispatches `from..to` of the chain (even ones read `a` and write `b`, odd ones the
/// reverse).
fn record_chain(rec: &mut Recorder, a: &Tensor, b: &Tensor, from: u32, to: u32) -> Result<()> {
    for i in from..to {
        let (x, y) = if i % 2 == 0 { (a, b) } else { (b, a) };
        unary_into(rec, UnaryOp::Tanh, x, y)?;
    }
    Ok(())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Runs every way.
pub fn run(device: &Device, cfg: &CommandsConfig) -> Result<CommandsReport> {
    if cfg.runs == 0 || cfg.dispatches == 0 || cfg.elems == 0 {
        return Err(VkError::Other(
            "runs, dispatches and elements must be at least 1".into(),
        ));
    }
    let n = cfg.dispatches.div_ceil(2) * 2;
    let shape = [1, 4, 1, cfg.elems.div_ceil(4)];
    let input = Rng::new(0xC0DE).vec(shape.iter().product(), -1.0, 1.0);
    let mut rows = Vec::new();
    let mut first: Option<Vec<f32>> = None;
    for (name, way, part, buffers) in WAYS {
        let a = Tensor::new(device, "bench chain a", &shape, cfg.precision)?;
        let b = Tensor::new(device, "bench chain b", &shape, cfg.precision)?;
        a.upload(&input)?;
        b.upload(&input)?;
        let cache = CommandCache::new(device);
        let mut recorded: Vec<Arc<RecordedCommands>> = Vec::new();
        let queries = TimestampQueries::new(device, QueueKind::Compute, 2)?;
        let signal = TimelineSemaphore::new(device, 0)?;
        let mut value = 0u64;
        let signals = |value: &mut u64| {
            *value += 1;
            [SemaphoreSignal {
                semaphore: signal.clone(),
                value: *value,
            }]
        };
        let (mut host, mut submit, mut gpu) = (Vec::new(), Vec::new(), Vec::new());
        for run in 0..=cfg.runs {
            let mut rec = Recorder::new(device, QueueKind::Compute)?;
            rec.set_step_buffers(buffers);
            if let (0, Some(group)) = (run, way) {
                // The untimed run captures the chain (its first run touches every image).
                let mut from = 0;
                while from < n {
                    let to = from.saturating_add(group).min(n);
                    recorded.push(rec.capture(&cache, |r| record_chain(r, &a, &b, from, to))?);
                    from = to;
                }
            }
            rec.barrier();
            rec.write_timestamp(&queries, 0)?;
            let t0 = Instant::now();
            match way {
                None => record_chain(&mut rec, &a, &b, 0, n)?,
                Some(_) => {
                    for (i, c) in recorded.iter().enumerate() {
                        if part.is_some_and(|k| i > 0 && (i as u32).is_multiple_of(k)) {
                            rec.cut(&[], &signals(&mut value))?;
                        }
                        rec.execute_recorded(c)?;
                    }
                }
            }
            let host_us = t0.elapsed().as_secs_f64() * 1e6;
            rec.write_timestamp(&queries, 1)?;
            let t1 = Instant::now();
            let sub = rec.submit(&[], &signals(&mut value))?;
            let submit_us = t1.elapsed().as_secs_f64() * 1e6;
            sub.wait()?;
            // The fence can signal before the submission's semaphore signals are visible
            // (lavapipe: "signalled 0 of 1" about one run in ten with another test busy beside
            // it, and the failed test's unwinding then tore the objects down under its queue
            // thread): wait for the last value itself.
            if !signal.wait(value, 5_000_000_000)? {
                return Err(VkError::Other(format!(
                    "{name}: the parts signalled {} of {value}",
                    signal.value()?
                )));
            }
            if run > 0 {
                host.push(host_us);
                submit.push(submit_us);
                gpu.push(queries.elapsed_ns(0, 1)? / 1e3 / n as f64);
            }
        }
        let out = a.download()?;
        let max_abs_diff = match &first {
            None => {
                // The recorded chain must have changed the input, or no way is checked.
                let moved = out.iter().zip(&input).any(|(o, i)| (o - i).abs() > 1e-3);
                if !moved {
                    return Err(VkError::Other(
                        "the recorded chain left its input unchanged".into(),
                    ));
                }
                first = Some(out);
                0.0
            }
            Some(f) => f
                .iter()
                .zip(&out)
                .map(|(x, y)| (x - y).abs())
                .fold(0.0, f32::max),
        };
        rows.push(CommandsRow {
            way: name,
            host_us: median(&mut host),
            submit_us: median(&mut submit),
            gpu_us_per_dispatch: median(&mut gpu),
            max_abs_diff,
        });
    }
    Ok(CommandsReport {
        device: device.name().to_string(),
        dispatches: n,
        runs: cfg.runs,
        rows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every way computes what recording the chain computes (a way that skipped the chain, or
    /// ran it out of order, would leave other values: each tanh shrinks them), and the
    /// validation layer accepts the emitted commands.
    #[test]
    fn every_way_gives_the_recorded_chains_output() {
        let device = crate::testing::device();
        let cfg = CommandsConfig {
            dispatches: 34,
            runs: 2,
            elems: 256,
            precision: Precision::F32,
        };
        let report = run(&device, &cfg).expect("command benchmark");
        assert_eq!(report.rows.len(), WAYS.len());
        for row in &report.rows {
            assert_eq!(row.max_abs_diff, 0.0, "{}", row.way);
            assert!(row.gpu_us_per_dispatch > 0.0, "{}", row.way);
        }
        crate::testing::assert_no_validation_messages(&device);
    }
}
