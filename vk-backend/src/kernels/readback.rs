//! Readback: a tensor's values into a host-visible buffer and back into f32 values on the
//! host. By default the device packs the values densely first (`pack_dense.comp`, row-major,
//! at the activations' precision); a one-channel tensor (every `[1, T, D]` of a transformer)
//! holds one value in each texel, so a copy of its texels moves four times the bytes. Where
//! the device's options ask for it ([`crate::DeviceOptions::dense_readback`] `Some(false)`)
//! the texels are copied as they are and unpacked on the host.

use crate::device::Device;
use crate::error::Result;
use crate::kernels::launch::{kerr, launch};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::{unpack_dense, Precision};
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Access, Arg, Recorder};
use crate::resource::Buffer;
use crate::tensor::Tensor;

const PACK_DENSE: KernelDesc = KernelDesc {
    name: "pack_dense",
    bindings: &[BindingKind::StorageImage, BindingKind::StorageBuffer],
    push_constant_bytes: 40,
    uses_weights: false,
};

/// Whether `device` reads tensors back as dense values (the default) or as their texels.
fn dense_on(device: &Device) -> bool {
    device.features().dense_readback != Some(false)
}

fn dense(t: &Tensor) -> bool {
    dense_on(t.device())
}

/// Bytes of `t` as [`readback_into`] writes them: its values at its precision (whole 32-bit
/// words, at least one, so that an empty tensor's staging is no empty buffer), or its physical
/// texels.
pub fn readback_bytes(t: &Tensor) -> u64 {
    readback_size(
        t.device(),
        t.elements() as u64,
        t.physical_bytes(),
        t.precision(),
    )
}

/// [`readback_bytes`] of a tensor not made yet: `elements` values, `physical_bytes` of texels
/// at `precision` on `device` (sizing the staging before the tensors exist).
pub fn readback_size(
    device: &Device,
    elements: u64,
    physical_bytes: u64,
    precision: Precision,
) -> u64 {
    if dense_on(device) {
        let value_bytes = precision.bytes_per_texel() as u64 / 4;
        (elements * value_bytes).div_ceil(4).max(1) * 4
    } else {
        physical_bytes
    }
}

/// Records the copy of `t` into `dst` at `offset` (a multiple of 4; [`readback_bytes`] from
/// there must fit), to read with [`read_back`] once it has run.
pub fn readback_into(rec: &mut Recorder, t: &Tensor, dst: &Buffer, offset: u64) -> Result<()> {
    if !dense(t) {
        return rec.copy_tensor_to_buffer(t, dst, offset);
    }
    let end = offset + readback_bytes(t);
    if !offset.is_multiple_of(4) || end > dst.size() {
        return Err(kerr(
            "pack_dense",
            format!(
                "`{}` needs bytes {offset}..{end} of `{}` ({} bytes, offsets a multiple of 4)",
                t.name(),
                dst.name(),
                dst.size()
            ),
        ));
    }
    let (Ok(first_word), Ok(elements)) = (u32::try_from(offset / 4), u32::try_from(t.elements()))
    else {
        return Err(kerr(
            "pack_dense",
            format!("`{}` is too large for 32-bit indexing", t.name()),
        ));
    };
    let per_word = if t.precision() == Precision::F16 {
        2
    } else {
        1
    };
    let pc = PushConstants::new()
        .tensor(t.desc())
        .u32(first_word)
        .u32(elements);
    let groups = dispatch_1d(rec.device(), u64::from(elements).div_ceil(per_word), 64);
    launch(
        rec,
        &PACK_DENSE,
        t.precision(),
        &[Arg::input(t), Arg::buffer(dst, Access::Write)],
        &pc,
        groups,
    )
}

/// `t`'s values (row-major f32) from the bytes [`readback_into`] wrote for it.
pub fn read_back(t: &Tensor, bytes: &[u8]) -> Vec<f32> {
    if dense(t) {
        unpack_dense(bytes, t.precision(), t.elements())
    } else {
        t.unpack_bytes(bytes)
    }
}
