//! Resize converter: modes, coordinate transforms and nearest rounding from attributes; the
//! output size from constant `sizes`, or from constant `scales` (floored).
use super::args::usizes;
use super::R;
use crate::ir::{CoordMode, NearestMode, Op, ResizeMode};
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

/// Maps a string attribute onto an enum, naming the attribute and value when it is unsupported.
fn choice<T: Copy>(
    ctx: &Ctx,
    n: &NodeRef,
    attr: &str,
    default: &str,
    what: &str,
    options: &[(&str, T)],
) -> R<T> {
    let v = Attrs(n.proto).string_or(attr, default);
    options
        .iter()
        .find(|(name, _)| *name == v)
        .map(|&(_, t)| t)
        .ok_or_else(|| ctx.output_err(n, format!("{what} '{v}' is not supported")))
}

pub(super) fn resize(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let x = ctx.need_input(n, 0)?;
    let xs = ctx.shape(x).to_vec();
    let mode = choice(
        ctx,
        n,
        "mode",
        "nearest",
        "Resize mode",
        &[
            ("nearest", ResizeMode::Nearest),
            ("linear", ResizeMode::Linear),
        ],
    )?;
    let coord = choice(
        ctx,
        n,
        "coordinate_transformation_mode",
        "half_pixel",
        "coordinate_transformation_mode",
        &[
            ("half_pixel", CoordMode::HalfPixel),
            ("pytorch_half_pixel", CoordMode::PytorchHalfPixel),
            ("align_corners", CoordMode::AlignCorners),
            ("asymmetric", CoordMode::Asymmetric),
        ],
    )?;
    let nearest = choice(
        ctx,
        n,
        "nearest_mode",
        "round_prefer_floor",
        "nearest_mode",
        &[
            ("round_prefer_floor", NearestMode::RoundPreferFloor),
            ("round_prefer_ceil", NearestMode::RoundPreferCeil),
            ("floor", NearestMode::Floor),
            ("ceil", NearestMode::Ceil),
        ],
    )?;
    if a.has("axes") || a.string_or("keep_aspect_ratio_policy", "stretch") != "stretch" {
        return Err(ctx.output_err(
            n,
            "Resize axes / keep_aspect_ratio_policy are not supported",
        ));
    }
    let scales = ctx
        .const_input(n, 2, "scales")?
        .map(|t| t.as_f32())
        .filter(|v| !v.is_empty());
    let sizes = ctx
        .const_input(n, 3, "sizes")?
        .map(|t| t.as_i64())
        .filter(|v| !v.is_empty());
    let from_scales = sizes.is_none();
    let (scales, sizes) = match (scales, sizes) {
        (_, Some(sz)) => {
            let sz = usizes(ctx, n, &sz, "size")?;
            if sz.len() != xs.len() {
                return Err(ctx.output_err(n, format!("Resize sizes {sz:?} for input {xs:?}")));
            }
            let sc = sz
                .iter()
                .zip(&xs)
                .map(|(&o, &i)| o as f32 / i.max(1) as f32)
                .collect();
            (sc, sz)
        }
        (Some(sc), None) => {
            if sc.len() != xs.len() || sc.iter().any(|&s| !(s > 0.0 && s.is_finite())) {
                return Err(ctx.output_err(n, format!("Resize scales {sc:?} for input {xs:?}")));
            }
            let sz = xs
                .iter()
                .zip(&sc)
                .map(|(&d, &s)| (d as f64 * s as f64).floor() as usize)
                .collect();
            (sc, sz)
        }
        (None, None) => return Err(ctx.output_err(n, "Resize needs constant scales or sizes")),
    };
    let op = Op::Resize {
        mode,
        coord,
        nearest,
        scales,
        sizes,
        from_scales,
    };
    ctx.emit(n, op, vec![Some(x)])?;
    Ok(())
}
