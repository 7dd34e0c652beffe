//! `texstream bench kernels`: kernels with tensors in images vs. storage buffers, and upload
//! bandwidth vs. device copy bandwidth (thin CLI over `vk_backend::bench`); `texstream bench
//! commands`: recorded against replayed commands (over `vk_backend::bench_commands`).

use anyhow::Context as _;
use serde_json::{json, Value};
use vk_backend::bench::{self, BenchConfig, BenchReport, Timing};
use vk_backend::Precision;

#[derive(clap::Args, Debug)]
pub struct BenchArgs {
    #[command(subcommand)]
    pub what: BenchWhat,
}

#[derive(clap::Subcommand, Debug)]
pub enum BenchWhat {
    /// MatMul/Conv2d/elementwise GFLOP/s with tensors in images vs. storage buffers, and
    /// staging -> image / buffer upload bandwidth vs. device copy bandwidth.
    Kernels(KernelBenchArgs),
    /// An open request stream: pipelines of one workload submitted concurrently (a fixed
    /// period, seeded random times) under one cap, each policy on a fresh engine.
    Stream(super::bench_stream::StreamArgs),
    /// Reloads under load: N reloads of the workload (every k-th invalid) while a client runs.
    Reloads(super::bench_reload::ReloadArgs),
    /// A chain of small dependent dispatches recorded every run against recorded once into
    /// secondary command buffers: host time to record a run, GPU time per dispatch.
    Commands(CommandsBenchArgs),
}

#[derive(clap::Args, Debug)]
pub struct CommandsBenchArgs {
    /// Dispatches in the chain (rounded up to even).
    #[arg(long, default_value_t = 512, value_parser = clap::value_parser!(u32).range(1..))]
    pub dispatches: u32,
    /// Timed runs per way (median reported).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: u32,
    /// Storage precision of the chain's tensors.
    #[arg(long, value_enum, default_value = "f16")]
    pub precision: PrecisionArg,
    /// Device index or name substring (default: TEXSTREAM_DEVICE, then discrete > integrated > ...).
    #[arg(long)]
    pub device: Option<String>,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrecisionArg {
    F16,
    F32,
}

#[derive(clap::Args, Debug)]
pub struct KernelBenchArgs {
    /// Storage precision of tensors (RGBA16F or RGBA32F texels).
    #[arg(long, value_enum, default_value = "f16")]
    pub precision: PrecisionArg,
    /// Small sizes for CPU drivers such as lavapipe (under a minute on 2 cores).
    #[arg(long)]
    pub quick: bool,
    /// Timed runs per case (median reported); default 10, 3 with --quick.
    #[arg(long)]
    pub runs: Option<u32>,
    /// MiB per copy in the bandwidth test; default 256, 4 with --quick.
    #[arg(long)]
    pub copy_mib: Option<u64>,
    /// Keep the GPU busy this many ms before measuring (clock ramp-up); default 1000, 0 with --quick.
    #[arg(long)]
    pub spin_up_ms: Option<u64>,
    /// Only cases whose kernel name or shape contains this (repeatable).
    #[arg(long)]
    pub only: Vec<String>,
    /// Device index or name substring (default: TEXSTREAM_DEVICE, then discrete > integrated > ...).
    #[arg(long)]
    pub device: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Also write the JSON report to this file.
    #[arg(long, value_name = "PATH")]
    pub save_json: Option<std::path::PathBuf>,
}

pub fn run(args: &BenchArgs) -> anyhow::Result<()> {
    match &args.what {
        BenchWhat::Stream(a) => super::bench_stream::run(a),
        BenchWhat::Reloads(a) => super::bench_reload::run(a),
        BenchWhat::Kernels(a) => run_kernels(a),
        BenchWhat::Commands(a) => run_commands(a),
    }
}

fn run_commands(a: &CommandsBenchArgs) -> anyhow::Result<()> {
    let (device, _placed) = super::infer::open_device(&a.device)?;
    let cfg = vk_backend::bench_commands::CommandsConfig {
        dispatches: a.dispatches,
        runs: a.runs,
        precision: match a.precision {
            PrecisionArg::F16 => Precision::F16,
            PrecisionArg::F32 => Precision::F32,
        },
        ..Default::default()
    };
    let r = vk_backend::bench_commands::run(&device, &cfg).context("command benchmark failed")?;
    let mut out = format!(
        "commands on {}: a chain of {} dependent dispatches of {} elements, median of {} runs\n",
        r.device, r.dispatches, cfg.elems, r.runs
    );
    out += &format!(
        "{:<60} {:>14} {:>12} {:>17} {:>11}\n",
        "way", "host µs a run", "submit µs", "GPU µs/dispatch", "max |diff|"
    );
    for row in &r.rows {
        out += &format!(
            "{:<60} {:>14.1} {:>12.1} {:>17.3} {:>11.2e}\n",
            row.way, row.host_us, row.submit_us, row.gpu_us_per_dispatch, row.max_abs_diff
        );
    }
    super::devices::write_stdout(&out)
}

fn run_kernels(a: &KernelBenchArgs) -> anyhow::Result<()> {
    let precision = match a.precision {
        PrecisionArg::F16 => Precision::F16,
        PrecisionArg::F32 => Precision::F32,
    };
    let mut cfg = BenchConfig::new(precision, a.quick);
    if let Some(r) = a.runs {
        anyhow::ensure!(r > 0, "--runs must be at least 1");
        cfg.runs = r;
    }
    if let Some(m) = a.copy_mib {
        anyhow::ensure!(m > 0, "--copy-mib must be at least 1");
        cfg.copy_bytes = m << 20;
    }
    cfg.filter = a.only.clone();
    if let Some(ms) = a.spin_up_ms {
        cfg.spin_up_ms = ms;
    }
    let (device, _placed) = super::infer::open_device(&a.device)?;
    let report = bench::run(&device, &cfg).context("kernel benchmark failed")?;
    let json = serde_json::to_string_pretty(&to_json(&report))? + "\n";
    if let Some(path) = &a.save_json {
        std::fs::write(path, &json)
            .with_context(|| format!("writing the JSON report to {}", path.display()))?;
    }
    let out = if a.json { json } else { table(&report) };
    super::devices::write_stdout(&out)
}

fn timing_json(t: &Timing) -> Value {
    json!({
        "median_ms": t.median_ms,
        "min_ms": t.min_ms,
        "gflops": t.gflops,
        "gbps": t.gbps,
    })
}

fn to_json(r: &BenchReport) -> Value {
    json!({
        "device": r.device,
        "precision": format!("{:?}", r.precision).to_lowercase(),
        "runs": r.runs,
        "kernels": r.kernels.iter().map(|k| json!({
            "kernel": k.kernel,
            "shape": k.shape,
            "flops": k.flops,
            "bytes": k.bytes,
            "image": timing_json(&k.image),
            "buffer": timing_json(&k.buffer),
            "buffer_over_image_speed": k.image.median_ms / k.buffer.median_ms,
            "max_rel_diff": k.max_rel_diff,
        })).collect::<Vec<_>>(),
        "copies": r.copies.iter().map(|c| json!({
            "what": c.what,
            "queue": c.queue,
            "bytes": c.bytes,
            "median_ms": c.median_ms,
            "gbps": c.gbps,
            "fraction_of_device_copy": c.fraction_of_device_copy,
            "fraction_of_best_device_copy": c.fraction_of_best_device_copy,
        })).collect::<Vec<_>>(),
        "staging_in_host_memory": r.staging_in_host_memory,
        "skipped": r.skipped.iter().map(|(c, why)| json!({"case": c, "reason": why}))
            .collect::<Vec<_>>(),
    })
}

fn table(r: &BenchReport) -> String {
    use std::fmt::Write as _;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "device: {}   precision: {:?}   median of {} timed runs (GPU timestamps)\n",
        r.device, r.precision, r.runs
    );
    let _ = writeln!(
        s,
        "{:<8} {:<56} {:>10} {:>9} {:>9} {:>10} {:>9} {:>9} {:>8} {:>9}",
        "kernel",
        "shape",
        "image ms",
        "GFLOP/s",
        "GB/s",
        "buffer ms",
        "GFLOP/s",
        "GB/s",
        "img/buf",
        "max diff"
    );
    for k in &r.kernels {
        let _ = writeln!(
            s,
            "{:<8} {:<56} {:>10.3} {:>9.1} {:>9.1} {:>10.3} {:>9.1} {:>9.1} {:>7.2}x {:>9.1e}",
            k.kernel,
            k.shape,
            k.image.median_ms,
            k.image.gflops,
            k.image.gbps,
            k.buffer.median_ms,
            k.buffer.gflops,
            k.buffer.gbps,
            k.buffer.median_ms / k.image.median_ms,
            k.max_rel_diff
        );
    }
    let _ = writeln!(
        s,
        "(img/buf = buffer time / image time: > 1 means images are faster. GB/s counts \
         activation bytes read + written once.)\n"
    );
    for (c, why) in &r.skipped {
        let _ = writeln!(s, "skipped {c}: {why}");
    }
    if let Some(c) = r.copies.first() {
        let _ = writeln!(
            s,
            "copies of {:.1} MiB (the engine's staging buffers are in {} memory; \
             GB/s = bytes copied / time):",
            c.bytes as f64 / (1u64 << 20) as f64,
            if r.staging_in_host_memory {
                "host"
            } else {
                "device-local host-visible"
            }
        );
    }
    let _ = writeln!(
        s,
        "{:<34} {:<9} {:>10} {:>9} {:>14} {:>14}",
        "copy", "queue", "ms", "GB/s", "of CopyBuffer", "of best copy"
    );
    for c in &r.copies {
        // "of CopyBuffer": vs vkCmdCopyBuffer buffer -> buffer on the compute queue; "of best copy":
        // vs the fastest device-to-device copy of the run (the identity kernel on some GPUs).
        let _ = writeln!(
            s,
            "{:<34} {:<9} {:>10.3} {:>9.2} {:>13.1}% {:>13.1}%",
            c.what,
            c.queue,
            c.median_ms,
            c.gbps,
            100.0 * c.fraction_of_device_copy,
            100.0 * c.fraction_of_best_device_copy
        );
    }
    s
}
