//! Reductions over any set of axes (keepdims or not): ReduceSum, ReduceMean, ReduceMax,
//! ReduceMin, ArgMax, ArgMin. Shader: `reduce.comp`.
//!
//! ArgMax/ArgMin write the index as a float value (int tensors are float-valued activations;
//! exact up to 2048 in fp16 and 2^24 in fp32).

use crate::error::{Result, VkError};
use crate::kernels::launch::{self, alloc_like, launch_per_texel, normalize_axes, IMAGES_2};
use crate::kernels::push::PushConstants;
use crate::layout::dims6;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const REDUCE: KernelDesc = KernelDesc {
    name: "reduce",
    bindings: IMAGES_2,
    push_constant_bytes: 88,
    uses_weights: false,
};

/// A reduction. ArgMax/ArgMin need exactly one axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    Sum,
    Mean,
    Max,
    Min,
    ArgMax { select_last_index: bool },
    ArgMin { select_last_index: bool },
}

impl ReduceOp {
    fn code(self) -> (u32, bool) {
        match self {
            ReduceOp::Sum => (0, false),
            ReduceOp::Mean => (1, false),
            ReduceOp::Max => (2, false),
            ReduceOp::Min => (3, false),
            ReduceOp::ArgMax { select_last_index } => (4, select_last_index),
            ReduceOp::ArgMin { select_last_index } => (5, select_last_index),
        }
    }
}

fn kerr(reason: String) -> VkError {
    launch::kerr("reduce", reason)
}

/// Normalized axes; empty `axes` means every axis (ONNX default without noop_with_empty_axes).
fn axes_of(op: ReduceOp, shape: &[usize], axes: &[i64]) -> Result<Vec<usize>> {
    let mut ax = normalize_axes("reduce", axes, shape.len())?;
    if ax.is_empty() {
        ax = (0..shape.len()).collect();
    }
    if matches!(op, ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. }) && ax.len() != 1 {
        return Err(kerr(format!("{op:?} needs exactly one axis, got {axes:?}")));
    }
    Ok(ax)
}

/// Output shape of a reduction of `shape` over `axes` (empty = all).
pub fn reduce_shape(
    op: ReduceOp,
    shape: &[usize],
    axes: &[i64],
    keepdims: bool,
) -> Result<Vec<usize>> {
    let ax = axes_of(op, shape, axes)?;
    Ok(shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (ax.contains(&i), keepdims) {
            (true, true) => Some(1),
            (true, false) => None,
            (false, _) => Some(d),
        })
        .collect())
}

/// Records `out = op(x)` over `axes` (empty = all axes).
pub fn reduce_into(
    rec: &mut Recorder,
    op: ReduceOp,
    x: &Tensor,
    axes: &[i64],
    keepdims: bool,
    out: &Tensor,
) -> Result<()> {
    let shape = x.shape();
    let ax = axes_of(op, shape, axes)?;
    let want = reduce_shape(op, shape, axes, keepdims)?;
    if dims6(out.shape())? != dims6(&want)? {
        return Err(kerr(format!(
            "output `{}` has shape {:?}, expected {want:?}",
            out.name(),
            out.shape()
        )));
    }
    let (ri, ro) = (shape.len(), want.len());
    let (i6, o6) = (dims6(shape)?, dims6(&want)?);
    if i6[1].max(i6[2]).max(o6[1]).max(o6[2]) > 0xFFFF {
        return Err(kerr(format!("leading dims of {shape:?} must be < 65536")));
    }
    // Output dim position -> input dim position (6-dim, right-aligned).
    let mut map = 0xFF_FFFFu32;
    let mut j = 0;
    for a in 0..ri {
        let reduced = ax.contains(&a);
        if reduced && !keepdims {
            continue;
        }
        let (op_pos, ip_pos) = (6 - ro + j, 6 - ri + a);
        j += 1;
        if !reduced {
            map = (map & !(0xF << (4 * op_pos))) | ((ip_pos as u32) << (4 * op_pos));
        }
    }
    let mut red_mask = 0u32;
    let mut count = 1u64;
    for &a in &ax {
        red_mask |= 1 << (6 - ri + a);
        count *= shape[a] as u64;
    }
    let (code, last) = op.code();
    let fast = (map >> 12) & 0xF == 3 && red_mask & 8 == 0;
    let flags = red_mask | (code << 8) | (u32::from(last) << 16) | (u32::from(fast) << 17);
    let pc = PushConstants::new()
        .tensor(out.desc())
        .tensor(x.desc())
        .u32(i6[1] as u32 | ((i6[2] as u32) << 16))
        .u32(o6[1] as u32 | ((o6[2] as u32) << 16))
        .u32(map)
        .u32(flags)
        .u32(count as u32)
        .f32(1.0 / count as f32);
    launch_per_texel(rec, &REDUCE, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output and records the reduction.
pub fn reduce(
    rec: &mut Recorder,
    op: ReduceOp,
    x: &Tensor,
    axes: &[i64],
    keepdims: bool,
    name: &str,
) -> Result<Tensor> {
    let shape = reduce_shape(op, x.shape(), axes, keepdims)?;
    let out = alloc_like(rec, x, name, &shape)?;
    reduce_into(rec, op, x, axes, keepdims, &out)?;
    Ok(out)
}
