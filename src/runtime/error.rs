//! Errors of the runtime: each names the node, tensor or file it concerns.
use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("node `{node}`: op {op} has no Vulkan kernel yet")]
    UnsupportedOp { node: String, op: String },
    #[error("node `{node}` ({op}): {reason}")]
    BadNode {
        node: String,
        op: String,
        reason: String,
    },
    #[error("node `{node}`: {source}")]
    Kernel {
        node: String,
        source: vk_backend::VkError,
    },
    #[error("{what}: {source}")]
    Vk {
        what: String,
        source: vk_backend::VkError,
    },
    #[error(transparent)]
    Packed(#[from] crate::packed::PackedError),
    #[error("weight page {page} of {source_name}: {source}")]
    PageRead {
        source_name: String,
        page: u32,
        source: std::io::Error,
    },
    #[error("input `{name}`: {reason}")]
    Input { name: String, reason: String },
    #[error("{file}: {reason}")]
    Npy { file: PathBuf, reason: String },
    #[error("activation precision: {0}")]
    ActivationPrecision(String),
    #[error("model precision {model:?} differs from the requested {requested:?}")]
    Precision {
        model: crate::packed::Precision,
        requested: crate::packed::Precision,
    },
}

pub type Result<T> = std::result::Result<T, RuntimeError>;

/// Wraps a backend error with a description of what was being done.
pub(crate) fn vk(what: impl Into<String>) -> impl FnOnce(vk_backend::VkError) -> RuntimeError {
    let what = what.into();
    move |source| RuntimeError::Vk { what, source }
}
