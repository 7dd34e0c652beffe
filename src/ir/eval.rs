//! Constant evaluation of shape-like and elementwise IR ops (used for constant folding only; the
//! executor runs everything else on the GPU).
use super::infer::{infer, InferError, Sig};
use super::op::*;
use super::tensor::row_major_strides;
use super::{DType, TensorData, Values};

/// Why constant folding of an op failed; the importer adds the node and tensor.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    #[error(transparent)]
    Infer(#[from] InferError),
    #[error("Gather index {index} out of range for axis size {size}")]
    GatherIndex { index: i64, size: i64 },
}

/// For each output element of `out` shape, the linear index into a tensor of `shape` broadcast to it.
fn bcast_index(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let r = out.len();
    let st = row_major_strides(shape);
    let mut idx = Vec::with_capacity(n);
    let ost = row_major_strides(out);
    for lin in 0..n {
        let mut off = 0;
        for (a, &d) in out.iter().enumerate() {
            let i = (lin / ost[a]) % d.max(1);
            if a + shape.len() >= r {
                let k = a + shape.len() - r;
                if shape[k] != 1 {
                    off += i * st[k];
                }
            }
        }
        idx.push(off);
    }
    idx
}

fn gather_by(t: &TensorData, shape: Vec<usize>, idx: &[usize]) -> TensorData {
    let values = match &t.values {
        Values::F(v) => Values::F(idx.iter().map(|&i| v[i]).collect()),
        Values::I(v) => Values::I(idx.iter().map(|&i| v[i]).collect()),
    };
    TensorData {
        dtype: t.dtype,
        shape,
        values,
    }
}

/// Input #i, present once inference has accepted the op.
fn input<'a>(ins: &[Option<&'a TensorData>], i: usize) -> Result<&'a TensorData, InferError> {
    ins.get(i)
        .copied()
        .flatten()
        .ok_or(InferError::MissingInput(i))
}

/// The `out`-shaped slice of `x` starting at `starts` with `steps` (normalized, one per axis).
fn slice(x: &TensorData, out: Vec<usize>, starts: &[i64], steps: &[i64]) -> TensorData {
    let ist = row_major_strides(&x.shape);
    let ost = row_major_strides(&out);
    let n: usize = out.iter().product();
    let idx: Vec<usize> = (0..n)
        .map(|lin| {
            (0..out.len())
                .map(|a| {
                    let i = ((lin / ost[a]) % out[a]) as i64;
                    (starts[a] + i * steps[a]) as usize * ist[a]
                })
                .sum()
        })
        .collect();
    gather_by(x, out, &idx)
}

fn binary(op: BinaryOp, a: f64, b: f64) -> f64 {
    let t = |c: bool| c as i64 as f64;
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => a.powf(b),
        BinaryOp::Equal => t(a == b),
        BinaryOp::Less => t(a < b),
        BinaryOp::Greater => t(a > b),
        BinaryOp::And => t(a != 0.0 && b != 0.0),
        BinaryOp::Or => t(a != 0.0 || b != 0.0),
        BinaryOp::PRelu => {
            if a < 0.0 {
                a * b
            } else {
                a
            }
        }
        BinaryOp::FMod => a % b,
        BinaryOp::Mod => {
            let r = a % b;
            if r != 0.0 && (r < 0.0) != (b < 0.0) {
                r + b
            } else {
                r
            }
        }
    }
}

fn unary(op: UnaryOp, x: f64) -> Option<f64> {
    Some(match op {
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                x * alpha as f64
            } else {
                x
            }
        }
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::Silu => x / (1.0 + (-x).exp()),
        UnaryOp::HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
        UnaryOp::HardSwish => x * ((x + 3.0).clamp(0.0, 6.0) / 6.0),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Clip { min, max } => x.max(min as f64).min(max as f64),
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::Not => (x == 0.0) as i64 as f64,
        UnaryOp::IsNaN => x.is_nan() as i64 as f64,
        // No erf in std: leave Erf/Gelu on constants unfolded (never seen in practice).
        UnaryOp::Erf | UnaryOp::Gelu => return None,
        UnaryOp::GeluTanh => {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x * x * x)).tanh())
        }
    })
}

/// Largest tensor constant folding will produce.
pub const MAX_FOLD_ELEMENTS: usize = 1 << 24;

/// Evaluates `op` on constant inputs. `Ok(None)` means the op is not constant-foldable here.
pub fn eval(op: &Op, ins: &[Option<&TensorData>]) -> Result<Option<Vec<TensorData>>, EvalError> {
    let sigs: Vec<Option<Sig>> = ins
        .iter()
        .map(|t| t.map(|t| (t.shape.clone(), t.dtype)))
        .collect();
    let x = match ins.first().copied().flatten() {
        Some(x) => x,
        None => return Ok(None),
    };
    let foldable = matches!(
        op,
        Op::Binary(_)
            | Op::Unary(_)
            | Op::Where
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Concat { .. }
            | Op::Split { .. }
            | Op::Slice { .. }
            | Op::Gather { .. }
            | Op::GatherElements { .. }
            | Op::Cast { .. }
            | Op::CumSum { .. }
            | Op::Trilu { .. }
            | Op::ScatterNd { .. }
            | Op::Expand { .. }
            | Op::Tile { .. }
            | Op::Reduce { .. }
            | Op::Pad {
                mode: PadMode::Constant,
                ..
            }
    );
    if !foldable {
        return Ok(None);
    }
    let outs = infer(op, &sigs)?;
    let (oshape, odt) = outs[0].clone();
    let n: usize = oshape.iter().product();
    // Large results are left to the GPU (and a malformed file cannot make us allocate wildly).
    if outs
        .iter()
        .any(|o| o.0.iter().product::<usize>() > MAX_FOLD_ELEMENTS)
    {
        return Ok(None);
    }
    let res = match op {
        Op::Binary(b) => {
            let y = input(ins, 1)?;
            let (ia, ib) = (
                bcast_index(&x.shape, &oshape),
                bcast_index(&y.shape, &oshape),
            );
            let int_math = !x.dtype.is_float() && !y.dtype.is_float();
            let vals = (0..n).map(|i| {
                let (a, c) = (x.values.get_f(ia[i]), y.values.get_f(ib[i]));
                if int_math && matches!(b, BinaryOp::Div | BinaryOp::Mod | BinaryOp::FMod) {
                    let (p, q) = (x.values.get_i(ia[i]), y.values.get_i(ib[i]));
                    if q == 0 {
                        0.0
                    } else {
                        match b {
                            BinaryOp::Div => p.div_euclid(q) as f64,
                            BinaryOp::FMod => p.wrapping_rem(q) as f64,
                            _ => {
                                let r = p.wrapping_rem(q);
                                (if r != 0 && (r < 0) != (q < 0) {
                                    r + q
                                } else {
                                    r
                                }) as f64
                            }
                        }
                    }
                } else {
                    binary(*b, a, c)
                }
            });
            vec![TensorData::from_f64s(odt, oshape, vals)]
        }
        Op::Unary(u) => {
            let mut v = Vec::with_capacity(n);
            for i in 0..n {
                match unary(*u, x.values.get_f(i)) {
                    Some(r) => v.push(r),
                    None => return Ok(None),
                }
            }
            vec![TensorData::from_f64s(odt, oshape, v.into_iter())]
        }
        Op::Where => {
            let (a, b) = (input(ins, 1)?, input(ins, 2)?);
            let (ic, ia, ib) = (
                bcast_index(&x.shape, &oshape),
                bcast_index(&a.shape, &oshape),
                bcast_index(&b.shape, &oshape),
            );
            let vals = (0..n).map(|i| {
                if x.values.get_i(ic[i]) != 0 {
                    a.values.get_f(ia[i])
                } else {
                    b.values.get_f(ib[i])
                }
            });
            if a.dtype.is_float() {
                vec![TensorData::from_f64s(odt, oshape, vals)]
            } else {
                let iv = (0..n).map(|i| {
                    if x.values.get_i(ic[i]) != 0 {
                        a.values.get_i(ia[i])
                    } else {
                        b.values.get_i(ib[i])
                    }
                });
                vec![TensorData {
                    dtype: odt,
                    shape: oshape,
                    values: Values::I(iv.collect()),
                }]
            }
        }
        Op::Reshape { .. } => vec![TensorData {
            dtype: x.dtype,
            shape: oshape,
            values: x.values.clone(),
        }],
        Op::Cast { to } => {
            let vals = (0..n).map(|i| x.values.get_f(i));
            let mut t = TensorData::from_f64s(*to, oshape, vals);
            if !to.is_float() && !x.dtype.is_float() {
                t.values = Values::I(x.as_i64());
                if *to == DType::Bool {
                    t.values = Values::I(x.as_i64().iter().map(|&v| (v != 0) as i64).collect());
                }
            }
            vec![t]
        }
        Op::Transpose { perm, read_as } => {
            let ist = row_major_strides(read_as.as_deref().unwrap_or(&x.shape));
            let ost = row_major_strides(&oshape);
            let idx: Vec<usize> = (0..n)
                .map(|lin| {
                    perm.iter()
                        .enumerate()
                        .map(|(a, &p)| ((lin / ost[a]) % oshape[a]) * ist[p])
                        .sum()
                })
                .collect();
            vec![gather_by(x, oshape, &idx)]
        }
        Op::Expand { .. } => vec![gather_by(
            x,
            oshape.clone(),
            &bcast_index(&x.shape, &oshape),
        )],
        Op::Tile { .. } => {
            let ist = row_major_strides(&x.shape);
            let ost = row_major_strides(&oshape);
            let idx: Vec<usize> = (0..n)
                .map(|lin| {
                    (0..oshape.len())
                        .map(|a| ((lin / ost[a]) % oshape[a] % x.shape[a]) * ist[a])
                        .sum()
                })
                .collect();
            vec![gather_by(x, oshape, &idx)]
        }
        Op::Slice { starts, steps, .. } => vec![slice(x, oshape, starts, steps)],
        Op::Pad { pads, value, .. } => {
            let r = x.shape.len();
            let ist = row_major_strides(&x.shape);
            let ost = row_major_strides(&oshape);
            let mut vals = Vec::with_capacity(n);
            for lin in 0..n {
                let mut off = Some(0usize);
                for a in 0..r {
                    let i = (lin / ost[a]) % oshape[a];
                    match i.checked_sub(pads[a]) {
                        Some(j) if j < x.shape[a] => off = off.map(|o| o + j * ist[a]),
                        _ => off = None,
                    }
                }
                vals.push(off.map(|o| x.values.get_f(o)).unwrap_or(*value as f64));
            }
            vec![TensorData::from_f64s(odt, oshape, vals.into_iter())]
        }
        Op::Gather { axis } => {
            let ind = input(ins, 1)?;
            let d = x.shape[*axis] as i64;
            let inner: usize = x.shape[axis + 1..].iter().product();
            let outer: usize = x.shape[..*axis].iter().product();
            let mut idx = Vec::with_capacity(n);
            for o in 0..outer {
                for k in 0..ind.numel() {
                    let mut j = ind.values.get_i(k);
                    if j < 0 {
                        j += d;
                    }
                    if j < 0 || j >= d {
                        return Err(EvalError::GatherIndex {
                            index: ind.values.get_i(k),
                            size: d,
                        });
                    }
                    for i in 0..inner {
                        idx.push((o * d as usize + j as usize) * inner + i);
                    }
                }
            }
            vec![gather_by(x, oshape, &idx)]
        }
        Op::GatherElements { axis } => {
            let ind = input(ins, 1)?;
            let (ist, ost) = (row_major_strides(&x.shape), row_major_strides(&oshape));
            let d = x.shape[*axis] as i64;
            let mut idx = Vec::with_capacity(n);
            for lin in 0..n {
                let raw = ind.values.get_i(lin);
                let j = if raw < 0 { raw + d } else { raw };
                if j < 0 || j >= d {
                    return Err(EvalError::GatherIndex {
                        index: raw,
                        size: d,
                    });
                }
                let off: usize = (0..oshape.len())
                    .map(|a| {
                        let i = if a == *axis {
                            j as usize
                        } else {
                            (lin / ost[a]) % oshape[a]
                        };
                        i * ist[a]
                    })
                    .sum();
                idx.push(off);
            }
            vec![gather_by(x, oshape, &idx)]
        }
        Op::CumSum {
            axis,
            exclusive,
            reverse,
        } => {
            let st = row_major_strides(&x.shape);
            let (len, step) = (x.shape[*axis], st[*axis]);
            let mut vals = vec![0.0f64; n];
            for (lin, v) in vals.iter_mut().enumerate() {
                let at = (lin / step) % len;
                let (lo, hi) = match (*reverse, *exclusive) {
                    (false, false) => (0, at + 1),
                    (false, true) => (0, at),
                    (true, false) => (at, len),
                    (true, true) => (at + 1, len),
                };
                let base = lin - at * step;
                *v = (lo..hi).map(|j| x.values.get_f(base + j * step)).sum();
            }
            vec![TensorData::from_f64s(odt, oshape, vals.into_iter())]
        }
        Op::ScatterNd { reduction } => {
            let (ind, upd) = (input(ins, 1)?, input(ins, 2)?);
            let k = ind.shape.last().copied().unwrap_or(0);
            let st = row_major_strides(&x.shape);
            let inner: usize = x.shape[k..].iter().product();
            let mut vals: Vec<f64> = (0..n).map(|i| x.values.get_f(i)).collect();
            for row in 0..ind.numel() / k.max(1) {
                let mut base = 0;
                for (a, (&dim, &stride)) in x.shape.iter().zip(&st).take(k).enumerate() {
                    let raw = ind.values.get_i(row * k + a);
                    let d = dim as i64;
                    let j = if raw < 0 { raw + d } else { raw };
                    if j < 0 || j >= d {
                        return Err(EvalError::GatherIndex {
                            index: raw,
                            size: d,
                        });
                    }
                    base += j as usize * stride;
                }
                for e in 0..inner {
                    let w = upd.values.get_f(row * inner + e);
                    let v = &mut vals[base + e];
                    *v = match reduction {
                        ScatterReduction::None => w,
                        ScatterReduction::Add => *v + w,
                        ScatterReduction::Mul => *v * w,
                    };
                }
            }
            vec![TensorData::from_f64s(odt, oshape, vals.into_iter())]
        }
        Op::Trilu { upper, k } => {
            let r = oshape.len();
            let (h, w) = (oshape[r - 2], oshape[r - 1]);
            let vals = (0..n).map(|lin| {
                let d = (lin % w) as i64 - ((lin / w) % h) as i64;
                let keep = if *upper { d >= *k } else { d <= *k };
                if keep {
                    x.values.get_f(lin)
                } else {
                    0.0
                }
            });
            vec![TensorData::from_f64s(odt, oshape, vals)]
        }
        Op::Concat { axis } => {
            let outer: usize = oshape[..*axis].iter().product();
            let parts: Vec<&TensorData> = ins.iter().flatten().copied().collect();
            let float = parts.iter().any(|p| matches!(p.values, Values::F(_)));
            let mut fv = Vec::new();
            let mut iv = Vec::new();
            for o in 0..outer {
                for p in &parts {
                    let chunk: usize = p.shape[*axis..].iter().product();
                    for i in o * chunk..(o + 1) * chunk {
                        if float {
                            fv.push(p.values.get_f(i) as f32);
                        } else {
                            iv.push(p.values.get_i(i));
                        }
                    }
                }
            }
            let values = if float { Values::F(fv) } else { Values::I(iv) };
            vec![TensorData {
                dtype: odt,
                shape: oshape,
                values,
            }]
        }
        Op::Split { axis, .. } => {
            // Each output is the slice of `x` along `axis` that starts where the previous ended.
            let r = x.shape.len();
            let (mut starts, steps) = (vec![0i64; r], vec![1i64; r]);
            outs.into_iter()
                .map(|(shape, _)| {
                    let part = slice(x, shape, &starts, &steps);
                    starts[*axis] += part.shape[*axis] as i64;
                    part
                })
                .collect()
        }
        Op::Reduce { op: rop, axes, .. } => {
            let ist = row_major_strides(&x.shape);
            let r = x.shape.len();
            let kept: Vec<usize> = (0..r).filter(|a| !axes.contains(a)).collect();
            let red: Vec<usize> = axes.clone();
            let rn: usize = red.iter().map(|&a| x.shape[a]).product();
            let mut vals = Vec::with_capacity(n);
            for lin in 0..n {
                // Decompose lin over the kept axes (keepdims only adds 1s, which do not change order).
                let mut base = 0;
                let mut rem = lin;
                for &a in kept.iter().rev() {
                    base += (rem % x.shape[a]) * ist[a];
                    rem /= x.shape[a];
                }
                let mut acc: Option<f64> = None;
                for k in 0..rn {
                    let mut off = base;
                    let mut rr = k;
                    for &a in red.iter().rev() {
                        off += (rr % x.shape[a]) * ist[a];
                        rr /= x.shape[a];
                    }
                    let v = x.values.get_f(off);
                    acc = Some(match (acc, rop) {
                        (None, _) => v,
                        (Some(s), ReduceOp::Sum | ReduceOp::Mean) => s + v,
                        (Some(s), ReduceOp::Max) => s.max(v),
                        (Some(s), ReduceOp::Min) => s.min(v),
                    });
                }
                let v = acc.unwrap_or(0.0);
                vals.push(if *rop == ReduceOp::Mean && rn > 0 {
                    v / rn as f64
                } else {
                    v
                });
            }
            vec![TensorData::from_f64s(odt, oshape, vals.into_iter())]
        }
        _ => return Ok(None),
    };
    Ok(Some(res))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_folds_into_consecutive_slices() {
        let x = TensorData::from_i64(vec![2, 5], (0..10).collect());
        let split = Op::Split {
            axis: 1,
            splits: vec![2, 3],
        };
        let parts = eval(&split, &[Some(&x)]).unwrap().unwrap();
        assert_eq!(parts[0].shape, [2, 2]);
        assert_eq!(parts[0].as_i64(), [0, 1, 5, 6]);
        assert_eq!(parts[1].shape, [2, 3]);
        assert_eq!(parts[1].as_i64(), [2, 3, 4, 7, 8, 9]);
    }

    #[test]
    fn gather_out_of_range_is_an_error() {
        let x = TensorData::from_f32(vec![3], vec![1.0, 2.0, 3.0]);
        let i = TensorData::from_i64(vec![1], vec![-4]);
        let e = eval(&Op::Gather { axis: 0 }, &[Some(&x), Some(&i)]).unwrap_err();
        assert_eq!(e, EvalError::GatherIndex { index: -4, size: 3 });
        let ok = TensorData::from_i64(vec![2], vec![-1, 0]);
        let y = eval(&Op::Gather { axis: 0 }, &[Some(&x), Some(&ok)])
            .unwrap()
            .unwrap();
        assert_eq!(y[0].as_f32(), [3.0, 1.0]);
    }

    #[test]
    fn mod_takes_the_divisor_sign_and_fmod_the_dividend_sign() {
        let a = TensorData::from_i64(vec![4], vec![-7, 7, -7, 7]);
        let b = TensorData::from_i64(vec![4], vec![3, -3, -3, 3]);
        let run = |op| {
            eval(&Op::Binary(op), &[Some(&a), Some(&b)])
                .unwrap()
                .unwrap()
        };
        assert_eq!(run(BinaryOp::Mod)[0].as_i64(), [2, -2, -1, 1]);
        assert_eq!(run(BinaryOp::FMod)[0].as_i64(), [-1, 1, -1, 1]);
    }

    #[test]
    fn cumsum_folds_each_variant() {
        let x = TensorData::from_i64(vec![2, 3], vec![1, 2, 3, 4, 5, 6]);
        let run = |axis, exclusive, reverse| {
            let op = Op::CumSum {
                axis,
                exclusive,
                reverse,
            };
            eval(&op, &[Some(&x)]).unwrap().unwrap()[0].as_i64()
        };
        assert_eq!(run(1, false, false), [1, 3, 6, 4, 9, 15]);
        assert_eq!(run(1, true, false), [0, 1, 3, 0, 4, 9]);
        assert_eq!(run(1, false, true), [6, 5, 3, 15, 11, 6]);
        assert_eq!(run(0, true, true), [4, 5, 6, 0, 0, 0]);
    }

    #[test]
    fn scatter_nd_folds_in_index_order() {
        let x = TensorData::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let i = TensorData::from_i64(vec![2, 1], vec![-1, 1]);
        let u = TensorData::from_i64(vec![2, 2], vec![5, 6, 7, 8]);
        let run = |reduction| {
            let op = Op::ScatterNd { reduction };
            eval(&op, &[Some(&x), Some(&i), Some(&u)]).unwrap().unwrap()[0].as_i64()
        };
        assert_eq!(run(ScatterReduction::None), [1, 2, 7, 8]);
        assert_eq!(run(ScatterReduction::Add), [1, 2, 15, 18]);
    }

    #[test]
    fn trilu_folds_both_triangles() {
        let x = TensorData::from_i64(vec![2, 3], vec![1, 2, 3, 4, 5, 6]);
        let run = |upper, k| eval(&Op::Trilu { upper, k }, &[Some(&x)]).unwrap().unwrap();
        assert_eq!(run(true, 0)[0].as_i64(), [1, 2, 3, 0, 5, 6]);
        assert_eq!(run(false, -1)[0].as_i64(), [0, 0, 0, 4, 0, 0]);
    }

    #[test]
    fn gather_elements_folds_along_its_axis() {
        let x = TensorData::from_i64(vec![2, 2], vec![1, 2, 3, 4]);
        let i = TensorData::from_i64(vec![2, 2], vec![0, 0, 1, -2]);
        let y = eval(&Op::GatherElements { axis: 1 }, &[Some(&x), Some(&i)])
            .unwrap()
            .unwrap();
        assert_eq!(y[0].as_i64(), [1, 1, 4, 3]);
    }
}
