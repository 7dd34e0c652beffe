//! The logical device: created from the capabilities `adapter.rs` found on the chosen adapter
//! (queues: compute plus a dedicated transfer queue where there is one; features and
//! extensions; the counted allocator; the pipeline cache), and the shared [`Device`] handle
//! everything else holds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use gpu_allocator::{AllocationSizes, AllocatorDebugSettings};

use crate::adapter::{
    adapters, select_adapter, AdapterInfo, Capabilities, DeviceFeatures, ImageLimits,
};
use crate::error::{Result, VkError, VkResultExt};
use crate::instance::Instance;
use crate::layout::{FoldLayout, ImagePadding, Precision};
use crate::memory::{HeapBudget, MemoryStats, MemoryTracker};
use crate::options::DeviceOptions;
use crate::pipeline::{Pipeline, PipelineKey};
use crate::placement::ThreadPlacement;

/// Queue roles the engine uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QueueKind {
    Compute,
    /// The dedicated transfer queue; falls back to the compute queue where the device has none.
    Transfer,
}

/// A device queue; submission is serialized through a mutex (Vulkan requires external sync).
pub struct Queue {
    pub family: u32,
    handle: Mutex<vk::Queue>,
}

impl Queue {
    pub(crate) fn lock(&self) -> MutexGuard<'_, vk::Queue> {
        self.handle.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Everything behind the shared `Device` handle.
pub struct DeviceInner {
    /// Destroyed (with its messenger) after everything below, when the fields drop.
    instance: Instance,
    pub(crate) physical: vk::PhysicalDevice,
    pub(crate) device: ash::Device,
    pub(crate) properties: vk::PhysicalDeviceProperties,
    pub(crate) memory_properties: vk::PhysicalDeviceMemoryProperties,
    name: String,
    compute: Queue,
    transfer: Option<Queue>,
    pub(crate) memory: MemoryTracker,
    pub(crate) pipeline_cache: vk::PipelineCache,
    cache_path: Option<PathBuf>,
    limits: ImageLimits,
    features: DeviceFeatures,
    pub(crate) pipelines: Mutex<HashMap<PipelineKey, Arc<Pipeline>>>,
    pub(crate) recycler: crate::recycle::Recycler,
    /// Whether the driver pads image heights to power-of-two row blocks (probed on first use).
    pads_rows: OnceLock<bool>,
    /// `DeviceOptions::pads_short_layers`: stack every tensor's short layers (or none).
    stack_short_layers: Option<bool>,
    /// [`Device::stacking_saves_memory`]'s answers by shape.
    short_layer_choices: Mutex<HashMap<[usize; 4], bool>>,
    /// [`DeviceOptions::shader_dir`], and the SPIR-V files read from it so far.
    shader_dir: Option<PathBuf>,
    shader_overrides: Mutex<Vec<PathBuf>>,
    /// The cores this device's host threads keep to.
    placement: Arc<ThreadPlacement>,
}

/// Cheap-to-clone handle to the opened Vulkan device.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Device")
            .field("name", &self.inner.name)
            .finish()
    }
}

/// The logical device's parts, before they are shared.
struct Opened {
    device: ash::Device,
    compute: Queue,
    transfer: Option<Queue>,
    memory: MemoryTracker,
    pipeline_cache: vk::PipelineCache,
}

impl Device {
    /// Opens the device chosen by `opts` (see [`DeviceOptions`]; [`DeviceOptions::from_env`]
    /// reads the `TEXSTREAM_*` variables).
    pub fn new(opts: &DeviceOptions) -> Result<Device> {
        let instance = Instance::new(opts.validation)?;
        let list = adapters(instance.raw())?;
        let infos: Vec<AdapterInfo> = list.iter().map(|a| a.info.clone()).collect();
        let chosen = select_adapter(&infos, opts.device.as_deref())?;
        // SAFETY: the adapter comes from this instance, which stays alive in the device.
        let mut caps =
            unsafe { Capabilities::probe(instance.entry(), instance.raw(), &list[chosen]) }?;
        restrict(&mut caps, opts);
        let opened = unsafe { open(instance.raw(), &caps, opts) }?;
        log::info!(
            "texstream: opened `{}` (compute family {}, transfer family {:?}, validation {})",
            caps.name,
            caps.compute_family,
            caps.transfer_family,
            instance.validation()
        );
        let placement = ThreadPlacement::for_device(
            caps.pci_address,
            !opts.threads_anywhere,
            opts.interrupt_source.as_ref(),
        );
        Ok(Device {
            inner: Arc::new(DeviceInner {
                placement,
                instance,
                physical: caps.physical,
                device: opened.device,
                properties: caps.properties,
                memory_properties: caps.memory_properties,
                name: caps.name,
                compute: opened.compute,
                transfer: opened.transfer,
                memory: opened.memory,
                pipeline_cache: opened.pipeline_cache,
                cache_path: opts.pipeline_cache_path.clone(),
                limits: caps.limits,
                features: caps.features,
                pipelines: Mutex::new(HashMap::new()),
                recycler: Default::default(),
                pads_rows: match opts.pads_image_rows {
                    Some(v) => OnceLock::from(v),
                    None => OnceLock::new(),
                },
                stack_short_layers: opts.pads_short_layers,
                short_layer_choices: Mutex::new(HashMap::new()),
                shader_dir: opts.shader_dir.clone(),
                shader_overrides: Mutex::new(Vec::new()),
            }),
        })
    }

    /// The raw ash device (for code inside vk-backend and kernel wrappers).
    pub fn raw(&self) -> &ash::Device {
        &self.inner.device
    }
    pub fn instance(&self) -> &ash::Instance {
        self.inner.instance.raw()
    }
    pub fn physical_device(&self) -> vk::PhysicalDevice {
        self.inner.physical
    }
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    pub fn properties(&self) -> &vk::PhysicalDeviceProperties {
        &self.inner.properties
    }
    pub fn memory_properties(&self) -> &vk::PhysicalDeviceMemoryProperties {
        &self.inner.memory_properties
    }
    /// Image limits used for folding (possibly overridden to be smaller for tests).
    pub fn image_limits(&self) -> ImageLimits {
        self.inner.limits
    }

    /// The image fold of an `[N, C, H, W]` activation here (`None`: it falls back to a storage
    /// buffer): [`FoldLayout::plan_padded`] under the device's limits, with power-of-two row
    /// blocks where [`Self::pads_image_rows`], and a tensor's short layers stacked into taller
    /// ones (or its few rows folded into 8 narrower ones) where `stacking_saves_memory` says so
    /// for this shape.
    pub fn fold_layout(&self, nchw: [usize; 4]) -> Result<Option<FoldLayout>> {
        let limits = self.image_limits();
        let plan = |short_layers| {
            FoldLayout::plan_padded(
                nchw,
                limits.max_image_dimension_2d,
                limits.max_image_array_layers,
                ImagePadding {
                    rows: self.pads_image_rows(),
                    short_layers,
                },
            )
        };
        let (kept, stacked) = (plan(false)?, plan(true)?);
        if kept == stacked {
            return Ok(kept);
        }
        let stack = match (self.inner.stack_short_layers, kept, stacked) {
            (Some(forced), _, _) => forced,
            (None, Some(k), Some(s)) => self.stacking_saves_memory(nchw, &k, &s),
            (None, kept, _) => kept.is_none(),
        };
        Ok(if stack { stacked } else { kept })
    }

    /// Whether stacking a tensor's short layers (`stacked`) takes at least a third less memory
    /// here than keeping them (`kept`), by the driver's requirements for both images (asked
    /// once a shape). A folded tensor costs every load three divisions, so a layout that only
    /// saves some padding is not worth them: NVIDIA pads a one-row layer to a tile height (a
    /// `[1, 96, 1, 18710]` head took 8x its texels), stacked; lavapipe pads a layer's rows to 4
    /// or 8 (a third more for PP-OCR's recognizer's 6- and 3-row stages, its arena 7.4 -> 8.2
    /// MB), kept, and there the recognizer ran in half the time (the divisions run lane by
    /// lane; session 41). Asked for fp16 images at either precision: the ratio is what counts.
    /// Where the query fails, stack (the cautious answer).
    fn stacking_saves_memory(
        &self,
        nchw: [usize; 4],
        kept: &FoldLayout,
        stacked: &FoldLayout,
    ) -> bool {
        let mut known = self
            .inner
            .short_layer_choices
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        *known.entry(nchw).or_insert_with(|| {
            let f = crate::conv::tensor_format(Precision::F16);
            let need = |l: &FoldLayout| {
                crate::resource::Image::memory_requirements(self, f, [l.pw, l.ph, l.pl])
                    .map(|n| n.size)
            };
            match (need(kept), need(stacked)) {
                (Ok(k), Ok(s)) => 2 * k >= 3 * s,
                _ => true,
            }
        })
    }

    /// Whether optimal-tiling images here take memory for power-of-two row blocks rather than
    /// their rows (NVIDIA's block-linear layout: a 192-row image costs 256 rows). Probed once by
    /// comparing a 192- and a 256-row image's requirements; `FoldLayout::plan_padded` then picks
    /// folds with block-friendly heights.
    pub fn pads_image_rows(&self) -> bool {
        *self.inner.pads_rows.get_or_init(|| {
            let f = crate::conv::tensor_format(Precision::F16);
            let need = |h| crate::resource::Image::memory_requirements(self, f, [256, h, 1]);
            match (need(192), need(256)) {
                (Ok(a), Ok(b)) => a.size >= b.size,
                _ => false,
            }
        })
    }
    /// Where the threads that drive this device run ([`crate::placement`]): each holds
    /// [`ThreadPlacement::place_current_thread`]'s guard while it runs.
    pub fn placement(&self) -> &Arc<ThreadPlacement> {
        &self.inner.placement
    }

    pub fn features(&self) -> DeviceFeatures {
        self.inner.features
    }
    /// Where kernels' SPIR-V may be read from instead of the embedded code
    /// ([`DeviceOptions::shader_dir`]).
    pub(crate) fn shader_dir(&self) -> Option<&std::path::Path> {
        self.inner.shader_dir.as_deref()
    }
    /// The SPIR-V files read from [`DeviceOptions::shader_dir`] so far, each once however many
    /// pipelines were built from it: what a run measured differs from the embedded kernels by
    /// these.
    pub fn shader_overrides(&self) -> Vec<PathBuf> {
        self.inner
            .shader_overrides
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    pub(crate) fn note_shader_override(&self, path: PathBuf) {
        let mut read = self
            .inner
            .shader_overrides
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if !read.contains(&path) {
            log::warn!("texstream: kernel SPIR-V read from {}", path.display());
            read.push(path);
        }
    }
    pub fn validation_enabled(&self) -> bool {
        self.inner.instance.validation()
    }
    /// The queue for a role; `Transfer` falls back to the compute queue without a dedicated family.
    pub fn queue(&self, kind: QueueKind) -> &Queue {
        match kind {
            QueueKind::Compute => &self.inner.compute,
            QueueKind::Transfer => self.inner.transfer.as_ref().unwrap_or(&self.inner.compute),
        }
    }
    /// Command pools this device created for recorders because no reset one was free (a
    /// steady state reuses them).
    pub fn command_pools_created(&self) -> u64 {
        self.inner.recycler.pools_created()
    }

    pub fn has_dedicated_transfer_queue(&self) -> bool {
        self.inner.transfer.is_some()
    }
    /// Queue families resources must be shared between (concurrent sharing when more than one).
    pub(crate) fn sharing_families(&self) -> Vec<u32> {
        let mut v = vec![self.inner.compute.family];
        if let Some(t) = &self.inner.transfer {
            v.push(t.family);
        }
        v
    }

    /// Every validation message (warning or error) recorded so far.
    pub fn validation_messages(&self) -> Vec<String> {
        self.inner.instance.messages()
    }

    /// Returns an error listing the validation messages, if any were recorded.
    pub fn check_validation(&self) -> Result<()> {
        let m = self.validation_messages();
        if m.is_empty() {
            Ok(())
        } else {
            Err(VkError::Other(format!(
                "{} Vulkan validation message(s):\n{}",
                m.len(),
                m.join("\n")
            )))
        }
    }

    /// Memory counters (current/peak/per category/fallbacks).
    pub fn memory_stats(&self) -> MemoryStats {
        self.inner.memory.stats()
    }
    pub fn memory(&self) -> &MemoryTracker {
        &self.inner.memory
    }
    pub fn set_memory_cap(&self, cap: Option<u64>) {
        self.inner.memory.set_cap(cap)
    }

    /// `VK_EXT_memory_budget` reading per heap, where the extension exists.
    pub fn memory_budget(&self) -> Option<Vec<HeapBudget>> {
        if !self.inner.features.memory_budget {
            return None;
        }
        let mut budget = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
        let mut p2 = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut budget);
        // SAFETY: valid physical device; the extension is present.
        unsafe {
            self.inner
                .instance
                .raw()
                .get_physical_device_memory_properties2(self.inner.physical, &mut p2)
        };
        let heaps = p2.memory_properties.memory_heap_count as usize;
        let heap_props = p2.memory_properties.memory_heaps;
        Some(
            (0..heaps)
                .map(|i| HeapBudget {
                    heap_index: i as u32,
                    heap_size: heap_props[i].size,
                    budget: budget.heap_budget[i],
                    usage: budget.heap_usage[i],
                    device_local: heap_props[i]
                        .flags
                        .contains(vk::MemoryHeapFlags::DEVICE_LOCAL),
                })
                .collect(),
        )
    }

    /// Writes the pipeline cache to its file, if one was configured.
    pub fn save_pipeline_cache(&self) -> Result<()> {
        let Some(path) = &self.inner.cache_path else {
            return Ok(());
        };
        // SAFETY: valid cache handle.
        let data = unsafe {
            self.inner
                .device
                .get_pipeline_cache_data(self.inner.pipeline_cache)
        }
        .vk("vkGetPipelineCacheData")?;
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, &data)
            .and_then(|_| std::fs::rename(&tmp, path))
            .map_err(|source| VkError::CacheFile {
                path: path.display().to_string(),
                source,
            })
    }

    /// Waits until the device is idle.
    pub fn wait_idle(&self) -> Result<()> {
        // Holding both queue locks keeps submissions out while waiting.
        let _c = self.inner.compute.lock();
        let _t = self.inner.transfer.as_ref().map(|q| q.lock());
        // SAFETY: valid device.
        unsafe { self.inner.device.device_wait_idle() }.vk("vkDeviceWaitIdle")
    }
}

/// Turns off what `opts` asks not to use: cooperative-matrix kernels, the dedicated transfer
/// queue, and image limits beyond `limits_override` (tests fold cheaply with small ones).
fn restrict(caps: &mut Capabilities, opts: &DeviceOptions) {
    if opts.no_cooperative_matrix {
        caps.features.cooperative_matrix_f16 = false;
    }
    if opts.no_subgroup_arithmetic {
        caps.features.subgroup_arithmetic = false;
    }
    caps.features.coop_conv_tile = opts.coop_conv_tile;
    caps.features.gemv_spread = opts.gemv_spread;
    caps.features.gemv_deep = opts.gemv_deep;
    caps.features.coop_min_tiles = opts.coop_min_tiles;
    caps.features.coop_rows = opts.coop_rows;
    caps.features.coop_cols = opts.coop_cols;
    caps.features.attention_splits = opts.attention_splits;
    caps.features.attention_head_copies = opts.attention_head_copies;
    caps.features.attention_query_blocks = opts.attention_query_blocks;
    caps.features.matmul_packed_a = opts.matmul_packed_a;
    caps.features.matmul_packed_out = opts.matmul_packed_out;
    caps.features.norm_packed_out = opts.norm_packed_out;
    caps.features.attention_packed_out = opts.attention_packed_out;
    caps.features.attention_packed_kv = opts.attention_packed_kv;
    caps.features.coop_step_k = opts.coop_step_k;
    caps.features.matmul_split_k = opts.matmul_split_k;
    caps.features.conv_split_k = opts.conv_split_k;
    caps.features.coop_conv_min_pixels = opts.coop_conv_min_pixels;
    caps.features.norm_row_groups = opts.norm_row_groups;
    caps.features.norm_wide_rows = opts.norm_wide_rows;
    caps.features.attention_one_pass = opts.attention_one_pass;
    caps.features.dense_readback = opts.dense_readback;
    if opts.no_transfer_queue {
        caps.transfer_family = None;
    }
    if let Some(o) = opts.limits_override {
        let l = &mut caps.limits;
        l.max_image_dimension_2d = l.max_image_dimension_2d.min(o.max_image_dimension_2d);
        l.max_image_array_layers = l.max_image_array_layers.min(o.max_image_array_layers);
    }
}

/// Creates the logical device `caps` describes: its queues, the enabled features and
/// extensions, the counted allocator (capped at `opts.memory_cap`) and the pipeline cache
/// (seeded from `opts.pipeline_cache_path`).
///
/// # Safety
/// `caps` must describe a physical device of `instance`.
unsafe fn open(
    instance: &ash::Instance,
    caps: &Capabilities,
    opts: &DeviceOptions,
) -> Result<Opened> {
    let prio = [1.0f32];
    let mut qcis = vec![vk::DeviceQueueCreateInfo::default()
        .queue_family_index(caps.compute_family)
        .queue_priorities(&prio)];
    if let Some(t) = caps.transfer_family {
        qcis.push(
            vk::DeviceQueueCreateInfo::default()
                .queue_family_index(t)
                .queue_priorities(&prio),
        );
    }

    let mut dev_exts: Vec<*const std::ffi::c_char> = Vec::new();
    if caps.features.memory_budget {
        dev_exts.push(ash::ext::memory_budget::NAME.as_ptr());
    }
    let mut en11 = vk::PhysicalDeviceVulkan11Features::default()
        .storage_buffer16_bit_access(caps.features.storage_buffer_16bit);
    let mut en12 = vk::PhysicalDeviceVulkan12Features::default()
        .timeline_semaphore(true)
        .host_query_reset(caps.features.host_query_reset)
        .shader_float16(caps.features.shader_float16)
        // The cooperative-matrix kernels use memory scope semantics (VulkanMemoryModel).
        .vulkan_memory_model(caps.features.cooperative_matrix_f16);
    let en_base = vk::PhysicalDeviceFeatures::default()
        .shader_storage_image_extended_formats(
            caps.base_features.shader_storage_image_extended_formats == vk::TRUE,
        )
        .shader_storage_image_write_without_format(
            caps.base_features.shader_storage_image_write_without_format == vk::TRUE,
        );
    let mut en_coop =
        vk::PhysicalDeviceCooperativeMatrixFeaturesNV::default().cooperative_matrix(true);
    if caps.features.cooperative_matrix_f16 {
        dev_exts.push(ash::nv::cooperative_matrix::NAME.as_ptr());
    }
    let mut dci = vk::DeviceCreateInfo::default()
        .queue_create_infos(&qcis)
        .enabled_extension_names(&dev_exts)
        .enabled_features(&en_base)
        .push_next(&mut en11)
        .push_next(&mut en12);
    if caps.features.cooperative_matrix_f16 {
        dci = dci.push_next(&mut en_coop);
    }
    let device =
        unsafe { instance.create_device(caps.physical, &dci, None) }.vk("vkCreateDevice")?;
    let compute = Queue {
        family: caps.compute_family,
        handle: Mutex::new(unsafe { device.get_device_queue(caps.compute_family, 0) }),
    };
    let transfer = caps.transfer_family.map(|f| Queue {
        family: f,
        handle: Mutex::new(unsafe { device.get_device_queue(f, 0) }),
    });

    let destroy_device = |device: &ash::Device| unsafe { device.destroy_device(None) };
    let allocator = match Allocator::new(&AllocatorCreateDesc {
        instance: instance.clone(),
        device: device.clone(),
        physical_device: caps.physical,
        debug_settings: AllocatorDebugSettings::default(),
        buffer_device_address: false,
        // Smaller blocks than the 256 MiB default keep reserved memory close to the counted bytes.
        allocation_sizes: AllocationSizes::new(32 << 20, 32 << 20),
    }) {
        Ok(a) => a,
        Err(e) => {
            destroy_device(&device);
            return Err(VkError::Alloc {
                name: "allocator".into(),
                source: e,
            });
        }
    };
    let memory = MemoryTracker::new(allocator, &caps.memory_properties, opts.memory_cap);

    let initial = opts
        .pipeline_cache_path
        .as_ref()
        .and_then(|p| std::fs::read(p).ok())
        .unwrap_or_default();
    let pci = vk::PipelineCacheCreateInfo::default().initial_data(&initial);
    let pipeline_cache = match unsafe { device.create_pipeline_cache(&pci, None) } {
        Ok(c) => c,
        Err(_) => {
            // Stale or foreign cache data: start empty.
            match unsafe {
                device.create_pipeline_cache(&vk::PipelineCacheCreateInfo::default(), None)
            } {
                Ok(c) => c,
                Err(e) => {
                    memory.shutdown();
                    destroy_device(&device);
                    return Err(VkError::Vk {
                        call: "vkCreatePipelineCache",
                        result: e,
                    });
                }
            }
        }
    };

    Ok(Opened {
        device,
        compute,
        transfer,
        memory,
        pipeline_cache,
    })
}

impl Drop for DeviceInner {
    fn drop(&mut self) {
        // SAFETY: last reference; every resource holding an Arc<DeviceInner> is gone.
        unsafe {
            let _ = self.device.device_wait_idle();
            if let Some(path) = &self.cache_path {
                if let Ok(data) = self.device.get_pipeline_cache_data(self.pipeline_cache) {
                    let tmp = path.with_extension("tmp");
                    if std::fs::write(&tmp, &data).is_ok() {
                        let _ = std::fs::rename(&tmp, path);
                    }
                }
            }
            let pipelines =
                std::mem::take(&mut *self.pipelines.lock().unwrap_or_else(|e| e.into_inner()));
            for (_, p) in pipelines {
                p.destroy(&self.device);
            }
            self.recycler.destroy(&self.device);
            self.device
                .destroy_pipeline_cache(self.pipeline_cache, None);
            self.memory.shutdown();
            self.device.destroy_device(None);
        }
        // `instance` drops after this, destroying the messenger and the instance.
    }
}
