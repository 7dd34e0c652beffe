//! Planner benchmark (`cargo bench --bench planner`): how long the global scheduler takes to plan,
//! side by side for every streaming policy.
//!
//! 1. Synthetic five-model workloads of 10 k, 100 k and 1 M steps (`scheduler::synth::uniform`,
//!    a cap of a fifth of the weights plus 16 MiB): plan + simulate + validate, best of a few runs,
//!    with the plan's ratio to its lower bound and the process's peak resident memory after the
//!    size (Linux `VmHWM`).
//! 2. The service's case, a re-plan when a request arrives: the camera workload's frame pipeline
//!    (`workloads/camera-ocr.ron`, its profiles read from the packed models like `texstream
//!    plan`), planned at the workload's cap, median of 50; and `planned` as the service re-plans
//!    (`scheduler::replan`: the construction that won last time is known), with the frame's
//!    fan-out at 1 to 8 crops while the previous plan assumed the workload's count.
//!
//! `TEXSTREAM_BENCH_MAX_STEPS` lowers the largest size (CI machines, quick looks).
use std::path::Path;
use std::time::Instant;

use scheduler::synth::{uniform, UniformSpec};
use scheduler::{plan, replan, Bandwidth, Pipeline, Policy, Stage};

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
    // The service's re-plan: the previous plan (the workload's own fan-out) chose a
    // construction; each request's real crop count then gets a warm re-plan.
    let previous = match plan(&profiles, &pipeline, cap, &bw, Policy::Planned) {
        Ok(p) => p.stats.variant,
        Err(e) => {
            println!("planned (warm) error: {e}");
            return;
        }
    };
    println!("planned re-plans, previous construction `{previous}`, by crops per frame:");
    println!(
        "{:<6} {:>12} {:>12} {:>10} {:>10}   warm chose",
        "crops", "warm median", "full median", "warm ÷ LB", "full ÷ LB"
    );
    for crops in [1u32, 2, 4, 8] {
        let mut p = pipeline.clone();
        for st in p.stages.iter_mut().skip(1) {
            st.count = crops;
        }
        let mut warm = Vec::new();
        let mut chose = "";
        let mut warm_ratio = f64::NAN;
        for _ in 0..50 {
            let t = Instant::now();
            match replan(&profiles, &p, cap, &bw, Policy::Planned, previous) {
                Ok(r) => {
                    warm_ratio = r.stats.ratio;
                    chose = r.stats.variant;
                }
                Err(e) => {
                    println!("{crops:<6} error: {e}");
                    break;
                }
            }
            warm.push(t.elapsed().as_secs_f64() * 1e3);
        }
        warm.sort_by(f64::total_cmp);
        match (
            time_plans(&profiles, &p, cap, &bw, Policy::Planned, 50),
            warm.get(warm.len() / 2),
        ) {
            (Ok((full, full_ratio)), Some(w)) => println!(
                "{crops:<6} {w:>9.3} ms {:>9.3} ms {warm_ratio:>10.3} {full_ratio:>10.3}   {chose}",
                full[full.len() / 2]
            ),
            (Err(e), _) => println!("{crops:<6} error: {e}"),
            _ => {}
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
