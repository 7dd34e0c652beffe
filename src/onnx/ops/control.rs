//! Converters that make no IR node: `If` on a condition fixed at import (the taken branch is
//! inlined), and Identity and inference-mode Dropout (their output aliases the input).
use super::R;
use crate::ir::TensorId;
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

/// Folds an If whose condition is constant by inlining the taken branch in a scope of its own.
pub(super) fn inline_if(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let c = ctx.need_input(n, 0)?;
    let cond = match ctx.konst(c) {
        Some(d) if d.numel() == 1 => d.values.get_i(0) != 0,
        _ => {
            return Err(ctx.node_err(
                n,
                &ctx.g.tensors[c].name,
                "If condition is not a constant after folding; texstream only supports If on conditions fixed at compile \
                 time (bind the deciding input, e.g. --bind sr=16000)",
            ))
        }
    };
    let branch_name = if cond { "then_branch" } else { "else_branch" };
    let branch = Attrs(n.proto)
        .graph(branch_name)
        .ok_or_else(|| ctx.node_err(n, branch_name, "If has no such branch"))?;
    let outs = ctx.in_new_scope(|ctx| {
        ctx.walk(branch)?;
        branch
            .output
            .iter()
            .map(|o| {
                let oname = o.name.clone().unwrap_or_default();
                ctx.lookup(&oname).ok_or_else(|| {
                    ctx.node_err(n, &oname, format!("{branch_name} output is never produced"))
                })
            })
            .collect::<R<Vec<TensorId>>>()
    })?;
    if outs.len() != n.proto.output.len() {
        return Err(ctx.node_err(
            n,
            branch_name,
            format!(
                "branch has {} outputs, If has {}",
                outs.len(),
                n.proto.output.len()
            ),
        ));
    }
    for (i, t) in outs.into_iter().enumerate() {
        ctx.alias_output(n, i, t);
    }
    Ok(())
}

/// Output 0 becomes input 0.
pub(super) fn identity(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    refuse_mask_output(ctx, n)?;
    alias_input(ctx, n)
}

/// Dropout (opset 12+) in training mode with a non-zero ratio draws a random mask; only
/// inference (or ratio 0) is the identity.
pub(super) fn dropout(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    refuse_mask_output(ctx, n)?;
    let training = ctx
        .const_input(n, 2, "Dropout training_mode")?
        .is_some_and(|t| t.numel() > 0 && t.values.get_i(0) != 0);
    if training {
        let ratio = match ctx.const_input(n, 1, "Dropout ratio (in training mode)")? {
            Some(r) if r.numel() > 0 => r.values.get_f(0),
            _ => 0.5,
        };
        if ratio != 0.0 {
            return Err(ctx.output_err(
                n,
                "Dropout in training mode (training_mode=true, ratio > 0) is not supported",
            ));
        }
    }
    alias_input(ctx, n)
}

fn refuse_mask_output(ctx: &Ctx, n: &NodeRef) -> R<()> {
    match n.proto.output.get(1).filter(|s| !s.is_empty()) {
        Some(mask) => Err(ctx.node_err(n, mask, "Dropout mask output is not supported")),
        None => Ok(()),
    }
}

fn alias_input(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    ctx.alias_output(n, 0, x);
    Ok(())
}
