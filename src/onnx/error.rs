//! Import errors: every variant names the file and, where it applies, the node, op type and tensor.
use std::path::PathBuf;

/// Where the list of supported ONNX ops lives (named in unknown-op errors).
pub const SUPPORTED_OPS_LOCATION: &str = "texstream::onnx::SUPPORTED_OPS (src/onnx/supported.rs)";

#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("{file}: cannot read model: {source}")]
    Io {
        file: PathBuf,
        source: std::io::Error,
    },
    #[error("{file}: not a valid ONNX model: protobuf decoding failed ({reason}); the file is truncated or not an ONNX protobuf")]
    Decode { file: PathBuf, reason: String },
    #[error("{file}: not a valid ONNX model: {reason}")]
    NotOnnx { file: PathBuf, reason: String },
    #[error("{file}: unsupported opset {version} for domain '{domain}' (texstream supports ai.onnx opsets 11 to 18)")]
    Opset {
        file: PathBuf,
        domain: String,
        version: i64,
    },
    #[error("{file}: node '{node}': unsupported op '{op}' (domain '{domain}'); supported ops are listed in {}", SUPPORTED_OPS_LOCATION)]
    UnknownOp {
        file: PathBuf,
        node: String,
        op: String,
        domain: String,
    },
    #[error(
        "{file}: input '{input}': shape mismatch: the model declares {expected}, given {given}"
    )]
    InputShape {
        file: PathBuf,
        input: String,
        expected: String,
        given: String,
    },
    #[error("{file}: input '{input}': needs a concrete shape (model declares {declared}); pass --input {input}=D0xD1x..")]
    MissingInputShape {
        file: PathBuf,
        input: String,
        declared: String,
    },
    #[error("{file}: no model input named '{input}' (model inputs: {available})")]
    UnknownInput {
        file: PathBuf,
        input: String,
        available: String,
    },
    #[error("{file}: {source}")]
    Constant {
        file: PathBuf,
        #[source]
        source: super::tensor::TensorError,
    },
    #[error("{file}: tensor '{tensor}': {reason}")]
    Tensor {
        file: PathBuf,
        tensor: String,
        reason: String,
    },
    #[error("{file}: node '{node}' (op {op}), tensor '{tensor}': {reason}")]
    Node {
        file: PathBuf,
        node: String,
        op: String,
        tensor: String,
        reason: String,
    },
}
