//! Checks a parsed packed header before anything indexes with it. The checksum only catches
//! accidents (anyone can write a file with a valid one), and the executor, the arena planner and
//! the scheduler index tables with the header's numbers unchecked. So every tensor id, node,
//! step, weight and page the header names must be in range, every size must be consistent
//! (checked arithmetic, bounded by [`MAX_DIM`] and [`MAX_ELEMENTS`]), every attribute must fit
//! its input's rank, and each node's stored output shapes must be what shape inference gives
//! for its inputs.
use std::collections::HashSet;

use super::format::{texels_per_page, PackedHeader, PageSizeError, WeightKind, PAGE_WIDTH};
use super::texels::texel_count;
use crate::ir::infer::{infer, Sig};
use crate::ir::{Graph, Node, Op, TensorLayout, Window};

/// Largest dimension, and largest size-like attribute (kernel, stride, pad, repeat, split...),
/// a packed graph may hold: 2^31, so that shape inference's sums and products of a few of them
/// stay far below 2^64.
pub const MAX_DIM: usize = 1 << 31;
/// Largest element count of one tensor (2^34, 64 GiB at fp32: beyond any device image).
pub const MAX_ELEMENTS: u64 = 1 << 34;
/// Largest page count: steps name pages as u32.
pub const MAX_PAGES: u64 = u32::MAX as u64;

/// What is wrong with a header.
#[derive(Debug, thiserror::Error)]
pub enum HeaderError {
    #[error("page width {found} (must be {PAGE_WIDTH})")]
    PageWidth { found: u64 },
    #[error(transparent)]
    PageSize(#[from] PageSizeError),
    #[error("{found} texels per page, but {page_bytes}-byte pages hold {expected}")]
    TexelsPerPage {
        found: u64,
        expected: u64,
        page_bytes: u64,
    },
    #[error("{count} pages (at most {MAX_PAGES})")]
    PageCount { count: u64 },
    #[error("the header says {header_count} pages of {header_bytes} bytes, the preamble {preamble_count} of {preamble_bytes}")]
    PreambleMismatch {
        header_count: u64,
        header_bytes: u64,
        preamble_count: u64,
        preamble_bytes: u64,
    },
    #[error("tensor {id} `{name}`: shape {shape:?} {problem} (limits: dimensions up to {MAX_DIM}, {MAX_ELEMENTS} elements)")]
    TensorSize {
        id: usize,
        name: String,
        shape: Vec<usize>,
        problem: &'static str,
    },
    #[error("{place} names tensor {id}, but the graph has {count} tensors")]
    TensorId {
        place: String,
        id: usize,
        count: usize,
    },
    #[error("tensor {id} `{name}`: {problem}")]
    View {
        id: usize,
        name: String,
        problem: String,
    },
    #[error("node {node} `{name}` ({op}): {problem}")]
    Node {
        node: usize,
        name: String,
        op: &'static str,
        problem: Box<NodeProblem>,
    },
    #[error("constant tensor {id} `{name}`: {problem}")]
    Constant {
        id: usize,
        name: String,
        problem: String,
    },
    #[error("port `{name}`: {problem}")]
    Port { name: String, problem: String },
    #[error("weight {index} `{name}`: {problem}")]
    Weight {
        index: usize,
        name: String,
        problem: String,
    },
    #[error("step {index} `{name}`: {problem}")]
    Step {
        index: usize,
        name: String,
        problem: String,
    },
    #[error("compensated page {page} is out of range ({count} pages)")]
    CompensatedPage { page: u32, count: u64 },
    #[error("{found} page checksums for {count} pages (must be one per page, or none)")]
    PageCrcCount { found: usize, count: u64 },
}

/// What is wrong with one node of a packed graph.
#[derive(Debug, thiserror::Error)]
pub enum NodeProblem {
    #[error("input 0 is missing")]
    MissingInput,
    #[error("{what} {value} is over the limit {max}", max = MAX_DIM)]
    OverLimit { what: &'static str, value: usize },
    #[error("{what} {axis} for a rank-{rank} input")]
    Axis {
        what: &'static str,
        axis: usize,
        rank: usize,
    },
    #[error("its stored shapes do not infer: {0}")]
    Inference(String),
    #[error("{stored} outputs, the op has {op}")]
    OutputCount { stored: usize, op: usize },
    #[error("output {slot} `{name}` is stored as {stored:?}, its inputs give {inferred:?}")]
    OutputShape {
        slot: usize,
        name: String,
        stored: Vec<usize>,
        inferred: Vec<usize>,
    },
    /// An attribute or a dataflow link that does not hold (the text says which).
    #[error("{0}")]
    Invalid(String),
}

type Check = Result<(), HeaderError>;

/// Checks every index and size of `h` (see the module doc).
pub fn check_header(h: &PackedHeader) -> Check {
    let tpp = check_geometry(h)?;
    let g = &h.graph;
    check_tensors(g)?;
    check_ports(g)?;
    check_constants(g)?;
    let weight_tensors = check_weights(h, tpp)?;
    check_nodes(g, &weight_tensors)?;
    check_steps(h, tpp)?;
    if let Some(&page) = h
        .compensated_pages
        .iter()
        .find(|&&p| u64::from(p) >= h.page_count)
    {
        return Err(HeaderError::CompensatedPage {
            page,
            count: h.page_count,
        });
    }
    if !h.page_crcs.is_empty() && h.page_crcs.len() as u64 != h.page_count {
        return Err(HeaderError::PageCrcCount {
            found: h.page_crcs.len(),
            count: h.page_count,
        });
    }
    Ok(())
}

/// Page width, size and count; returns texels per page.
fn check_geometry(h: &PackedHeader) -> Result<u64, HeaderError> {
    if h.page_width != PAGE_WIDTH {
        return Err(HeaderError::PageWidth {
            found: h.page_width,
        });
    }
    let tpp = texels_per_page(h.page_bytes, h.precision)?;
    if h.texels_per_page != tpp {
        return Err(HeaderError::TexelsPerPage {
            found: h.texels_per_page,
            expected: tpp,
            page_bytes: h.page_bytes,
        });
    }
    if h.page_count > MAX_PAGES {
        return Err(HeaderError::PageCount {
            count: h.page_count,
        });
    }
    Ok(tpp)
}

/// Element count of `shape` if every dimension and the product are within the limits.
fn elements(shape: &[usize]) -> Result<u64, &'static str> {
    if shape.iter().any(|&d| d > MAX_DIM) {
        return Err("has a dimension over the limit");
    }
    shape
        .iter()
        .try_fold(1u64, |n, &d| n.checked_mul(d as u64))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or("has more elements than the limit")
}

fn tensor_id(g: &Graph, id: usize, place: impl FnOnce() -> String) -> Check {
    if id < g.tensors.len() {
        Ok(())
    } else {
        Err(HeaderError::TensorId {
            place: place(),
            id,
            count: g.tensors.len(),
        })
    }
}

/// Sizes of every tensor; views name an existing root of as many elements, without cycles.
fn check_tensors(g: &Graph) -> Check {
    let mut sizes = Vec::with_capacity(g.tensors.len());
    for (id, t) in g.tensors.iter().enumerate() {
        let n = elements(&t.shape).map_err(|problem| HeaderError::TensorSize {
            id,
            name: t.name.clone(),
            shape: t.shape.clone(),
            problem,
        })?;
        sizes.push(n);
    }
    for (id, t) in g.tensors.iter().enumerate() {
        let TensorLayout::ViewOf(root) = t.layout else {
            continue;
        };
        let view_err = |problem: String| HeaderError::View {
            id,
            name: t.name.clone(),
            problem,
        };
        tensor_id(g, root, || {
            format!("tensor {id} `{}` (its view root)", t.name)
        })?;
        if sizes[root] != sizes[id] {
            return Err(view_err(format!(
                "a view of {} elements over tensor {root} of {}",
                sizes[id], sizes[root]
            )));
        }
        // Follow the chain: it must reach a tensor with its own image.
        let (mut at, mut hops) = (root, 0);
        while let TensorLayout::ViewOf(next) = g.tensors[at].layout {
            hops += 1;
            if next >= g.tensors.len() || hops > g.tensors.len() {
                return Err(view_err("its chain of views never reaches an image".into()));
            }
            at = next;
        }
    }
    Ok(())
}

fn check_ports(g: &Graph) -> Check {
    for s in &g.state {
        tensor_id(g, s.tensor, || format!("state `{}`", s.name))?;
        let rank = g.tensors[s.tensor].shape.len();
        if s.axis >= rank {
            return Err(HeaderError::Port {
                name: s.name.clone(),
                problem: format!("state axis {} of a rank-{rank} tensor", s.axis),
            });
        }
    }
    for (kind, ports) in [("input", &g.inputs), ("output", &g.outputs)] {
        for p in ports {
            tensor_id(g, p.tensor, || format!("graph {kind} `{}`", p.name))?;
            let port_err = |problem: String| HeaderError::Port {
                name: p.name.clone(),
                problem,
            };
            if let Some(shape) = &p.shape {
                let t = &g.tensors[p.tensor];
                let shown =
                    elements(shape).map_err(|e| port_err(format!("shape {shape:?} {e}")))?;
                if shown != elements(&t.shape).unwrap_or(0) {
                    return Err(port_err(format!(
                        "shows {shape:?} over a tensor of shape {:?}",
                        t.shape
                    )));
                }
            }
        }
    }
    Ok(())
}

fn check_constants(g: &Graph) -> Check {
    for (&id, d) in &g.constants {
        tensor_id(g, id, || "a constant".into())?;
        let t = &g.tensors[id];
        let err = |problem: String| HeaderError::Constant {
            id,
            name: t.name.clone(),
            problem,
        };
        if d.shape != t.shape || d.dtype != t.dtype {
            return Err(err(format!(
                "data is {:?} {:?}, the tensor {:?} {:?}",
                d.dtype, d.shape, t.dtype, t.shape
            )));
        }
        let want = elements(&d.shape).unwrap_or(0);
        if d.values.len() as u64 != want {
            return Err(err(format!(
                "{} values for shape {:?} ({want} elements)",
                d.values.len(),
                d.shape
            )));
        }
    }
    Ok(())
}

/// Values a weight kind describes, if its dimensions are within the limits.
fn kind_values(kind: &WeightKind) -> Option<u64> {
    let dims: Vec<usize> = match kind {
        WeightKind::MatrixKN { k, n } => vec![*k, *n],
        WeightKind::Rows { rows, width } => vec![*rows, *width],
        WeightKind::ConvFilter {
            o,
            i_per_group,
            kh,
            kw,
        } => vec![*o, *i_per_group, *kh, *kw],
        WeightKind::Depthwise { c, kh, kw } => vec![*c, *kh, *kw],
        WeightKind::Vector { c } => vec![*c],
        WeightKind::Activation { shape } => shape.clone(),
    };
    elements(&dims).ok()
}

/// Each weight packs an existing tensor with as many values, and its texels lie in the pages.
/// Returns the packed tensors (their constants are no longer in the graph).
fn check_weights(h: &PackedHeader, tpp: u64) -> Result<HashSet<usize>, HeaderError> {
    let g = &h.graph;
    let space = h.page_count * tpp; // both bounded: page_count <= 2^32, tpp <= 2^21
    let mut packed = HashSet::new();
    for (index, w) in h.weights.iter().enumerate() {
        let err = |problem: String| HeaderError::Weight {
            index,
            name: w.name.clone(),
            problem,
        };
        tensor_id(g, w.tensor, || format!("weight {index} `{}`", w.name))?;
        let t = &g.tensors[w.tensor];
        let numel = elements(&t.shape).unwrap_or(0);
        let values =
            kind_values(&w.kind).ok_or_else(|| err(format!("{:?} is too large", w.kind)))?;
        // LSTM biases are stored as Wb + Rb: half the tensor's values.
        let lstm_bias = matches!(w.kind, WeightKind::Vector { .. }) && values * 2 == numel;
        if values != numel && !lstm_bias {
            return Err(err(format!(
                "{:?} describes {values} values, tensor `{}` {:?} has {numel}",
                w.kind, t.name, t.shape
            )));
        }
        // Cannot overflow: `values` fits the limits and a kind has at most 4x padding.
        let texels = texel_count(&w.kind) as u64;
        if w.texels != texels {
            return Err(err(format!(
                "{} texels, {:?} packs into {texels}",
                w.texels, w.kind
            )));
        }
        match w.texel_offset.checked_add(w.texels) {
            Some(end) if end <= space => {}
            _ => {
                return Err(err(format!(
                    "texels {}..+{} lie outside the {} pages ({space} texels)",
                    w.texel_offset, w.texels, h.page_count
                )))
            }
        }
        packed.insert(w.tensor);
    }
    Ok(packed)
}

/// Node inputs and outputs exist, every input is written before it is read, no tensor is
/// written twice, attributes fit their input's rank, and stored shapes are the inferred ones.
fn check_nodes(g: &Graph, weight_tensors: &HashSet<usize>) -> Check {
    let mut available = vec![false; g.tensors.len()];
    for p in &g.inputs {
        available[p.tensor] = true;
    }
    for s in &g.state {
        available[s.tensor] = true;
    }
    for &t in g.constants.keys().chain(weight_tensors) {
        available[t] = true;
    }
    for (ni, n) in g.nodes.iter().enumerate() {
        let err = |problem: NodeProblem| HeaderError::Node {
            node: ni,
            name: n.name.clone(),
            op: n.op.name(),
            problem: Box::new(problem),
        };
        for (slot, t) in n.inputs.iter().enumerate() {
            let Some(t) = *t else { continue };
            tensor_id(g, t, || format!("node {ni} `{}` input {slot}", n.name))?;
            if !available[t] {
                return Err(err(NodeProblem::Invalid(format!(
                    "reads tensor {t} `{}` before any node writes it",
                    g.tensors[t].name
                ))));
            }
        }
        for (slot, &t) in n.outputs.iter().enumerate() {
            tensor_id(g, t, || format!("node {ni} `{}` output {slot}", n.name))?;
            if std::mem::replace(&mut available[t], true) {
                return Err(err(NodeProblem::Invalid(format!(
                    "writes tensor {t} `{}`, which is already an input, a constant or another node's output",
                    g.tensors[t].name
                ))));
            }
        }
        check_attributes(g, n).map_err(err)?;
        check_inferred(g, n).map_err(err)?;
    }
    for p in &g.outputs {
        if !available[p.tensor] {
            return Err(HeaderError::Port {
                name: p.name.clone(),
                problem: format!("tensor {} is never written", p.tensor),
            });
        }
    }
    Ok(())
}

fn rank_of(g: &Graph, n: &Node) -> Result<usize, NodeProblem> {
    n.input(0)
        .map(|t| g.tensors[t].shape.len())
        .ok_or(NodeProblem::MissingInput)
}

fn bounded(what: &'static str, values: &[usize]) -> Result<(), NodeProblem> {
    match values.iter().find(|&&v| v > MAX_DIM) {
        Some(&value) => Err(NodeProblem::OverLimit { what, value }),
        None => Ok(()),
    }
}

fn axis_in(what: &'static str, axis: usize, rank: usize) -> Result<(), NodeProblem> {
    if axis < rank {
        Ok(())
    } else {
        Err(NodeProblem::Axis { what, axis, rank })
    }
}

fn check_window(w: &Window) -> Result<(), NodeProblem> {
    if !matches!(w.spatial_rank, 1 | 2) {
        return Err(NodeProblem::Invalid(format!(
            "spatial rank {}",
            w.spatial_rank
        )));
    }
    if w.kernel.contains(&0) || w.strides.contains(&0) || w.dilations.contains(&0) {
        return Err(NodeProblem::Invalid(format!("zero in window {w:?}")));
    }
    bounded("window size", &w.kernel)?;
    bounded("stride", &w.strides)?;
    bounded("dilation", &w.dilations)?;
    bounded("pad", &w.pads)
}

/// Attributes that index into the input's axes or size things: in range and bounded, so that
/// shape inference and the kernels can use them directly.
fn check_attributes(g: &Graph, n: &Node) -> Result<(), NodeProblem> {
    let rank = rank_of(g, n)?;
    match &n.op {
        Op::Conv { window, group, .. } => {
            check_window(window)?;
            if *group == 0 || *group > MAX_DIM {
                return Err(NodeProblem::Invalid(format!("group {group}")));
            }
            if let Some(addend) = n.input(3) {
                let want = n.outputs.first().map(|&t| &g.tensors[t].shape);
                if want != Some(&g.tensors[addend].shape) {
                    return Err(NodeProblem::Invalid(format!(
                        "addend {:?} differs from the output {want:?}",
                        g.tensors[addend].shape
                    )));
                }
            }
            if let Some(scale) = n.input(4) {
                let x = n.input(0).map(|t| &g.tensors[t].shape);
                let want = x.filter(|x| x.len() == 4).map(|x| vec![x[0], x[1], 1, 1]);
                if *group != 1 || want.as_ref() != Some(&g.tensors[scale].shape) {
                    return Err(NodeProblem::Invalid(format!(
                        "input scale {:?} of a convolution over {x:?} in {group} groups: \
                         expected [N, C, 1, 1] of a dense convolution's input",
                        g.tensors[scale].shape
                    )));
                }
            }
        }
        Op::ConvTranspose {
            window,
            group,
            output_padding,
            ..
        } => {
            check_window(window)?;
            bounded("output padding", output_padding)?;
            if *group == 0 || *group > MAX_DIM {
                return Err(NodeProblem::Invalid(format!("group {group}")));
            }
        }
        Op::MaxPool { window, .. } | Op::AveragePool { window, .. } => check_window(window)?,
        Op::Trilu { k, .. } => {
            if rank < 2 || k.unsigned_abs() > MAX_DIM as u64 {
                return Err(NodeProblem::Invalid(format!(
                    "Trilu k {k} on a rank-{rank} input"
                )));
            }
        }
        Op::Softmax { axis } | Op::LayerNorm { axis, .. } | Op::ArgMax { axis, .. } => {
            axis_in("axis", *axis, rank)?
        }
        Op::Concat { axis }
        | Op::Gather { axis }
        | Op::GatherElements { axis }
        | Op::CumSum { axis, .. }
        | Op::KvWrite { axis, .. } => axis_in("axis", *axis, rank)?,
        Op::Split { axis, splits } => {
            axis_in("axis", *axis, rank)?;
            bounded("split", splits)?;
            if splits.len() != n.outputs.len() {
                return Err(NodeProblem::Invalid(format!(
                    "{} splits for {} outputs",
                    splits.len(),
                    n.outputs.len()
                )));
            }
        }
        Op::Reduce { axes, .. } => {
            for &a in axes {
                axis_in("axis", a, rank)?;
            }
        }
        Op::Resize { scales, sizes, .. } => {
            if scales.len() != rank || sizes.len() != rank {
                return Err(NodeProblem::Invalid(format!(
                    "{} scales and {} sizes for a rank-{rank} input",
                    scales.len(),
                    sizes.len()
                )));
            }
            bounded("size", sizes)?;
        }
        Op::Slice {
            starts,
            ends,
            steps,
        } => {
            if starts.len() != rank || ends.len() != rank || steps.len() != rank {
                return Err(NodeProblem::Invalid(format!(
                    "slice entries for a rank-{rank} input: {starts:?} {ends:?} {steps:?}"
                )));
            }
            let dim = MAX_DIM as i64;
            let in_range = |v: &i64| (-1..=dim).contains(v);
            if !starts.iter().chain(ends).all(in_range)
                || steps.iter().any(|&s| s == 0 || !(-dim..=dim).contains(&s))
            {
                return Err(NodeProblem::Invalid(format!(
                    "slice {starts:?}..{ends:?} step {steps:?} out of range"
                )));
            }
        }
        Op::Transpose { perm, read_as } => {
            // A folded Reshape: the input is read as `read_as`, of the same element count.
            let rank = match read_as {
                None => rank,
                Some(shape) => {
                    bounded("dimension", shape)?;
                    let elements = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
                    let input = n.input(0).map(|x| g.tensors[x].shape.iter().product::<usize>());
                    if elements.is_none() || elements != input {
                        return Err(NodeProblem::Invalid(format!(
                            "read_as {shape:?} does not hold the input's elements"
                        )));
                    }
                    shape.len()
                }
            };
            let mut seen = vec![false; rank];
            let is_perm = perm.len() == rank
                && perm
                    .iter()
                    .all(|&p| p < rank && !std::mem::replace(&mut seen[p], true));
            if !is_perm {
                return Err(NodeProblem::Invalid(format!(
                    "perm {perm:?} for a rank-{rank} input"
                )));
            }
        }
        Op::Reshape { shape, .. } | Op::Expand { shape } => bounded("dimension", shape)?,
        Op::Pad { pads, .. } => {
            bounded("pad", pads)?;
            if pads.len() != 2 * rank {
                return Err(NodeProblem::Invalid(format!(
                    "{} pads for a rank-{rank} input",
                    pads.len()
                )));
            }
        }
        Op::Tile { repeats } => {
            bounded("repeat", repeats)?;
            if repeats.len() != rank {
                return Err(NodeProblem::Invalid(format!(
                    "{} repeats for a rank-{rank} input",
                    repeats.len()
                )));
            }
        }
        Op::Lstm { hidden_size } => bounded("hidden size", &[*hidden_size])?,
        Op::Attention {
            scale, split_heads, ..
        } => {
            if !scale.is_finite() {
                return Err(NodeProblem::Invalid(format!("attention scale {scale}")));
            }
            let dims: Vec<usize> = split_heads.dims().into_iter().flatten().collect();
            bounded("head dim", &dims)?;
            if dims.contains(&0) {
                return Err(NodeProblem::Invalid(format!("split heads {split_heads:?}")));
            }
        }
        Op::MatMul { .. }
        | Op::Gemm { .. }
        | Op::Rope { .. }
        | Op::Binary(_)
        | Op::Unary(_)
        | Op::Where
        | Op::BatchNorm { .. }
        | Op::GlobalAveragePool
        // Its reduction is a closed enum; the operand shapes are checked by inference.
        | Op::ScatterNd { .. }
        | Op::Cast { .. } => {}
    }
    Ok(())
}

/// The node's stored output shapes are what inference gives for its stored input shapes.
fn check_inferred(g: &Graph, n: &Node) -> Result<(), NodeProblem> {
    let ins: Vec<Option<Sig>> = n
        .inputs
        .iter()
        .map(|t| t.map(|t| (g.tensors[t].shape.clone(), g.tensors[t].dtype)))
        .collect();
    let inferred = infer(&n.op, &ins).map_err(|e| NodeProblem::Inference(e.to_string()))?;
    if inferred.len() != n.outputs.len() {
        return Err(NodeProblem::OutputCount {
            stored: n.outputs.len(),
            op: inferred.len(),
        });
    }
    for (slot, ((shape, _), &t)) in inferred.iter().zip(&n.outputs).enumerate() {
        if *shape != g.tensors[t].shape {
            return Err(NodeProblem::OutputShape {
                slot,
                name: g.tensors[t].name.clone(),
                stored: g.tensors[t].shape.clone(),
                inferred: shape.clone(),
            });
        }
    }
    Ok(())
}

/// Steps name existing nodes (each at most once) and weights read at the node's slots, and list
/// exactly the pages those weights touch, ascending.
fn check_steps(h: &PackedHeader, tpp: u64) -> Check {
    let g = &h.graph;
    let mut stepped = vec![false; g.nodes.len()];
    for (index, s) in h.steps.iter().enumerate() {
        let err = |problem: String| HeaderError::Step {
            index,
            name: s.name.clone(),
            problem,
        };
        if s.node >= g.nodes.len() {
            return Err(err(format!(
                "names node {}, the graph has {}",
                s.node,
                g.nodes.len()
            )));
        }
        if std::mem::replace(&mut stepped[s.node], true) {
            return Err(err(format!("node {} has a step already", s.node)));
        }
        let n = &g.nodes[s.node];
        if let Some(l) = &s.lookup {
            let is_rows = h
                .weights
                .get(l.weight)
                .is_some_and(|w| matches!(w.kind, WeightKind::Rows { .. }));
            let read_here = s
                .weights
                .iter()
                .any(|&(slot, w)| slot == 0 && w == l.weight);
            if !matches!(n.op, crate::ir::Op::Gather { .. }) || !is_rows || !read_here {
                return Err(err(format!(
                    "is a lookup of weight {}, which is not a row table its Gather reads",
                    l.weight
                )));
            }
            if !g.inputs.iter().any(|p| p.name == l.ids_input) {
                return Err(err(format!(
                    "looks up ids from `{}`, which is not a graph input",
                    l.ids_input
                )));
            }
        }
        let mut ranges = Vec::new();
        for &(slot, w) in &s.weights {
            // A lookup's table is read by ids, not listed.
            if s.lookup.as_ref().is_some_and(|l| l.weight == w) {
                continue;
            }
            let Some(entry) = h.weights.get(w) else {
                return Err(err(format!(
                    "names weight {w}, the header has {}",
                    h.weights.len()
                )));
            };
            if n.input(slot) != Some(entry.tensor) {
                return Err(err(format!(
                    "weight {w} `{}` is not node `{}`'s input {slot}",
                    entry.name, n.name
                )));
            }
            let (off, cnt) = entry.span_read_by(&n.op, slot);
            if cnt > 0 {
                ranges.push((off / tpp, (off + cnt - 1) / tpp));
            }
        }
        // Compared as merged ranges: a weight may span many pages, the list is in the file.
        ranges.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (a, b) in ranges {
            match merged.last_mut() {
                Some(last) if a <= last.1 + 1 => last.1 = last.1.max(b),
                _ => merged.push((a, b)),
            }
        }
        let count: u64 = merged.iter().map(|(a, b)| b - a + 1).sum();
        let listed = s.pages.iter().map(|&p| u64::from(p));
        if count != s.pages.len() as u64 || !listed.eq(merged.iter().flat_map(|&(a, b)| a..=b)) {
            return Err(err(format!(
                "lists pages {:?}, its weights lie in pages {merged:?} (inclusive ranges)",
                s.pages
            )));
        }
    }
    Ok(())
}
