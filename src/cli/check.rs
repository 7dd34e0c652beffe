//! `texstream check WORKLOAD.ron`: everything about a workload that can be checked without a
//! GPU (the file, its models compiled where stale and verified, every pipeline checked into a
//! typed DAG), then each pipeline's DAG and the scheduler's minimum cap. Exits non-zero on the
//! first problem, with its `file:line:col` or model file.
use std::path::PathBuf;

use anyhow::{Context, Result};
use scheduler::{format_size, min_feasible_cap, Pipeline};
use texstream::engine::loaded::load;
use texstream::workload::load_workload;

use super::args::Progress;

#[derive(clap::Args, Debug)]
pub struct CheckArgs {
    /// Workload file (RON).
    pub workload: PathBuf,
    /// Also list the single-model pipelines (every model can be called alone by its name).
    #[arg(long)]
    pub models: bool,
}

pub fn run(args: &CheckArgs) -> Result<()> {
    let w = load_workload(&args.workload)?;
    let progress = Progress::new();
    let loaded = load(w, None, None, &mut |model, why| {
        progress.say(&format!("compiling model `{model}` ({why})"));
    })
    .with_context(|| format!("checking {}", args.workload.display()))?;
    progress.finish();
    println!(
        "workload `{}`: {} models, {} of weights, cap {}, policy {}, pages of {}",
        loaded.workload.spec.name,
        loaded.models.len(),
        format_size(loaded.weight_bytes()),
        format_size(loaded.cap),
        loaded.policy.name(),
        format_size(loaded.page_bytes)
    );
    for ((name, pm), prof) in loaded.models.iter().zip(&loaded.profiles) {
        println!(
            "  model `{name}`: {} pages, {} of weights, {} steps",
            pm.page_count(),
            format_size(prof.weight_bytes()),
            prof.steps.len()
        );
    }
    let shown = if args.models {
        loaded.graphs.len()
    } else {
        loaded.pipelines
    };
    for g in &loaded.graphs[..shown] {
        println!();
        print!("{}", g.describe());
        let pipeline = Pipeline {
            stages: g.expected_stages(),
            repetitions: 1,
        };
        match min_feasible_cap(&loaded.profiles, &pipeline) {
            Ok(m) => println!(
                "  minimum cap for one request as expected: {} (step `{}` of `{}` reads {} \
                 pages; plus the state below; the device adds the engine's own buffers, which \
                 `run` measures)",
                format_size(m.bytes),
                m.step,
                m.model,
                m.step_pages
            ),
            Err(e) => println!("  no plan: {e}"),
        }
    }
    let state = state_bytes(&loaded);
    if state > 0 {
        println!(
            "\nstate kept on the device all session (key/value caches, at their precision): {}",
            format_size(state)
        );
    }
    println!("\nok: no device was opened");
    Ok(())
}

/// Bytes of every model's state tensors (its key/value caches) as the engine stores them: C4
/// texels at the cache's precision (the workload's `KvCacheSpec::precision`, else the
/// activations', else the weights').
fn state_bytes(loaded: &texstream::engine::loaded::Loaded) -> u64 {
    loaded
        .models
        .iter()
        .map(|(name, pm)| {
            let h = pm.header();
            let (_, precision) = loaded.tensor_precisions(name, pm).resolved(h.precision);
            h.graph
                .state
                .iter()
                .map(|s| {
                    texstream::ir::c4_bytes(&h.graph.tensors[s.tensor].shape, 1) as u64 / 4
                        * precision.bytes_per_texel() as u64
                })
                .sum::<u64>()
        })
        .sum()
}
