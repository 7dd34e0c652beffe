//! `texstream run WORKLOAD.ron`: runs the workload's pipeline with its models streamed under the
//! cap, prints the outputs (OCR text lines) and the metrics summary, optionally for every policy.
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;
use scheduler::{parse_size, Policy};

use crate::runtime::auto_compile::ensure_packed;
use crate::runtime::metrics::RunSummary;
use crate::runtime::workload_run::{prepare, run_policy, FrameOutput, RunOptions};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Workload file (RON).
    pub workload: PathBuf,
    /// Device memory cap (e.g. 24MiB); default: the workload's.
    #[arg(long)]
    pub cap: Option<String>,
    /// preload, reload-per-model, on-demand, lru or planned; default: the workload's.
    #[arg(long)]
    pub policy: Option<String>,
    /// Frames (pipeline repetitions); default: the workload's.
    #[arg(long)]
    pub iterations: Option<u32>,
    /// Write the metrics as JSON (with --all-policies: one object per policy).
    #[arg(long)]
    pub metrics_json: Option<PathBuf>,
    /// Run every policy, one after another on a fresh device, and compare them.
    #[arg(long)]
    pub all_policies: bool,
    /// Input image instead of the workload's demo input.
    #[arg(long)]
    pub image: Option<PathBuf>,
    /// For measurements: first run `preload` with every weight resident and no cap, then give
    /// every policy that run's step costs for its predicted time and lower bound (instead of
    /// costs calibrated on its own, possibly stalled, runs) and report its time beside theirs.
    /// The reference run alone ignores --cap.
    #[arg(long)]
    pub resident_reference: bool,
}

/// `--resident-reference`'s cap: large enough for any workload's weights (the atlas only takes
/// the slots the weights need).
const RESIDENT_REFERENCE_CAP: u64 = 1 << 40;

/// One frame's OCR text and chain output bits (what every policy must reproduce).
type FrameBits = (Vec<String>, Vec<Vec<u32>>);

pub fn run(args: &RunArgs) -> Result<()> {
    let cap = args
        .cap
        .as_deref()
        .map(parse_size)
        .transpose()
        .context("--cap")?;
    let mut opts = RunOptions {
        cap,
        iterations: args.iterations,
        image: args.image.clone(),
        device: vk_backend::DeviceOptions::from_env(),
        ..RunOptions::default()
    };
    // ONNX sources are (re)compiled first where their packed file is missing or out of date.
    let compiling = indicatif::ProgressBar::new_spinner();
    compiling.enable_steady_tick(std::time::Duration::from_millis(120));
    ensure_packed(&args.workload, |model, why| {
        compiling.set_message(format!("compiling model `{model}` ({why})"));
    })?;
    compiling.finish_and_clear();
    let prep = prepare(&args.workload, &opts)?;
    let policies: Vec<Policy> = if args.all_policies {
        Policy::ALL.to_vec()
    } else {
        match args.policy.as_deref() {
            Some(p) => vec![p.parse()?],
            None => vec![prep.workload.policy()?],
        }
    };
    let bar = indicatif::ProgressBar::new(prep.models.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{bar:20}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut summaries: Vec<RunSummary> = Vec::new();
    let mut failures: Vec<(Policy, String)> = Vec::new();
    // What every policy must reproduce: OCR text, or the chain's output bits.
    let mut first: Option<Vec<FrameBits>> = None;
    let mut resident: Option<RunSummary> = None;
    if args.resident_reference {
        let everything = RunOptions {
            cap: Some(RESIDENT_REFERENCE_CAP),
            ..opts.clone()
        };
        let o = run_policy(&prep, &everything, Policy::Preload, Some(&bar))
            .context("resident reference run (preload, no cap)")?;
        bar.suspend(|| {
            println!(
                "\nresident reference (preload, no cap; its step costs set every later policy's \
                 predicted time and LB):\n{}",
                o.summary.table()
            )
        });
        // Every policy must reproduce the resident run's outputs.
        bar.suspend(|| print_outputs(&o.frames));
        first = Some(frame_bits(&o.frames));
        opts.fixed_costs = Some(o.costs);
        resident = Some(o.summary);
    }
    for &policy in &policies {
        match run_policy(&prep, &opts, policy, Some(&bar)) {
            Ok(o) => {
                let got = frame_bits(&o.frames);
                match &first {
                    None => {
                        bar.suspend(|| print_outputs(&o.frames));
                        first = Some(got);
                    }
                    Some(t) if *t != got => {
                        failures.push((policy, "outputs differ from the first run's".into()))
                    }
                    Some(_) => {}
                }
                bar.suspend(|| println!("\n{}", o.summary.table()));
                summaries.push(o.summary);
            }
            Err(e) if args.all_policies => failures.push((policy, e.to_string())),
            Err(e) => {
                bar.finish_and_clear();
                return Err(e.into());
            }
        }
    }
    bar.finish_and_clear();
    if args.all_policies || resident.is_some() {
        // The CPU pipeline steps (OCR pre/post-processing) run between the model runs under
        // every policy; the scheduler's LB covers the model runs only. `runs/LB` compares the
        // model runs with it, `e2e/LB+cpu` the whole frame with LB plus the resident run's CPU
        // steps (the run's own without a resident reference).
        let resident_cpu_s = resident
            .as_ref()
            .map(|r| (r.measured_s - r.model_s).max(0.0));
        println!(
            "{:<18} {:>11} {:>11} {:>11} {:>8} {:>8} {:>8} {:>8} {:>11} {:>12} {:>10} {:>14}",
            "policy",
            "measured ms",
            "predict ms",
            "LB ms",
            "meas/pr",
            "meas/LB",
            "runs/LB",
            "meas/res",
            "e2e/LB+cpu",
            "streamed MiB",
            "stall ms",
            "peak/cap MiB"
        );
        for (s, label) in resident
            .iter()
            .map(|s| (s, "resident (no cap)"))
            .chain(summaries.iter().map(|s| (s, s.policy.as_str())))
        {
            let vs_resident = resident
                .as_ref()
                .filter(|r| r.measured_s > 0.0)
                .map_or(String::from("-"), |r| {
                    format!("{:.2}", s.measured_s / r.measured_s)
                });
            let cpu_s = resident_cpu_s.unwrap_or((s.measured_s - s.model_s).max(0.0));
            let e2e = s.measured_s / (s.lower_bound_s + cpu_s).max(f64::MIN_POSITIVE);
            println!(
                "{:<18} {:>11.2} {:>11.2} {:>11.2} {:>8.2} {:>8.2} {:>8.2} {:>8} {:>11.2} {:>12.2} {:>10.2} {:>7.2}/{:<6}",
                label,
                s.measured_s * 1e3,
                s.predicted_s * 1e3,
                s.lower_bound_s * 1e3,
                s.measured_over_predicted,
                s.measured_over_lower_bound,
                s.model_over_lower_bound,
                vs_resident,
                e2e,
                s.bytes_streamed as f64 / 1048576.0,
                s.stall_s * 1e3,
                s.peak_device_bytes as f64 / 1048576.0,
                if s.cap_bytes >= RESIDENT_REFERENCE_CAP {
                    "none".to_string()
                } else {
                    format!("{:.2}", s.cap_bytes as f64 / 1048576.0)
                }
            );
        }
        for (p, e) in &failures {
            println!("{:<18} not run: {e}", p.name());
        }
    }
    if let Some(path) = &args.metrics_json {
        let json = if let Some(r) = &resident {
            serde_json::to_string_pretty(&serde_json::json!({
                "resident_reference": r,
                "policies": summaries,
            }))?
        } else if args.all_policies {
            serde_json::to_string_pretty(&summaries)?
        } else {
            serde_json::to_string_pretty(&summaries.first())?
        };
        std::fs::write(path, json).with_context(|| format!("writing {}", path.display()))?;
    }
    if summaries.iter().any(|s| s.peak_device_bytes > s.cap_bytes) {
        bail!("peak device bytes exceeded the cap");
    }
    if failures.iter().any(|(_, e)| e.contains("differ")) {
        bail!("policies disagree on the outputs");
    }
    Ok(())
}

/// What every policy must reproduce of `frames`: OCR text and chain output bits.
fn frame_bits(frames: &[FrameOutput]) -> Vec<FrameBits> {
    frames
        .iter()
        .map(|f| {
            let text = f.lines.iter().map(|l| l.text.clone()).collect();
            let bits = f
                .tensors
                .iter()
                .map(|(_, _, v)| v.iter().map(|x| x.to_bits()).collect())
                .collect();
            (text, bits)
        })
        .collect()
}

/// The last frame's outputs: OCR lines, or each chain output's shape, sum and first values.
fn print_outputs(frames: &[FrameOutput]) {
    let Some(last) = frames.last() else { return };
    if !last.lines.is_empty() || last.tensors.is_empty() {
        println!("recognized text ({} lines, last frame):", last.lines.len());
        for l in &last.lines {
            println!("  {:.3}  {}", l.score, l.text);
        }
    }
    for (name, shape, v) in &last.tensors {
        let sum: f64 = v.iter().map(|&x| x as f64).sum();
        let head: Vec<String> = v.iter().take(4).map(|x| format!("{x:.5}")).collect();
        println!(
            "output `{name}` {shape:?}: sum {sum:.6}, first [{}] (last frame)",
            head.join(", ")
        );
    }
}
