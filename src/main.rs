use clap::Parser;

#[derive(Parser)]
#[command(name = "texstream", version, about)]
enum Cli {
    /// Plan a workload's weight streaming under a memory cap and compare policies.
    Plan(texstream::cli::plan::PlanArgs),
    /// Run a workload's pipeline with its models streamed under the cap; print outputs and metrics.
    Run(texstream::cli::run::RunArgs),
    /// Import an ONNX model, optimize it and write a packed model (.tspk).
    Compile(texstream::cli::compile::CompileArgs),
    /// List every Vulkan device: limits, queues, memory, features texstream cares about.
    Devices(texstream::cli::devices::DevicesArgs),
    /// Benchmarks (`bench kernels`: images vs. storage buffers, upload bandwidth).
    Bench(texstream::cli::bench::BenchArgs),
    /// Run an ONNX or packed model on .npy inputs on the GPU; writes one .npy per output.
    Infer(texstream::cli::infer::InferArgs),
    /// Read the text in an image: PP-OCR det/cls/rec run on the GPU by the executor.
    Ocr(texstream::cli::ocr::OcrArgs),
}

fn main() -> anyhow::Result<()> {
    env_logger::init();
    match Cli::parse() {
        Cli::Plan(args) => texstream::cli::plan::run(&args),
        Cli::Run(args) => texstream::cli::run::run(&args),
        Cli::Compile(args) => texstream::cli::compile::run(&args),
        Cli::Devices(args) => texstream::cli::devices::run(&args),
        Cli::Bench(args) => texstream::cli::bench::run(&args),
        Cli::Infer(args) => texstream::cli::infer::run(&args),
        Cli::Ocr(args) => texstream::cli::ocr::run(&args),
    }
}
