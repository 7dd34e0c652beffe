//! The `texstream` command line.
mod cli;

use clap::Parser;

#[derive(Parser)]
#[command(name = "texstream", version, about)]
enum Cli {
    /// Plan a workload's weight streaming under a memory cap and compare policies.
    Plan(cli::plan::PlanArgs),
    /// Run a workload's pipeline with its models streamed under the cap; print outputs and metrics.
    Run(cli::run::RunArgs),
    /// Import an ONNX model, optimize it and write a packed model (.tspk).
    Compile(cli::compile::CompileArgs),
    /// List every Vulkan device: limits, queues, memory, features texstream cares about.
    Devices(cli::devices::DevicesArgs),
    /// Benchmarks (`bench kernels`: images vs. storage buffers, upload bandwidth).
    Bench(cli::bench::BenchArgs),
    /// Run an ONNX or packed model on .npy inputs on the GPU; writes one .npy per output.
    Infer(cli::infer::InferArgs),
    /// Read the text in an image (PP-OCR detector, classifier and recognizer on the GPU).
    Ocr(cli::ocr::OcrArgs),
    /// Serve the workload over HTTP (KServe v2 inference, /metrics, status page, hot reload).
    Serve(cli::serve::ServeArgs),
    /// Load-test a running `texstream serve`: C clients x N requests; throughput, p50/p99.
    Loadgen(cli::loadgen::LoadgenArgs),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    // A service reports reloads and shutdown in its log: show those by default.
    let default_level = if matches!(cli, Cli::Serve(_)) {
        "warn,texstream=info"
    } else {
        "error"
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        .init();
    match cli {
        Cli::Plan(args) => cli::plan::run(&args),
        Cli::Run(args) => cli::run::run(&args),
        Cli::Compile(args) => cli::compile::run(&args),
        Cli::Devices(args) => cli::devices::run(&args),
        Cli::Bench(args) => cli::bench::run(&args),
        Cli::Infer(args) => cli::infer::run(&args),
        Cli::Ocr(args) => cli::ocr::run(&args),
        Cli::Serve(args) => cli::serve::run(&args),
        Cli::Loadgen(args) => cli::loadgen::run(&args),
    }
}
