//! The `texstream` command line: one module per subcommand, each a thin layer over the
//! library, and what they share in [`args`].
pub mod args;
pub mod bench;
pub mod bench_reload;
pub mod bench_stream;
pub mod check;
pub mod compile;
pub mod devices;
pub mod infer;
pub mod loadgen;
pub mod ocr;
pub mod plan;
pub mod profile;
pub mod run;
pub mod serve;
