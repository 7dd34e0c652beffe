//! The engine's errors: opening or reloading a workload ([`EngineError`]) and answering one
//! request ([`RequestError`]). Each names the file, model, pipeline or step it is about. Device
//! errors are carried as text so that no Vulkan type appears in the API.
use std::path::PathBuf;

use crate::compile::auto::AutoCompileError;
use crate::pipeline::{ExecError, GraphError};
use crate::runtime::run_budget::CapError;
use crate::workload::WorkloadError;

/// Why a workload could not be opened or reloaded.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error(transparent)]
    Compile(Box<AutoCompileError>),
    #[error(transparent)]
    Pipeline(#[from] GraphError),
    #[error("{workload}: model `{model}`: {msg}")]
    Model {
        workload: PathBuf,
        model: String,
        msg: String,
    },
    #[error(transparent)]
    Cap(#[from] CapError),
    #[error("device: {0}")]
    Device(String),
    #[error("the engine has shut down")]
    Shutdown,
}

impl From<AutoCompileError> for EngineError {
    fn from(e: AutoCompileError) -> Self {
        EngineError::Compile(Box::new(e))
    }
}

impl From<ExecError> for RequestError {
    fn from(e: ExecError) -> Self {
        RequestError::Exec(Box::new(e))
    }
}

impl EngineError {
    pub(crate) fn device(e: impl std::fmt::Display) -> EngineError {
        EngineError::Device(e.to_string())
    }
}

/// Why a request got no outputs.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// The queue was full (try again later).
    #[error("busy: {depth} requests are queued, the limit")]
    Busy { depth: usize },
    #[error("unknown pipeline or model `{name}` (this workload has: {known})")]
    UnknownPipeline { name: String, known: String },
    #[error(transparent)]
    Exec(Box<ExecError>),
    #[error("request cancelled")]
    Cancelled,
    #[error("deadline exceeded")]
    DeadlineExceeded,
    #[error("the engine has shut down")]
    Shutdown,
    /// The device failed during the request; the engine rebuilt its streaming state and serves
    /// the next requests.
    #[error("device error: {0}")]
    Device(String),
}
