//! Subcommand implementations of the `texstream` CLI.
pub mod compile;
pub mod infer;
pub mod ocr;
pub mod plan;
pub mod run;
