//! Error type of the Vulkan backend.

use ash::vk;

/// Everything that can go wrong in the Vulkan backend.
#[derive(Debug, thiserror::Error)]
pub enum VkError {
    #[error(
        "could not load the Vulkan loader (libvulkan.so.1): {0}; install it with \
         `sudo apt-get install libvulkan1 mesa-vulkan-drivers`"
    )]
    NoLoader(String),
    #[error("no Vulkan device found{0}")]
    NoDevice(String),
    #[error("device `{device}` lacks required feature: {feature}")]
    MissingFeature { device: String, feature: String },
    #[error(
        "validation was requested but the layer VK_LAYER_KHRONOS_validation is not installed; \
         install it with `sudo apt-get install vulkan-validationlayers`"
    )]
    NoValidationLayer,
    #[error("Vulkan call {call} failed: {result}")]
    Vk {
        call: &'static str,
        result: vk::Result,
    },
    #[error("device memory allocation `{name}` failed: {source}")]
    Alloc {
        name: String,
        #[source]
        source: gpu_allocator::AllocationError,
    },
    #[error(
        "memory cap exceeded: allocating {requested} bytes for `{name}` ({category:?}) would bring \
         device usage to {would_be} bytes, above the cap of {cap} bytes"
    )]
    CapExceeded {
        name: String,
        category: crate::memory::MemoryCategory,
        requested: u64,
        would_be: u64,
        cap: u64,
    },
    #[error("invalid tensor shape {shape:?}: {reason}")]
    BadShape { shape: Vec<usize>, reason: String },
    #[error("data length {got} does not match tensor `{name}` with {expected} elements")]
    DataLength {
        name: String,
        expected: usize,
        got: usize,
    },
    #[error("kernel `{kernel}`: {reason}")]
    Kernel { kernel: String, reason: String },
    #[error("no embedded SPIR-V for shader `{0}`")]
    NoShader(String),
    #[error("weight atlas: {0}")]
    Atlas(String),
    #[error("pipeline cache file {path}: {source}")]
    CacheFile {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("reading page {page} of model {model} (`{name}`): {source}")]
    PageRead {
        model: u32,
        name: String,
        page: u32,
        #[source]
        source: std::io::Error,
    },
    #[error("weight streaming: {0}")]
    Stream(String),
    #[error("{0}")]
    Other(String),
}

/// Result alias for the backend.
pub type Result<T> = std::result::Result<T, VkError>;

/// Adds the name of the failing Vulkan call to a `vk::Result`.
pub(crate) trait VkResultExt<T> {
    fn vk(self, call: &'static str) -> Result<T>;
}

impl<T> VkResultExt<T> for std::result::Result<T, vk::Result> {
    fn vk(self, call: &'static str) -> Result<T> {
        self.map_err(|result| VkError::Vk { call, result })
    }
}
