//! Subcommand implementations of the `texstream` CLI.
pub mod compile;
pub mod plan;
