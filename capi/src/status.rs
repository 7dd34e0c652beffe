//! What every C function returns: [`TsStatus`], one code per way a call can fail, and the
//! crate's error type [`CapiError`], which says what failed (its text becomes the thread's last
//! error) and which code that is.
use texstream::{EngineError, RequestError};

/// The result of a call. `TS_STATUS_OK` is 0; every other code leaves a message naming what
/// failed for `ts_last_error()`. The numbers are part of the ABI and do not change.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsStatus {
    Ok = 0,
    /// A pointer argument that must not be NULL was NULL.
    NullArgument = 1,
    /// An argument was out of range or malformed (not UTF-8, a shape that does not match the
    /// data, an index past the end, an undecodable image, an unknown policy).
    InvalidArgument = 2,
    /// `TsValues` holds no value of that name.
    NotFound = 3,
    /// The value exists but is of another kind than the reader asks for.
    WrongKind = 4,
    /// The workload could not be opened or reloaded: the file, a model, a pipeline or a
    /// compilation is wrong.
    Workload = 5,
    /// The memory cap is below what the workload needs (the message names the minimum).
    Cap = 6,
    /// The Vulkan device failed, or none could be opened.
    Device = 7,
    /// The workload has no pipeline or model of that name.
    UnknownPipeline = 8,
    /// The request queue is full; try again later.
    Busy = 9,
    /// `ts_request_wait` timed out; the request is still pending and may be waited on again.
    Timeout = 10,
    /// The request was cancelled before it finished.
    Cancelled = 11,
    /// The request's deadline passed before it finished.
    DeadlineExceeded = 12,
    /// The request ran and failed (wrong inputs for the pipeline, a step's error).
    RequestFailed = 13,
    /// The engine has shut down.
    Shutdown = 14,
    /// texstream panicked inside the call (a bug); the panic was caught at the boundary.
    Panic = 15,
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CapiError {
    #[error("argument `{0}` is NULL")]
    Null(&'static str),
    #[error("argument `{0}` is not valid UTF-8")]
    Utf8(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error("no value named `{name}` (the values are: {known})")]
    NotFound { name: String, known: String },
    #[error("value `{name}` is {actual}, not {wanted}")]
    WrongKind {
        name: String,
        actual: String,
        wanted: &'static str,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error("timed out after {0} ms; the request is still pending")]
    Timeout(u64),
}

impl CapiError {
    /// The status code this error is reported as.
    pub fn status(&self) -> TsStatus {
        match self {
            CapiError::Null(_) => TsStatus::NullArgument,
            CapiError::Utf8(_) | CapiError::Invalid(_) => TsStatus::InvalidArgument,
            CapiError::NotFound { .. } => TsStatus::NotFound,
            CapiError::WrongKind { .. } => TsStatus::WrongKind,
            CapiError::Engine(e) => match e {
                EngineError::Cap(_) => TsStatus::Cap,
                EngineError::Device(_) => TsStatus::Device,
                EngineError::Shutdown => TsStatus::Shutdown,
                EngineError::Workload(_)
                | EngineError::Compile(_)
                | EngineError::Pipeline(_)
                | EngineError::Model { .. } => TsStatus::Workload,
            },
            CapiError::Request(e) => match e {
                RequestError::Busy { .. } => TsStatus::Busy,
                RequestError::UnknownPipeline { .. } => TsStatus::UnknownPipeline,
                RequestError::Exec(_) => TsStatus::RequestFailed,
                RequestError::Cancelled => TsStatus::Cancelled,
                RequestError::DeadlineExceeded => TsStatus::DeadlineExceeded,
                RequestError::Shutdown => TsStatus::Shutdown,
                RequestError::Device(_) => TsStatus::Device,
            },
            CapiError::Timeout(_) => TsStatus::Timeout,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_errors_keep_their_own_codes() {
        let cases = [
            (RequestError::Busy { depth: 8 }, TsStatus::Busy),
            (
                RequestError::UnknownPipeline {
                    name: "x".into(),
                    known: "`y`".into(),
                },
                TsStatus::UnknownPipeline,
            ),
            (RequestError::Cancelled, TsStatus::Cancelled),
            (RequestError::DeadlineExceeded, TsStatus::DeadlineExceeded),
            (RequestError::Shutdown, TsStatus::Shutdown),
            (RequestError::Device("lost".into()), TsStatus::Device),
        ];
        for (e, want) in cases {
            assert_eq!(CapiError::from(e).status(), want);
        }
        assert_eq!(CapiError::Timeout(5).status(), TsStatus::Timeout);
        assert_eq!(
            CapiError::from(EngineError::Device("none".into())).status(),
            TsStatus::Device
        );
    }
}
