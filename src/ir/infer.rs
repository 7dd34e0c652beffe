//! Shape and dtype inference for IR ops from input shapes and typed attributes.
use tensor_shape::{broadcast, BroadcastError};

use super::op::*;
use super::DType;

/// Shape and dtype of one tensor.
pub type Sig = (Vec<usize>, DType);

/// Why an op's output shape cannot be inferred; the importer adds the node and tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum InferError {
    #[error("missing input #{0}")]
    MissingInput(usize),
    #[error(transparent)]
    Broadcast(#[from] BroadcastError),
    #[error("window {kernel}, stride {stride}, dilation {dilation} must all be positive")]
    EmptyWindow {
        kernel: usize,
        stride: usize,
        dilation: usize,
    },
    #[error("window {kernel} (dilation {dilation}) larger than padded input {len}+{pad}")]
    WindowTooLarge {
        kernel: usize,
        dilation: usize,
        len: usize,
        pad: usize,
    },
    #[error("expected a rank-{rank} input, got shape {shape:?}")]
    WindowRank { rank: usize, shape: Vec<usize> },
    #[error("Conv input channels {channels} != weight {weight:?} x group {group}")]
    ConvChannels {
        channels: usize,
        weight: Vec<usize>,
        group: usize,
    },
    #[error("ConvTranspose input channels {channels} != weight {weight:?}")]
    ConvTransposeChannels { channels: usize, weight: Vec<usize> },
    #[error("ConvTranspose with an empty input, kernel or stride")]
    ConvTransposeEmpty,
    #[error("negative ConvTranspose output")]
    ConvTransposeNegative,
    #[error("MatMul of a scalar")]
    MatMulScalar,
    #[error("a residual norm's R {residual:?} differs in shape from its X {x:?}")]
    ResidualShape { x: Vec<usize>, residual: Vec<usize> },
    #[error("Rope of x {x:?} needs [N, C, S, D] (D even) and cos/sin [1, 1, S, D], got {cos:?} and {sin:?}")]
    Rope {
        x: Vec<usize>,
        cos: Vec<usize>,
        sin: Vec<usize>,
    },
    /// MatMul or Gemm operands whose contracted dimensions differ.
    #[error("{op} inner dims differ: {a:?} x {b:?}")]
    InnerDims {
        op: &'static str,
        a: Vec<usize>,
        b: Vec<usize>,
    },
    #[error("Gemm needs rank-2 operands, got {a:?} and {b:?}")]
    GemmRank { a: Vec<usize>, b: Vec<usize> },
    #[error("GlobalAveragePool needs rank >= 3, got {0:?}")]
    GlobalPoolRank(Vec<usize>),
    #[error("Resize output {sizes:?} for rank {rank}")]
    ResizeRank { sizes: Vec<usize>, rank: usize },
    #[error("Concat axis {axis} out of range for {shape:?}")]
    ConcatAxis { axis: usize, shape: Vec<usize> },
    #[error("Concat inputs disagree: {first:?} vs {other:?}")]
    ConcatShapes {
        first: Vec<usize>,
        other: Vec<usize>,
    },
    #[error("Split {splits:?} on axis {axis} does not cover {shape:?}")]
    Split {
        splits: Vec<usize>,
        axis: usize,
        shape: Vec<usize>,
    },
    #[error("Transpose perm {perm:?} for rank {rank}")]
    TransposeRank { perm: Vec<usize>, rank: usize },
    #[error("cannot reshape {from:?} to {to:?}")]
    Reshape { from: Vec<usize>, to: Vec<usize> },
    #[error("Pad has {pads} pads for rank {rank}")]
    PadRank { pads: usize, rank: usize },
    #[error("GatherElements indices {indices:?} do not fit data {data:?} on axis {axis}")]
    GatherElements {
        data: Vec<usize>,
        indices: Vec<usize>,
        axis: usize,
    },
    #[error("ScatterND data {data:?}, indices {indices:?} and updates {updates:?} do not fit")]
    ScatterNd {
        data: Vec<usize>,
        indices: Vec<usize>,
        updates: Vec<usize>,
    },
    #[error("Trilu needs rank >= 2, got {0:?}")]
    TriluRank(Vec<usize>),
    #[error(
        "a cache write needs the new rows {new:?} to match the cache {cache:?} on every axis but \
         {axis}, and fit in it"
    )]
    KvWrite {
        cache: Vec<usize>,
        new: Vec<usize>,
        axis: usize,
    },
    #[error("Attention operands do not fit: Q {q:?}, K {k:?}, V {v:?}, mask {mask:?}")]
    Attention {
        q: Vec<usize>,
        k: Vec<usize>,
        v: Vec<usize>,
        mask: Option<Vec<usize>>,
    },
    #[error("Gemm rows {rows:?} of B {b:?}: B must be read transposed, the rows in range, the first a multiple of 4")]
    GemmRows { rows: [usize; 2], b: Vec<usize> },
    #[error("LSTM input must be [seq, batch, input], got {0:?}")]
    LstmInput(Vec<usize>),
}

type R<T> = Result<T, InferError>;

/// Output size of a sliding window along one axis.
pub fn window_out(len: usize, k: usize, s: usize, d: usize, pad: usize, ceil: bool) -> R<usize> {
    if k == 0 || s == 0 || d == 0 {
        return Err(InferError::EmptyWindow {
            kernel: k,
            stride: s,
            dilation: d,
        });
    }
    let eff = d * (k - 1) + 1;
    if len + pad < eff {
        return Err(InferError::WindowTooLarge {
            kernel: k,
            dilation: d,
            len,
            pad,
        });
    }
    let num = len + pad - eff;
    Ok(if ceil {
        num.div_ceil(s) + 1
    } else {
        num / s + 1
    })
}

/// `(OH, OW)` of `window` sliding over `x` (OH = 1 for a 1-D window).
fn window_hw(x: &[usize], window: &Window, ceil: bool) -> R<(usize, usize)> {
    let (h, w) = spatial(x, window)?;
    let axis = |a: usize, len: usize| {
        window_out(
            len,
            window.kernel[a],
            window.strides[a],
            window.dilations[a],
            window.pads[a] + window.pads[a + 2],
            ceil,
        )
    };
    Ok((axis(0, h)?, axis(1, w)?))
}

fn spatial(shape: &[usize], w: &Window) -> R<(usize, usize)> {
    match (w.spatial_rank, shape.len()) {
        (1, 3) => Ok((1, shape[2])),
        (2, 4) => Ok((shape[2], shape[3])),
        _ => Err(InferError::WindowRank {
            rank: w.spatial_rank as usize + 2,
            shape: shape.to_vec(),
        }),
    }
}

fn out_spatial(n: usize, c: usize, h: usize, w: usize, win: &Window) -> Vec<usize> {
    if win.spatial_rank == 1 {
        vec![n, c, w]
    } else {
        vec![n, c, h, w]
    }
}

/// The scores `[.., Sq, Sk]` and output `[.., Sq, Dv]` shapes of attention over Q `[.., Sq, D]`,
/// K (`[.., Sk, D]` with `key_rows`, else `[.., D, Sk]`) and V `[.., Sk, Dv]`; None when they
/// do not fit (one rank >= 2, equal leading dims, matching D and Sk).
pub fn attention_shapes(
    q: &[usize],
    k: &[usize],
    v: &[usize],
    key_rows: bool,
) -> Option<(Vec<usize>, Vec<usize>)> {
    let r = q.len();
    if r < 2 || k.len() != r || v.len() != r || !kv_heads_fit(q, k) || !kv_heads_fit(q, v) {
        return None;
    }
    if r >= 3 && k[r - 3] != v[r - 3] {
        return None;
    }
    let (sk, d) = if key_rows {
        (k[r - 2], k[r - 1])
    } else {
        (k[r - 1], k[r - 2])
    };
    if d != q[r - 1] || v[r - 2] != sk {
        return None;
    }
    let mut scores = q.to_vec();
    scores[r - 1] = sk;
    let mut out = q.to_vec();
    out[r - 1] = v[r - 1];
    Some((scores, out))
}

/// K's (or V's) leading dims against Q's: equal, except that the heads (the last leading dim,
/// the packed channel axis) may be fewer when they divide Q's (grouped-query attention: query
/// head h reads key head h / (Hq / Hkv)).
fn kv_heads_fit(q: &[usize], kv: &[usize]) -> bool {
    let r = q.len();
    if r < 3 {
        return kv[..r - 2] == q[..r - 2];
    }
    kv[..r - 3] == q[..r - 3] && kv[r - 3] > 0 && q[r - 3].is_multiple_of(kv[r - 3])
}

/// An additive mask broadcasts (numpy rules) to the scores without growing them.
pub fn mask_broadcasts(mask: &[usize], scores: &[usize]) -> bool {
    broadcast(scores, mask).ok().as_deref() == Some(scores)
}

fn need(ins: &[Option<Sig>], i: usize) -> R<&Sig> {
    ins.get(i)
        .and_then(|x| x.as_ref())
        .ok_or(InferError::MissingInput(i))
}

/// Infers output shapes/dtypes; the caller wraps errors with the node.
pub fn infer(op: &Op, ins: &[Option<Sig>]) -> R<Vec<Sig>> {
    let x = need(ins, 0)?;
    let (xs, xt) = (&x.0, x.1);
    Ok(match op {
        Op::Conv { window, group, .. } => {
            // The rank check comes before reading the channel axis.
            spatial(xs, window)?;
            let ws = &need(ins, 1)?.0;
            if ws.is_empty() || xs[1] != ws.get(1).copied().unwrap_or(0) * group {
                return Err(InferError::ConvChannels {
                    channels: xs[1],
                    weight: ws.clone(),
                    group: *group,
                });
            }
            let (oh, ow) = window_hw(xs, window, false)?;
            vec![(out_spatial(xs[0], ws[0], oh, ow, window), xt)]
        }
        Op::ConvTranspose {
            window,
            group,
            output_padding,
            ..
        } => {
            let (h, w) = spatial(xs, window)?;
            let ws = &need(ins, 1)?.0;
            if ws.len() < 2 || ws[0] != xs[1] {
                return Err(InferError::ConvTransposeChannels {
                    channels: xs[1],
                    weight: ws.clone(),
                });
            }
            let f = |len: usize, a: usize| -> R<usize> {
                if len == 0 || window.kernel[a] == 0 || window.strides[a] == 0 {
                    return Err(InferError::ConvTransposeEmpty);
                }
                let full = window.strides[a] * (len - 1)
                    + output_padding[a]
                    + (window.kernel[a] - 1) * window.dilations[a]
                    + 1;
                full.checked_sub(window.pads[a] + window.pads[a + 2])
                    .ok_or(InferError::ConvTransposeNegative)
            };
            vec![(
                out_spatial(xs[0], ws[1] * group, f(h, 0)?, f(w, 1)?, window),
                xt,
            )]
        }
        Op::MatMul {
            transpose_a,
            transpose_b,
            ..
        } => {
            let mut a = xs.clone();
            let mut b = need(ins, 1)?.0.clone();
            if a.is_empty() || b.is_empty() {
                return Err(InferError::MatMulScalar);
            }
            let (a1, b1) = (a.len() == 1, b.len() == 1);
            if a1 {
                a.insert(0, 1);
            }
            if b1 {
                b.push(1);
            }
            let (ra, rb) = (a.len(), b.len());
            if *transpose_a {
                a.swap(ra - 1, ra - 2);
            }
            if *transpose_b {
                b.swap(rb - 1, rb - 2);
            }
            if a[ra - 1] != b[rb - 2] {
                return Err(InferError::InnerDims { op: "MatMul", a, b });
            }
            let mut out = broadcast(&a[..ra - 2], &b[..rb - 2])?;
            if !a1 {
                out.push(a[ra - 2]);
            }
            if !b1 {
                out.push(b[rb - 1]);
            }
            vec![(out, xt)]
        }
        Op::Gemm {
            trans_a,
            trans_b,
            b_rows,
            ..
        } => {
            let b = &need(ins, 1)?.0;
            if xs.len() != 2 || b.len() != 2 {
                return Err(InferError::GemmRank {
                    a: xs.clone(),
                    b: b.clone(),
                });
            }
            let (m, k) = if *trans_a {
                (xs[1], xs[0])
            } else {
                (xs[0], xs[1])
            };
            let (k2, mut n) = if *trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
            if k != k2 {
                return Err(InferError::InnerDims {
                    op: "Gemm",
                    a: xs.clone(),
                    b: b.clone(),
                });
            }
            if let Some([r0, r1]) = *b_rows {
                if !*trans_b || r0 % 4 != 0 || r0 >= r1 || r1 > n {
                    return Err(InferError::GemmRows {
                        rows: [r0, r1],
                        b: b.clone(),
                    });
                }
                n = r1 - r0;
            }
            vec![(vec![m, n], xt)]
        }
        Op::Binary(b) => {
            let y = need(ins, 1)?;
            let shape = broadcast(xs, &y.0)?;
            let dt = match b {
                BinaryOp::Equal
                | BinaryOp::Less
                | BinaryOp::Greater
                | BinaryOp::And
                | BinaryOp::Or => DType::Bool,
                _ => xt,
            };
            vec![(shape, dt)]
        }
        Op::Unary(u) => vec![(
            xs.clone(),
            if matches!(u, UnaryOp::Not | UnaryOp::IsNaN) {
                DType::Bool
            } else {
                xt
            },
        )],
        Op::Where => {
            let a = need(ins, 1)?;
            let b = need(ins, 2)?;
            vec![(broadcast(&broadcast(xs, &a.0)?, &b.0)?, a.1)]
        }
        Op::LayerNorm { residual: true, .. } => {
            let r = need(ins, 3)?;
            if r.0 != *xs {
                return Err(InferError::ResidualShape {
                    x: xs.clone(),
                    residual: r.0.clone(),
                });
            }
            vec![(xs.clone(), xt), (xs.clone(), xt)]
        }
        Op::Softmax { .. } | Op::LayerNorm { .. } | Op::BatchNorm { .. } | Op::CumSum { .. } => {
            vec![(xs.clone(), xt)]
        }
        Op::Rope { split_heads } => {
            let (c, sn) = (&need(ins, 1)?.0, &need(ins, 2)?.0);
            let bad = || InferError::Rope {
                x: xs.clone(),
                cos: c.clone(),
                sin: sn.clone(),
            };
            // Split heads: the output is X as [N, C, S, D], D the table's last axis.
            let heads = if *split_heads {
                let d = c.last().copied().ok_or_else(bad)?;
                split_heads_shape(xs, d).ok_or_else(bad)?
            } else {
                xs.clone()
            };
            if !rope_shapes_fit(&heads, c) || !rope_shapes_fit(&heads, sn) {
                return Err(bad());
            }
            vec![(heads, xt)]
        }
        Op::Attention {
            key_rows,
            merge_heads,
            split_heads,
            ..
        } => {
            let (k, v) = (&need(ins, 1)?.0, &need(ins, 2)?.0);
            let mask = ins.get(3).and_then(|m| m.as_ref()).map(|m| m.0.clone());
            let bad = || InferError::Attention {
                q: xs.clone(),
                k: k.clone(),
                v: v.clone(),
                mask: mask.clone(),
            };
            let [q, k, v] = attention_operands(split_heads, [xs, k, v]).ok_or_else(bad)?;
            if split_heads.k.is_some() && !key_rows {
                return Err(bad());
            }
            let (scores, out) = attention_shapes(&q, &k, &v, *key_rows).ok_or_else(bad)?;
            if mask.as_ref().is_some_and(|m| !mask_broadcasts(m, &scores)) {
                return Err(bad());
            }
            let out = if *merge_heads {
                merged_heads(&out).ok_or_else(bad)?
            } else {
                out
            };
            vec![(out, xt)]
        }
        Op::Reduce { axes, keepdims, .. } => {
            let mut out = Vec::new();
            for (i, &d) in xs.iter().enumerate() {
                if axes.contains(&i) {
                    if *keepdims {
                        out.push(1);
                    }
                } else {
                    out.push(d);
                }
            }
            vec![(out, xt)]
        }
        Op::ArgMax { axis, keepdims, .. } => {
            let mut out = xs.clone();
            if *keepdims {
                out[*axis] = 1;
            } else {
                out.remove(*axis);
            }
            vec![(out, DType::I64)]
        }
        Op::MaxPool { window, ceil_mode }
        | Op::AveragePool {
            window, ceil_mode, ..
        } => {
            let (oh, ow) = window_hw(xs, window, *ceil_mode)?;
            vec![(out_spatial(xs[0], xs[1], oh, ow, window), xt)]
        }
        Op::GlobalAveragePool => {
            if xs.len() < 3 {
                return Err(InferError::GlobalPoolRank(xs.clone()));
            }
            let mut out = xs.clone();
            for d in out.iter_mut().skip(2) {
                *d = 1;
            }
            vec![(out, xt)]
        }
        Op::Resize { sizes, .. } => {
            if sizes.len() != xs.len() {
                return Err(InferError::ResizeRank {
                    sizes: sizes.clone(),
                    rank: xs.len(),
                });
            }
            vec![(sizes.clone(), xt)]
        }
        Op::Concat { axis } => {
            let mut out = xs.clone();
            if *axis >= out.len() {
                return Err(InferError::ConcatAxis {
                    axis: *axis,
                    shape: xs.clone(),
                });
            }
            out[*axis] = 0;
            for s in ins.iter().flatten() {
                if s.0.len() != xs.len()
                    || s.0
                        .iter()
                        .enumerate()
                        .any(|(i, &d)| i != *axis && d != xs[i])
                {
                    return Err(InferError::ConcatShapes {
                        first: xs.clone(),
                        other: s.0.clone(),
                    });
                }
                out[*axis] += s.0[*axis];
            }
            vec![(out, xt)]
        }
        Op::Split { axis, splits } => {
            if *axis >= xs.len() || splits.iter().sum::<usize>() != xs[*axis] {
                return Err(InferError::Split {
                    splits: splits.clone(),
                    axis: *axis,
                    shape: xs.clone(),
                });
            }
            splits
                .iter()
                .map(|&s| {
                    let mut o = xs.clone();
                    o[*axis] = s;
                    (o, xt)
                })
                .collect()
        }
        Op::Slice {
            starts,
            ends,
            steps,
        } => {
            let out = (0..xs.len())
                .map(|i| slice_len(starts[i], ends[i], steps[i]))
                .collect();
            vec![(out, xt)]
        }
        Op::Transpose { perm, read_as } => {
            let src = match read_as {
                None => xs.as_slice(),
                Some(shape) => reshaped(xs, shape)?,
            };
            if perm.len() != src.len() {
                return Err(InferError::TransposeRank {
                    perm: perm.clone(),
                    rank: src.len(),
                });
            }
            vec![(perm.iter().map(|&p| src[p]).collect(), xt)]
        }
        Op::Reshape { shape, .. } => vec![(reshaped(xs, shape)?.to_vec(), xt)],
        Op::Pad { pads, .. } => {
            let r = xs.len();
            if pads.len() != 2 * r {
                return Err(InferError::PadRank {
                    pads: pads.len(),
                    rank: r,
                });
            }
            vec![((0..r).map(|i| xs[i] + pads[i] + pads[i + r]).collect(), xt)]
        }
        Op::Gather { axis } => {
            let idx = &need(ins, 1)?.0;
            let mut out = xs[..*axis].to_vec();
            out.extend_from_slice(idx);
            out.extend_from_slice(&xs[axis + 1..]);
            vec![(out, xt)]
        }
        Op::GatherElements { axis } => {
            let idx = &need(ins, 1)?.0;
            // Off the gathered axis an index position is also a data position.
            let fits = idx.len() == xs.len()
                && *axis < xs.len()
                && idx
                    .iter()
                    .zip(xs)
                    .enumerate()
                    .all(|(a, (&i, &d))| a == *axis || i <= d);
            if !fits {
                return Err(InferError::GatherElements {
                    data: xs.clone(),
                    indices: idx.clone(),
                    axis: *axis,
                });
            }
            vec![(idx.clone(), xt)]
        }
        Op::ScatterNd { .. } => {
            let (is, us) = (&need(ins, 1)?.0, &need(ins, 2)?.0);
            // updates = indices[:-1] + data[k:], with k the index tuple length.
            let fits = match is.split_last() {
                Some((&k, rows)) if k >= 1 && k <= xs.len() => {
                    us.len() == rows.len() + xs.len() - k
                        && us[..rows.len()] == *rows
                        && us[rows.len()..] == xs[k..]
                }
                _ => false,
            };
            if !fits {
                return Err(InferError::ScatterNd {
                    data: xs.clone(),
                    indices: is.clone(),
                    updates: us.clone(),
                });
            }
            vec![(xs.clone(), xt)]
        }
        Op::KvWrite { axis, split_heads } => {
            let given = &need(ins, 1)?.0;
            need(ins, 2)?;
            // Split heads: the new rows [N, S, C * D] are written as [N, C, S, D] along S.
            let split = match (*split_heads, xs.as_slice()) {
                (false, _) => Some(given.clone()),
                (true, [_, _, _, d]) if *axis == 2 => split_heads_shape(given, *d),
                (true, _) => None,
            };
            let ns = split.as_ref().unwrap_or(given);
            let fits = split.is_some()
                && ns.len() == xs.len()
                && *axis < xs.len()
                && xs
                    .iter()
                    .zip(ns)
                    .enumerate()
                    .all(|(a, (c, n))| if a == *axis { n <= c } else { n == c });
            if !fits {
                return Err(InferError::KvWrite {
                    cache: xs.clone(),
                    new: given.clone(),
                    axis: *axis,
                });
            }
            vec![(xs.clone(), xt)]
        }
        Op::Trilu { .. } => {
            if xs.len() < 2 {
                return Err(InferError::TriluRank(xs.clone()));
            }
            vec![(xs.clone(), xt)]
        }
        Op::Cast { to } => vec![(xs.clone(), *to)],
        Op::Expand { shape } => vec![(broadcast(xs, shape)?, xt)],
        Op::Tile { repeats } => vec![(xs.iter().zip(repeats).map(|(a, b)| a * b).collect(), xt)],
        Op::Lstm { hidden_size } => {
            if xs.len() != 3 {
                return Err(InferError::LstmInput(xs.clone()));
            }
            let (s, b, h) = (xs[0], xs[1], *hidden_size);
            vec![
                (vec![s, 1, b, h], xt),
                (vec![1, b, h], xt),
                (vec![1, b, h], xt),
            ]
        }
    })
}

/// Number of elements selected by a normalized (start, end, step).
pub fn slice_len(start: i64, end: i64, step: i64) -> usize {
    if step > 0 && end > start {
        ((end - start + step - 1) / step) as usize
    } else if step < 0 && start > end {
        ((start - end + (-step) - 1) / (-step)) as usize
    } else {
        0
    }
}

/// Whether `table` (cos or sin) fits Rope's x: x `[N, C, S, D]` with D even, the table
/// `[.., S, D]` with every leading dim 1 and rank at most 4 (the kernel's contract).
pub fn rope_shapes_fit(x: &[usize], table: &[usize]) -> bool {
    let r = table.len();
    x.len() == 4
        && x[3].is_multiple_of(2)
        && (2..=4).contains(&r)
        && table[r - 2..] == x[2..]
        && table[..r - 2].iter().all(|&d| d == 1)
}

/// `[N, S, C * D]` (a projection's output, the heads side by side in each row) read as its heads
/// `[N, C, S, D]` (see `Op::Rope::split_heads`); `None` unless the shape is rank 3 and its rows
/// hold whole heads of `d`.
pub fn split_heads_shape(x: &[usize], d: usize) -> Option<Vec<usize>> {
    match x {
        [n, s, cd] if d > 0 && cd.is_multiple_of(d) => Some(vec![*n, cd / d, *s, d]),
        _ => None,
    }
}

/// `shape` when it holds exactly the elements of `xs` (a Reshape's target, a Transpose's
/// `read_as`). The target comes from the file: its product may overflow.
fn reshaped<'a>(xs: &[usize], shape: &'a [usize]) -> R<&'a [usize]> {
    let target = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
    if target != Some(xs.iter().product::<usize>()) {
        return Err(InferError::Reshape {
            from: xs.to_vec(),
            to: shape.to_vec(),
        });
    }
    Ok(shape)
}

/// Attention's Q, K and V as the kernel reads them: a split operand's rows `[1, S, H * D]` as
/// `[1, H, S, D]` (`None` when they do not split by its head dim, or have a batch).
pub fn attention_operands(splits: &HeadSplits, shapes: [&[usize]; 3]) -> Option<[Vec<usize>; 3]> {
    let one = |shape: &[usize], d: Option<usize>| match d {
        None => Some(shape.to_vec()),
        Some(d) if shape.first() == Some(&1) => split_heads_shape(shape, d),
        Some(_) => None,
    };
    let [q, k, v] = splits.dims();
    Some([one(shapes[0], q)?, one(shapes[1], k)?, one(shapes[2], v)?])
}

/// `[1, H, Sq, Dv]` attention output as `[1, Sq, H * Dv]` (see `Op::Attention::merge_heads`);
/// `None` for any other rank or a batch.
pub fn merged_heads(out: &[usize]) -> Option<Vec<usize>> {
    match out {
        [1, h, sq, dv] => Some(vec![1, *sq, h * dv]),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f32s(shape: &[usize]) -> Option<Sig> {
        Some((shape.to_vec(), DType::F32))
    }

    #[test]
    fn errors_name_the_op_and_shapes() {
        let matmul = Op::MatMul {
            transpose_a: false,
            transpose_b: false,
            activation: Activation::None,
        };
        let e = infer(&matmul, &[f32s(&[1, 72]), f32s(&[128, 10])]).unwrap_err();
        assert_eq!(
            e,
            InferError::InnerDims {
                op: "MatMul",
                a: vec![1, 72],
                b: vec![128, 10]
            }
        );
        assert_eq!(
            e.to_string(),
            "MatMul inner dims differ: [1, 72] x [128, 10]"
        );
        let add = Op::Binary(BinaryOp::Add);
        let e = infer(&add, &[f32s(&[2, 3]), f32s(&[4])]).unwrap_err();
        assert_eq!(e.to_string(), "cannot broadcast shapes [2, 3] and [4]");
        assert_eq!(
            infer(&add, &[f32s(&[2, 3])]),
            Err(InferError::MissingInput(1))
        );
    }

    #[test]
    fn conv_and_pool_windows() {
        let window = Window {
            kernel: [3, 3],
            strides: [2, 2],
            dilations: [1, 1],
            pads: [1, 1, 1, 1],
            spatial_rank: 2,
        };
        let conv = Op::Conv {
            window,
            group: 1,
            activation: Activation::None,
        };
        let out = infer(&conv, &[f32s(&[1, 3, 8, 8]), f32s(&[16, 3, 3, 3])]).unwrap();
        assert_eq!(out[0].0, vec![1, 16, 4, 4]);
        let e = infer(&conv, &[f32s(&[1, 4, 8, 8]), f32s(&[16, 3, 3, 3])]).unwrap_err();
        assert!(
            matches!(e, InferError::ConvChannels { channels: 4, .. }),
            "{e}"
        );
        let pool = Op::MaxPool {
            window,
            ceil_mode: true,
        };
        assert_eq!(
            infer(&pool, &[f32s(&[1, 3, 7, 7])]).unwrap()[0].0,
            [1, 3, 4, 4]
        );
        assert!(matches!(
            infer(&pool, &[f32s(&[1, 3, 7])]),
            Err(InferError::WindowRank { rank: 4, .. })
        ));
    }

    #[test]
    fn scatter_nd_updates_fit_indices_and_data() {
        let op = Op::ScatterNd {
            reduction: ScatterReduction::None,
        };
        let i64s = |s: &[usize]| Some((s.to_vec(), DType::I64));
        let out = infer(&op, &[f32s(&[4, 4, 4]), i64s(&[2, 1]), f32s(&[2, 4, 4])]).unwrap();
        assert_eq!(out[0].0, [4, 4, 4]);
        assert!(matches!(
            infer(&op, &[f32s(&[4, 4, 4]), i64s(&[2, 1]), f32s(&[2, 4])]),
            Err(InferError::ScatterNd { .. })
        ));
        assert!(matches!(
            infer(&op, &[f32s(&[4]), i64s(&[2, 2]), f32s(&[2])]),
            Err(InferError::ScatterNd { .. })
        ));
    }

    #[test]
    fn trilu_needs_a_matrix() {
        let op = Op::Trilu { upper: true, k: 0 };
        assert_eq!(infer(&op, &[f32s(&[2, 3, 4])]).unwrap()[0].0, [2, 3, 4]);
        assert_eq!(
            infer(&op, &[f32s(&[4])]),
            Err(InferError::TriluRank(vec![4]))
        );
    }

    #[test]
    fn gather_elements_takes_the_indices_shape() {
        let op = Op::GatherElements { axis: 1 };
        let i64s = |s: &[usize]| Some((s.to_vec(), DType::I64));
        let out = infer(&op, &[f32s(&[3, 3]), i64s(&[2, 5])]).unwrap();
        assert_eq!(out, vec![(vec![2, 5], DType::F32)]);
        assert!(matches!(
            infer(&op, &[f32s(&[3, 3]), i64s(&[4, 1])]),
            Err(InferError::GatherElements { .. })
        ));
        assert!(matches!(
            infer(&op, &[f32s(&[3, 3]), i64s(&[3])]),
            Err(InferError::GatherElements { .. })
        ));
    }
}
