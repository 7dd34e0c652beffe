//! Data movement through one generic strided N-d copy / gather kernel (`copy.comp`): Transpose,
//! Reshape (Flatten / Squeeze / Unsqueeze), Slice (negative steps too), Concat, Split, Expand,
//! Tile, Gather and GatherElements (indices from a tensor) and Cast.
//!
//! Integer tensors are float-valued activations: an int value is stored as the float with that
//! value, exact up to 2^11 = 2048 in fp16 and 2^24 in fp32 storage (larger ints round). Bool is
//! 0.0 / 1.0. Constant Gather indices are uploaded as an activation tensor of the data's precision.
//! Per-dispatch parameters live in a small host-visible storage buffer (too many for push constants).

use crate::error::Result;
use crate::kernels::launch::{alloc_like, kerr, launch, normalize_axes, params_buffer};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::{dims6, MAX_RANK};
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Access, Arg, Recorder};
use crate::tensor::Tensor;

/// Concatenation by whole texels (along channels on texel boundaries, or along rows or columns),
/// up to [`CONCAT_TEXELS_INPUTS`] inputs a dispatch.
const CONCAT_TEXELS: KernelDesc = KernelDesc {
    name: "concat_texels",
    // 8 inputs, the output, the per-input parameters.
    bindings: &[
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageBuffer,
    ],
    push_constant_bytes: 44,
    uses_weights: false,
};
const CONCAT_TEXELS_INPUTS: usize = 8;

const COPY: KernelDesc = KernelDesc {
    name: "copy",
    bindings: &[
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageBuffer,
    ],
    push_constant_bytes: 100,
    uses_weights: false,
};

/// Row-major element strides of `shape`.
fn strides(shape: &[usize]) -> Vec<i64> {
    let mut s = vec![1i64; shape.len()];
    for a in (0..shape.len().saturating_sub(1)).rev() {
        s[a] = s[a + 1] * shape[a + 1] as i64;
    }
    s
}

/// One copy dispatch: region of `dst` filled from `src` (see `copy.comp`).
struct Spec {
    stride: [i64; 6],
    base: i64,
    lo: [usize; 6],
    size: [usize; 6],
    gather: Option<(usize, usize, i64, i64)>, // (qs, qr, axis_stride, axis_size)
    /// Gather reads the index at the destination's own coordinates (GatherElements).
    elements: bool,
    post: u32,
    /// Per destination axis: region coordinates are taken modulo this (0 = no wrap); Tile.
    wrap: [usize; 6],
}

impl Spec {
    /// Whole-`dst` region with strides given per destination axis.
    fn whole(dst_shape: &[usize], axis_strides: &[i64], base: i64) -> Result<Spec> {
        let d6 = dims6(dst_shape)?;
        let off = 6 - dst_shape.len();
        let mut stride = [0i64; 6];
        stride[off..].copy_from_slice(axis_strides);
        Ok(Spec {
            stride,
            base,
            lo: [0; 6],
            size: d6,
            gather: None,
            elements: false,
            post: 0,
            wrap: [0; 6],
        })
    }
}

fn record(
    rec: &mut Recorder,
    kernel: &str,
    src: &Tensor,
    idx: Option<&Tensor>,
    dst: &Tensor,
    spec: &Spec,
) -> Result<()> {
    let (s6, d6) = (dims6(src.shape())?, dims6(dst.shape())?);
    let i6 = match idx {
        Some(t) => dims6(t.shape())?,
        None => [1; 6],
    };
    let too_big = |v: i64| i32::try_from(v).is_err();
    if too_big(src.elements() as i64)
        || spec.stride.iter().any(|&s| too_big(s))
        || too_big(spec.base)
    {
        return Err(kerr(
            kernel,
            format!("`{}` is too large for 32-bit indexing", src.name()),
        ));
    }
    let box_c4 = (spec.lo[3] + spec.size[3] - 1) / 4 - spec.lo[3] / 4 + 1;
    let box_texels: u64 = [
        spec.size[0],
        spec.size[1],
        spec.size[2],
        box_c4,
        spec.size[4],
        spec.size[5],
    ]
    .iter()
    .map(|&v| v as u64)
    .product();
    let (qs, qr, ast, asz) = spec.gather.unwrap_or((0, 0, 0, 1));
    let mut words: Vec<u32> = Vec::with_capacity(50);
    words.extend(d6.iter().map(|&v| v as u32));
    words.extend(s6.iter().map(|&v| v as u32));
    words.extend(spec.stride.iter().map(|&v| v as i32 as u32));
    words.push(spec.base as i32 as u32);
    words.extend(spec.lo.iter().map(|&v| v as u32));
    words.extend(spec.size.iter().map(|&v| v as u32));
    words.push(match (spec.gather.is_some(), spec.elements) {
        (false, _) => 0,
        (true, false) => 1,
        (true, true) => 2,
    });
    words.extend([qs as u32, qr as u32, ast as i32 as u32, asz as i32 as u32]);
    words.extend(i6.iter().map(|&v| v as u32));
    words.push(spec.post);
    words.push(box_c4 as u32);
    words.extend(spec.wrap.iter().map(|&v| v as u32));
    let params = params_buffer(rec, "copy params", &words)?;
    let idx_t = idx.unwrap_or(src);
    let pc = PushConstants::new()
        .tensor(dst.desc())
        .tensor(src.desc())
        .tensor(idx_t.desc())
        .u32(u32::try_from(box_texels).map_err(|_| kerr(kernel, "region too large".into()))?);
    let groups = dispatch_1d(rec.device(), box_texels, 64);
    let args = [
        Arg::input(src),
        Arg::input(idx_t),
        Arg::inout(dst),
        Arg::buffer(&params, Access::Read),
    ];
    launch(rec, &COPY, dst.precision(), &args, &pc, groups)
}

fn check_out(kernel: &str, out: &Tensor, want: &[usize]) -> Result<()> {
    if out.shape() != want {
        return Err(kerr(
            kernel,
            format!(
                "output `{}` has shape {:?}, expected {want:?}",
                out.name(),
                out.shape()
            ),
        ));
    }
    Ok(())
}

/// Output shape of Transpose with `perm` (empty = reverse the axes, as ONNX).
pub fn transpose_shape(shape: &[usize], perm: &[usize]) -> Result<Vec<usize>> {
    let r = shape.len();
    let perm: Vec<usize> = if perm.is_empty() {
        (0..r).rev().collect()
    } else {
        perm.to_vec()
    };
    let mut seen = vec![false; r];
    if perm.len() != r
        || perm
            .iter()
            .any(|&p| p >= r || std::mem::replace(&mut seen[p], true))
    {
        return Err(kerr(
            "transpose",
            format!("perm {perm:?} is not a permutation of {r} axes"),
        ));
    }
    Ok(perm.iter().map(|&p| shape[p]).collect())
}

/// Records Transpose: `out.shape[i] = x.shape[perm[i]]` (empty `perm` reverses).
pub fn transpose_into(rec: &mut Recorder, x: &Tensor, perm: &[usize], out: &Tensor) -> Result<()> {
    transpose_as_into(rec, x, x.shape(), perm, out)
}

/// Records Transpose of `x` read as the row-major shape `read_as` (a Reshape and the Transpose
/// after it in one copy): `out.shape[i] = read_as[perm[i]]`.
pub fn transpose_as_into(
    rec: &mut Recorder,
    x: &Tensor,
    read_as: &[usize],
    perm: &[usize],
    out: &Tensor,
) -> Result<()> {
    if read_as.iter().product::<usize>() != x.elements() {
        return Err(kerr(
            "transpose",
            format!(
                "`{}` {:?} cannot be read as {read_as:?}",
                x.name(),
                x.shape()
            ),
        ));
    }
    let want = transpose_shape(read_as, perm)?;
    check_out("transpose", out, &want)?;
    let r = read_as.len();
    let perm: Vec<usize> = if perm.is_empty() {
        (0..r).rev().collect()
    } else {
        perm.to_vec()
    };
    // The source's linear index is its row-major index under any shape of its element count.
    let ss = strides(read_as);
    let st: Vec<i64> = perm.iter().map(|&p| ss[p]).collect();
    record(rec, "transpose", x, None, out, &Spec::whole(&want, &st, 0)?)
}

/// Allocates the output and records Transpose.
pub fn transpose(rec: &mut Recorder, x: &Tensor, perm: &[usize], name: &str) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, &transpose_shape(x.shape(), perm)?)?;
    transpose_into(rec, x, perm, &out)?;
    Ok(out)
}

/// Whether a reshape `from -> to` moves texels. When false the runtime may alias the storage
/// (same N, C, H, W under the rank rule, so the same texel order).
pub fn reshape_needs_copy(from: &[usize], to: &[usize]) -> Result<bool> {
    Ok(crate::layout::nchw(from)? != crate::layout::nchw(to)?)
}

/// Records Reshape / Flatten / Squeeze / Unsqueeze into `out` (same element count, row-major order).
pub fn reshape_into(rec: &mut Recorder, x: &Tensor, out: &Tensor) -> Result<()> {
    if x.elements() != out.elements() {
        return Err(kerr(
            "reshape",
            format!(
                "`{}` {:?} and `{}` {:?} differ in element count",
                x.name(),
                x.shape(),
                out.name(),
                out.shape()
            ),
        ));
    }
    // The src linear index equals the dst linear index.
    let st = strides(out.shape());
    record(
        rec,
        "reshape",
        x,
        None,
        out,
        &Spec::whole(out.shape(), &st, 0)?,
    )
}

/// Allocates the output (`shape`) and records Reshape.
pub fn reshape(rec: &mut Recorder, x: &Tensor, shape: &[usize], name: &str) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, shape)?;
    reshape_into(rec, x, &out)?;
    Ok(out)
}

/// Records Expand: numpy broadcast of `x` to `out.shape()` (broadcast dims read stride 0).
pub fn expand_into(rec: &mut Recorder, x: &Tensor, out: &Tensor) -> Result<()> {
    let (sx, so) = (x.shape(), out.shape());
    if sx.len() > so.len() {
        return Err(kerr("expand", format!("cannot expand {sx:?} to {so:?}")));
    }
    let ss = strides(sx);
    let off = so.len() - sx.len();
    let mut st = vec![0i64; so.len()];
    for (a, &d) in sx.iter().enumerate() {
        if d == so[off + a] {
            st[off + a] = ss[a];
        } else if d != 1 {
            return Err(kerr("expand", format!("cannot expand {sx:?} to {so:?}")));
        }
    }
    record(rec, "expand", x, None, out, &Spec::whole(so, &st, 0)?)
}

/// Output shape of Tile: `shape[i] * repeats[i]`.
pub fn tile_shape(shape: &[usize], repeats: &[usize]) -> Result<Vec<usize>> {
    if repeats.len() != shape.len() || repeats.contains(&0) {
        return Err(kerr(
            "tile",
            format!("repeats {repeats:?} for shape {shape:?} (one positive repeat per axis)"),
        ));
    }
    Ok(shape.iter().zip(repeats).map(|(d, r)| d * r).collect())
}

/// Records ONNX Tile: `out[i] = x[i % x.shape]` on every axis, one dispatch (coordinates wrap).
pub fn tile_into(rec: &mut Recorder, x: &Tensor, repeats: &[usize], out: &Tensor) -> Result<()> {
    let want = tile_shape(x.shape(), repeats)?;
    check_out("tile", out, &want)?;
    let mut spec = Spec::whole(&want, &strides(x.shape()), 0)?;
    let off = 6 - want.len();
    for (a, (&d, &r)) in x.shape().iter().zip(repeats).enumerate() {
        if r > 1 {
            spec.wrap[off + a] = d;
        }
    }
    record(rec, "tile", x, None, out, &spec)
}

/// Allocates the output and records Tile.
pub fn tile(rec: &mut Recorder, x: &Tensor, repeats: &[usize], name: &str) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, &tile_shape(x.shape(), repeats)?)?;
    tile_into(rec, x, repeats, &out)?;
    Ok(out)
}

/// Per-axis `(start, step, len)` of an ONNX Slice (clamped like ONNX Runtime).
fn slice_plan(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
) -> Result<Vec<(i64, i64, usize)>> {
    let r = shape.len();
    let axes = if axes.is_empty() {
        (0..starts.len()).collect()
    } else {
        normalize_axes("slice", axes, r)?
    };
    if starts.len() != ends.len()
        || axes.len() != starts.len()
        || (!steps.is_empty() && steps.len() != starts.len())
    {
        return Err(kerr(
            "slice",
            format!(
                "starts {starts:?}, ends {ends:?}, axes {axes:?}, steps {steps:?} differ in length"
            ),
        ));
    }
    let mut plan: Vec<(i64, i64, usize)> = shape.iter().map(|&d| (0, 1, d)).collect();
    for (j, &a) in axes.iter().enumerate() {
        if a >= r {
            return Err(kerr("slice", format!("axis {a} out of range for rank {r}")));
        }
        let d = shape[a] as i64;
        let step = steps.get(j).copied().unwrap_or(1);
        if step == 0 {
            return Err(kerr("slice", format!("step 0 on axis {a}")));
        }
        let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
        let (mut s, mut e) = (fix(starts[j]), fix(ends[j]));
        let len = if step > 0 {
            s = s.clamp(0, d);
            e = e.clamp(0, d);
            ((e - s).max(0) + step - 1) / step
        } else {
            s = s.clamp(0, d - 1);
            e = e.clamp(-1, d - 1);
            ((s - e).max(0) - step - 1) / -step
        };
        if len == 0 {
            return Err(kerr(
                "slice",
                format!("empty result on axis {a} (empty tensors have no storage)"),
            ));
        }
        plan[a] = (s, step, len as usize);
    }
    Ok(plan)
}

/// Output shape of an ONNX Slice (empty `axes` = `0..starts.len()`, empty `steps` = all 1).
pub fn slice_shape(
    shape: &[usize],
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
) -> Result<Vec<usize>> {
    Ok(slice_plan(shape, starts, ends, axes, steps)?
        .iter()
        .map(|p| p.2)
        .collect())
}

/// Records an ONNX Slice (negative starts/ends/steps allowed).
pub fn slice_into(
    rec: &mut Recorder,
    x: &Tensor,
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
    out: &Tensor,
) -> Result<()> {
    let plan = slice_plan(x.shape(), starts, ends, axes, steps)?;
    let want: Vec<usize> = plan.iter().map(|p| p.2).collect();
    check_out("slice", out, &want)?;
    let ss = strides(x.shape());
    let base: i64 = plan.iter().zip(&ss).map(|(p, s)| p.0 * s).sum();
    let st: Vec<i64> = plan.iter().zip(&ss).map(|(p, s)| p.1 * s).collect();
    record(rec, "slice", x, None, out, &Spec::whole(&want, &st, base)?)
}

/// Allocates the output and records Slice.
pub fn slice(
    rec: &mut Recorder,
    x: &Tensor,
    starts: &[i64],
    ends: &[i64],
    axes: &[i64],
    steps: &[i64],
    name: &str,
) -> Result<Tensor> {
    let shape = slice_shape(x.shape(), starts, ends, axes, steps)?;
    let out = alloc_like(rec, x, name, &shape)?;
    slice_into(rec, x, starts, ends, axes, steps, &out)?;
    Ok(out)
}

/// Output shape of Concat along `axis`.
pub fn concat_shape(shapes: &[&[usize]], axis: i64) -> Result<Vec<usize>> {
    let first = shapes
        .first()
        .ok_or_else(|| kerr("concat", "no inputs".into()))?;
    let a = normalize_axes("concat", &[axis], first.len())?[0];
    let mut out = first.to_vec();
    out[a] = 0;
    for s in shapes {
        let same = s.len() == first.len()
            && s.iter()
                .zip(first.iter())
                .enumerate()
                .all(|(i, (x, y))| i == a || x == y);
        if !same {
            return Err(kerr(
                "concat",
                format!("input shapes {shapes:?} differ outside axis {axis}"),
            ));
        }
        out[a] += s[a];
    }
    Ok(out)
}

/// Records Concat: whole texels, up to 8 inputs a dispatch, where [`concat_by_texels`] allows;
/// else one copy per input into its region of `out`.
pub fn concat_into(rec: &mut Recorder, inputs: &[&Tensor], axis: i64, out: &Tensor) -> Result<()> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
    let want = concat_shape(&shapes, axis)?;
    check_out("concat", out, &want)?;
    let r = want.len();
    let a = normalize_axes("concat", &[axis], r)?[0];
    if let Some(texel_axis) = texel_axis(inputs, a, out) {
        let extent = |t: &Tensor| {
            let l = t.layout();
            match texel_axis {
                TexelAxis::Channels => l.c4,
                TexelAxis::Rows => l.h,
                TexelAxis::Columns => l.w,
            }
        };
        let mut lo = 0u32;
        for chunk in inputs.chunks(CONCAT_TEXELS_INPUTS) {
            let first = lo;
            let mut words = vec![0u32; 4 * CONCAT_TEXELS_INPUTS];
            for (j, t) in chunk.iter().enumerate() {
                let l = t.layout();
                words[4 * j..4 * j + 4].copy_from_slice(&[lo, extent(t), l.pw, l.ph]);
                lo += extent(t);
            }
            let params = params_buffer(rec, "concat params", &words)?;
            let span = lo - first;
            let pc = PushConstants::new()
                .tensor(out.desc())
                .u32(chunk.len() as u32)
                .u32(span)
                .u32(texel_axis as u32);
            let l = out.layout();
            let texels = l.n as u64 * l.c4 as u64 * l.h as u64 * l.w as u64 / extent(out) as u64
                * span as u64;
            let mut args: Vec<Arg> = (0..CONCAT_TEXELS_INPUTS)
                .map(|j| Arg::input(chunk.get(j).unwrap_or(&chunk[0])))
                .collect();
            args.push(Arg::output(out));
            args.push(Arg::buffer(&params, Access::Read));
            let groups = dispatch_1d(rec.device(), texels, 64);
            launch(rec, &CONCAT_TEXELS, out.precision(), &args, &pc, groups)?;
        }
        return Ok(());
    }
    let pos = 6 - r + a;
    let mut offset = 0;
    for t in inputs {
        let mut spec = Spec::whole(t.shape(), &strides(t.shape()), 0)?;
        spec.lo[pos] = offset;
        offset += t.shape()[a];
        record(rec, "concat", t, None, out, &spec)?;
    }
    Ok(())
}

/// The texel axis a Concat runs along in `concat_texels.comp` (its push constant `axis`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TexelAxis {
    Channels = 0,
    Rows = 1,
    Columns = 2,
}

/// Along which texel axis a Concat along `axis` copies whole texels, if it can: all inputs in the
/// output's storage kind and precision, and either along the layout's rows or columns (the last
/// two dims of any rank: a texel's lanes hold the same channels in every input) or along the
/// channels of rank-4 tensors with every input but the last a multiple of 4 channels (so each
/// starts on a texel of the output).
fn texel_axis(inputs: &[&Tensor], axis: usize, out: &Tensor) -> Option<TexelAxis> {
    let same_storage = inputs
        .iter()
        .all(|t| t.storage_kind() == out.storage_kind() && t.precision() == out.precision());
    let r = out.shape().len();
    if !same_storage || r == 0 {
        return None;
    }
    match 6 - r + axis {
        5 => Some(TexelAxis::Columns),
        4 => Some(TexelAxis::Rows),
        3 if r == 4
            && inputs
                .iter()
                .rev()
                .skip(1)
                .all(|t| t.shape()[1].is_multiple_of(4)) =>
        {
            Some(TexelAxis::Channels)
        }
        _ => None,
    }
}

/// Whether a Concat along `axis` copies whole texels (`concat_texels.comp`, see `texel_axis`).
pub fn concat_by_texels(inputs: &[&Tensor], axis: usize, out: &Tensor) -> bool {
    texel_axis(inputs, axis, out).is_some()
}

/// Allocates the output and records Concat.
pub fn concat(rec: &mut Recorder, inputs: &[&Tensor], axis: i64, name: &str) -> Result<Tensor> {
    let shapes: Vec<&[usize]> = inputs.iter().map(|t| t.shape()).collect();
    let first = inputs
        .first()
        .ok_or_else(|| kerr("concat", "no inputs".into()))?;
    let out = alloc_like(rec, first, name, &concat_shape(&shapes, axis)?)?;
    concat_into(rec, inputs, axis, &out)?;
    Ok(out)
}

/// Records Split along `axis`: output `i` takes the next `outs[i].shape()[axis]` entries.
pub fn split_into(rec: &mut Recorder, x: &Tensor, axis: i64, outs: &[&Tensor]) -> Result<()> {
    let r = x.shape().len();
    let a = normalize_axes("split", &[axis], r)?[0];
    let total: usize = outs
        .iter()
        .map(|o| o.shape().get(a).copied().unwrap_or(0))
        .sum();
    if total != x.shape()[a] {
        return Err(kerr(
            "split",
            format!(
                "output sizes along axis {axis} sum to {total}, input has {}",
                x.shape()[a]
            ),
        ));
    }
    let ss = strides(x.shape());
    let mut start = 0;
    for o in outs {
        let mut want = x.shape().to_vec();
        want[a] = o.shape()[a];
        check_out("split", o, &want)?;
        record(
            rec,
            "split",
            x,
            None,
            o,
            &Spec::whole(&want, &ss, start as i64 * ss[a])?,
        )?;
        start += want[a];
    }
    Ok(())
}

/// Allocates outputs of the given `sizes` along `axis` and records Split.
pub fn split(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    sizes: &[usize],
    name: &str,
) -> Result<Vec<Tensor>> {
    let a = normalize_axes("split", &[axis], x.shape().len())?[0];
    let outs = sizes
        .iter()
        .enumerate()
        .map(|(i, &s)| {
            let mut shape = x.shape().to_vec();
            shape[a] = s;
            alloc_like(rec, x, &format!("{name}_{i}"), &shape)
        })
        .collect::<Result<Vec<_>>>()?;
    let refs: Vec<&Tensor> = outs.iter().collect();
    split_into(rec, x, axis, &refs)?;
    Ok(outs)
}

/// Output shape of Gather: `data[:axis] + indices + data[axis+1:]`.
pub fn gather_shape(data: &[usize], indices: &[usize], axis: i64) -> Result<Vec<usize>> {
    let a = normalize_axes("gather", &[axis], data.len())?[0];
    let mut s = data[..a].to_vec();
    s.extend_from_slice(indices);
    s.extend_from_slice(&data[a + 1..]);
    if s.len() > MAX_RANK {
        return Err(kerr(
            "gather",
            format!("output rank {} exceeds {MAX_RANK}", s.len()),
        ));
    }
    Ok(s)
}

/// Records ONNX Gather along `axis`; `indices` holds integer values as floats (negative wrap;
/// out-of-range indices are clamped, not an error, because they are only known on the GPU).
pub fn gather_into(
    rec: &mut Recorder,
    data: &Tensor,
    indices: &Tensor,
    axis: i64,
    out: &Tensor,
) -> Result<()> {
    let want = gather_shape(data.shape(), indices.shape(), axis)?;
    check_out("gather", out, &want)?;
    let a = normalize_axes("gather", &[axis], data.shape().len())?[0];
    let q = indices.shape().len();
    let ss = strides(data.shape());
    let mut st = Vec::with_capacity(want.len());
    st.extend_from_slice(&ss[..a]);
    st.extend(std::iter::repeat_n(0, q));
    st.extend_from_slice(&ss[a + 1..]);
    let mut spec = Spec::whole(&want, &st, 0)?;
    spec.gather = Some((6 - want.len() + a, q, ss[a], data.shape()[a] as i64));
    record(rec, "gather", data, Some(indices), out, &spec)
}

/// Allocates the output and records Gather.
pub fn gather(
    rec: &mut Recorder,
    data: &Tensor,
    indices: &Tensor,
    axis: i64,
    name: &str,
) -> Result<Tensor> {
    let shape = gather_shape(data.shape(), indices.shape(), axis)?;
    let out = alloc_like(rec, data, name, &shape)?;
    gather_into(rec, data, indices, axis, &out)?;
    Ok(out)
}

/// Records ONNX GatherElements along `axis`: `out[i] = data[i with i[axis] = indices[i]]`, where
/// `indices` and `out` share a shape of `data`'s rank. Indices wrap and clamp as in [`gather_into`].
pub fn gather_elements_into(
    rec: &mut Recorder,
    data: &Tensor,
    indices: &Tensor,
    axis: i64,
    out: &Tensor,
) -> Result<()> {
    let r = data.shape().len();
    let a = normalize_axes("gather_elements", &[axis], r)?[0];
    if indices.shape().len() != r {
        return Err(kerr(
            "gather_elements",
            format!(
                "indices {:?} and data {:?} differ in rank",
                indices.shape(),
                data.shape()
            ),
        ));
    }
    check_out("gather_elements", out, indices.shape())?;
    let mut st = strides(data.shape());
    let axis_stride = std::mem::replace(&mut st[a], 0);
    let mut spec = Spec::whole(out.shape(), &st, 0)?;
    spec.gather = Some((6 - r + a, 1, axis_stride, data.shape()[a] as i64));
    spec.elements = true;
    record(rec, "gather_elements", data, Some(indices), out, &spec)
}

/// Target of a Cast (all values stay floats; see the module docs for the int range).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CastTo {
    /// Any float type: a plain copy.
    Float,
    /// Any integer type: truncation toward zero (like ONNX Runtime's float -> int).
    Int,
    /// Bool: `x != 0` as 0.0 / 1.0.
    Bool,
}

/// Records a Cast of `x` into `out` (same shape).
pub fn cast_into(rec: &mut Recorder, x: &Tensor, to: CastTo, out: &Tensor) -> Result<()> {
    check_out("cast", out, x.shape())?;
    let mut spec = Spec::whole(x.shape(), &strides(x.shape()), 0)?;
    spec.post = match to {
        CastTo::Float => 0,
        CastTo::Int => 1,
        CastTo::Bool => 2,
    };
    record(rec, "cast", x, None, out, &spec)
}

/// Allocates the output and records a Cast.
pub fn cast(rec: &mut Recorder, x: &Tensor, to: CastTo, name: &str) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, x.shape())?;
    cast_into(rec, x, to, &out)?;
    Ok(out)
}
