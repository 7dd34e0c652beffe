//! The `texstream` command line: parses the subcommand and runs it. User errors print their
//! chain of causes without a backtrace and exit with code 1; panics (bugs) keep Rust's report.
mod cli;

use std::process::ExitCode;

use clap::Parser;

#[derive(Parser)]
#[command(name = "texstream", version, about)]
enum Cli {
    /// Plan a workload's weight streaming under a memory cap and compare policies.
    Plan(cli::plan::PlanArgs),
    /// Check a workload without a GPU (models compiled and verified, pipelines checked) and
    /// print each pipeline's DAG.
    Check(cli::check::CheckArgs),
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

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A service reports reloads and shutdown in its log: show those by default.
    let default_level = if matches!(cli, Cli::Serve(_)) {
        "warn,texstream=info"
    } else {
        "error"
    };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_level))
        .init();
    // Ctrl-C (and SIGTERM/SIGHUP) remove the packed files being written before exiting. ctrlc's
    // signal handler only wakes its own thread, which runs this closure outside signal context.
    // `serve` handles the signals itself: it stops accepting and finishes what is in flight.
    if !matches!(cli, Cli::Serve(_)) {
        if let Err(e) = ctrlc::set_handler(|| {
            texstream::packed::temp::remove_in_progress();
            std::process::exit(130);
        }) {
            log::warn!("cannot install the interrupt handler: {e}");
        }
    }
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // The chain of causes on one line (like `{err:#}`); `{err:?}` would add a backtrace
            // when RUST_BACKTRACE is set, which a user error does not need.
            eprintln!("error: {}", chain_message(&err));
            ExitCode::FAILURE
        }
    }
}

/// `outer: cause: root cause`, skipping a cause whose text its parent already shows (many
/// errors print their source in their own message and also return it from `source()`).
fn chain_message(err: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if msg.contains(&text) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&text);
    }
    msg
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli {
        Cli::Plan(args) => cli::plan::run(&args),
        Cli::Check(args) => cli::check::run(&args),
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
