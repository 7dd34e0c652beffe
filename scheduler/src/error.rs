//! Errors of the planner: bad input, infeasible caps, and invariant violations found by the validator.
use thiserror::Error;

/// Everything that can go wrong while planning, simulating or validating.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum PlanError {
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error(
        "cap {} ({cap} bytes) is below the minimum feasible cap {} ({min} bytes): step `{step}` of model \
         `{model}` reads {step_pages} pages ({}) and the activation peak is {}",
        crate::format_size(*.cap),
        crate::format_size(*.min),
        crate::format_size(*.step_bytes),
        crate::format_size(*.activation_bytes)
    )]
    CapTooSmall {
        cap: u64,
        min: u64,
        model: String,
        step: String,
        step_pages: u32,
        step_bytes: u64,
        activation_bytes: u64,
    },
    #[error("policy `{policy}` needs {needed_pages} resident pages ({needed_bytes} bytes) but the cap leaves {slots} slots")]
    PolicyExceedsCap {
        policy: String,
        needed_pages: u64,
        needed_bytes: u64,
        slots: u32,
    },
    #[error("unknown policy `{0}` (expected one of: preload, reload-per-model, on-demand, lru, planned)")]
    UnknownPolicy(String),
    #[error("invalid size `{input}`: {reason}")]
    Size { input: String, reason: String },
    #[error(
        "plan deadlocks: transfer op {op} waits for step {step}, which waits for a later transfer"
    )]
    Deadlock { op: usize, step: usize },
    #[error("plan violates an invariant: {0}")]
    Invariant(String),
}
