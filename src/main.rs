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
}

fn main() -> anyhow::Result<()> {
    env_logger::init();
    match Cli::parse() {
        Cli::Plan(args) => cli::plan::run(&args),
        Cli::Run(args) => cli::run::run(&args),
        Cli::Compile(args) => cli::compile::run(&args),
        Cli::Devices(args) => cli::devices::run(&args),
        Cli::Bench(args) => cli::bench::run(&args),
        Cli::Infer(args) => cli::infer::run(&args),
        Cli::Ocr(args) => cli::ocr::run(&args),
    }
}
