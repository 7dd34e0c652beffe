//! ONNX import: protobuf decoding, opset checks, per-op conversion into the IR with shape
//! inference and constant folding (shape subgraphs, `If` on constant conditions). Protobuf types
//! never leave this module.
mod attrs;
mod error;
mod import;
mod kv_cache;
mod ops;
mod peek;
mod tensor;

#[allow(clippy::all, clippy::pedantic, missing_docs)]
mod proto {
    include!(concat!(env!("OUT_DIR"), "/onnx.rs"));
}

use std::collections::BTreeMap;
use std::path::Path;

pub use error::{ImportError, SpecError, SUPPORTED_OPS_LOCATION};
pub use ops::SUPPORTED_OPS;
pub use peek::{read_tensor_pb, summarize_model, ModelSummary};
pub use tensor::{TensorError, TensorProblem};

use crate::ir::{DType, Graph, TensorData};

/// What the caller fixes about the model's inputs.
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Concrete shapes for inputs, by name.
    pub input_shapes: BTreeMap<String, Vec<usize>>,
    /// Inputs bound to constant values (e.g. Silero VAD's `sr=16000`); they become constants and
    /// let the importer fold `If` nodes on them.
    pub bindings: BTreeMap<String, TensorData>,
    /// Rewrite a with-past decoder's caches into state updated in place (see [`KvCache`]).
    pub kv_cache: Option<KvCache>,
}

/// How a decoder exported with past keys and values (`present = Concat(past, new)`, the
/// standard `with_past` form) keeps its cache: every past input that only that Concat reads,
/// and whose Concat result is a graph output, becomes a state tensor of `max_len` positions
/// that the model writes in place at the position the `position_input`'s first element holds.
/// The caller stops passing past and reading present; the attention mask input is sized
/// `max_len` and the graph's own mask hides the positions not written yet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KvCache {
    pub max_len: usize,
    pub position_input: String,
}

impl ImportOptions {
    /// Parses `NAME=D0xD1x...` (e.g. `x=1x3x640x640`; `NAME=` or `NAME=scalar` for a scalar).
    pub fn add_input_spec(&mut self, spec: &str) -> Result<(), SpecError> {
        let (name, dims) = spec.split_once('=').ok_or_else(|| SpecError::InputForm {
            spec: spec.to_string(),
        })?;
        let shape = if dims.is_empty() || dims == "scalar" {
            Vec::new()
        } else {
            dims.split(['x', 'X', ','])
                .map(|d| {
                    d.trim().parse::<usize>().map_err(|_| SpecError::InputDim {
                        spec: spec.to_string(),
                        dim: d.to_string(),
                    })
                })
                .collect::<Result<Vec<_>, _>>()?
        };
        self.input_shapes.insert(name.to_string(), shape);
        Ok(())
    }

    /// Parses `NAME=VALUE` binding a scalar input to a constant: an integer gives int64, a number
    /// with '.' or 'e' gives float32.
    pub fn add_binding(&mut self, spec: &str) -> Result<(), SpecError> {
        let (name, v) = spec.split_once('=').ok_or_else(|| SpecError::BindingForm {
            spec: spec.to_string(),
        })?;
        let data = if let Ok(i) = v.parse::<i64>() {
            TensorData::from_i64(vec![], vec![i])
        } else if let Ok(f) = v.parse::<f32>() {
            TensorData::from_f32(vec![], vec![f])
        } else {
            return Err(SpecError::BindingValue {
                spec: spec.to_string(),
                value: v.to_string(),
            });
        };
        self.bindings.insert(name.to_string(), data);
        Ok(())
    }
}

/// An imported model: the IR graph plus what the ONNX file said about itself.
#[derive(Clone, Debug)]
pub struct Model {
    pub graph: Graph,
    /// ai.onnx opset version.
    pub opset: i64,
    pub producer: String,
    /// ONNX op types found in the file (including If branches), with counts, before any folding.
    pub onnx_ops: BTreeMap<String, usize>,
    /// Every main-graph ONNX value name (inputs, initializers, node outputs, including names
    /// removed by Identity/If folding) -> the IR tensor that holds it.
    pub value_names: BTreeMap<String, crate::ir::TensorId>,
    metadata: BTreeMap<String, String>,
}

impl Model {
    /// `metadata_props` of the model (e.g. the OCR recognizer's `character` dictionary).
    pub fn metadata(&self) -> &BTreeMap<String, String> {
        &self.metadata
    }
}

/// Imports an ONNX file. External data is resolved relative to the file's directory.
pub fn import(path: &Path, opts: &ImportOptions) -> Result<Model, ImportError> {
    let bytes = std::fs::read(path).map_err(|source| ImportError::Io {
        file: path.to_path_buf(),
        source,
    })?;
    let dir = path.parent().unwrap_or(Path::new("."));
    import_bytes(&bytes, path, dir, opts)
}

/// Imports from memory; `file` is only used in error messages (the fuzz entry point).
pub fn import_bytes(
    bytes: &[u8],
    file: &Path,
    model_dir: &Path,
    opts: &ImportOptions,
) -> Result<Model, ImportError> {
    import::run(bytes, file, model_dir, opts)
}

/// The dtypes the importer accepts, for documentation and tests.
pub const SUPPORTED_DTYPES: &[DType] = &[
    DType::F32,
    DType::F16,
    DType::F64,
    DType::I64,
    DType::I32,
    DType::I8,
    DType::U8,
    DType::Bool,
];
