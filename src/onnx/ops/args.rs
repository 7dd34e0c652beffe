//! Argument helpers shared by the converters: axis normalization, axes given as an attribute or
//! an input, and ONNX integer lists that must be non-negative.
use super::R;
use crate::onnx::attrs::Attrs;
use crate::onnx::import::{Ctx, NodeRef};

/// `axis` (negative counts from the end) as an index into a rank-`rank` shape.
pub(super) fn norm_axis(ctx: &Ctx, n: &NodeRef, axis: i64, rank: usize) -> R<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(ctx.output_err(n, format!("axis {axis} out of range for rank {rank}")));
    }
    Ok(a as usize)
}

/// [`norm_axis`] of every entry, sorted, without repeats.
pub(super) fn norm_axes(ctx: &Ctx, n: &NodeRef, axes: &[i64], rank: usize) -> R<Vec<usize>> {
    let mut v = axes
        .iter()
        .map(|&a| norm_axis(ctx, n, a, rank))
        .collect::<R<Vec<_>>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Axes from attribute (older opsets) or from input #`input_idx` (newer opsets), whichever is
/// present.
pub(super) fn axes_of(ctx: &Ctx, n: &NodeRef, input_idx: usize) -> R<Option<Vec<i64>>> {
    if let Some(a) = Attrs(n.proto).ints("axes") {
        return Ok(Some(a));
    }
    Ok(ctx.const_input(n, input_idx, "axes")?.map(|t| t.as_i64()))
}

/// `v` as sizes; a negative entry is an error naming `what` it is.
pub(super) fn usizes(ctx: &Ctx, n: &NodeRef, v: &[i64], what: &str) -> R<Vec<usize>> {
    v.iter()
        .map(|&x| {
            usize::try_from(x)
                .map_err(|_| ctx.output_err(n, format!("negative {what} {x} unsupported")))
        })
        .collect()
}
