//! Reading serialized `TensorProto` files and summarizing a model without importing it (used by
//! the ONNX conformance harness; protobuf types stay inside this module).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use prost::Message;

use super::error::ImportError;
use super::proto;
use super::tensor::tensor_from_proto;
use crate::ir::TensorData;

/// A model's interface and op types, read without converting any node.
#[derive(Clone, Debug, Default)]
pub struct ModelSummary {
    /// ai.onnx opset (None if the model imports no ai.onnx opset).
    pub opset: Option<i64>,
    /// Op types of every node including If/Loop bodies, with counts.
    pub ops: BTreeMap<String, usize>,
    /// Graph inputs that are not initializers, in order.
    pub inputs: Vec<String>,
    /// Graph outputs, in order.
    pub outputs: Vec<String>,
}

fn io_err(path: &Path, source: std::io::Error) -> ImportError {
    ImportError::Io {
        file: path.to_path_buf(),
        source,
    }
}

/// Adds the op types of `g`'s nodes, including those of subgraphs (If/Loop bodies), to `acc`.
pub(super) fn count_ops(g: &proto::GraphProto, acc: &mut BTreeMap<String, usize>) {
    for n in &g.node {
        *acc.entry(n.op_type.clone().unwrap_or_default())
            .or_insert(0) += 1;
        for a in &n.attribute {
            for sg in a.g.iter().chain(&a.graphs) {
                count_ops(sg, acc);
            }
        }
    }
}

/// The graph inputs that are not initializers (older exporters list initializers as inputs too).
pub(super) fn runtime_inputs(g: &proto::GraphProto) -> Vec<&proto::ValueInfoProto> {
    let inits: Vec<&str> = g
        .initializer
        .iter()
        .filter_map(|i| i.name.as_deref())
        .collect();
    g.input
        .iter()
        .filter(|i| !inits.contains(&i.name.as_deref().unwrap_or("")))
        .collect()
}

/// Reads one serialized `TensorProto` (e.g. an ONNX test's `input_0.pb`): its name (may be empty)
/// and its data. External data is resolved next to the file.
pub fn read_tensor_pb(path: &Path) -> Result<(String, TensorData), ImportError> {
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let t = proto::TensorProto::decode(bytes.as_slice()).map_err(|e| ImportError::Decode {
        file: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let name = t.name.clone().unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    let data = tensor_from_proto(&t, dir).map_err(|source| ImportError::Constant {
        file: PathBuf::from(path),
        source,
    })?;
    Ok((name, data))
}

/// Reads a model's opset, op types and input/output names without importing it.
pub fn summarize_model(path: &Path) -> Result<ModelSummary, ImportError> {
    let bytes = std::fs::read(path).map_err(|e| io_err(path, e))?;
    let m = proto::ModelProto::decode(bytes.as_slice()).map_err(|e| ImportError::Decode {
        file: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    let g = m.graph.as_ref().ok_or_else(|| ImportError::NotOnnx {
        file: path.to_path_buf(),
        reason: "the file has no graph (wrong file type?)".into(),
    })?;
    let opset = m
        .opset_import
        .iter()
        .filter(|o| matches!(o.domain.as_deref(), None | Some("") | Some("ai.onnx")))
        .filter_map(|o| o.version)
        .max();
    let mut ops = BTreeMap::new();
    count_ops(g, &mut ops);
    Ok(ModelSummary {
        opset,
        ops,
        inputs: runtime_inputs(g)
            .iter()
            .map(|i| i.name.clone().unwrap_or_default())
            .collect(),
        outputs: g
            .output
            .iter()
            .map(|o| o.name.clone().unwrap_or_default())
            .collect(),
    })
}
