//! Runs a packed model's IR on Vulkan textures: weight preload, static activation arena, per-node
//! kernel dispatch recorded into one command buffer, and .npy I/O for the CLI and tests.
pub mod arena;
pub mod dispatch;
pub mod error;
pub mod executor;
pub mod npy;
pub mod shape_cache;
pub mod weights;

pub use arena::{ArenaPlan, ArenaStats};
pub use error::RuntimeError;
pub use executor::{BuildOptions, Executable, HostTensor, RunTimings};
pub use weights::WeightResidency;
pub mod auto_compile;
pub mod metrics;
pub mod run_budget;
pub mod run_model;
pub mod run_source;
pub mod stream_exec;
pub mod workload_run;
