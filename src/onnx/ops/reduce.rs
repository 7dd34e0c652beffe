//! Reduction converters: ReduceMean/Sum/Max/Min (axes as attribute or input), ArgMax and CumSum.
use super::args::{axes_of, norm_axes, norm_axis};
use super::R;
use crate::ir::{Op, ReduceOp};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

/// `op` over the given axes (all axes when none are given, unless `noop_with_empty_axes`).
pub(super) fn reduce(ctx: &mut Ctx, n: &NodeRef, op: ReduceOp) -> R<()> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    let rank = ctx.shape(x).len();
    let axes = axes_of(ctx, n, 1)?.unwrap_or_default();
    if axes.is_empty() && a.int_or("noop_with_empty_axes", 0) != 0 {
        ctx.alias_output(n, 0, x);
        return Ok(());
    }
    let axes = if axes.is_empty() {
        (0..rank).collect()
    } else {
        norm_axes(ctx, n, &axes, rank)?
    };
    let op = Op::Reduce {
        op,
        axes,
        keepdims: a.int_or("keepdims", 1) != 0,
    };
    ctx.emit(n, op, vec![Some(x)])?;
    Ok(())
}

pub(super) fn arg_max(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    let axis = norm_axis(ctx, n, a.int_or("axis", 0), ctx.shape(x).len())?;
    let op = Op::ArgMax {
        axis,
        keepdims: a.int_or("keepdims", 1) != 0,
        select_last_index: a.int_or("select_last_index", 0) != 0,
    };
    ctx.emit(n, op, vec![Some(x)])?;
    Ok(())
}

/// CumSum with its axis from constant input 1.
pub(super) fn cumsum(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let axis = ctx.need_const_input(n, 1, "axis")?;
    if axis.numel() != 1 {
        return Err(ctx.output_err(n, "CumSum axis must be a scalar"));
    }
    let axis = norm_axis(ctx, n, axis.values.get_i(0), ctx.shape(x).len())?;
    let a = Attrs(n.proto);
    let op = Op::CumSum {
        axis,
        exclusive: a.int_or("exclusive", 0) != 0,
        reverse: a.int_or("reverse", 0) != 0,
    };
    ctx.emit(n, op, vec![Some(x)])?;
    Ok(())
}
