//! ConvTranspose2d (groups, stride, pads, output_padding, dilation) with fused bias and
//! activation. The filter is packed by `layout::pack_conv_transpose_filter` and read through
//! `fetch_weight`, or through its rows' pages found once (`conv_transpose2d_plain.comp`) where
//! the rows allow it, as the dense convolutions do.

use crate::error::Result;
use crate::kernels::conv::{check_groups, conv_push_constants, ConvWeights};
use crate::kernels::elementwise::UnaryOp;
use crate::kernels::launch::{kerr, launch_unfolded, unfolded, IMAGES_2};
use crate::kernels::window::{check_out, dispatch_3d, rank4, Window2d};
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const CONV_TRANSPOSE2D: KernelDesc = KernelDesc {
    name: "conv_transpose2d",
    bindings: IMAGES_2,
    push_constant_bytes: crate::kernels::conv::CONV_PUSH_BYTES,
    uses_weights: true,
};

/// `conv_transpose2d.comp` reading each filter row through its pages found once
/// (`conv_transpose2d_plain.comp`), where every row lies in at most two pages with no
/// compensated texel ([`crate::Recorder::weight_rows_plain`]).
const CONV_TRANSPOSE2D_PLAIN: KernelDesc = KernelDesc {
    name: "conv_transpose2d_plain",
    ..CONV_TRANSPOSE2D
};

/// ConvTranspose2d attributes (filter `[I, O/groups, KH, KW]`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConvTranspose2dParams {
    /// Kernel, strides, dilations and pads `[top, left, bottom, right]` (pads crop the output).
    pub window: Window2d,
    pub groups: usize,
    /// Output channels O.
    pub out_channels: usize,
    /// `[h, w]`, each smaller than the stride or the dilation.
    pub output_padding: [usize; 2],
    /// Fused activation after the bias (`UnaryOp::Identity` for none).
    pub activation: UnaryOp,
}

/// Output shape `[N, O, OH, OW]` with `OH = (H-1)*sh - pt - pb + (kh-1)*dh + 1 + output_padding`.
pub fn conv_transpose2d_output_shape(x: &[usize], p: &ConvTranspose2dParams) -> Result<[usize; 4]> {
    let name = "conv_transpose2d";
    let [n, c] = match *x {
        [n, c, _, _] => [n, c],
        _ => {
            return Err(kerr(
                name,
                format!("input shape {x:?} is not rank-4 [N, C, H, W]"),
            ))
        }
    };
    check_groups(name, c, p.groups, p.out_channels)?;
    p.window.validate(name)?;
    let wd = &p.window;
    let ext = wd.extent();
    let mut out = [0usize; 2];
    for a in 0..2 {
        let op = p.output_padding[a];
        if op >= wd.strides[a] && op >= wd.dilations[a] {
            return Err(kerr(
                name,
                format!(
                    "output_padding {op} on axis {} must be smaller than the stride or dilation",
                    a + 2
                ),
            ));
        }
        let full = (x[2 + a] - 1) * wd.strides[a] + ext[a] + op;
        let crop = wd.pads[a] + wd.pads[a + 2];
        if crop >= full {
            return Err(kerr(
                name,
                format!(
                    "pads {crop} crop the whole output ({full}) on axis {}",
                    a + 2
                ),
            ));
        }
        out[a] = full - crop;
    }
    Ok([n, p.out_channels, out[0], out[1]])
}

/// Records `out = act(conv_transpose2d(x, W) + b)`; `out` must have
/// [`conv_transpose2d_output_shape`]. Needs `rec.use_weights(..)`.
pub fn conv_transpose2d_into(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &ConvTranspose2dParams,
    out: &Tensor,
) -> Result<()> {
    let [_, c, _, _] = rank4("conv_transpose2d", x)?;
    let want = conv_transpose2d_output_shape(x.shape(), p)?;
    check_out("conv_transpose2d", x, out, &want)?;
    let (icg, ocg) = (c / p.groups, p.out_channels / p.groups);
    let aligned = p.groups == 1 || (icg.is_multiple_of(4) && ocg.is_multiple_of(4));
    let flags = if aligned { 0 } else { 0x100 };
    let pc = conv_push_constants(x, out, &p.window, [icg, ocg], weights, p.activation, flags);
    let l = out.layout();
    let groups = dispatch_3d(
        rec.device(),
        "conv_transpose2d",
        [l.w as u64, l.h as u64, l.layers()],
        [8, 8, 1],
    )?;
    let args = [Arg::input(x), Arg::output(out)];
    // The kernel reads its input with LOAD_AT.
    let flat = unfolded(&[x]);
    let [kh, kw] = p.window.kernel;
    let row_texels = (kh * kw * icg.div_ceil(4)) as u64;
    let desc = if rec.weight_rows_plain(weights.filter as u64, p.out_channels as u64, row_texels) {
        &CONV_TRANSPOSE2D_PLAIN
    } else {
        &CONV_TRANSPOSE2D
    };
    launch_unfolded(rec, desc, out.precision(), &args, &pc, groups, flat)
}

/// Allocates the output and records the transposed conv.
pub fn conv_transpose2d(
    rec: &mut Recorder,
    x: &Tensor,
    weights: ConvWeights,
    p: &ConvTranspose2dParams,
    name: &str,
) -> Result<Tensor> {
    let shape = conv_transpose2d_output_shape(x.shape(), p)?;
    let out = Tensor::new(rec.device(), name, &shape, x.precision())?;
    conv_transpose2d_into(rec, x, weights, p, &out)?;
    Ok(out)
}
