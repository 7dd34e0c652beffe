//! Errors of the OCR steps.

use std::path::PathBuf;

/// Error type model-run closures may return (anything that converts, e.g. `anyhow::Error`).
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

#[derive(Debug, thiserror::Error)]
pub enum OcrError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{what}: cannot decode image: {source}")]
    Decode {
        what: String,
        #[source]
        source: super::image::ImageError,
    },
    #[error("{what}: tensor shape {shape:?} does not fit: expected {expected}")]
    Shape {
        what: String,
        shape: Vec<usize>,
        expected: String,
    },
    #[error("invalid input: {0}")]
    Invalid(String),
    #[error("{model} model run failed: {source}")]
    Model {
        model: &'static str,
        #[source]
        source: BoxError,
    },
}
