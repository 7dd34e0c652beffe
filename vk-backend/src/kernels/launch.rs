//! What every kernel wrapper shares: the binding lists of kernels that bind only tensors, the
//! kernel error, ONNX axis normalization, an output allocated in the input's storage kind, a
//! buffer of per-dispatch parameters, and the last step of every wrapper: the pipeline at the
//! output's precision, dispatched (for most kernels, one invocation per output texel).

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::error::{Result, VkError};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::Precision;
use crate::memory::MemoryCategory;
use crate::pipeline::{BindingKind, KernelDesc, Specialization};
use crate::recorder::{Arg, Recorder};
use crate::resource::Buffer;
use crate::tensor::Tensor;

/// Two tensors (input, output).
pub(crate) const IMAGES_2: &[BindingKind] = &[BindingKind::StorageImage; 2];
/// Three tensors.
pub(crate) const IMAGES_3: &[BindingKind] = &[BindingKind::StorageImage; 3];
/// Four tensors.
pub(crate) const IMAGES_4: &[BindingKind] = &[BindingKind::StorageImage; 4];

/// A kernel's error: its name and why.
pub(crate) fn kerr(kernel: &str, reason: String) -> VkError {
    VkError::Kernel {
        kernel: kernel.to_string(),
        reason,
    }
}

/// Normalizes ONNX axes (negative counts from the end) of a rank-`rank` tensor; errors name `what`.
pub(crate) fn normalize_axes(what: &str, axes: &[i64], rank: usize) -> Result<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let r = rank as i64;
        let n = if a < 0 { a + r } else { a };
        if n < 0 || n >= r.max(1) {
            return Err(kerr(
                what,
                format!("axis {a} is out of range for rank {rank}"),
            ));
        }
        if out.contains(&(n as usize)) {
            return Err(kerr(what, format!("axis {a} repeated")));
        }
        out.push(n as usize);
    }
    Ok(out)
}

/// Allocates an output in the same storage kind (image or buffer) as `like`, so the allocating
/// wrappers work for buffer tensors too (one dispatch binds one kind).
pub(crate) fn alloc_like(
    rec: &Recorder,
    like: &Tensor,
    name: &str,
    shape: &[usize],
) -> Result<Tensor> {
    Tensor::with_storage(
        rec.device(),
        name,
        shape,
        like.precision(),
        MemoryCategory::Activations,
        like.storage_kind(),
    )
}

/// A host-visible storage buffer holding `words`: per-dispatch parameters too many for push
/// constants (the recorder keeps it alive until the dispatch has run).
pub(crate) fn params_buffer(rec: &Recorder, name: &str, words: &[u32]) -> Result<Buffer> {
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let params = Buffer::new(
        rec.device(),
        name,
        bytes.len() as u64,
        vk::BufferUsageFlags::STORAGE_BUFFER,
        MemoryLocation::CpuToGpu,
        MemoryCategory::Scratch,
    )?;
    params.write(0, &bytes)?;
    Ok(params)
}

/// Records `desc` (its pipeline at `precision`) over `args` with push constants `pc` and
/// `groups` workgroups.
pub(crate) fn launch(
    rec: &mut Recorder,
    desc: &KernelDesc,
    precision: Precision,
    args: &[Arg<'_>],
    pc: &PushConstants,
    groups: [u32; 3],
) -> Result<()> {
    launch_unfolded(rec, desc, precision, args, pc, groups, false)
}

/// [`launch`] on the pipeline specialized for unfolded operands where `unfolded` says every
/// tensor the kernel reads with `LOAD_AT` is unfolded ([`unfolded`]).
pub(crate) fn launch_unfolded(
    rec: &mut Recorder,
    desc: &KernelDesc,
    precision: Precision,
    args: &[Arg<'_>],
    pc: &PushConstants,
    groups: [u32; 3],
    unfolded: bool,
) -> Result<()> {
    let spec = Specialization {
        unfolded,
        ..Specialization::default()
    };
    launch_specialized(rec, desc, precision, args, pc, groups, spec)
}

/// [`launch`] on the pipeline built with the specialization constants `spec`.
pub(crate) fn launch_specialized(
    rec: &mut Recorder,
    desc: &KernelDesc,
    precision: Precision,
    args: &[Arg<'_>],
    pc: &PushConstants,
    groups: [u32; 3],
    spec: Specialization,
) -> Result<()> {
    let pipeline = rec.device().pipeline_with(desc, precision, spec)?;
    rec.dispatch(&pipeline, args, &pc.bytes(), groups)
}

/// Whether every tensor of `tensors` is unfolded: its image's width and height are its logical
/// ones, so `LOAD_AT` may address it without the fold (the shader's own test).
pub(crate) fn unfolded(tensors: &[&Tensor]) -> bool {
    tensors.iter().all(|t| {
        let l = t.layout();
        l.pw == l.w && l.ph == l.h
    })
}

/// [`launch`] at `out`'s precision with one invocation per texel of `out`, 64 per workgroup.
pub(crate) fn launch_per_texel(
    rec: &mut Recorder,
    desc: &KernelDesc,
    out: &Tensor,
    args: &[Arg<'_>],
    pc: &PushConstants,
) -> Result<()> {
    let groups = dispatch_1d(rec.device(), out.layout().texels(), 64);
    launch(rec, desc, out.precision(), args, pc, groups)
}
