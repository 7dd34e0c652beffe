//! Counted device-memory allocator: every image and buffer the engine allocates goes through here.
//!
//! Counts current and peak bytes, per category, and enforces an optional hard cap *before* any
//! Vulkan memory is allocated. gpu-allocator sub-allocates from larger blocks; the cap applies to
//! the bytes of the allocations themselves (the block slack is reported as `reserved_bytes`).

use std::sync::Mutex;

use ash::vk;
use gpu_allocator::vulkan::{Allocation, AllocationCreateDesc, AllocationScheme, Allocator};
use gpu_allocator::MemoryLocation;

use crate::error::{Result, VkError};

/// What an allocation is for; used for per-category accounting.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MemoryCategory {
    Weights,
    Activations,
    Staging,
    Scratch,
}

impl MemoryCategory {
    pub const ALL: [MemoryCategory; 4] = [
        MemoryCategory::Weights,
        MemoryCategory::Activations,
        MemoryCategory::Staging,
        MemoryCategory::Scratch,
    ];

    fn index(self) -> usize {
        match self {
            MemoryCategory::Weights => 0,
            MemoryCategory::Activations => 1,
            MemoryCategory::Staging => 2,
            MemoryCategory::Scratch => 3,
        }
    }
}

/// A snapshot of the memory counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryStats {
    /// Device-local bytes currently allocated (what the cap applies to).
    pub current_bytes: u64,
    /// Highest `current_bytes` seen.
    pub peak_bytes: u64,
    /// Device-local bytes per category, indexed like `MemoryCategory::ALL`.
    pub category_bytes: [u64; 4],
    /// Peak per category.
    pub category_peak_bytes: [u64; 4],
    /// Host-only (not device-local) bytes currently allocated, e.g. staging in system memory.
    pub host_bytes: u64,
    /// Number of live allocations.
    pub live_allocations: u64,
    /// Tensors that had to fall back to storage buffers because no image layout fits.
    pub fallback_tensors: u64,
    /// Bytes held by those fallback tensors.
    pub fallback_bytes: u64,
    /// The hard cap, if any.
    pub cap: Option<u64>,
}

impl MemoryStats {
    pub fn category(&self, c: MemoryCategory) -> u64 {
        self.category_bytes[c.index()]
    }
    pub fn category_peak(&self, c: MemoryCategory) -> u64 {
        self.category_peak_bytes[c.index()]
    }
}

/// Heap budget reading from `VK_EXT_memory_budget`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeapBudget {
    pub heap_index: u32,
    pub heap_size: u64,
    pub budget: u64,
    pub usage: u64,
    pub device_local: bool,
}

/// One live, counted allocation. Must be released with `MemoryTracker::free`.
#[derive(Debug)]
pub struct CountedAllocation {
    pub(crate) allocation: Allocation,
    pub(crate) bytes: u64,
    pub(crate) category: MemoryCategory,
    pub(crate) device_local: bool,
}

impl CountedAllocation {
    pub fn size(&self) -> u64 {
        self.bytes
    }
    pub fn category(&self) -> MemoryCategory {
        self.category
    }
    pub fn mapped_slice_mut(&mut self) -> Option<&mut [u8]> {
        self.allocation.mapped_slice_mut()
    }
    pub fn mapped_slice(&self) -> Option<&[u8]> {
        self.allocation.mapped_slice()
    }
}

struct State {
    allocator: Option<Allocator>,
    stats: MemoryStats,
}

/// The allocator wrapper owned by the device.
pub struct MemoryTracker {
    state: Mutex<State>,
    /// True when every host-visible memory type is also device-local (UMA, lavapipe), so
    /// staging counts against the cap as well.
    host_visible_is_device_local: bool,
}

impl MemoryTracker {
    pub(crate) fn new(
        allocator: Allocator,
        mem_props: &vk::PhysicalDeviceMemoryProperties,
        cap: Option<u64>,
    ) -> Self {
        let types = &mem_props.memory_types[..mem_props.memory_type_count as usize];
        let host_visible_is_device_local = types
            .iter()
            .filter(|t| {
                t.property_flags
                    .contains(vk::MemoryPropertyFlags::HOST_VISIBLE)
            })
            .all(|t| {
                t.property_flags
                    .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL)
            });
        MemoryTracker {
            state: Mutex::new(State {
                allocator: Some(allocator),
                stats: MemoryStats {
                    cap,
                    ..Default::default()
                },
            }),
            host_visible_is_device_local,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock leaves only counters behind; keep going.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn stats(&self) -> MemoryStats {
        self.lock().stats.clone()
    }

    pub fn set_cap(&self, cap: Option<u64>) {
        self.lock().stats.cap = cap;
    }

    /// Starts peak tracking afresh from the current bytes (a new workload under a new cap).
    pub fn reset_peak(&self) {
        let mut st = self.lock();
        st.stats.peak_bytes = st.stats.current_bytes;
    }

    /// Whether an allocation at `location` counts against the cap (device-local memory; on
    /// UMA devices such as lavapipe every host-visible type is device-local too).
    pub fn counts_against_cap(&self, location: MemoryLocation) -> bool {
        location == MemoryLocation::GpuOnly || self.host_visible_is_device_local
    }

    /// Bytes gpu-allocator has reserved from Vulkan (blocks), >= the counted bytes.
    pub fn reserved_bytes(&self) -> u64 {
        let st = self.lock();
        st.allocator
            .as_ref()
            .map(|a| a.generate_report().total_capacity_bytes)
            .unwrap_or(0)
    }

    pub(crate) fn record_fallback(&self, bytes: u64, delta: i64) {
        let mut st = self.lock();
        if delta > 0 {
            st.stats.fallback_tensors += 1;
            st.stats.fallback_bytes += bytes;
        } else {
            st.stats.fallback_tensors = st.stats.fallback_tensors.saturating_sub(1);
            st.stats.fallback_bytes = st.stats.fallback_bytes.saturating_sub(bytes);
        }
    }

    fn check_cap(st: &State, name: &str, category: MemoryCategory, bytes: u64) -> Result<()> {
        if let Some(cap) = st.stats.cap {
            let would_be = st.stats.current_bytes + bytes;
            if would_be > cap {
                return Err(VkError::CapExceeded {
                    name: name.to_string(),
                    category,
                    requested: bytes,
                    would_be,
                    cap,
                });
            }
        }
        Ok(())
    }

    /// Allocates memory for the given requirements, checking the cap first.
    pub(crate) fn allocate(
        &self,
        name: &str,
        requirements: vk::MemoryRequirements,
        location: MemoryLocation,
        linear: bool,
        category: MemoryCategory,
    ) -> Result<CountedAllocation> {
        let mut st = self.lock();
        let predicted_device_local =
            location == MemoryLocation::GpuOnly || self.host_visible_is_device_local;
        if predicted_device_local {
            Self::check_cap(&st, name, category, requirements.size)?;
        }
        let allocator = st
            .allocator
            .as_mut()
            .ok_or_else(|| VkError::Other("allocator already shut down".into()))?;
        let allocation = allocator
            .allocate(&AllocationCreateDesc {
                name,
                requirements,
                location,
                linear,
                allocation_scheme: AllocationScheme::GpuAllocatorManaged,
            })
            .map_err(|source| VkError::Alloc {
                name: name.to_string(),
                source,
            })?;
        let device_local = allocation
            .memory_properties()
            .contains(vk::MemoryPropertyFlags::DEVICE_LOCAL);
        let bytes = requirements.size;
        if device_local && !predicted_device_local {
            // The allocator picked device-local (e.g. BAR) memory for a host location.
            if let Err(e) = Self::check_cap(&st, name, category, bytes) {
                if let Some(a) = st.allocator.as_mut() {
                    let _ = a.free(allocation);
                }
                return Err(e);
            }
        }
        let s = &mut st.stats;
        s.live_allocations += 1;
        if device_local {
            s.current_bytes += bytes;
            s.peak_bytes = s.peak_bytes.max(s.current_bytes);
            let i = category.index();
            s.category_bytes[i] += bytes;
            s.category_peak_bytes[i] = s.category_peak_bytes[i].max(s.category_bytes[i]);
        } else {
            s.host_bytes += bytes;
        }
        Ok(CountedAllocation {
            allocation,
            bytes,
            category,
            device_local,
        })
    }

    pub(crate) fn free(&self, alloc: CountedAllocation) {
        let mut st = self.lock();
        let s = &mut st.stats;
        s.live_allocations = s.live_allocations.saturating_sub(1);
        if alloc.device_local {
            s.current_bytes = s.current_bytes.saturating_sub(alloc.bytes);
            let i = alloc.category.index();
            s.category_bytes[i] = s.category_bytes[i].saturating_sub(alloc.bytes);
        } else {
            s.host_bytes = s.host_bytes.saturating_sub(alloc.bytes);
        }
        if let Some(a) = st.allocator.as_mut() {
            if let Err(e) = a.free(alloc.allocation) {
                log::error!("freeing device memory failed: {e}");
            }
        }
    }

    /// Drops the allocator; must happen before the VkDevice is destroyed.
    pub(crate) fn shutdown(&self) {
        let mut st = self.lock();
        st.allocator = None;
    }
}
