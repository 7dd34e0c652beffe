use clap::Parser;

#[derive(Parser)]
#[command(name = "texstream", version, about)]
enum Cli {
    /// Plan a workload's weight streaming under a memory cap and compare policies.
    Plan(texstream::cli::plan::PlanArgs),
    /// Import an ONNX model, optimize it and write a packed model (.tspk).
    Compile(texstream::cli::compile::CompileArgs),
}

fn main() -> anyhow::Result<()> {
    env_logger::init();
    match Cli::parse() {
        Cli::Plan(args) => texstream::cli::plan::run(&args),
        Cli::Compile(args) => texstream::cli::compile::run(&args),
    }
}
