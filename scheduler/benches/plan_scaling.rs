//! Planner scaling benchmark: plans 5-model synthetic workloads of 1k to 100k steps with every policy
//! and prints the wall time (plan + simulate + validate). Run: `cargo bench -p texstream-scheduler`.
use scheduler::synth::{uniform, UniformSpec};
use scheduler::{plan, Bandwidth, Pipeline, Policy, Stage};
use std::time::Instant;

fn main() {
    let bw = Bandwidth::default();
    println!(
        "{:>8} {:>7} {:<17} {:>12} {:>10} {:>8}",
        "steps", "models", "policy", "plan time", "µs/step", "÷ LB"
    );
    for steps in [1_000u32, 10_000, 100_000] {
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
        for policy in [Policy::OnDemand, Policy::Lru, Policy::Planned] {
            let mut best = f64::INFINITY;
            let mut ratio = 0.0;
            for _ in 0..3 {
                let t = Instant::now();
                let p =
                    plan(&profiles, &pipeline, cap, &bw, policy).expect("synthetic workload plans");
                best = best.min(t.elapsed().as_secs_f64());
                ratio = p.stats.ratio;
            }
            println!(
                "{steps:>8} {:>7} {:<17} {:>9.3} ms {:>10.3} {:>8.3}",
                5,
                policy.name(),
                best * 1e3,
                best * 1e6 / steps as f64,
                ratio
            );
        }
    }
}
