//! Import errors: every variant names the file and, where it applies, the node, op type and tensor.
use std::path::PathBuf;

use crate::ir::eval::EvalError;
use crate::ir::infer::InferError;

/// Where the list of supported ONNX ops lives (named in unknown-op errors).
pub const SUPPORTED_OPS_LOCATION: &str = "texstream::onnx::SUPPORTED_OPS (src/onnx/ops/mod.rs)";

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
    #[error("{file}: input '{input}': needs a concrete shape (model declares {declared}); give it as `--shape {input}=D0xD1x..` (`texstream compile`) or in the workload's `inputs`, or, for a decoder's past keys and values, give the model a key/value cache (`--kv-cache MAX_LEN`, or the workload's `kv_cache`)")]
    MissingInputShape {
        file: PathBuf,
        input: String,
        declared: String,
    },
    #[error("{file}: key/value cache: {reason}")]
    KvCache { file: PathBuf, reason: String },
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
    /// The IR op a node became has no valid output shape.
    #[error("{file}: node '{node}' (op {op}), tensor '{tensor}': {source}")]
    Infer {
        file: PathBuf,
        node: String,
        op: String,
        tensor: String,
        // Boxed: every import Result carries this enum, and the IR errors hold shapes.
        source: Box<InferError>,
    },
    /// Folding the IR op of a node with constant inputs failed.
    #[error("{file}: node '{node}' (op {op}), tensor '{tensor}': {source}")]
    Fold {
        file: PathBuf,
        node: String,
        op: String,
        tensor: String,
        source: Box<EvalError>,
    },
}

/// A malformed `NAME=D0xD1x..` input shape or `NAME=VALUE` binding (`--input`, `--bind`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("input spec '{spec}' is not NAME=D0xD1x...")]
    InputForm { spec: String },
    #[error("input spec '{spec}': '{dim}' is not a dimension")]
    InputDim { spec: String, dim: String },
    #[error("binding '{spec}' is not NAME=VALUE")]
    BindingForm { spec: String },
    #[error("binding '{spec}': '{value}' is not a number")]
    BindingValue { spec: String, value: String },
}
