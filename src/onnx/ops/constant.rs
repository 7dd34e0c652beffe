//! Converters of ops that always fold to constants at import: Constant, and the shape ops
//! Shape, Size, ConstantOfShape and Range (their results depend only on shapes and constants).
use super::R;
use crate::ir::eval::MAX_FOLD_ELEMENTS;
use crate::ir::TensorData;
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};
use crate::onnx::tensor::{dims_to_shape, tensor_from_proto};

pub(super) fn constant(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let data = if let Some(t) = a.tensor("value") {
        tensor_from_proto(t, ctx.model_dir).map_err(|e| ctx.output_err(n, e))?
    } else if let Some(f) = a.float("value_float") {
        TensorData::from_f32(vec![], vec![f])
    } else if let Some(f) = a.floats("value_floats") {
        TensorData::from_f32(vec![f.len()], f)
    } else if let Some(i) = a.int("value_int") {
        TensorData::from_i64(vec![], vec![i])
    } else if let Some(i) = a.ints("value_ints") {
        TensorData::from_i64(vec![i.len()], i)
    } else {
        return Err(ctx.output_err(n, "Constant without a supported value attribute"));
    };
    ctx.const_output(n, 0, data);
    Ok(())
}

/// The input's dimensions `[start, end)` (opset 15 attributes; the whole shape by default).
pub(super) fn shape(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    let s: Vec<i64> = ctx.shape(x).iter().map(|&d| d as i64).collect();
    let r = s.len() as i64;
    let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let (st, en) = (clampi(a.int_or("start", 0)), clampi(a.int_or("end", r)));
    let v = if st < en { s[st..en].to_vec() } else { vec![] };
    ctx.const_output(n, 0, TensorData::from_i64(vec![v.len()], v));
    Ok(())
}

pub(super) fn size(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let s = ctx.g.tensors[x].numel() as i64;
    ctx.const_output(n, 0, TensorData::from_i64(vec![], vec![s]));
    Ok(())
}

pub(super) fn constant_of_shape(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let shape = ctx.need_const_input(n, 0, "shape")?.as_i64();
    let shape = dims_to_shape(&shape).map_err(|e| ctx.output_err(n, e))?;
    let value = match Attrs(n.proto).tensor("value") {
        Some(t) => tensor_from_proto(t, ctx.model_dir).map_err(|e| ctx.output_err(n, e))?,
        None => TensorData::from_f32(vec![1], vec![0.0]),
    };
    if value.numel() != 1 {
        return Err(ctx.output_err(n, "ConstantOfShape value must have one element"));
    }
    let cnt: usize = shape.iter().product();
    if cnt > MAX_FOLD_ELEMENTS {
        return Err(ctx.output_err(n, format!("ConstantOfShape result {shape:?} is too large")));
    }
    let v = value.values.get_f(0);
    ctx.const_output(
        n,
        0,
        TensorData::from_f64s(value.dtype, shape, std::iter::repeat_n(v, cnt)),
    );
    Ok(())
}

pub(super) fn range(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let get = |i: usize, what: &str| -> R<&TensorData> {
        ctx.const_input(n, i, what)?
            .filter(|t| t.numel() == 1)
            .ok_or_else(|| ctx.output_err(n, format!("missing or non-scalar {what}")))
    };
    let (s, l, d) = (get(0, "start")?, get(1, "limit")?, get(2, "delta")?);
    let dt = s.dtype;
    let (s, l, d) = (s.values.get_f(0), l.values.get_f(0), d.values.get_f(0));
    let cnt = ((l - s) / d).ceil().max(0.0);
    if d == 0.0 || !cnt.is_finite() || cnt > MAX_FOLD_ELEMENTS as f64 {
        return Err(ctx.output_err(n, "Range has a zero delta or too many elements"));
    }
    let cnt = cnt as usize;
    ctx.const_output(
        n,
        0,
        TensorData::from_f64s(dt, vec![cnt], (0..cnt).map(|i| s + i as f64 * d)),
    );
    Ok(())
}
