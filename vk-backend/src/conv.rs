//! Conversions between texstream's own enums and Vulkan's or gpu-allocator's, in one place (as
//! wgpu-hal's `conv.rs`): tensor precision → image format, binding kinds → descriptor types,
//! staging kinds → memory locations and buffer usage, and the Vulkan enums and flags that
//! `texstream devices` prints → names.

use std::ffi::c_char;

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::layout::Precision;
use crate::types::{BindingKind, StagingDirection, StagingMemory, StorageKind};

/// The RGBA image format of tensors and atlas pages at `precision`.
pub(crate) fn tensor_format(precision: Precision) -> vk::Format {
    match precision {
        Precision::F16 => vk::Format::R16G16B16A16_SFLOAT,
        Precision::F32 => vk::Format::R32G32B32A32_SFLOAT,
    }
}

/// Bytes per texel of a [`tensor_format`] image (fp16: 8, fp32: 16).
pub(crate) fn texel_bytes(format: vk::Format) -> u64 {
    if format == vk::Format::R16G16B16A16_SFLOAT {
        8
    } else {
        16
    }
}

/// The descriptor type of a kernel binding in the pipeline variant with `storage` (activation
/// tensors become storage buffers in the `Buffer` variant).
pub(crate) fn descriptor_type(kind: BindingKind, storage: StorageKind) -> vk::DescriptorType {
    match (kind, storage) {
        (
            BindingKind::StorageImage | BindingKind::StorageImageF32 | BindingKind::StorageImageF16,
            StorageKind::Image,
        ) => vk::DescriptorType::STORAGE_IMAGE,
        (
            BindingKind::StorageImage | BindingKind::StorageImageF32 | BindingKind::StorageImageF16,
            StorageKind::Buffer,
        ) => vk::DescriptorType::STORAGE_BUFFER,
        (BindingKind::StorageBuffer, _) => vk::DescriptorType::STORAGE_BUFFER,
        (BindingKind::UniformBuffer, _) => vk::DescriptorType::UNIFORM_BUFFER,
    }
}

/// Usage and memory of a staging buffer for `direction`: uploads in write-combined memory
/// (`CpuToGpu`), readback and two-way buffers in host-cached memory (`GpuToCpu`).
pub(crate) fn staging_buffer(
    direction: StagingDirection,
) -> (vk::BufferUsageFlags, MemoryLocation) {
    match direction {
        StagingDirection::Upload => (vk::BufferUsageFlags::TRANSFER_SRC, MemoryLocation::CpuToGpu),
        // Storage too: outputs are packed into it by a kernel (`kernels::readback_into`).
        StagingDirection::Download => (
            vk::BufferUsageFlags::TRANSFER_DST | vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::GpuToCpu,
        ),
        StagingDirection::Both => (
            vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST
                | vk::BufferUsageFlags::STORAGE_BUFFER,
            MemoryLocation::GpuToCpu,
        ),
    }
}

/// Usage and memory of the stream engine's staging-ring buffers. System: host-cached system
/// memory, so the ring does not take capped VRAM on a discrete GPU. DeviceLocal: gpu-allocator's
/// `CpuToGpu` prefers BAR memory; the counted allocator then charges it to the cap.
pub(crate) fn staging_ring_buffer(memory: StagingMemory) -> (vk::BufferUsageFlags, MemoryLocation) {
    let location = match memory {
        StagingMemory::System => MemoryLocation::GpuToCpu,
        StagingMemory::DeviceLocal => MemoryLocation::CpuToGpu,
    };
    (vk::BufferUsageFlags::TRANSFER_SRC, location)
}

/// Preference order of device types when no device is named: discrete > integrated > virtual >
/// CPU > other (lower is better).
pub(crate) fn device_type_rank(t: vk::PhysicalDeviceType) -> u32 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

pub(crate) fn device_type_name(t: vk::PhysicalDeviceType) -> &'static str {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => "discrete",
        vk::PhysicalDeviceType::INTEGRATED_GPU => "integrated",
        vk::PhysicalDeviceType::VIRTUAL_GPU => "virtual",
        vk::PhysicalDeviceType::CPU => "cpu",
        _ => "other",
    }
}

/// A NUL-terminated name field of a Vulkan properties struct as a `String`.
pub(crate) fn fixed_cstr(raw: &[c_char]) -> String {
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// `major.minor.patch` of a Vulkan version number.
pub(crate) fn version(v: u32) -> String {
    format!(
        "{}.{}.{}",
        vk::api_version_major(v),
        vk::api_version_minor(v),
        vk::api_version_patch(v)
    )
}

/// Driver version per vendor encoding (NVIDIA 10.8.8.6 bits, Intel on Windows 18.14 bits).
pub(crate) fn driver_version(vendor: u32, v: u32) -> String {
    match vendor {
        0x10DE => format!(
            "{}.{}.{}.{}",
            v >> 22,
            (v >> 14) & 0xFF,
            (v >> 6) & 0xFF,
            v & 0x3F
        ),
        0x8086 if cfg!(windows) => format!("{}.{}", v >> 14, v & 0x3FFF),
        _ => version(v),
    }
}

/// The names of the bits of `flags` that appear in `names`.
fn flag_names<F: Copy + PartialEq + std::ops::BitAnd<Output = F>>(
    flags: F,
    names: &[(F, &str)],
) -> Vec<String> {
    names
        .iter()
        .filter(|(bit, _)| flags & *bit == *bit)
        .map(|(_, n)| n.to_string())
        .collect()
}

pub(crate) fn queue_flags(f: vk::QueueFlags) -> Vec<String> {
    flag_names(
        f,
        &[
            (vk::QueueFlags::GRAPHICS, "GRAPHICS"),
            (vk::QueueFlags::COMPUTE, "COMPUTE"),
            (vk::QueueFlags::TRANSFER, "TRANSFER"),
            (vk::QueueFlags::SPARSE_BINDING, "SPARSE_BINDING"),
            (vk::QueueFlags::PROTECTED, "PROTECTED"),
            (vk::QueueFlags::VIDEO_DECODE_KHR, "VIDEO_DECODE"),
            (vk::QueueFlags::VIDEO_ENCODE_KHR, "VIDEO_ENCODE"),
            (vk::QueueFlags::OPTICAL_FLOW_NV, "OPTICAL_FLOW"),
        ],
    )
}

pub(crate) fn heap_flags(f: vk::MemoryHeapFlags) -> Vec<String> {
    flag_names(
        f,
        &[
            (vk::MemoryHeapFlags::DEVICE_LOCAL, "DEVICE_LOCAL"),
            (vk::MemoryHeapFlags::MULTI_INSTANCE, "MULTI_INSTANCE"),
        ],
    )
}

pub(crate) fn memory_flags(f: vk::MemoryPropertyFlags) -> Vec<String> {
    flag_names(
        f,
        &[
            (vk::MemoryPropertyFlags::DEVICE_LOCAL, "DEVICE_LOCAL"),
            (vk::MemoryPropertyFlags::HOST_VISIBLE, "HOST_VISIBLE"),
            (vk::MemoryPropertyFlags::HOST_COHERENT, "HOST_COHERENT"),
            (vk::MemoryPropertyFlags::HOST_CACHED, "HOST_CACHED"),
            (
                vk::MemoryPropertyFlags::LAZILY_ALLOCATED,
                "LAZILY_ALLOCATED",
            ),
            (vk::MemoryPropertyFlags::PROTECTED, "PROTECTED"),
            (
                vk::MemoryPropertyFlags::DEVICE_COHERENT_AMD,
                "DEVICE_COHERENT_AMD",
            ),
            (
                vk::MemoryPropertyFlags::DEVICE_UNCACHED_AMD,
                "DEVICE_UNCACHED_AMD",
            ),
            (vk::MemoryPropertyFlags::RDMA_CAPABLE_NV, "RDMA_CAPABLE_NV"),
        ],
    )
}

/// A cooperative-matrix component type as `f16`, `i8`, ...
pub(crate) fn component(t: vk::ComponentTypeKHR) -> String {
    match t {
        vk::ComponentTypeKHR::FLOAT16 => "f16".into(),
        vk::ComponentTypeKHR::FLOAT32 => "f32".into(),
        vk::ComponentTypeKHR::FLOAT64 => "f64".into(),
        vk::ComponentTypeKHR::SINT8 => "i8".into(),
        vk::ComponentTypeKHR::UINT8 => "u8".into(),
        vk::ComponentTypeKHR::SINT32 => "i32".into(),
        vk::ComponentTypeKHR::UINT32 => "u32".into(),
        vk::ComponentTypeKHR::SINT16 => "i16".into(),
        vk::ComponentTypeKHR::UINT16 => "u16".into(),
        vk::ComponentTypeKHR::SINT64 => "i64".into(),
        vk::ComponentTypeKHR::UINT64 => "u64".into(),
        other => format!("type{}", other.as_raw()),
    }
}

pub(crate) fn scope(s: vk::ScopeKHR) -> &'static str {
    match s {
        vk::ScopeKHR::SUBGROUP => "subgroup",
        vk::ScopeKHR::WORKGROUP => "workgroup",
        vk::ScopeKHR::DEVICE => "device",
        vk::ScopeKHR::QUEUE_FAMILY => "queue-family",
        _ => "other",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texel_bytes_match_the_precision() {
        for p in [Precision::F16, Precision::F32] {
            assert_eq!(texel_bytes(tensor_format(p)), p.bytes_per_texel() as u64);
        }
    }

    #[test]
    fn flag_names_list_only_set_bits_in_order() {
        let f = vk::QueueFlags::TRANSFER | vk::QueueFlags::COMPUTE;
        assert_eq!(queue_flags(f), ["COMPUTE", "TRANSFER"]);
        assert!(heap_flags(vk::MemoryHeapFlags::empty()).is_empty());
    }

    #[test]
    fn versions_decode_per_vendor() {
        assert_eq!(version(vk::make_api_version(0, 1, 3, 239)), "1.3.239");
        // NVIDIA 535.104.5.0.
        let nv = (535 << 22) | (104 << 14) | (5 << 6);
        assert_eq!(driver_version(0x10DE, nv), "535.104.5.0");
    }
}
