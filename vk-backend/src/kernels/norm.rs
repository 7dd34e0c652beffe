//! Row-wise normalizations: Softmax / LogSoftmax over any set of axes, LayerNormalization and
//! RMSNorm.
//!
//! One workgroup per row (a fixed coordinate in the non-reduced dims), statistics in fp32 through
//! shared memory: 64 invocations for Softmax (rows are often short: attention scores), 256 for
//! the norms (a decoder's one long row). Shaders: `softmax.comp`, `layernorm.comp` (`include/rownorm_body.glsl`),
//! and where the device's compute stage has subgroup arithmetic, `softmax_subgroup.comp` and
//! `layernorm_subgroup.comp`: the same with each reduction on subgroup operations; and
//! `layernorm_skip.comp` / `layernorm_skip_subgroup.comp` for the norm of a residual sum; and
//! `layernorm*_rows*.comp`, the same over many short rows, eight rows a workgroup, and
//! `layernorm*_wide*.comp` on 1024 invocations a row for a few long rows ([`norm_rows`]).

use crate::error::{Result, VkError};
use crate::kernels::launch::{alloc_like, launch, normalize_axes, IMAGES_2, IMAGES_4};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::dims6;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

/// Invocations a row (`WG` in the shaders).
const SOFTMAX_ROW_INVOCATIONS: u64 = 64;
const LAYERNORM_ROW_INVOCATIONS: u64 = 256;

const SOFTMAX: KernelDesc = KernelDesc {
    name: "softmax",
    bindings: IMAGES_2,
    push_constant_bytes: 64,
    uses_weights: false,
};

/// `rownorm_body.glsl`'s mask bit for RMSNorm.
const RMS_BIT: u32 = 1 << 9;
/// The row-group kernels (`layernorm*_rows*.comp`): `ROW_GROUP` invocations a row,
/// `LAYERNORM_ROW_INVOCATIONS / ROW_GROUP` rows a workgroup, up to `ROW_GROUP * GROUP_SLOTS`
/// texels a row.
const ROW_GROUP: u64 = 32;
const GROUP_SLOTS: u64 = 16;
/// Invocations a row of the wide kernels (`layernorm*_wide*.comp`), and texels an invocation
/// holds on the norms' register path (`ROW_REGS` in `rownorm_body.glsl`).
const WIDE_ROW_INVOCATIONS: u64 = 1024;
const ROW_REGS: u64 = 8;
/// Rows from which a norm takes the row groups by shape: past about one workgroup a
/// multiprocessor at 256 invocations a row, the rows come in waves.
const ROW_GROUP_MIN_ROWS: u64 = 256;

const LAYERNORM: KernelDesc = KernelDesc {
    name: "layernorm",
    bindings: IMAGES_2,
    push_constant_bytes: 64,
    uses_weights: true,
};

/// `layernorm_skip.comp`: the norm of a residual sum, writing the sum too (see [`Residual`]).
const LAYERNORM_SKIP: KernelDesc = KernelDesc {
    name: "layernorm_skip",
    bindings: IMAGES_4,
    push_constant_bytes: 64,
    uses_weights: true,
};
const LAYERNORM_SKIP_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_skip_subgroup",
    ..LAYERNORM_SKIP
};

const LAYERNORM_ROWS: KernelDesc = KernelDesc {
    name: "layernorm_rows",
    ..LAYERNORM
};
const LAYERNORM_ROWS_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_rows_subgroup",
    ..LAYERNORM
};
const LAYERNORM_SKIP_ROWS: KernelDesc = KernelDesc {
    name: "layernorm_skip_rows",
    ..LAYERNORM_SKIP
};
const LAYERNORM_SKIP_ROWS_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_skip_rows_subgroup",
    ..LAYERNORM_SKIP
};

/// The row-group kernels writing the normalized rows as the tensor-core MatMul's packed A
/// (`layernorm*_rows_packed*.comp`, [`norm_packed_into`]): the packed output's descriptor
/// follows the norm's push constants.
const LAYERNORM_ROWS_PACKED: KernelDesc = KernelDesc {
    name: "layernorm_rows_packed",
    push_constant_bytes: 96,
    ..LAYERNORM
};
const LAYERNORM_ROWS_PACKED_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_rows_packed_subgroup",
    ..LAYERNORM_ROWS_PACKED
};
const LAYERNORM_SKIP_ROWS_PACKED: KernelDesc = KernelDesc {
    name: "layernorm_skip_rows_packed",
    push_constant_bytes: 96,
    ..LAYERNORM_SKIP
};
const LAYERNORM_SKIP_ROWS_PACKED_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_skip_rows_packed_subgroup",
    ..LAYERNORM_SKIP_ROWS_PACKED
};

const LAYERNORM_WIDE: KernelDesc = KernelDesc {
    name: "layernorm_wide",
    ..LAYERNORM
};
const LAYERNORM_WIDE_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_wide_subgroup",
    ..LAYERNORM
};
const LAYERNORM_SKIP_WIDE: KernelDesc = KernelDesc {
    name: "layernorm_skip_wide",
    ..LAYERNORM_SKIP
};
const LAYERNORM_SKIP_WIDE_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_skip_wide_subgroup",
    ..LAYERNORM_SKIP
};

const SOFTMAX_SUBGROUP: KernelDesc = KernelDesc {
    name: "softmax_subgroup",
    ..SOFTMAX
};
const LAYERNORM_SUBGROUP: KernelDesc = KernelDesc {
    name: "layernorm_subgroup",
    ..LAYERNORM
};

/// `desc`, or `on_subgroups` (the same kernel reducing with subgroup operations) where the
/// device's compute stage has subgroup arithmetic.
fn reducing<'a>(
    rec: &Recorder,
    desc: &'a KernelDesc,
    on_subgroups: &'a KernelDesc,
) -> &'a KernelDesc {
    if rec.device().features().subgroup_arithmetic {
        on_subgroups
    } else {
        desc
    }
}

fn same_layout(what: &str, x: &Tensor, out: &Tensor) -> Result<()> {
    if x.shape() != out.shape() {
        return Err(VkError::Kernel {
            kernel: what.into(),
            reason: format!(
                "output `{}` {:?} differs in shape from input `{}` {:?}",
                out.name(),
                out.shape(),
                x.name(),
                x.shape()
            ),
        });
    }
    Ok(())
}

/// Push constants + dispatch size of a row reduction over `axes` (normalized) of `x`.
fn row_push(x: &Tensor, axes: &[usize], extra_mask: u32) -> Result<(PushConstants, u64)> {
    let shape = x.shape();
    let d6 = dims6(shape)?;
    let off = 6 - shape.len();
    let mut mask = 0u32;
    for &a in axes {
        mask |= 1 << (off + a);
    }
    let c4 = d6[3].div_ceil(4);
    let t = [d6[0], d6[1], d6[2], c4, d6[4], d6[5]];
    let (mut rows, mut red, mut count) = (1u64, 1u64, 1u64);
    for k in 0..6 {
        if mask & (1 << k) != 0 {
            red *= t[k] as u64;
            count *= d6[k] as u64;
        } else {
            rows *= t[k] as u64;
        }
    }
    if d6[1] > 0xFFFF || d6[2] > 0xFFFF {
        return Err(VkError::BadShape {
            shape: shape.to_vec(),
            reason: "leading dims d1, d2 must be < 65536".into(),
        });
    }
    let pc = PushConstants::new()
        .tensor(x.desc())
        .u32(d6[1] as u32 | ((d6[2] as u32) << 16))
        .u32(mask | extra_mask)
        .u32(rows as u32)
        .u32(red as u32)
        .f32(1.0 / count as f32);
    Ok((pc, rows))
}

/// Records Softmax (or LogSoftmax with `log`) of `x` over `axes` into `out` (same shape).
/// ONNX opset >= 13 passes `[axis]`; opset < 13 (2-D coercion) passes every axis from `axis` on.
pub fn softmax_into(
    rec: &mut Recorder,
    x: &Tensor,
    axes: &[i64],
    log: bool,
    out: &Tensor,
) -> Result<()> {
    same_layout("softmax", x, out)?;
    let axes = normalize_axes("softmax", axes, x.shape().len())?;
    let (pc, rows) = row_push(x, &axes, if log { 256 } else { 0 })?;
    let pc = pc.f32(0.0).u32(0).u32(u32::MAX);
    let desc = reducing(rec, &SOFTMAX, &SOFTMAX_SUBGROUP);
    let args = [Arg::input(x), Arg::output(out)];
    launch_rows(
        rec,
        (desc, SOFTMAX_ROW_INVOCATIONS),
        (&args, out),
        &pc,
        rows,
    )
}

/// Allocates the output and records Softmax / LogSoftmax.
pub fn softmax(
    rec: &mut Recorder,
    x: &Tensor,
    axes: &[i64],
    log: bool,
    name: &str,
) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, x.shape())?;
    softmax_into(rec, x, axes, log, &out)?;
    Ok(out)
}

/// The residual sum a norm reads: `x + residual` is normalized and also written to `sum` (the Add
/// before a transformer's norms, in the same kernel). Both tensors have `x`'s shape; the sum is
/// rounded to the storage precision first, as an Add would store it.
#[derive(Debug, Clone, Copy)]
pub struct Residual<'a> {
    pub residual: &'a Tensor,
    pub sum: &'a Tensor,
}

/// How a row norm normalizes: over axes `[axis, rank)`, `epsilon`, the packed scale (and bias)
/// at these texel offsets, and RMSNorm (`rms`: no mean subtracted, no bias) or LayerNorm.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct NormSpec {
    pub axis: i64,
    pub epsilon: f32,
    pub scale_offset: u32,
    pub bias_offset: Option<u32>,
    pub rms: bool,
}

/// Records the norm `spec` of `x + residual` into `out`, and the sum into `residual.sum`
/// ([`Residual`]); reading the scale needs `rec.use_weights(..)`.
pub fn residual_norm_into(
    rec: &mut Recorder,
    x: &Tensor,
    residual: Residual<'_>,
    spec: &NormSpec,
    out: &Tensor,
) -> Result<()> {
    norm_into(
        rec,
        x,
        spec.axis,
        spec.epsilon,
        spec.scale_offset,
        spec.bias_offset,
        spec.rms,
        Some(residual),
        out,
    )
}

/// ONNX LayerNormalization over axes `[axis, rank)`: `(x - mean) / sqrt(var + epsilon) * scale + bias`.
/// `scale` / `bias` hold `prod(shape[axis..])` values packed by `layout::pack_vector` (row-major over
/// the normalized dims) at these texel offsets; reading them needs `rec.use_weights(..)`.
pub fn layernorm_into(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    epsilon: f32,
    scale_offset: u32,
    bias_offset: Option<u32>,
    out: &Tensor,
) -> Result<()> {
    norm_into(
        rec,
        x,
        axis,
        epsilon,
        scale_offset,
        bias_offset,
        false,
        None,
        out,
    )
}

/// RMSNorm over axes `[axis, rank)`: `x / sqrt(mean(x^2) + epsilon) * scale`, with `scale`
/// packed as for [`layernorm_into`]. One kernel for what Llama-family exporters write as Pow,
/// ReduceMean, Add, Sqrt, Reciprocal and two Muls.
pub fn rmsnorm_into(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    epsilon: f32,
    scale_offset: u32,
    out: &Tensor,
) -> Result<()> {
    norm_into(rec, x, axis, epsilon, scale_offset, None, true, None, out)
}

/// The `[4, K/4, M]` shape in which [`norm_packed_into`] can write the norm of `x` over `axis`:
/// the tensor-core MatMul's packed A of `x` read as one `[M, K]` matrix
/// ([`super::matmul_packed_a_shape`]), where the norm is over the last axis alone, `x` holds one
/// value a texel (one channel: `[M, K]`, `[1, M, K]`, ...), `K` is a multiple of 4 and its rows
/// fit the row groups; `None` elsewhere, or where the device's options turn the row groups or
/// this output off ([`crate::DeviceOptions::norm_packed_out`]).
pub fn norm_packed_out_shape(rec: &Recorder, x: &Tensor, axis: i64) -> Result<Option<Vec<usize>>> {
    let rank = x.shape().len();
    let a = normalize_axes("layernorm", &[axis], rank)?[0];
    let d = dims6(x.shape())?;
    let one_matrix = rank >= 2 && d[0] * d[1] * d[2] == 1 && d[3] == 1;
    let fits = a + 1 == rank && d[5].is_multiple_of(4) && d[5] as u64 <= ROW_GROUP * GROUP_SLOTS;
    let f = rec.device().features();
    let allowed = f.norm_row_groups != Some(false) && f.norm_packed_out != Some(false);
    Ok((one_matrix && fits && allowed).then(|| vec![4, d[5] / 4, d[4]]))
}

/// Records the norm `spec` of `x` (of `x + residual`, writing the sum, with a [`Residual`]) in
/// row groups, its output written only as `packed`, the tensor-core MatMul's packed A of shape
/// [`norm_packed_out_shape`] (texel `(m, k/4)` holding `k..k+3` of row `m`), so that the
/// MatMuls reading it need no copy of their own.
pub fn norm_packed_into(
    rec: &mut Recorder,
    x: &Tensor,
    residual: Option<Residual<'_>>,
    spec: &NormSpec,
    packed: &Tensor,
) -> Result<()> {
    let what = if spec.rms { "rmsnorm" } else { "layernorm" };
    let want = norm_packed_out_shape(rec, x, spec.axis)?;
    if want.as_deref() != Some(packed.shape()) || packed.precision() != x.precision() {
        return Err(VkError::Kernel {
            kernel: what.into(),
            reason: format!(
                "`{}` {:?} is not the packed output of `{}` {:?} (want {want:?} at {:?})",
                packed.name(),
                packed.shape(),
                x.name(),
                x.shape(),
                x.precision()
            ),
        });
    }
    if let Some(r) = residual {
        residual_layout(what, x, r)?;
    }
    let rank = x.shape().len();
    let (pc, rows) = row_push(x, &[rank - 1], if spec.rms { RMS_BIT } else { 0 })?;
    let pc = pc
        .f32(spec.epsilon)
        .u32(spec.scale_offset)
        .u32(spec.bias_offset.unwrap_or(u32::MAX))
        .tensor(packed.desc());
    let rows = rows.div_ceil(LAYERNORM_ROW_INVOCATIONS / ROW_GROUP);
    let invocations = LAYERNORM_ROW_INVOCATIONS;
    let Some(r) = residual else {
        let desc = reducing(rec, &LAYERNORM_ROWS_PACKED, &LAYERNORM_ROWS_PACKED_SUBGROUP);
        let args = [Arg::input(x), Arg::output(packed)];
        return launch_rows(rec, (desc, invocations), (&args, packed), &pc, rows);
    };
    let desc = reducing(
        rec,
        &LAYERNORM_SKIP_ROWS_PACKED,
        &LAYERNORM_SKIP_ROWS_PACKED_SUBGROUP,
    );
    let args = [
        Arg::input(x),
        Arg::output(packed),
        Arg::input(r.residual),
        Arg::output(r.sum),
    ];
    launch_rows(rec, (desc, invocations), (&args, packed), &pc, rows)
}

/// A residual norm's residual and sum share `x`'s shape and fold (one layout for the kernel).
fn residual_layout(what: &str, x: &Tensor, r: Residual<'_>) -> Result<()> {
    for t in [r.residual, r.sum] {
        same_layout(what, x, t)?;
        if t.desc() != x.desc() {
            return Err(VkError::Kernel {
                kernel: what.into(),
                reason: format!(
                    "`{}` is folded differently from `{}` (one layout for a residual norm)",
                    t.name(),
                    x.name()
                ),
            });
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn norm_into(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    epsilon: f32,
    scale_offset: u32,
    bias_offset: Option<u32>,
    rms: bool,
    residual: Option<Residual<'_>>,
    out: &Tensor,
) -> Result<()> {
    let what = if rms { "rmsnorm" } else { "layernorm" };
    same_layout(what, x, out)?;
    if let Some(r) = residual {
        residual_layout(what, x, r)?;
    }
    let rank = x.shape().len();
    let a = normalize_axes(what, &[axis], rank)?[0];
    let axes: Vec<usize> = (a..rank).collect();
    let layout = norm_rows(rec, x, axis)?;
    let (pc, rows) = row_push(x, &axes, if rms { RMS_BIT } else { 0 })?;
    let pc = pc
        .f32(epsilon)
        .u32(scale_offset)
        .u32(bias_offset.unwrap_or(u32::MAX));
    // Kernels without and with the residual sum, on the shared-memory tree and on subgroups.
    let [plain, plain_sg, skip, skip_sg] = match layout {
        NormRows::Groups => [
            &LAYERNORM_ROWS,
            &LAYERNORM_ROWS_SUBGROUP,
            &LAYERNORM_SKIP_ROWS,
            &LAYERNORM_SKIP_ROWS_SUBGROUP,
        ],
        NormRows::Wide => [
            &LAYERNORM_WIDE,
            &LAYERNORM_WIDE_SUBGROUP,
            &LAYERNORM_SKIP_WIDE,
            &LAYERNORM_SKIP_WIDE_SUBGROUP,
        ],
        NormRows::One => [
            &LAYERNORM,
            &LAYERNORM_SUBGROUP,
            &LAYERNORM_SKIP,
            &LAYERNORM_SKIP_SUBGROUP,
        ],
    };
    // A row group's workgroup takes several rows: one dispatched "row" a workgroup of them.
    let (invocations, rows) = match layout {
        NormRows::Groups => (
            LAYERNORM_ROW_INVOCATIONS,
            rows.div_ceil(LAYERNORM_ROW_INVOCATIONS / ROW_GROUP),
        ),
        NormRows::Wide => (WIDE_ROW_INVOCATIONS, rows),
        NormRows::One => (LAYERNORM_ROW_INVOCATIONS, rows),
    };
    let Some(r) = residual else {
        let desc = reducing(rec, plain, plain_sg);
        let args = [Arg::input(x), Arg::output(out)];
        return launch_rows(rec, (desc, invocations), (&args, out), &pc, rows);
    };
    let desc = reducing(rec, skip, skip_sg);
    let args = [
        Arg::input(x),
        Arg::output(out),
        Arg::input(r.residual),
        Arg::output(r.sum),
    ];
    launch_rows(rec, (desc, invocations), (&args, out), &pc, rows)
}

/// How a LayerNorm or RMSNorm lays its rows over workgroups ([`norm_rows`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NormRows {
    /// One workgroup of 256 invocations a row.
    One,
    /// Row groups: eight rows a workgroup, 32 invocations a row, the scale and bias staged once
    /// a workgroup (`layernorm*_rows*.comp`), for many short rows.
    Groups,
    /// One workgroup of 1024 invocations a row (`layernorm*_wide*.comp`), for a few long rows.
    Wide,
}

/// How the norm of `x` over `[axis, rank)` lays its rows over workgroups. Where it normalizes
/// the last axis alone: in row groups over at least 256 rows of at most 512
/// (`ROW_GROUP * GROUP_SLOTS`) texels, or wherever they fit if the device's options say so
/// ([`crate::DeviceOptions::norm_row_groups`]); wide only where the options ask for it
/// ([`crate::DeviceOptions::norm_wide_rows`]). Else one workgroup of 256 invocations a row.
/// On an H100 (session 32, chains of 48 residual norms) the row groups took the Whisper-tiny
/// encoder's `[1, 1500, 384]` norms from 58.7 to 19.2 us; the wide kernels doubled a decoder
/// step's `[1, 1, 2048]` norm (13.8 -> 29.8 us) and a 128-token prefill's (14.0 -> 66.3).
pub fn norm_rows(rec: &Recorder, x: &Tensor, axis: i64) -> Result<NormRows> {
    let rank = x.shape().len();
    let a = normalize_axes("layernorm", &[axis], rank)?[0];
    let d6 = dims6(x.shape())?;
    let texels = d6[5] as u64;
    let last_alone = a + 1 == rank;
    let groups_fit = last_alone && texels <= ROW_GROUP * GROUP_SLOTS;
    let wide_fits = last_alone && texels <= WIDE_ROW_INVOCATIONS * ROW_REGS;
    let rows = x.layout().texels() / texels;
    let features = rec.device().features();
    let groups = match features.norm_row_groups {
        Some(forced) => forced && groups_fit,
        None => groups_fit && rows >= ROW_GROUP_MIN_ROWS,
    };
    let wide = features.norm_wide_rows == Some(true) && wide_fits;
    Ok(if groups {
        NormRows::Groups
    } else if wide {
        NormRows::Wide
    } else {
        NormRows::One
    })
}

/// Records row kernel `desc` on `args` (input, output, ...) at the output `out`'s precision: one
/// workgroup of `invocations` per row.
fn launch_rows(
    rec: &mut Recorder,
    (desc, invocations): (&KernelDesc, u64),
    (args, out): (&[Arg<'_>], &Tensor),
    pc: &PushConstants,
    rows: u64,
) -> Result<()> {
    let groups = dispatch_1d(rec.device(), rows * invocations, invocations as u32);
    launch(rec, desc, out.precision(), args, pc, groups)
}

/// Allocates the output and records LayerNormalization.
pub fn layernorm(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    epsilon: f32,
    scale_offset: u32,
    bias_offset: Option<u32>,
    name: &str,
) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, x.shape())?;
    layernorm_into(rec, x, axis, epsilon, scale_offset, bias_offset, &out)?;
    Ok(out)
}
