//! Planner benchmark (`cargo bench --bench planner`): how long the global scheduler takes to plan,
//! side by side for every streaming policy.
//!
//! 1. Synthetic five-model workloads of 10 k, 100 k and 1 M steps (`scheduler::synth::uniform`,
//!    a cap of a fifth of the weights plus 16 MiB): plan + simulate + validate, best of a few runs,
//!    with the plan's ratio to its lower bound and the process's peak resident memory after the
//!    size (Linux `VmHWM`).
//! 2. The service's case, a re-plan when a request arrives: the camera workload's frame pipeline
//!    (`workloads/camera-ocr.ron`, its profiles read from the packed models like `texstream
//!    plan`), planned at the workload's cap, median of 50.
//!
//! `TEXSTREAM_BENCH_MAX_STEPS` lowers the largest size (CI machines, quick looks).
use std::path::Path;
use std::time::Instant;

use scheduler::synth::{uniform, UniformSpec};
use scheduler::{plan, Bandwidth, Pipeline, Policy, Stage};

const POLICIES: [Policy; 3] = [Policy::OnDemand, Policy::Lru, Policy::Planned];

fn peak_rss_mib() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let kb: f64 = s
        .lines()
        .find(|l| l.starts_with("VmHWM:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    Some(kb / 1024.0)
}

/// Times `runs` plans of one policy: the wall times in ms (sorted) and the plan's ÷ LB.
fn time_plans(
    profiles: &[scheduler::Profile],
    pipeline: &Pipeline,
    cap: u64,
    bw: &Bandwidth,
    policy: Policy,
    runs: usize,
) -> Result<(Vec<f64>, f64), scheduler::PlanError> {
    let mut times = Vec::with_capacity(runs);
    let mut ratio = f64::NAN;
    for _ in 0..runs {
        let t = Instant::now();
        ratio = plan(profiles, pipeline, cap, bw, policy)?.stats.ratio;
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    times.sort_by(f64::total_cmp);
    Ok((times, ratio))
}

fn synthetic(max_steps: u32) {
    let bw = Bandwidth::default();
    println!("synthetic five-model workloads (cap = a fifth of the weights + 16 MiB)");
    println!(
        "{:>9} {:<10} {:>12} {:>9} {:>8} {:>13}",
        "steps", "policy", "plan time", "us/step", "÷ LB", "peak RSS MiB"
    );
    for steps in [10_000u32, 100_000, 1_000_000] {
        if steps > max_steps {
            println!("{steps:>9} skipped (TEXSTREAM_BENCH_MAX_STEPS={max_steps})");
            continue;
        }
        let per_model = steps / 5;
        let profiles: Vec<_> = (0..5u64)
            .map(|m| {
                uniform(
                    &format!("m{m}"),
                    1 << 20,
                    &UniformSpec {
                        layers: per_model,
                        bytes_per_layer: (128 + 64 * m) << 10,
                        compute_per_layer_s: (10.0 + 5.0 * m as f64) * 1e-6,
                        activation_bytes: (m + 1) << 20,
                    },
                )
            })
            .collect();
        let total: u64 = profiles.iter().map(|p| p.weight_bytes()).sum();
        let pipeline = Pipeline {
            stages: (0..5).map(|model| Stage { model, count: 1 }).collect(),
            repetitions: 1,
        };
        let cap = total / 5 + (16 << 20);
        let runs = if steps >= 1_000_000 { 1 } else { 3 };
        for policy in POLICIES {
            match time_plans(&profiles, &pipeline, cap, &bw, policy, runs) {
                Ok((times, ratio)) => println!(
                    "{steps:>9} {:<10} {:>9.3} ms {:>9.3} {:>8.3} {:>13}",
                    policy.name(),
                    times[0],
                    times[0] * 1e3 / steps as f64,
                    ratio,
                    peak_rss_mib().map_or("-".into(), |m| format!("{m:.0}"))
                ),
                Err(e) => println!("{steps:>9} {:<10} error: {e}", policy.name()),
            }
        }
    }
}

fn camera_replan() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("workloads/camera-ocr.ron");
    println!("\nre-plan for one request: {}", path.display());
    let prepared = (|| -> anyhow::Result<_> {
        let w = texstream::workload::load_workload(&path)?;
        let page = w.page_bytes()?;
        let mut profiles = Vec::new();
        for m in &w.spec.models {
            profiles.push(texstream::workload::load_profile(&w, m, page)?.0);
        }
        let ps = w.pipeline_spec(None)?;
        Ok((
            w.planner_pipeline(ps),
            profiles,
            w.cap_bytes()?,
            w.bandwidth()?,
        ))
    })();
    let (pipeline, profiles, cap, bw) = match prepared {
        Ok(p) => p,
        Err(e) => {
            println!("skipped: {e:#} (scripts/fetch_models.py fetches the OCR models)");
            return;
        }
    };
    let steps: usize = profiles.iter().map(|p| p.steps.len()).sum();
    println!(
        "{:<10} {:>12} {:>12} {:>8}   ({} profile steps, cap {} B)",
        "policy", "median", "min", "÷ LB", steps, cap
    );
    for policy in POLICIES {
        match time_plans(&profiles, &pipeline, cap, &bw, policy, 50) {
            Ok((times, ratio)) => println!(
                "{:<10} {:>9.3} ms {:>9.3} ms {:>8.3}",
                policy.name(),
                times[times.len() / 2],
                times[0],
                ratio
            ),
            Err(e) => println!("{:<10} error: {e}", policy.name()),
        }
    }
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to parse.
    let max_steps = std::env::var("TEXSTREAM_BENCH_MAX_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(u32::MAX);
    synthetic(max_steps);
    camera_replan();
}
