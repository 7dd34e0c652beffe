//! Builds a packed model: assigns every float constant operand a weight kind, lays the weights
//! into the weight space in first-use order, and computes per-step pages, costs and liveness.
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet};

use super::cost;
use super::format::*;
use super::texels::{self, TexelError};
use crate::ir::passes::PassReport;
use crate::ir::{Graph, Op};

/// Compile-time choices.
#[derive(Clone, Copy, Debug)]
pub struct PackOptions {
    pub precision: Precision,
    pub page_bytes: u64,
    /// fp16 only: weight tensors of at most this many values are stored compensated (hi + lo
    /// fp16 pairs, see [`super::placement`]); 0 turns it off.
    pub compensate_max_values: usize,
}

/// Biases, norm scales and the smallest filters: 0.7% of the PP-OCR detector's weight values.
pub const DEFAULT_COMPENSATE_MAX_VALUES: usize = 1024;

impl PackOptions {
    /// `precision` with 1 MiB pages and the default compensation.
    pub fn new(precision: Precision) -> PackOptions {
        PackOptions {
            precision,
            page_bytes: 1 << 20,
            compensate_max_values: DEFAULT_COMPENSATE_MAX_VALUES,
        }
    }
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions::new(Precision::F16)
    }
}

/// Why a graph cannot be packed.
#[derive(Debug, thiserror::Error)]
pub enum PackError {
    #[error(
        "page size {page_bytes} is not a multiple of {row_bytes} (one {row_texels}-texel row)"
    )]
    PageSize {
        page_bytes: u64,
        row_bytes: u64,
        row_texels: u64,
    },
    #[error("node '{node}': LSTM bias has {values} values, expected {expected}")]
    LstmBias {
        node: String,
        values: usize,
        expected: usize,
    },
    #[error("node '{node}' weight '{weight}': {source}")]
    Texels {
        node: String,
        weight: String,
        source: TexelError,
    },
}

/// A packed model in memory: header plus the page bytes (page_count * page_bytes).
pub struct Packed {
    pub header: PackedHeader,
    pub data: Vec<u8>,
}

/// A weight's kind and its values (row-major in that kind's logical shape).
type Classified<'g> = Option<(WeightKind, Cow<'g, [f32]>)>;

/// The weight kind and the values for input `slot` of node `ni`, or None when the input stays
/// inline (integer constants). The values borrow the constant where no reordering is needed: a
/// tied vocabulary table read by a hundred head pieces is not copied a hundred times.
fn classify<'g>(
    g: &'g Graph,
    tables: &HashSet<usize>,
    ni: usize,
    slot: usize,
) -> Result<Classified<'g>, PackError> {
    let n = &g.nodes[ni];
    let Some(t) = n.input(slot) else {
        return Ok(None);
    };
    let Some(d) = g.constants.get(&t) else {
        return Ok(None);
    };
    if !d.dtype.is_float() {
        return Ok(None);
    }
    let s = &d.shape;
    let v = d.f32_values();
    let vector = |v: Cow<'g, [f32]>| Ok(Some((WeightKind::Vector { c: v.len() }, v)));
    let act = |v: Cow<'g, [f32]>| Ok(Some((WeightKind::Activation { shape: s.clone() }, v)));
    let rows = |v: Cow<'g, [f32]>| {
        Ok(Some((
            WeightKind::Rows {
                rows: s[0],
                width: s[1],
            },
            v,
        )))
    };
    match (&n.op, slot) {
        // A row table, and the output head tied to it (the same tensor as B^T).
        (Op::Gather { axis: 0 }, 0) if tables.contains(&t) => rows(v),
        (
            Op::Gemm { trans_b: true, .. }
            | Op::MatMul {
                transpose_b: true, ..
            },
            1,
        ) if tables.contains(&t) => rows(v),
        (Op::Conv { group, window, .. }, 1) => {
            let (o, ig) = (s[0], s[1]);
            let (kh, kw) = (window.kernel[0], window.kernel[1]);
            let cin = g.tensors[n.input(0).unwrap_or(t)]
                .shape
                .get(1)
                .copied()
                .unwrap_or(0);
            if *group == cin && *group == o && ig == 1 {
                Ok(Some((WeightKind::Depthwise { c: o, kh, kw }, v)))
            } else {
                Ok(Some((
                    WeightKind::ConvFilter {
                        o,
                        i_per_group: ig,
                        kh,
                        kw,
                    },
                    v,
                )))
            }
        }
        (Op::ConvTranspose { group, window, .. }, 1) => {
            let (i, og) = (s[0], s[1]);
            let (kh, kw) = (window.kernel[0], window.kernel[1]);
            let w = texels::conv_transpose_to_oihw(&v, i, og, *group, kh * kw);
            Ok(Some((
                WeightKind::ConvFilter {
                    o: og * group,
                    i_per_group: i / group.max(&1),
                    kh,
                    kw,
                },
                w.into(),
            )))
        }
        (
            Op::Conv { .. } | Op::ConvTranspose { .. } | Op::MatMul { .. } | Op::LayerNorm { .. },
            2,
        ) if s.len() <= 1 => vector(v),
        (Op::LayerNorm { .. }, 1) if s.len() <= 1 => vector(v),
        (Op::MatMul { transpose_b, .. }, 1) if s.len() == 2 => matrix_kn(s, v, *transpose_b),
        (Op::Gemm { trans_b, .. }, 1) => matrix_kn(s, v, *trans_b),
        (Op::Gemm { .. }, 2) if s.len() <= 1 => vector(v),
        (Op::Lstm { .. }, 1 | 2) => {
            // [1, 4H, I] -> B matrix [I, 4H].
            let (rows, cols) = (s[1], s[2]);
            Ok(Some((
                WeightKind::MatrixKN { k: cols, n: rows },
                texels::transpose2(&v, rows, cols).into(),
            )))
        }
        (Op::Lstm { hidden_size }, 3) => {
            let h4 = 4 * hidden_size;
            if v.len() != 2 * h4 {
                return Err(PackError::LstmBias {
                    node: n.name.clone(),
                    values: v.len(),
                    expected: 2 * h4,
                });
            }
            vector((0..h4).map(|i| v[i] + v[i + h4]).collect::<Vec<_>>().into())
        }
        _ => act(v),
    }
}

/// The graph input that `t` is, through reshapes only (the host knows its values before a run).
fn graph_input_of(g: &Graph, producers: &[Option<usize>], mut t: usize) -> Option<String> {
    loop {
        if let Some(p) = g.inputs.iter().find(|p| p.tensor == t) {
            return Some(p.name.clone());
        }
        let n = &g.nodes[producers.get(t).copied().flatten()?];
        if !matches!(n.op, Op::Reshape { .. }) {
            return None;
        }
        t = n.input(0)?;
    }
}

/// A constant B operand `[K, N]` (or `[N, K]` read transposed) as a `[K, N]` matrix weight.
fn matrix_kn<'g>(
    s: &[usize],
    v: Cow<'g, [f32]>,
    transposed: bool,
) -> Result<Classified<'g>, PackError> {
    let (k, n, v) = if transposed {
        (s[1], s[0], texels::transpose2(&v, s[0], s[1]).into())
    } else {
        (s[0], s[1], v)
    };
    Ok(Some((WeightKind::MatrixKN { k, n }, v)))
}

/// Packs an optimized graph.
#[allow(clippy::needless_range_loop)] // node indices key several tables
pub fn pack_graph(
    mut graph: Graph,
    source: &str,
    passes: PassReport,
    metadata: BTreeMap<String, String>,
    opts: PackOptions,
) -> Result<Packed, PackError> {
    let bpt = opts.precision.bytes_per_texel() as u64;
    if opts.page_bytes == 0 || !opts.page_bytes.is_multiple_of(PAGE_WIDTH * bpt) {
        return Err(PackError::PageSize {
            page_bytes: opts.page_bytes,
            row_bytes: PAGE_WIDTH * bpt,
            row_texels: PAGE_WIDTH,
        });
    }
    let tpp = opts.page_bytes / bpt;
    let compensate = match opts.precision {
        Precision::F16 => opts.compensate_max_values,
        Precision::F32 => 0,
    };
    let mut weights: Vec<WeightEntry> = Vec::new();
    let mut placement = super::placement::Placement::new(tpp);
    let mut index: HashMap<(usize, String), usize> = HashMap::new();
    let mut step_weights: Vec<Vec<(usize, usize)>> = vec![Vec::new(); graph.nodes.len()];
    let tables = crate::ir::passes::split_head::row_tables(&graph);
    for ni in 0..graph.nodes.len() {
        for slot in 0..graph.nodes[ni].inputs.len() {
            let Some((kind, vals)) = classify(&graph, &tables, ni, slot)? else {
                continue;
            };
            let t = graph.nodes[ni].inputs[slot].unwrap_or(usize::MAX);
            let key = (t, format!("{kind:?}"));
            let wi = match index.get(&key) {
                Some(&wi) => wi,
                None => {
                    let packed =
                        texels::pack(&kind, &vals).map_err(|source| PackError::Texels {
                            node: graph.nodes[ni].name.clone(),
                            weight: graph.tensors[t].name.clone(),
                            source,
                        })?;
                    let cnt = (packed.len() / 4) as u64;
                    let compensated = (vals.len() <= compensate)
                        .then(|| placement.place_compensated(&packed))
                        .flatten();
                    let off = compensated.unwrap_or_else(|| placement.place(&packed));
                    weights.push(WeightEntry {
                        tensor: t,
                        name: graph.tensors[t].name.clone(),
                        kind,
                        texel_offset: off,
                        texels: cnt,
                    });
                    index.insert(key, weights.len() - 1);
                    weights.len() - 1
                }
            };
            step_weights[ni].push((slot, wi));
        }
    }
    let (texel_data, page_count, compensated_pages) = placement.finish();
    let bpv = opts.precision.bytes_per_value();
    // Before the weights stop being constants: they live in pages, not in the arena.
    let (live, peak) = crate::ir::liveness::liveness(&graph, bpv);
    // Drop packed float constants from the inline graph; ints stay.
    let packed_tensors: std::collections::HashSet<usize> =
        weights.iter().map(|w| w.tensor).collect();
    graph
        .constants
        .retain(|t, d| !(packed_tensors.contains(t) && d.dtype.is_float()));

    let mut steps = Vec::with_capacity(graph.nodes.len());
    let producers = graph.producers();
    for (ni, n) in graph.nodes.iter().enumerate() {
        let mut pages: Vec<u32> = Vec::new();
        let mut wbytes = 0u64;
        let lookup = match (&n.op, step_weights[ni].first(), n.input(1)) {
            (Op::Gather { .. }, Some(&(0, wi)), Some(ids))
                if matches!(weights[wi].kind, WeightKind::Rows { .. }) =>
            {
                graph_input_of(&graph, &producers, ids).map(|ids_input| Lookup {
                    weight: wi,
                    ids_input,
                })
            }
            _ => None,
        };
        for &(slot, wi) in &step_weights[ni] {
            let w = &weights[wi];
            if w.texels == 0 || lookup.as_ref().is_some_and(|l| l.weight == wi) {
                continue;
            }
            let (off, cnt) = w.span_read_by(&n.op, slot);
            let (p0, p1) = (off / tpp, (off + cnt - 1) / tpp);
            pages.extend((p0..=p1).map(|p| p as u32));
            wbytes += cnt * bpt;
        }
        pages.sort_unstable();
        pages.dedup();
        let act_bytes: u64 = n
            .present_inputs()
            .chain(n.outputs.iter().copied())
            .filter(|t| !graph.is_const(*t) && !packed_tensors.contains(t))
            .map(|t| crate::ir::c4_bytes(&graph.tensors[t].shape, bpv) as u64)
            .sum();
        let view = cost::is_view(&graph, n);
        steps.push(StepInfo {
            node: ni,
            name: n.name.clone(),
            op: n.op.name().to_string(),
            weights: step_weights[ni].clone(),
            pages,
            flops: if view { 0 } else { cost::flops(&graph, n) },
            bytes: if view { 0 } else { wbytes + act_bytes },
            live_activation_bytes: live[ni],
            is_view: view,
            lookup,
        });
    }
    let mut data = Vec::with_capacity((page_count * opts.page_bytes) as usize);
    match opts.precision {
        Precision::F16 => data.extend(
            texel_data
                .iter()
                .flat_map(|&v| half::f16::from_f32(v).to_le_bytes()),
        ),
        Precision::F32 => data.extend(texel_data.iter().flat_map(|&v| v.to_le_bytes())),
    }
    data.resize((page_count * opts.page_bytes) as usize, 0);
    let layout_transforms = graph.layout_transform_count();
    let header = PackedHeader {
        activations: None,
        source: source.to_string(),
        precision: opts.precision,
        page_bytes: opts.page_bytes,
        page_width: PAGE_WIDTH,
        texels_per_page: tpp,
        page_count,
        graph,
        weights,
        steps,
        peak_activation_bytes: peak,
        layout_transforms,
        passes,
        compiler_revision: super::format::COMPILER_REVISION,
        compensated_pages: compensated_pages.iter().map(|&p| p as u32).collect(),
        metadata,
        // Filled in by `Packed::write`, from the data it writes.
        page_crcs: Vec::new(),
    };
    Ok(Packed { header, data })
}
