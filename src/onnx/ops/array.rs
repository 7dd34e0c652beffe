//! Shape and data-movement converters: Concat, Split, Slice, Transpose, the reshapes (Reshape,
//! Flatten, Squeeze, Unsqueeze all become [`Op::Reshape`] to a concrete shape), Pad, Gather,
//! GatherElements, GatherND (constant indices, as a Gather), ScatterND, Expand and Tile.
use super::args::{axes_of, norm_axes, norm_axis, usizes};
use super::R;
use crate::ir::{Op, PadMode, ReshapeKind, ScatterReduction, TensorData, TensorId};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

pub(super) fn concat(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let ins = (0..n.proto.input.len())
        .map(|i| ctx.input(n, i))
        .collect::<R<Vec<_>>>()?;
    let first = ins
        .iter()
        .flatten()
        .next()
        .copied()
        .ok_or_else(|| ctx.output_err(n, "Concat without inputs"))?;
    let axis = Attrs(n.proto)
        .int("axis")
        .ok_or_else(|| ctx.output_err(n, "missing axis"))?;
    let axis = norm_axis(ctx, n, axis, ctx.shape(first).len())?;
    ctx.emit(n, Op::Concat { axis }, ins)?;
    Ok(())
}

/// Split sizes from the attribute (opset < 13) or input 1; otherwise equal parts, one per
/// output (or `num_outputs`, opset 18), the last one smaller.
pub(super) fn split(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let axis = norm_axis(ctx, n, a.int_or("axis", 0), xs.len())?;
    let split = match a.ints("split") {
        Some(s) => Some(s),
        None => ctx.const_input(n, 1, "split")?.map(|t| t.as_i64()),
    };
    let splits = match split {
        Some(s) => usizes(ctx, n, &s, "split")?,
        None => {
            let k = a
                .int("num_outputs")
                .map(|v| v as usize)
                .unwrap_or(n.proto.output.len())
                .max(1);
            let d = xs[axis];
            let each = d.div_ceil(k);
            (0..k)
                .map(|i| each.min(d.saturating_sub(i * each)))
                .collect()
        }
    };
    ctx.emit(n, Op::Split { axis, splits }, vec![Some(x)])?;
    Ok(())
}

/// Normalizes ONNX Slice parameters to a (start, end) for one axis of size d.
fn norm_slice(start: i64, end: i64, step: i64, d: i64) -> (i64, i64) {
    if d == 0 {
        return (0, 0);
    }
    let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (fix(start), fix(end));
    if step > 0 {
        (s.clamp(0, d), e.clamp(0, d))
    } else {
        (s.clamp(0, d - 1), e.clamp(-1, d - 1))
    }
}

pub(super) fn slice(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let get = |i: usize, what: &str| -> R<Option<Vec<i64>>> {
        Ok(ctx.const_input(n, i, what)?.map(|t| t.as_i64()))
    };
    let starts = get(1, "starts")?.ok_or_else(|| ctx.output_err(n, "missing starts"))?;
    let ends = get(2, "ends")?.ok_or_else(|| ctx.output_err(n, "missing ends"))?;
    let axes = get(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = get(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len()
        || axes.len() != starts.len()
        || steps.len() != starts.len()
        || steps.contains(&0)
    {
        return Err(ctx.output_err(
            n,
            "Slice starts/ends/axes/steps lengths differ or a step is 0",
        ));
    }
    let r = xs.len();
    let mut st = vec![0i64; r];
    let mut en: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
    let mut sp = vec![1i64; r];
    for i in 0..starts.len() {
        let ax = norm_axis(ctx, n, axes[i], r)?;
        let (s, e) = norm_slice(starts[i], ends[i], steps[i], xs[ax] as i64);
        st[ax] = s;
        en[ax] = e;
        sp[ax] = steps[i];
    }
    let op = Op::Slice {
        starts: st,
        ends: en,
        steps: sp,
    };
    ctx.emit(n, op, vec![Some(x)])?;
    Ok(())
}

pub(super) fn transpose(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let r = ctx.shape(x).len();
    let perm = Attrs(n.proto)
        .ints("perm")
        .unwrap_or_else(|| (0..r as i64).rev().collect());
    let perm = usizes(ctx, n, &perm, "perm")?;
    let mut sorted = perm.clone();
    sorted.sort_unstable();
    if sorted != (0..r).collect::<Vec<_>>() {
        return Err(ctx.output_err(n, format!("perm {perm:?} is not a permutation of rank {r}")));
    }
    ctx.emit(
        n,
        Op::Transpose {
            perm,
            read_as: None,
        },
        vec![Some(x)],
    )?;
    Ok(())
}

/// Emits the [`Op::Reshape`] every reshaping op becomes.
fn emit_reshape(
    ctx: &mut Ctx,
    n: &NodeRef,
    kind: ReshapeKind,
    shape: Vec<usize>,
    x: TensorId,
) -> R<()> {
    ctx.emit(n, Op::Reshape { kind, shape }, vec![Some(x)])?;
    Ok(())
}

/// Reshape to a constant target: 0 copies the input dimension (unless `allowzero`), one -1 is
/// inferred.
pub(super) fn reshape(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let spec = ctx.need_const_input(n, 1, "shape")?.as_i64();
    let allowzero = Attrs(n.proto).int_or("allowzero", 0) != 0;
    let mut shape = Vec::with_capacity(spec.len());
    let mut infer_at = None;
    for (i, &d) in spec.iter().enumerate() {
        match d {
            -1 if infer_at.is_none() => {
                infer_at = Some(i);
                shape.push(1);
            }
            0 if !allowzero => shape.push(
                *xs.get(i)
                    .ok_or_else(|| ctx.output_err(n, "0 in shape beyond input rank"))?,
            ),
            d if d >= 0 => shape.push(d as usize),
            _ => return Err(ctx.output_err(n, format!("invalid reshape target {spec:?}"))),
        }
    }
    let total: usize = xs.iter().product();
    if let Some(i) = infer_at {
        // The target comes from the file: its product may overflow.
        let rest = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .unwrap_or(0);
        if rest == 0 || !total.is_multiple_of(rest) {
            return Err(ctx.output_err(n, format!("cannot reshape {xs:?} to {spec:?}")));
        }
        shape[i] = total / rest;
    }
    emit_reshape(ctx, n, ReshapeKind::Reshape, shape, x)
}

pub(super) fn flatten(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let ax = Attrs(n.proto).int_or("axis", 1);
    let ax = if ax < 0 { ax + xs.len() as i64 } else { ax };
    if ax < 0 || ax > xs.len() as i64 {
        return Err(ctx.output_err(n, format!("Flatten axis {ax} out of range")));
    }
    let ax = ax as usize;
    let shape = vec![xs[..ax].iter().product(), xs[ax..].iter().product()];
    emit_reshape(ctx, n, ReshapeKind::Flatten, shape, x)
}

pub(super) fn squeeze(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let axes = match axes_of(ctx, n, 1)? {
        Some(ax) => norm_axes(ctx, n, &ax, xs.len())?,
        None => (0..xs.len()).filter(|&i| xs[i] == 1).collect(),
    };
    if let Some(&bad) = axes.iter().find(|&&i| xs[i] != 1) {
        return Err(ctx.output_err(n, format!("cannot squeeze axis {bad} of {xs:?}")));
    }
    let shape = (0..xs.len())
        .filter(|i| !axes.contains(i))
        .map(|i| xs[i])
        .collect();
    emit_reshape(ctx, n, ReshapeKind::Squeeze, shape, x)
}

pub(super) fn unsqueeze(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let ax = axes_of(ctx, n, 1)?.ok_or_else(|| ctx.output_err(n, "missing axes"))?;
    let r = xs.len() + ax.len();
    let axes = norm_axes(ctx, n, &ax, r)?;
    let mut it = xs.iter();
    let shape = (0..r)
        .map(|i| {
            if axes.contains(&i) {
                Some(1)
            } else {
                it.next().copied()
            }
        })
        .collect::<Option<Vec<_>>>();
    let shape = shape.ok_or_else(|| ctx.output_err(n, "repeated Unsqueeze axes"))?;
    emit_reshape(ctx, n, ReshapeKind::Unsqueeze, shape, x)
}

/// Pad with pads from input 1 over the axes of input 3 (all axes by default).
pub(super) fn pad(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let r = ctx.shape(x).len();
    let mode = match Attrs(n.proto).string_or("mode", "constant").as_str() {
        "constant" => PadMode::Constant,
        "reflect" => PadMode::Reflect,
        "edge" => PadMode::Edge,
        m => return Err(ctx.output_err(n, format!("Pad mode '{m}' is not supported"))),
    };
    let raw = ctx.need_const_input(n, 1, "pads")?.as_i64();
    let value = ctx
        .const_input(n, 2, "constant_value")?
        .filter(|t| t.numel() > 0)
        .map(|t| t.values.get_f(0) as f32)
        .unwrap_or(0.0);
    let axes = match ctx.const_input(n, 3, "axes")? {
        Some(t) => norm_axes(ctx, n, &t.as_i64(), r)?,
        None => (0..r).collect(),
    };
    if raw.len() != 2 * axes.len() {
        return Err(ctx.output_err(
            n,
            format!("Pad has {} pads for {} axes", raw.len(), axes.len()),
        ));
    }
    let raw = usizes(ctx, n, &raw, "pad")?;
    let mut pads = vec![0; 2 * r];
    for (i, &ax) in axes.iter().enumerate() {
        pads[ax] = raw[i];
        pads[ax + r] = raw[i + axes.len()];
    }
    ctx.emit(n, Op::Pad { mode, pads, value }, vec![Some(x)])?;
    Ok(())
}

pub(super) fn gather(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let (x, i) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
    let axis = norm_axis(ctx, n, Attrs(n.proto).int_or("axis", 0), ctx.shape(x).len())?;
    ctx.emit(n, Op::Gather { axis }, vec![Some(x), Some(i)])?;
    Ok(())
}

/// GatherND with constant indices `[b…, m…, k]` is a Gather along axis 0 of the data re-shaped
/// `[d0·…·d(b+k-1), d(b+k), …]`, by each tuple's row-major offset within its batch (the first
/// `batch_dims` axes). The dynamo exporter emits one for Hugging Face's padding mask
/// (`mask[batch_idx, kv_idx]`).
pub(super) fn gather_nd(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let idx = ctx.need_const_input(n, 1, "GatherND indices")?;
    let (ishape, ivals) = (idx.shape.clone(), idx.as_i64());
    let b = usize::try_from(Attrs(n.proto).int_or("batch_dims", 0))
        .map_err(|_| ctx.output_err(n, "negative batch_dims"))?;
    let k = *ishape
        .last()
        .ok_or_else(|| ctx.output_err(n, "GatherND indices must have rank >= 1"))?;
    // batch_dims comes from the file: checked before it offsets anything.
    let fits = b.checked_add(k).is_some_and(|bk| bk <= xs.len());
    if k == 0 || !fits || b >= ishape.len() || ishape[..b] != xs[..b] {
        return Err(ctx.output_err(
            n,
            format!("GatherND indices {ishape:?} (batch_dims {b}) do not fit data {xs:?}"),
        ));
    }
    let batches: usize = xs[..b].iter().product();
    let per_batch = (ivals.len() / k) / batches.max(1);
    let mut flat = Vec::with_capacity(ivals.len() / k);
    for (j, tuple) in ivals.chunks(k).enumerate() {
        let mut off = (j / per_batch.max(1)) as i64;
        for (&i, &d) in tuple.iter().zip(&xs[b..]) {
            let d = d as i64;
            let i = if i < 0 { i + d } else { i };
            if !(0..d).contains(&i) {
                return Err(ctx.output_err(n, format!("GatherND index {tuple:?} outside {xs:?}")));
            }
            off = off * d + i;
        }
        flat.push(off);
    }
    let mut rows = vec![xs[..b + k].iter().product::<usize>()];
    rows.extend_from_slice(&xs[b + k..]);
    let out = ctx.first_output(n);
    // A constant table is re-shaped here, so that the Gather folds.
    let data = match ctx.konst(x).cloned() {
        Some(mut t) => {
            t.shape = rows;
            ctx.g.add_constant(format!("{out}/rows"), t)
        }
        None => ctx.emit_internal(
            &format!("{out}/rows"),
            n,
            Op::Reshape {
                kind: ReshapeKind::Reshape,
                shape: rows,
            },
            vec![Some(x)],
        )?,
    };
    let offsets = TensorData::from_i64(ishape[..ishape.len() - 1].to_vec(), flat);
    let offsets = ctx.g.add_constant(format!("{out}/offsets"), offsets);
    ctx.emit(n, Op::Gather { axis: 0 }, vec![Some(data), Some(offsets)])?;
    Ok(())
}

pub(super) fn gather_elements(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let (x, i) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
    let axis = norm_axis(ctx, n, Attrs(n.proto).int_or("axis", 0), ctx.shape(x).len())?;
    ctx.emit(n, Op::GatherElements { axis }, vec![Some(x), Some(i)])?;
    Ok(())
}

/// ScatterND with reduction none, add or mul (opset 18's max/min are not supported).
pub(super) fn scatter_nd(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let ins = vec![
        Some(ctx.need_input(n, 0)?),
        Some(ctx.need_input(n, 1)?),
        Some(ctx.need_input(n, 2)?),
    ];
    let reduction = match Attrs(n.proto).string_or("reduction", "none").as_str() {
        "none" => ScatterReduction::None,
        "add" => ScatterReduction::Add,
        "mul" => ScatterReduction::Mul,
        r => return Err(ctx.output_err(n, format!("ScatterND reduction '{r}' is not supported"))),
    };
    ctx.emit(n, Op::ScatterNd { reduction }, ins)?;
    Ok(())
}

/// Expand to the broadcast of the input's shape and the constant target.
pub(super) fn expand(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let s = ctx.need_const_input(n, 1, "shape")?.as_i64();
    let s = usizes(ctx, n, &s, "dimension")?;
    let shape = tensor_shape::broadcast(ctx.shape(x), &s)
        .map_err(|e| ctx.infer_err(n, &ctx.first_output(n), e.into()))?;
    ctx.emit(n, Op::Expand { shape }, vec![Some(x)])?;
    Ok(())
}

pub(super) fn tile(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let rep = ctx.need_const_input(n, 1, "repeats")?.as_i64();
    let repeats = usizes(ctx, n, &rep, "repeat")?;
    if repeats.len() != ctx.shape(x).len() {
        return Err(ctx.output_err(n, "Tile repeats length != rank"));
    }
    ctx.emit(n, Op::Tile { repeats }, vec![Some(x)])?;
    Ok(())
}
