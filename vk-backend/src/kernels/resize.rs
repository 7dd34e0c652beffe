//! Resize over H and W: nearest (ONNX nearest_mode) or bilinear, with the ONNX coordinate
//! transformation modes. Scales come from the CPU side (ONNX `scales`, or output/input sizes).

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_per_texel, IMAGES_2};
use crate::kernels::push::PushConstants;
use crate::kernels::window::check_out;
use crate::layout::nchw;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const RESIZE: KernelDesc = KernelDesc {
    name: "resize",
    bindings: IMAGES_2,
    push_constant_bytes: 80,
    uses_weights: false,
};

/// ONNX `nearest_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

/// ONNX `coordinate_transformation_mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoordMode {
    HalfPixel,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
}

/// Interpolation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResizeMode {
    Nearest(NearestMode),
    /// Bilinear over H and W.
    Linear,
}

/// Resize attributes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ResizeParams {
    pub mode: ResizeMode,
    pub coord: CoordMode,
    /// `[scale_h, scale_w]` used by the coordinate transform (ONNX `scales`); `None` uses
    /// output/input sizes (what ONNX does when only `sizes` is given).
    pub scales: Option<[f32; 2]>,
    /// ONNX `scales` were given: align_corners / pytorch_half_pixel then take the resized length
    /// as `scale * length_in`, unfloored, as the ONNX reference implementation does (4 -> 2 at
    /// scale 0.6 maps output x = 1 to 1 * 3 / (2.4 - 1)); otherwise it is the output length.
    /// Ignored when `scales` is `None`.
    pub length_from_scales: bool,
}

/// Records a resize of `x` into `out`: same rank, equal dims except the last two (H, W).
pub fn resize_into(rec: &mut Recorder, x: &Tensor, p: &ResizeParams, out: &Tensor) -> Result<()> {
    let (xs, os) = (x.shape(), out.shape());
    if xs.len() < 2 || xs.len() != os.len() || xs[..xs.len() - 2] != os[..os.len() - 2] {
        return Err(kerr(
            "resize",
            format!(
                "output `{}` {os:?} must match input `{}` {xs:?} except in the last two axes",
                out.name(),
                x.name()
            ),
        ));
    }
    check_out("resize", x, out, os)?;
    let [_, _, ih, iw] = nchw(xs)?;
    let [_, _, oh, ow] = nchw(os)?;
    let [sh, sw] = p
        .scales
        .unwrap_or([oh as f32 / ih as f32, ow as f32 / iw as f32]);
    let scaled_len = p.length_from_scales && p.scales.is_some();
    if !(sh.is_finite() && sh > 0.0 && sw.is_finite() && sw > 0.0) {
        return Err(kerr(
            "resize",
            format!("scales must be finite and positive, got [{sh}, {sw}]"),
        ));
    }
    let (m, n) = match p.mode {
        ResizeMode::Linear => (1u32, 0u32),
        ResizeMode::Nearest(nm) => (
            0,
            match nm {
                NearestMode::RoundPreferFloor => 0,
                NearestMode::RoundPreferCeil => 1,
                NearestMode::Floor => 2,
                NearestMode::Ceil => 3,
            },
        ),
    };
    let c = match p.coord {
        CoordMode::HalfPixel => 0u32,
        CoordMode::PytorchHalfPixel => 1,
        CoordMode::AlignCorners => 2,
        CoordMode::Asymmetric => 3,
    };
    let pc = PushConstants::new()
        .tensor(x.desc())
        .tensor(out.desc())
        .u32(m | (c << 4) | (n << 8) | (u32::from(scaled_len) << 12))
        .f32(sh)
        .f32(sw)
        .pad_to(20);
    launch_per_texel(rec, &RESIZE, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output (input shape with the last two axes set to `out_hw`) and records the
/// resize.
pub fn resize(
    rec: &mut Recorder,
    x: &Tensor,
    p: &ResizeParams,
    out_hw: [usize; 2],
    name: &str,
) -> Result<Tensor> {
    let mut shape = x.shape().to_vec();
    let r = shape.len();
    if r < 2 {
        return Err(kerr(
            "resize",
            format!("input `{}` {shape:?} needs rank >= 2", x.name()),
        ));
    }
    shape[r - 2..].copy_from_slice(&out_hw);
    let out = Tensor::new(rec.device(), name, &shape, x.precision())?;
    resize_into(rec, x, p, &out)?;
    Ok(out)
}
