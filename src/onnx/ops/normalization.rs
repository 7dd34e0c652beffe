//! Converters of normalizations over an axis: Softmax (with opset < 13's 2-D coercion),
//! LayerNormalization and inference-mode BatchNormalization.
use super::args::norm_axis;
use super::R;
use crate::ir::{Op, ReshapeKind};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

pub(super) fn softmax(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let rank = ctx.shape(x).len();
    let default_axis = if ctx.opset < 13 { 1 } else { -1 };
    let axis = norm_axis(ctx, n, Attrs(n.proto).int_or("axis", default_axis), rank)?;
    if ctx.opset < 13 && axis + 1 < rank {
        // Opset < 13 softmax coerces to 2D at `axis`: flatten, softmax the last axis, restore.
        let s = ctx.shape(x).to_vec();
        let flat = vec![s[..axis].iter().product(), s[axis..].iter().product()];
        let f = ctx.emit_internal(
            &format!("{}/coerce2d", n.name),
            n,
            Op::Reshape {
                kind: ReshapeKind::Flatten,
                shape: flat,
            },
            vec![Some(x)],
        )?;
        let sm = ctx.emit_internal(
            &format!("{}/softmax2d", n.name),
            n,
            Op::Softmax { axis: 1 },
            vec![Some(f)],
        )?;
        let restore = Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape: s,
        };
        ctx.emit(n, restore, vec![Some(sm)])?;
    } else {
        ctx.emit(n, Op::Softmax { axis }, vec![Some(x)])?;
    }
    Ok(())
}

pub(super) fn layer_norm(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    if n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(ctx.output_err(
            n,
            "LayerNormalization Mean/InvStdDev outputs are not supported",
        ));
    }
    let axis = norm_axis(ctx, n, a.int_or("axis", -1), ctx.shape(x).len())?;
    let ins = vec![Some(x), ctx.input(n, 1)?, ctx.input(n, 2)?];
    let op = Op::LayerNorm {
        axis,
        epsilon: a.float_or("epsilon", 1e-5),
        rms: false,
        residual: false,
    };
    ctx.emit(n, op, ins)?;
    Ok(())
}

pub(super) fn batch_norm(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    if n.proto.output.iter().skip(1).any(|o| !o.is_empty()) || a.int_or("training_mode", 0) != 0 {
        return Err(ctx.output_err(n, "BatchNormalization in training mode is not supported"));
    }
    let x = ctx.need_input(n, 0)?;
    let mut ins = vec![Some(x)];
    for (i, what) in ["scale", "B", "mean", "var"].iter().enumerate() {
        ctx.const_input(n, i + 1, what)?
            .ok_or_else(|| ctx.node_err(n, what, "missing BatchNormalization parameter"))?;
        ins.push(ctx.input(n, i + 1)?);
    }
    let op = Op::BatchNorm {
        epsilon: a.float_or("epsilon", 1e-5),
    };
    ctx.emit(n, op, ins)?;
    Ok(())
}
