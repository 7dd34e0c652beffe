//! Sliding-window converters: Conv, ConvTranspose, MaxPool, AveragePool and GlobalAveragePool,
//! with ONNX's kernel/strides/dilations/pads/auto_pad resolved into one [`Window`].
use super::args::usizes;
use super::R;
use crate::ir::{Activation, Op, ReshapeKind, TensorId, Window};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

/// Resolves kernel/strides/dilations/pads/auto_pad into a [`Window`]. `transpose`: a
/// ConvTranspose, for which SAME_* auto_pad is refused.
fn window(ctx: &Ctx, n: &NodeRef, x: TensorId, kernel: &[usize], transpose: bool) -> R<Window> {
    let a = Attrs(n.proto);
    let sr = kernel.len();
    if sr == 0 || sr > 2 {
        return Err(ctx.output_err(
            n,
            format!("only 1D and 2D windows are supported, kernel is {kernel:?}"),
        ));
    }
    let list = |name: &str, default: usize, len: usize, what: &str| {
        usizes(
            ctx,
            n,
            &a.ints(name).unwrap_or_else(|| vec![default as i64; len]),
            what,
        )
    };
    let strides = list("strides", 1, sr, "stride")?;
    let dil = list("dilations", 1, sr, "dilation")?;
    let mut pads = list("pads", 0, 2 * sr, "pad")?;
    if strides.len() != sr
        || dil.len() != sr
        || pads.len() != 2 * sr
        || strides.contains(&0)
        || dil.contains(&0)
    {
        return Err(ctx.output_err(n, "strides/dilations/pads do not match the kernel rank"));
    }
    let auto = a.string_or("auto_pad", "NOTSET");
    let xs = ctx.shape(x);
    if xs.len() != sr + 2 {
        return Err(ctx.node_err(
            n,
            &ctx.g.tensors[x].name,
            format!("expected a rank-{} input, got {xs:?}", sr + 2),
        ));
    }
    match auto.as_str() {
        "NOTSET" => {}
        "VALID" => pads = vec![0; 2 * sr],
        "SAME_UPPER" | "SAME_LOWER" if !transpose => {
            for i in 0..sr {
                let len = xs[2 + i];
                let out = len.div_ceil(strides[i]);
                let need =
                    (out.saturating_sub(1) * strides[i] + kernel[i].saturating_sub(1) * dil[i] + 1)
                        .saturating_sub(len);
                let (lo, hi) = if auto == "SAME_UPPER" {
                    (need / 2, need - need / 2)
                } else {
                    (need - need / 2, need / 2)
                };
                pads[i] = lo;
                pads[i + sr] = hi;
            }
        }
        other => return Err(ctx.output_err(n, format!("auto_pad '{other}' unsupported"))),
    }
    Ok(if sr == 1 {
        Window {
            kernel: [1, kernel[0]],
            strides: [1, strides[0]],
            dilations: [1, dil[0]],
            pads: [0, pads[0], 0, pads[1]],
            spatial_rank: 1,
        }
    } else {
        Window {
            kernel: [kernel[0], kernel[1]],
            strides: [strides[0], strides[1]],
            dilations: [dil[0], dil[1]],
            pads: [pads[0], pads[1], pads[2], pads[3]],
            spatial_rank: 2,
        }
    })
}

/// What Conv and ConvTranspose share: data, constant weight, constant bias, window, group.
struct ConvOperands {
    x: TensorId,
    w: TensorId,
    b: Option<TensorId>,
    window: Window,
    group: usize,
}

impl ConvOperands {
    fn inputs(&self) -> Vec<Option<TensorId>> {
        vec![Some(self.x), Some(self.w), self.b]
    }
}

fn conv_operands(ctx: &Ctx, n: &NodeRef, transpose: bool) -> R<ConvOperands> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    let w = ctx.need_input(n, 1)?;
    let w_name = &ctx.g.tensors[w].name;
    let ws = ctx
        .konst(w)
        .map(|t| t.shape.clone())
        .ok_or_else(|| ctx.node_err(n, w_name, "weight must be a constant initializer"))?;
    let kernel = ws.get(2..).unwrap_or(&[]).to_vec();
    if let Some(k) = a.ints("kernel_shape") {
        if usizes(ctx, n, &k, "kernel")? != kernel {
            return Err(ctx.node_err(
                n,
                w_name,
                format!("kernel_shape {k:?} != weight shape {ws:?}"),
            ));
        }
    }
    let window = window(ctx, n, x, &kernel, transpose)?;
    let group = a.int_or("group", 1).max(1) as usize;
    let b = ctx.input(n, 2)?;
    if let Some(b) = b {
        if !ctx.g.is_const(b) {
            return Err(ctx.node_err(
                n,
                &ctx.g.tensors[b].name,
                "bias must be a constant initializer",
            ));
        }
    }
    Ok(ConvOperands {
        x,
        w,
        b,
        window,
        group,
    })
}

pub(super) fn conv(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let c = conv_operands(ctx, n, false)?;
    let op = Op::Conv {
        window: c.window,
        group: c.group,
        activation: Activation::None,
    };
    ctx.emit(n, op, c.inputs())?;
    Ok(())
}

pub(super) fn conv_transpose(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let c = conv_operands(ctx, n, true)?;
    let a = Attrs(n.proto);
    if a.has("output_shape") {
        return Err(ctx.output_err(
            n,
            "ConvTranspose output_shape attribute is not supported; use pads",
        ));
    }
    let op = a.ints("output_padding").unwrap_or_default();
    let op = usizes(ctx, n, &op, "output_padding")?;
    let output_padding = match (c.window.spatial_rank, op.as_slice()) {
        (_, []) => [0, 0],
        (1, [w]) => [0, *w],
        (2, [h, w]) => [*h, *w],
        _ => return Err(ctx.output_err(n, "bad output_padding")),
    };
    let op = Op::ConvTranspose {
        window: c.window,
        group: c.group,
        output_padding,
        activation: Activation::None,
    };
    ctx.emit(n, op, c.inputs())?;
    Ok(())
}

/// The window and ceil mode of a MaxPool / AveragePool, for input `x`; a second (Indices)
/// output is refused.
fn pool_window(ctx: &Ctx, n: &NodeRef, x: TensorId) -> R<(Window, bool)> {
    if let Some(indices) = n.proto.output.get(1).filter(|s| !s.is_empty()) {
        return Err(ctx.node_err(n, indices, "MaxPool Indices output is not supported"));
    }
    let a = Attrs(n.proto);
    let k = a
        .ints("kernel_shape")
        .ok_or_else(|| ctx.output_err(n, "missing kernel_shape"))?;
    let k = usizes(ctx, n, &k, "kernel")?;
    Ok((window(ctx, n, x, &k, false)?, a.int_or("ceil_mode", 0) != 0))
}

pub(super) fn max_pool(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let (window, ceil_mode) = pool_window(ctx, n, x)?;
    ctx.emit(n, Op::MaxPool { window, ceil_mode }, vec![Some(x)])?;
    Ok(())
}

pub(super) fn average_pool(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let (window, ceil_mode) = pool_window(ctx, n, x)?;
    let op = Op::AveragePool {
        window,
        ceil_mode,
        count_include_pad: Attrs(n.proto).int_or("count_include_pad", 0) != 0,
    };
    ctx.emit(n, op, vec![Some(x)])?;
    Ok(())
}

/// GlobalAveragePool; the kernel pools NCHW planes, so another rank (`[N, C, L]` from
/// `AdaptiveAvgPool1d(1)`, Hugging Face Swin's pooler) pools `[N, C, 1, D·H·…]` and re-shapes.
pub(super) fn global_average_pool(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    if xs.len() == 4 || xs.len() < 3 {
        ctx.emit(n, Op::GlobalAveragePool, vec![Some(x)])?;
        return Ok(());
    }
    let out = ctx.first_output(n);
    let plane = vec![xs[0], xs[1], 1, xs[2..].iter().product()];
    let x4 = ctx.emit_internal(
        &format!("{out}/plane"),
        n,
        Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape: plane,
        },
        vec![Some(x)],
    )?;
    let pooled = ctx.emit_internal(
        &format!("{out}/pooled"),
        n,
        Op::GlobalAveragePool,
        vec![Some(x4)],
    )?;
    let mut shape = vec![1; xs.len()];
    shape[..2].copy_from_slice(&xs[..2]);
    ctx.emit(
        n,
        Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape,
        },
        vec![Some(pooled)],
    )?;
    Ok(())
}
