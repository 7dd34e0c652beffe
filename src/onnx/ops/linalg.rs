//! Matrix product converters: MatMul (numpy semantics) and Gemm.
use super::R;
use crate::ir::{Activation, Op};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

pub(super) fn matmul(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let (x, y) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
    let op = Op::MatMul {
        transpose_a: false,
        transpose_b: false,
        activation: Activation::None,
    };
    ctx.emit(n, op, vec![Some(x), Some(y)])?;
    Ok(())
}

pub(super) fn gemm(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let (x, y, c) = (
        ctx.need_input(n, 0)?,
        ctx.need_input(n, 1)?,
        ctx.input(n, 2)?,
    );
    let op = Op::Gemm {
        alpha: a.float_or("alpha", 1.0),
        beta: a.float_or("beta", 1.0),
        trans_a: a.int_or("transA", 0) != 0,
        trans_b: a.int_or("transB", 0) != 0,
        activation: Activation::None,
        b_rows: None,
    };
    ctx.emit(n, op, vec![Some(x), Some(y), c])?;
    Ok(())
}
