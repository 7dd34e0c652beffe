//! Pad on the N, C, H, W dims of a tensor of rank <= 4: constant, reflect or edge.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_per_texel, IMAGES_2};
use crate::kernels::push::PushConstants;
use crate::kernels::window::check_out;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const PAD: KernelDesc = KernelDesc {
    name: "pad",
    bindings: IMAGES_2,
    push_constant_bytes: 96,
    uses_weights: false,
};

/// ONNX Pad mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PadMode {
    Constant,
    /// Mirror without repeating the edge value (pads must be smaller than the dim).
    Reflect,
    Edge,
}

/// Pad attributes.
#[derive(Debug, Clone, PartialEq)]
pub struct PadParams {
    pub mode: PadMode,
    /// ONNX order for the tensor's rank r <= 4: `[begin_0, .., begin_{r-1}, end_0, .., end_{r-1}]`.
    pub pads: Vec<usize>,
    /// Fill value of `Constant`.
    pub value: f32,
}

/// Output shape of a pad (same rank as `x`); checks the pads.
pub fn pad_output_shape(x: &[usize], p: &PadParams) -> Result<Vec<usize>> {
    let r = x.len();
    if r > 4 || p.pads.len() != 2 * r {
        return Err(kerr(
            "pad",
            format!(
                "needs rank <= 4 and 2*rank pads; got shape {x:?} and pads {:?}",
                p.pads
            ),
        ));
    }
    let mut out = Vec::with_capacity(r);
    for (a, &len) in x.iter().enumerate() {
        let (b, e) = (p.pads[a], p.pads[r + a]);
        if p.mode == PadMode::Reflect && len > 1 && (b >= len || e >= len) {
            return Err(kerr(
                "pad",
                format!("reflect pads ({b}, {e}) on axis {a} must be smaller than its size {len}"),
            ));
        }
        out.push(len + b + e);
    }
    Ok(out)
}

/// Records the pad of `x` into `out` (shape [`pad_output_shape`]).
pub fn pad_into(rec: &mut Recorder, x: &Tensor, p: &PadParams, out: &Tensor) -> Result<()> {
    let want = pad_output_shape(x.shape(), p)?;
    check_out("pad", x, out, &want)?;
    let r = x.shape().len();
    // Right-align the begin pads into N, C, H, W.
    let mut begin = [0u32; 4];
    for a in 0..r {
        begin[4 - r + a] = u32::try_from(p.pads[a])
            .map_err(|_| kerr("pad", format!("pad {} too large", p.pads[a])))?;
    }
    let mode = match p.mode {
        PadMode::Constant => 0,
        PadMode::Reflect => 1,
        PadMode::Edge => 2,
    };
    let pc = PushConstants::new()
        .tensor(x.desc())
        .tensor(out.desc())
        .u32(begin[0])
        .u32(begin[1])
        .u32(begin[2])
        .u32(begin[3])
        .u32(mode)
        .f32(p.value)
        .pad_to(24);
    launch_per_texel(rec, &PAD, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output and records the pad.
pub fn pad(rec: &mut Recorder, x: &Tensor, p: &PadParams, name: &str) -> Result<Tensor> {
    let shape = pad_output_shape(x.shape(), p)?;
    let out = Tensor::new(rec.device(), name, &shape, x.precision())?;
    pad_into(rec, x, p, &out)?;
    Ok(out)
}
