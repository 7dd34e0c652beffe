//! Vulkan backend: device, 2.5D texture tensors, paged weight atlas, staging, transfer and compute kernels.
//!
//! Entry points: [`Device::new`] (with [`DeviceOptions`]; [`DeviceOptions::from_env`] at the
//! CLI and in tests), [`Tensor`] (C4-packed 2D-array images), [`WeightAtlas`] (paged weights read
//! through `fetch_weight`), [`Recorder`] (record many dispatches/copies, submit once with
//! timeline-semaphore waits/signals), [`kernels`], and the pure-CPU packing functions in
//! [`layout`]. How to add a kernel: `vk-backend/KERNELS.md`.

pub mod adapter;
pub mod atlas;
pub mod bench;
pub mod bench_commands;
mod bench_conv;
mod conv;
pub mod device;
pub mod error;
mod immediate;
pub mod info;
mod instance;
pub mod kernels;
pub mod layout;
pub mod memory;
pub mod options;
pub mod pipeline;
pub mod placement;
pub mod recorder;
mod recycle;
pub mod resource;
pub mod shaders;
pub mod stream;
pub mod sync;
pub mod tensor;
pub mod testing;
pub mod timestamps;
mod types;

pub use adapter::{enumerate_adapters, select_adapter, AdapterInfo, DeviceFeatures, ImageLimits};
pub use atlas::{AtlasConfig, AtlasNeeds, StackLimits, WeightAtlas, COMPENSATED, UNMAPPED};
pub use device::{Device, QueueKind};
pub use error::{Result, VkError};
pub use layout::{FoldLayout, Precision};
pub use memory::{HeapBudget, MemoryCategory, MemoryStats};
pub use options::DeviceOptions;
pub use pipeline::{BindingKind, KernelDesc, Pipeline, Specialization, StorageKind};
pub use recorder::{Access, Arg, CommandCache, RecordedCommands, Recorder, Replay, Submission};
pub use resource::{
    Buffer, Image, MemoryNeeds, SharedMemory, SharedMemoryLayout, StagingDirection,
};
pub use stream::{
    HostTime, LoadTicket, PageSource, StagingMemory, StreamConfig, StreamEngine, StreamEvent,
    StreamStats,
};
pub use sync::{SemaphoreSignal, SemaphoreWait, TimelineSemaphore};
pub use tensor::{Tensor, TensorDesc, TensorStorage};
pub use timestamps::TimestampQueries;

/// Re-export so dependents name Vulkan types without their own ash dependency.
pub use ash::vk;
/// Re-export of gpu-allocator's memory locations for `Buffer::new`.
pub use gpu_allocator::MemoryLocation;
