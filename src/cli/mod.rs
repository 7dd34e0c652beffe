//! Subcommand implementations of the `texstream` CLI.
pub mod compile;
