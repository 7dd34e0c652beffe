//! Runs packed models on the Vulkan backend: the executor (weights, the liveness-planned
//! activation arena, per-node kernel dispatch), `.npy` I/O, and the streaming side the engine
//! drives: a model's executor on the shared page space ([`run_model`]), packed files as page
//! sources ([`run_source`]), the cap accounting ([`run_budget`]), the plan follower ([`stream_exec`]) and the
//! lower bound of what it ran ([`ran_bound`]).
pub mod arena;
pub mod dispatch;
pub mod error;
pub mod executor;
pub mod npy;
pub mod ran_bound;
mod replay;
pub mod weights;

pub use arena::{ArenaPlan, ArenaStats};
pub use error::RuntimeError;
pub use executor::{BuildOptions, Executable, HostTensor, RunTimings, TensorPrecisions};
pub use weights::WeightResidency;
pub mod run_budget;
pub mod run_model;
pub mod run_source;
pub mod stream_exec;
