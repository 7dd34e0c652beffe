//! The backend's own kinds of things, in its own words and free of Vulkan: how a kernel binds a
//! resource, where tensors live, which way a staging buffer carries data, and where the staging
//! ring lives. They sit below `conv.rs`, which maps them to Vulkan and gpu-allocator values, and
//! below the modules that use both.

/// Kind of one descriptor binding in set 0 of a kernel (binding numbers are the slice indices).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BindingKind {
    /// An activation tensor image (`image2DArray` with declared format).
    StorageImage,
    /// An fp32 tensor (`rgba32f`) whatever the pipeline's precision: results kept at full
    /// precision between two kernels of one op (attention's partial sums over key spans).
    StorageImageF32,
    /// An fp16 tensor (`rgba16f`) under an fp32 pipeline: a decoder's key/value cache kept at
    /// half the bytes (the `_kv16` kernels, `TENSOR_*_CACHE` in `tensor.glsl`).
    StorageImageF16,
    /// A storage buffer (`buffer` block).
    StorageBuffer,
    /// A uniform buffer (`uniform` block).
    UniformBuffer,
}

/// Where a kernel's activation tensors live. Every shader is built in both variants from the same
/// source (`TENSOR_STORAGE_BUFFER` in `tensor.glsl`); weights always come from the atlas image.
/// `Image` is the engine's path; `Buffer` (same C4 texel order, linear texel index, no fold)
/// exists for the texture-vs-buffer benchmark and for buffer-fallback tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum StorageKind {
    #[default]
    Image,
    Buffer,
}

/// What a staging buffer carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StagingDirection {
    /// Host to device (write-combined memory where the driver has it).
    Upload,
    /// Device to host (host-cached memory where the driver has it).
    Download,
    /// Both, one transfer at a time: for devices whose host-visible memory is device memory
    /// anyway, where one buffer costs the cap less than two.
    Both,
}

/// Which memory the staging ring lives in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StagingMemory {
    /// Host-cached system memory (gpu-allocator `GpuToCpu`): not device-local on discrete GPUs,
    /// so it does not use capped VRAM. The default.
    #[default]
    System,
    /// Host-visible memory preferring device-local (`CpuToGpu`: BAR / ReBAR on NVIDIA). Counted
    /// against the cap as `Staging` when it is device-local.
    DeviceLocal,
}
