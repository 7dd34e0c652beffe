use clap::Parser;

#[derive(Parser)]
#[command(name = "texstream", version, about)]
enum Cli {
    /// Import an ONNX model, optimize it and write a packed model (.tspk).
    Compile(texstream::cli::compile::CompileArgs),
}

fn main() -> anyhow::Result<()> {
    env_logger::init();
    match Cli::parse() {
        Cli::Compile(args) => texstream::cli::compile::run(&args),
    }
}
