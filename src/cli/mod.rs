//! Subcommand implementations of the `texstream` CLI.
pub mod bench;
pub mod compile;
pub mod devices;
pub mod infer;
pub mod ocr;
pub mod plan;
pub mod run;
