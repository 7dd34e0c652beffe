//! Finds a with-past decoder's cache pattern in the ONNX graph before import: a graph input
//! (`past`) read only by a Concat whose result is a graph output (`present`). The importer then
//! makes each such input a state tensor of the cache's full length and the Concat an in-place
//! [`crate::ir::Op::KvWrite`] at the position the position input gives.
use std::collections::HashMap;
use std::path::Path;

use super::error::ImportError;
use super::proto;
use super::KvCache;

/// One cache the rewrite found.
#[derive(Clone, Debug)]
pub(super) struct CacheLink {
    /// The past input.
    pub past: String,
    /// The present output (the Concat's result).
    pub present: String,
    /// The Concat's axis, normalized.
    pub axis: usize,
}

/// Every past → present link of `graph`, keyed by the Concat's output name. Errors when the
/// options ask for a cache and the graph has none, or lacks the position input.
pub(super) fn find_links(
    graph: &proto::GraphProto,
    opts: &KvCache,
    file: &Path,
) -> Result<HashMap<String, CacheLink>, ImportError> {
    let err = |reason: String| ImportError::KvCache {
        file: file.to_path_buf(),
        reason,
    };
    let inputs: HashMap<&str, &proto::ValueInfoProto> = graph
        .input
        .iter()
        .filter_map(|v| v.name.as_deref().map(|n| (n, v)))
        .collect();
    if !inputs.contains_key(opts.position_input.as_str()) {
        return Err(err(format!(
            "the model has no position input `{}` (inputs: {})",
            opts.position_input,
            graph
                .input
                .iter()
                .filter_map(|v| v.name.clone())
                .collect::<Vec<_>>()
                .join(", ")
        )));
    }
    let outputs: Vec<&str> = graph
        .output
        .iter()
        .filter_map(|o| o.name.as_deref())
        .collect();
    let mut readers: HashMap<&str, usize> = HashMap::new();
    for n in &graph.node {
        for i in &n.input {
            *readers.entry(i.as_str()).or_default() += 1;
        }
    }
    let mut links = HashMap::new();
    for n in &graph.node {
        if n.op_type.as_deref() != Some("Concat") || n.input.len() != 2 {
            continue;
        }
        let (past, out) = (n.input[0].as_str(), n.output.first().map(String::as_str));
        let Some(out) = out else { continue };
        let Some(vi) = inputs.get(past) else { continue };
        if !outputs.contains(&out) || readers.get(past) != Some(&1) {
            continue;
        }
        let rank = rank_of(vi).ok_or_else(|| err(format!("past input `{past}` has no rank")))?;
        let axis = n
            .attribute
            .iter()
            .find(|a| a.name.as_deref() == Some("axis"))
            .and_then(|a| a.i)
            .ok_or_else(|| err(format!("Concat `{out}` has no axis")))?;
        let axis = if axis < 0 { axis + rank as i64 } else { axis };
        if !(0..rank as i64).contains(&axis) {
            return Err(err(format!("Concat `{out}` axis {axis} out of range")));
        }
        links.insert(
            out.to_string(),
            CacheLink {
                past: past.to_string(),
                present: out.to_string(),
                axis: axis as usize,
            },
        );
    }
    if links.is_empty() {
        return Err(err(
            "no past input read only by a Concat whose result is a graph output (the with_past \
             form `present = Concat(past, new)`) was found"
                .into(),
        ));
    }
    Ok(links)
}

fn rank_of(v: &proto::ValueInfoProto) -> Option<usize> {
    match v.r#type.as_ref()?.value.as_ref()? {
        proto::type_proto::Value::TensorType(t) => Some(t.shape.as_ref()?.dim.len()),
        _ => None,
    }
}
