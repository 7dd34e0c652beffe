//! texstream's IR: a topologically ordered graph of typed ops over tensors with concrete shapes.
//!
//! Produced by `crate::onnx::import`, rewritten by [`passes`], packed by `crate::packed`, and run by
//! the executor. Tensors are referred to by index ([`TensorId`]) into [`Graph::tensors`].
//!
//! # Conventions the executor relies on
//! - Every tensor has a concrete shape and dtype. Shape subgraphs, `If` on constant conditions,
//!   Identity/Dropout, Shape/Size/ConstantOfShape/Range are gone after import.
//! - `Node::inputs` keeps ONNX input positions; absent optional inputs are `None`.
//! - Conv / ConvTranspose / MatMul / Gemm carry an `Activation` applied after the bias.
//!   Conv and ConvTranspose input 2 is the bias `[O]`. After the passes a Conv may also have an
//!   input 3: an activation of its output's shape added before the activation (a partial sum). After the passes a MatMul may also have an
//!   input 2: a bias `[N]` added to the last axis (fused `Add`).
//! - Conv-like ops with `Window::spatial_rank == 1` take `[N, C, W]` tensors; treat them as
//!   `[N, C, 1, W]` (the window's H entries are 1/1/1/0).
//! - `MatMul { transpose_a, transpose_b }` means that operand tensor is read with its last two axes
//!   swapped (an absorbed Transpose). For a constant B the packed weight is always `[K, N]`.
//! - A `Reshape`/`Transpose` whose output has `TensorLayout::ViewOf(root)` runs no kernel: the
//!   output aliases `root`'s C4 image (same physical texel order; only the logical shape differs).
//! - `LayerNorm { axis, epsilon }` inputs: X, scale, bias (the importer fills in ones/zeros when a
//!   fused pattern had none). `Lstm` is ONNX LSTM, forward, layout 0, gates i,o,f,c.
//! - Float constants read by kernels live in the packed weight space (see `crate::packed::format`
//!   for each operand's packing); integer constants (e.g. Gather indices) stay in
//!   [`Graph::constants`].
pub mod eval;
pub mod infer;
pub mod liveness;
pub mod op;
pub mod passes;
pub mod tensor;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use op::{
    Activation, BinaryOp, CoordMode, HeadSplits, NearestMode, Op, PadMode, ReduceOp, ReshapeKind,
    ResizeMode, ScatterReduction, UnaryOp, Window,
};
pub use tensor::{c4_bytes, nchw, DType, TensorData, TensorInfo, TensorLayout, Values};

/// Index into [`Graph::tensors`].
pub type TensorId = usize;

/// One operation. `inputs` keeps ONNX positions; absent optional inputs are `None`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Node {
    pub name: String,
    pub op: Op,
    pub inputs: Vec<Option<TensorId>>,
    pub outputs: Vec<TensorId>,
}

impl Node {
    /// Present inputs, in order.
    pub fn present_inputs(&self) -> impl Iterator<Item = TensorId> + '_ {
        self.inputs.iter().flatten().copied()
    }
    pub fn input(&self, i: usize) -> Option<TensorId> {
        self.inputs.get(i).copied().flatten()
    }
}

/// A named graph input or output.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Port {
    pub name: String,
    pub tensor: TensorId,
    /// The shape callers see when it differs from the tensor's: same elements in the same
    /// row-major order (a row-packed head, see `passes::rows`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<Vec<usize>>,
}

impl Port {
    /// A port showing `tensor` with its own shape.
    pub fn new(name: impl Into<String>, tensor: TensorId) -> Port {
        Port {
            name: name.into(),
            tensor,
            shape: None,
        }
    }
}

/// State a model keeps between runs: a tensor that no caller uploads or reads back, written in
/// place by [`Op::KvWrite`] (a decoder's key/value cache). `name` is the ONNX past input it
/// replaces and `present` the output that the in-place write made redundant.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatePort {
    pub name: String,
    pub present: String,
    pub tensor: TensorId,
    /// The axis the cache grows along (its length is the cache's capacity).
    pub axis: usize,
}

/// The graph. `nodes` are in topological order.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Graph {
    pub tensors: Vec<TensorInfo>,
    pub nodes: Vec<Node>,
    pub inputs: Vec<Port>,
    pub outputs: Vec<Port>,
    /// Constant tensors (weights and folded values), keyed by tensor id.
    pub constants: BTreeMap<TensorId, TensorData>,
    /// Tensors kept between runs (see [`StatePort`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub state: Vec<StatePort>,
}

impl Graph {
    pub fn add_tensor(
        &mut self,
        name: impl Into<String>,
        shape: Vec<usize>,
        dtype: DType,
    ) -> TensorId {
        self.tensors.push(TensorInfo {
            name: name.into(),
            shape,
            dtype,
            layout: TensorLayout::C4,
        });
        self.tensors.len() - 1
    }

    pub fn add_constant(&mut self, name: impl Into<String>, data: TensorData) -> TensorId {
        let id = self.add_tensor(name, data.shape.clone(), data.dtype);
        self.constants.insert(id, data);
        id
    }

    pub fn is_const(&self, t: TensorId) -> bool {
        self.constants.contains_key(&t)
    }

    /// For every tensor, the indices of the nodes that read it.
    pub fn consumers(&self) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); self.tensors.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for t in n.present_inputs() {
                if !out[t].contains(&i) {
                    out[t].push(i);
                }
            }
        }
        out
    }

    /// For every tensor, the node that writes it (None for inputs and constants).
    pub fn producers(&self) -> Vec<Option<usize>> {
        let mut out = vec![None; self.tensors.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            for &t in &n.outputs {
                out[t] = Some(i);
            }
        }
        out
    }

    /// Whether `t`'s storage is a state tensor (kept between runs; never overwritten by a pass).
    pub fn is_state(&self, t: TensorId) -> bool {
        let r = self.storage_root(t);
        self.state.iter().any(|s| s.tensor == r)
    }

    pub fn is_output(&self, t: TensorId) -> bool {
        self.outputs.iter().any(|p| p.tensor == t)
    }

    /// The tensor whose memory `t` uses: the root it is a view of, or itself.
    pub fn storage_root(&self, t: TensorId) -> TensorId {
        match self.tensors[t].layout {
            TensorLayout::ViewOf(root) => root,
            TensorLayout::C4 => t,
        }
    }

    /// Makes `t` a view of the memory `of` uses.
    pub fn make_view(&mut self, t: TensorId, of: TensorId) {
        self.tensors[t].layout = TensorLayout::ViewOf(self.storage_root(of));
    }

    /// The shape a caller sees at `port`.
    pub fn port_shape<'a>(&'a self, port: &'a Port) -> &'a [usize] {
        port.shape
            .as_deref()
            .unwrap_or(&self.tensors[port.tensor].shape)
    }

    /// Counts of each op name (unary/binary ops are reported by their sub-op).
    pub fn op_histogram(&self) -> BTreeMap<String, usize> {
        let mut h = BTreeMap::new();
        for n in &self.nodes {
            let name = match &n.op {
                Op::Unary(u) => format!("{u:?}")
                    .split(' ')
                    .next()
                    .unwrap_or("Unary")
                    .to_string(),
                Op::Binary(b) => format!("{b:?}"),
                Op::Reduce { op, .. } => format!("Reduce{op:?}"),
                o => o.name().to_string(),
            };
            *h.entry(name).or_insert(0) += 1;
        }
        h
    }

    /// Nodes that are real layout copies (Reshape/Transpose whose output is not a view).
    pub fn layout_transform_count(&self) -> usize {
        self.nodes
            .iter()
            .filter(|n| {
                n.op.is_layout_op()
                    && n.outputs
                        .iter()
                        .any(|&t| self.tensors[t].layout == TensorLayout::C4)
            })
            .count()
    }

    /// Removes constants and tensors no longer reachable is not attempted (ids stay stable);
    /// this drops constants that no node or output reads.
    pub fn prune_constants(&mut self) {
        let mut used = vec![false; self.tensors.len()];
        for n in &self.nodes {
            for t in n.present_inputs() {
                used[t] = true;
            }
        }
        for p in &self.outputs {
            used[p.tensor] = true;
        }
        self.constants.retain(|t, _| used[*t]);
    }
}
