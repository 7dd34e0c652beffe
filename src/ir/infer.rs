//! Shape and dtype inference for IR ops from input shapes and typed attributes.
use super::op::*;
use super::DType;

/// Shape and dtype of one tensor.
pub type Sig = (Vec<usize>, DType);

/// Numpy-style broadcast of two shapes.
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, String> {
    let r = a.len().max(b.len());
    let mut out = vec![0; r];
    for i in 0..r {
        let da = if i + a.len() >= r {
            a[i + a.len() - r]
        } else {
            1
        };
        let db = if i + b.len() >= r {
            b[i + b.len() - r]
        } else {
            1
        };
        out[i] = if da == db || db == 1 {
            da
        } else if da == 1 {
            db
        } else {
            return Err(format!("cannot broadcast shapes {a:?} and {b:?}"));
        };
    }
    Ok(out)
}

/// Output size of a sliding window along one axis.
pub fn window_out(
    len: usize,
    k: usize,
    s: usize,
    d: usize,
    pad: usize,
    ceil: bool,
) -> Result<usize, String> {
    if k == 0 || s == 0 || d == 0 {
        return Err(format!(
            "window {k}, stride {s}, dilation {d} must all be positive"
        ));
    }
    let eff = d * (k - 1) + 1;
    if len + pad < eff {
        return Err(format!(
            "window {k} (dilation {d}) larger than padded input {len}+{pad}"
        ));
    }
    let num = len + pad - eff;
    Ok(if ceil {
        num.div_ceil(s) + 1
    } else {
        num / s + 1
    })
}

fn spatial(shape: &[usize], w: &Window) -> Result<(usize, usize), String> {
    match (w.spatial_rank, shape.len()) {
        (1, 3) => Ok((1, shape[2])),
        (2, 4) => Ok((shape[2], shape[3])),
        _ => Err(format!(
            "expected a rank-{} input, got shape {shape:?}",
            w.spatial_rank + 2
        )),
    }
}

fn out_spatial(n: usize, c: usize, h: usize, w: usize, win: &Window) -> Vec<usize> {
    if win.spatial_rank == 1 {
        vec![n, c, w]
    } else {
        vec![n, c, h, w]
    }
}

fn need(ins: &[Option<Sig>], i: usize) -> Result<&Sig, String> {
    ins.get(i)
        .and_then(|x| x.as_ref())
        .ok_or_else(|| format!("missing input #{i}"))
}

/// Infers output shapes/dtypes; errors are plain messages the caller wraps with node context.
pub fn infer(op: &Op, ins: &[Option<Sig>]) -> Result<Vec<Sig>, String> {
    let x = need(ins, 0)?;
    let (xs, xt) = (&x.0, x.1);
    Ok(match op {
        Op::Conv { window, group, .. } => {
            let (h, w) = spatial(xs, window)?;
            let ws = &need(ins, 1)?.0;
            if ws.is_empty() || xs[1] != ws.get(1).copied().unwrap_or(0) * group {
                return Err(format!(
                    "Conv input channels {} != weight {:?} x group {group}",
                    xs[1], ws
                ));
            }
            let oh = window_out(
                h,
                window.kernel[0],
                window.strides[0],
                window.dilations[0],
                window.pads[0] + window.pads[2],
                false,
            )?;
            let ow = window_out(
                w,
                window.kernel[1],
                window.strides[1],
                window.dilations[1],
                window.pads[1] + window.pads[3],
                false,
            )?;
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
                return Err(format!(
                    "ConvTranspose input channels {} != weight {:?}",
                    xs[1], ws
                ));
            }
            let f = |len: usize, a: usize| -> Result<usize, String> {
                if len == 0 || window.kernel[a] == 0 || window.strides[a] == 0 {
                    return Err("ConvTranspose with an empty input, kernel or stride".to_string());
                }
                let full = window.strides[a] * (len - 1)
                    + output_padding[a]
                    + (window.kernel[a] - 1) * window.dilations[a]
                    + 1;
                full.checked_sub(window.pads[a] + window.pads[a + 2])
                    .ok_or_else(|| "negative ConvTranspose output".to_string())
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
                return Err("MatMul of a scalar".into());
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
                return Err(format!("MatMul inner dims differ: {a:?} x {b:?}"));
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
            trans_a, trans_b, ..
        } => {
            let b = &need(ins, 1)?.0;
            if xs.len() != 2 || b.len() != 2 {
                return Err(format!("Gemm needs rank-2 operands, got {xs:?} and {b:?}"));
            }
            let (m, k) = if *trans_a {
                (xs[1], xs[0])
            } else {
                (xs[0], xs[1])
            };
            let (k2, n) = if *trans_b { (b[1], b[0]) } else { (b[0], b[1]) };
            if k != k2 {
                return Err(format!("Gemm inner dims differ: {xs:?} x {b:?}"));
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
            if matches!(u, UnaryOp::Not) {
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
        Op::Softmax { .. } | Op::LayerNorm { .. } | Op::BatchNorm { .. } => vec![(xs.clone(), xt)],
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
            let (h, w) = spatial(xs, window)?;
            let oh = window_out(
                h,
                window.kernel[0],
                window.strides[0],
                window.dilations[0],
                window.pads[0] + window.pads[2],
                *ceil_mode,
            )?;
            let ow = window_out(
                w,
                window.kernel[1],
                window.strides[1],
                window.dilations[1],
                window.pads[1] + window.pads[3],
                *ceil_mode,
            )?;
            vec![(out_spatial(xs[0], xs[1], oh, ow, window), xt)]
        }
        Op::GlobalAveragePool => {
            if xs.len() < 3 {
                return Err(format!("GlobalAveragePool needs rank >= 3, got {xs:?}"));
            }
            let mut out = xs.clone();
            for d in out.iter_mut().skip(2) {
                *d = 1;
            }
            vec![(out, xt)]
        }
        Op::Resize { sizes, .. } => {
            if sizes.len() != xs.len() {
                return Err(format!("Resize output {sizes:?} for rank {}", xs.len()));
            }
            vec![(sizes.clone(), xt)]
        }
        Op::Concat { axis } => {
            let mut out = xs.clone();
            if *axis >= out.len() {
                return Err(format!("Concat axis {axis} out of range for {xs:?}"));
            }
            out[*axis] = 0;
            for s in ins.iter().flatten() {
                if s.0.len() != xs.len()
                    || s.0
                        .iter()
                        .enumerate()
                        .any(|(i, &d)| i != *axis && d != xs[i])
                {
                    return Err(format!("Concat inputs disagree: {xs:?} vs {:?}", s.0));
                }
                out[*axis] += s.0[*axis];
            }
            vec![(out, xt)]
        }
        Op::Split { axis, splits } => {
            if *axis >= xs.len() || splits.iter().sum::<usize>() != xs[*axis] {
                return Err(format!(
                    "Split {splits:?} on axis {axis} does not cover {xs:?}"
                ));
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
        Op::Transpose { perm } => {
            if perm.len() != xs.len() {
                return Err(format!("Transpose perm {perm:?} for rank {}", xs.len()));
            }
            vec![(perm.iter().map(|&p| xs[p]).collect(), xt)]
        }
        Op::Reshape { shape, .. } => {
            // The target comes from the file: its product may overflow.
            let target = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
            if target != Some(xs.iter().product::<usize>()) {
                return Err(format!("cannot reshape {xs:?} to {shape:?}"));
            }
            vec![(shape.clone(), xt)]
        }
        Op::Pad { pads, .. } => {
            let r = xs.len();
            if pads.len() != 2 * r {
                return Err(format!("Pad has {} pads for rank {r}", pads.len()));
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
        Op::Cast { to } => vec![(xs.clone(), *to)],
        Op::Expand { shape } => vec![(broadcast(xs, shape)?, xt)],
        Op::Tile { repeats } => vec![(xs.iter().zip(repeats).map(|(a, b)| a * b).collect(), xt)],
        Op::Lstm { hidden_size } => {
            if xs.len() != 3 {
                return Err(format!(
                    "LSTM input must be [seq, batch, input], got {xs:?}"
                ));
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
