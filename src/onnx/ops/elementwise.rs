//! Elementwise converters: unary math and activations, broadcasting binary ops (Mod too), Where,
//! Trilu and Cast.
use super::R;
use crate::ir::{BinaryOp, Op, UnaryOp};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};
use crate::onnx::tensor::dtype_from_onnx;

/// `op(x)` for input 0.
pub(super) fn unary(ctx: &mut Ctx, n: &NodeRef, op: UnaryOp) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    ctx.emit(n, Op::Unary(op), vec![Some(x)])?;
    Ok(())
}

pub(super) fn leaky_relu(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let alpha = Attrs(n.proto).float_or("alpha", 0.01);
    unary(ctx, n, UnaryOp::LeakyRelu { alpha })
}

pub(super) fn hard_sigmoid(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let (alpha, beta) = (a.float_or("alpha", 0.2), a.float_or("beta", 0.5));
    unary(ctx, n, UnaryOp::HardSigmoid { alpha, beta })
}

pub(super) fn gelu(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let op = match Attrs(n.proto).string_or("approximate", "none").as_str() {
        "none" => UnaryOp::Gelu,
        "tanh" => UnaryOp::GeluTanh,
        other => {
            return Err(ctx.output_err(
                n,
                format!("Gelu approximate={other:?} (expected \"none\" or \"tanh\")"),
            ))
        }
    };
    unary(ctx, n, op)
}

/// Clip with its bounds from inputs 1 and 2 (opset 11+); an absent bound is unbounded.
pub(super) fn clip(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let bound = |i: usize, what: &str, absent: f32| -> R<f32> {
        Ok(ctx
            .const_input(n, i, what)?
            .filter(|t| t.numel() > 0)
            .map(|t| t.values.get_f(0) as f32)
            .unwrap_or(absent))
    };
    let min = bound(1, "Clip min", f32::NEG_INFINITY)?;
    let max = bound(2, "Clip max", f32::INFINITY)?;
    unary(ctx, n, UnaryOp::Clip { min, max })
}

/// `op(a, b)` with numpy broadcasting.
pub(super) fn binary(ctx: &mut Ctx, n: &NodeRef, op: BinaryOp) -> R<()> {
    let (x, y) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
    ctx.emit(n, Op::Binary(op), vec![Some(x), Some(y)])?;
    Ok(())
}

/// LessOrEqual / GreaterOrEqual as the negation of Greater / Less (`a <= b` is `!(a > b)`;
/// they differ only on NaN, which ONNX compares false either way). Both nodes fold on constants.
pub(super) fn or_equal(ctx: &mut Ctx, n: &NodeRef, negated: BinaryOp) -> R<()> {
    let (x, y) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
    let strict = ctx.emit(n, Op::Binary(negated), vec![Some(x), Some(y)])?;
    ctx.emit(n, Op::Unary(UnaryOp::Not), vec![strict.first().copied()])?;
    Ok(())
}

/// Mod: `fmod = 0` (the divisor's sign) is defined for integer tensors only.
pub(super) fn modulo(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let op = if Attrs(n.proto).int_or("fmod", 0) != 0 {
        BinaryOp::FMod
    } else if ctx.g.tensors[x].dtype.is_float() {
        return Err(ctx.output_err(n, "Mod of floats needs fmod = 1"));
    } else {
        BinaryOp::Mod
    };
    binary(ctx, n, op)
}

/// Trilu with its diagonal offset from constant input 1 (0 when absent).
pub(super) fn trilu(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let k = match ctx.const_input(n, 1, "k")? {
        Some(t) if t.numel() == 1 => t.values.get_i(0),
        Some(_) => return Err(ctx.output_err(n, "Trilu k must be a scalar")),
        None => 0,
    };
    let upper = Attrs(n.proto).int_or("upper", 1) != 0;
    ctx.emit(n, Op::Trilu { upper, k }, vec![Some(x)])?;
    Ok(())
}

pub(super) fn where_(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let ins = vec![
        Some(ctx.need_input(n, 0)?),
        Some(ctx.need_input(n, 1)?),
        Some(ctx.need_input(n, 2)?),
    ];
    ctx.emit(n, Op::Where, ins)?;
    Ok(())
}

pub(super) fn cast(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let to =
        dtype_from_onnx(Attrs(n.proto).int_or("to", 0) as i32).map_err(|e| ctx.output_err(n, e))?;
    ctx.emit(n, Op::Cast { to }, vec![Some(x)])?;
    Ok(())
}
