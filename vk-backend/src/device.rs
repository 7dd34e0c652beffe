//! Vulkan instance + logical device: device choice, queues, features, validation, pipeline cache.

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use ash::vk;
use gpu_allocator::vulkan::{Allocator, AllocatorCreateDesc};
use gpu_allocator::{AllocationSizes, AllocatorDebugSettings};

use crate::error::{Result, VkError, VkResultExt};
use crate::memory::{HeapBudget, MemoryStats, MemoryTracker};

const VALIDATION_LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Which device to open and how.
#[derive(Debug, Clone, Default)]
pub struct DeviceOptions {
    /// Device selector: an index into the enumeration order, or a case-insensitive name substring.
    /// `None` falls back to the `TEXSTREAM_DEVICE` environment variable, then to preference order
    /// (discrete > integrated > virtual > CPU).
    pub device: Option<String>,
    /// Force validation on/off; `None` reads `TEXSTREAM_VALIDATION` (`1`/`true` = on).
    pub validation: Option<bool>,
    /// Where to load/save the VkPipelineCache; `None` keeps it in memory only.
    pub pipeline_cache_path: Option<PathBuf>,
    /// Hard cap on device-local bytes; allocations beyond it fail before Vulkan is called.
    pub memory_cap: Option<u64>,
    /// Pretend the device has smaller image limits (tests exercise folding cheaply with this).
    pub limits_override: Option<ImageLimits>,
    /// Do not use a dedicated transfer family even if one exists (also `TEXSTREAM_NO_TRANSFER_QUEUE=1`).
    pub no_transfer_queue: bool,
    /// Treat images as padded to power-of-two row blocks (`Some(true)`: test the folds that
    /// avoid it on any device) or not; `None` reads `TEXSTREAM_PAD_ROWS` (`1`/`0`) or probes the
    /// driver.
    pub pads_image_rows: Option<bool>,
    /// Do not enable cooperative-matrix kernels even where the device has them (also
    /// `TEXSTREAM_NO_COOPMAT=1`): the portable kernels run instead, e.g. to compare the two.
    pub no_cooperative_matrix: bool,
}

impl DeviceOptions {
    /// Options taken entirely from the environment (`TEXSTREAM_DEVICE`, `TEXSTREAM_VALIDATION`).
    pub fn from_env() -> Self {
        Self::default()
    }
}

fn env_validation() -> bool {
    env_flag("TEXSTREAM_VALIDATION")
}

/// The `VK_NV_cooperative_matrix` shapes of `physical` (empty when the query fails).
fn nv_coop_shapes(
    entry: &ash::Entry,
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
) -> Vec<vk::CooperativeMatrixPropertiesNV<'static>> {
    let cm = ash::nv::cooperative_matrix::Instance::new(entry, instance);
    let f = cm.fp().get_physical_device_cooperative_matrix_properties_nv;
    let mut count = 0u32;
    // SAFETY: valid physical device; the standard two-call enumeration.
    if unsafe { f(physical, &mut count, std::ptr::null_mut()) } != vk::Result::SUCCESS {
        return Vec::new();
    }
    let mut list = vec![vk::CooperativeMatrixPropertiesNV::default(); count as usize];
    // SAFETY: `list` holds `count` initialized structures with their sType set.
    match unsafe { f(physical, &mut count, list.as_mut_ptr()) } {
        vk::Result::SUCCESS | vk::Result::INCOMPLETE => {
            list.truncate(count as usize);
            list
        }
        _ => Vec::new(),
    }
}

/// Whether environment variable `name` is set to 1/true/yes/on.
fn env_flag(name: &str) -> bool {
    std::env::var(name)
        .map(|v| {
            matches!(
                v.trim().to_ascii_lowercase().as_str(),
                "1" | "true" | "yes" | "on"
            )
        })
        .unwrap_or(false)
}

/// Image limits that decide 2.5D folding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ImageLimits {
    pub max_image_dimension_2d: u32,
    pub max_image_array_layers: u32,
}

/// Optional capabilities, reported (and used where enabled).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceFeatures {
    pub shader_float16: bool,
    pub storage_buffer_16bit: bool,
    pub memory_budget: bool,
    pub cooperative_matrix_khr: bool,
    pub cooperative_matrix_nv: bool,
    pub subgroup_size_control: bool,
    pub timeline_semaphore: bool,
    pub storage_image_read_without_format: bool,
    /// `hostQueryReset` (Vulkan 1.2): enabled where supported; the stream engine's timestamps use it.
    pub host_query_reset: bool,
    /// `VK_NV_cooperative_matrix` enabled with the fp16 16x8x16 (fp32 accumulate) subgroup shape,
    /// `shaderFloat16` and 32-wide subgroups: MatMul with constant B uses tensor-core kernels.
    pub cooperative_matrix_f16: bool,
}

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

/// Summary of one physical device, as enumerated.
#[derive(Debug, Clone)]
pub struct AdapterInfo {
    pub index: usize,
    pub name: String,
    pub device_type: vk::PhysicalDeviceType,
    pub api_version: u32,
}

pub(crate) struct Debug {
    loader: ash::ext::debug_utils::Instance,
    messenger: vk::DebugUtilsMessengerEXT,
}

/// Everything behind the shared `Device` handle.
pub struct DeviceInner {
    pub(crate) entry: ash::Entry,
    pub(crate) instance: ash::Instance,
    debug: Option<Debug>,
    messages: *mut Mutex<Vec<String>>,
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
    pub(crate) pipelines:
        Mutex<HashMap<crate::pipeline::PipelineKey, Arc<crate::pipeline::Pipeline>>>,
    pub(crate) recycler: crate::recycle::Recycler,
    validation: bool,
    /// Whether the driver pads image heights to power-of-two row blocks (probed on first use).
    pads_rows: std::sync::OnceLock<bool>,
}

// SAFETY: the raw `messages` pointer is only dereferenced under its own mutex, and Vulkan handles
// are plain integers; queues are behind mutexes as Vulkan requires.
unsafe impl Send for DeviceInner {}
unsafe impl Sync for DeviceInner {}

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

/// The validation layer's own semaphore/fence state tracking times out on correct host waits in
/// the Debian 1.3.239 layer ("This is most likely a validation bug"; seen on lavapipe and the
/// H200; KhronosGroup/Vulkan-ValidationLayers#4649 and #5928, fixed by the state-tracking
/// rewrite of #8519). They say nothing about our usage, so they are logged, not counted.
const KNOWN_LAYER_BUGS: [&str; 2] = [
    "UNASSIGNED-VkSemaphore-state-timeout",
    "UNASSIGNED-VkFence-state-timeout",
];

unsafe extern "system" fn debug_callback(
    severity: vk::DebugUtilsMessageSeverityFlagsEXT,
    types: vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    user: *mut c_void,
) -> vk::Bool32 {
    // SAFETY: the layer passes valid callback data; `user` is the boxed message store that lives
    // until after the messenger and instance are destroyed.
    let msg = unsafe {
        if data.is_null() || (*data).p_message.is_null() {
            String::from("<no message>")
        } else {
            CStr::from_ptr((*data).p_message)
                .to_string_lossy()
                .into_owned()
        }
    };
    // SAFETY: as above; the id name is a NUL-terminated string or null.
    let id = unsafe {
        if data.is_null() || (*data).p_message_id_name.is_null() {
            String::new()
        } else {
            CStr::from_ptr((*data).p_message_id_name)
                .to_string_lossy()
                .into_owned()
        }
    };
    let line = format!("[{severity:?} {types:?}] {msg}");
    if KNOWN_LAYER_BUGS.contains(&id.as_str()) {
        log::warn!("vulkan (known validation-layer bug, not counted): {line}");
        return vk::FALSE;
    }
    if types == vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE {
        // Advisory only (e.g. "use TRANSFER_DST_OPTIMAL instead of GENERAL" for copies into
        // images we deliberately keep in GENERAL); logged, not counted as a failure.
        log::debug!("vulkan: {line}");
        return vk::FALSE;
    }
    log::warn!("vulkan: {line}");
    if !user.is_null() {
        let store = unsafe { &*(user as *const Mutex<Vec<String>>) };
        store.lock().unwrap_or_else(|e| e.into_inner()).push(line);
    }
    vk::FALSE
}

fn cstr_array_to_string(raw: &[std::ffi::c_char]) -> String {
    // SAFETY-free conversion: stop at the first NUL.
    let bytes: Vec<u8> = raw
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

fn load_entry() -> Result<ash::Entry> {
    // SAFETY: loading the system Vulkan loader library.
    unsafe { ash::Entry::load() }.map_err(|e| VkError::NoLoader(e.to_string()))
}

fn type_rank(t: vk::PhysicalDeviceType) -> u32 {
    match t {
        vk::PhysicalDeviceType::DISCRETE_GPU => 0,
        vk::PhysicalDeviceType::INTEGRATED_GPU => 1,
        vk::PhysicalDeviceType::VIRTUAL_GPU => 2,
        vk::PhysicalDeviceType::CPU => 3,
        _ => 4,
    }
}

/// Picks an adapter: by index, by name substring, else by type preference.
pub fn select_adapter(adapters: &[AdapterInfo], selector: Option<&str>) -> Result<usize> {
    let usable: Vec<&AdapterInfo> = adapters
        .iter()
        .filter(|a| a.api_version >= vk::API_VERSION_1_2)
        .collect();
    let names = || {
        adapters
            .iter()
            .map(|a| format!("#{} {}", a.index, a.name))
            .collect::<Vec<_>>()
            .join(", ")
    };
    if usable.is_empty() {
        return Err(VkError::NoDevice(if adapters.is_empty() {
            "; install a driver, e.g. `sudo apt-get install mesa-vulkan-drivers`".into()
        } else {
            format!(" supporting Vulkan 1.2 (found: {})", names())
        }));
    }
    match selector.map(str::trim).filter(|s| !s.is_empty()) {
        Some(sel) => {
            if let Ok(i) = sel.parse::<usize>() {
                return adapters
                    .iter()
                    .find(|a| a.index == i && a.api_version >= vk::API_VERSION_1_2)
                    .map(|a| a.index)
                    .ok_or_else(|| {
                        VkError::NoDevice(format!(" with index {i} (found: {})", names()))
                    });
            }
            let needle = sel.to_ascii_lowercase();
            usable
                .iter()
                .find(|a| a.name.to_ascii_lowercase().contains(&needle))
                .map(|a| a.index)
                .ok_or_else(|| VkError::NoDevice(format!(" matching `{sel}` (found: {})", names())))
        }
        None => Ok(usable
            .iter()
            .min_by_key(|a| (type_rank(a.device_type), a.index))
            .map(|a| a.index)
            .unwrap_or(usable[0].index)),
    }
}

/// Lists the physical devices without opening one.
pub fn enumerate_adapters() -> Result<Vec<AdapterInfo>> {
    let entry = load_entry()?;
    let app = vk::ApplicationInfo::default().api_version(vk::API_VERSION_1_2);
    let ci = vk::InstanceCreateInfo::default().application_info(&app);
    // SAFETY: plain instance creation and destruction.
    unsafe {
        let instance = entry
            .create_instance(&ci, None)
            .map_err(crate::info::instance_error)?;
        let out = adapters_of(&instance);
        instance.destroy_instance(None);
        out
    }
}

unsafe fn adapters_of(instance: &ash::Instance) -> Result<Vec<AdapterInfo>> {
    let pds = unsafe { instance.enumerate_physical_devices() }.vk("vkEnumeratePhysicalDevices")?;
    Ok(pds
        .iter()
        .enumerate()
        .map(|(index, &pd)| {
            let p = unsafe { instance.get_physical_device_properties(pd) };
            AdapterInfo {
                index,
                name: cstr_array_to_string(&p.device_name),
                device_type: p.device_type,
                api_version: p.api_version,
            }
        })
        .collect())
}

impl Device {
    /// Opens the device chosen by `opts` (see `DeviceOptions`).
    pub fn new(opts: &DeviceOptions) -> Result<Device> {
        let entry = load_entry()?;
        let validation = opts.validation.unwrap_or_else(env_validation);
        let selector = opts
            .device
            .clone()
            .or_else(|| std::env::var("TEXSTREAM_DEVICE").ok());

        let messages: *mut Mutex<Vec<String>> = Box::into_raw(Box::new(Mutex::new(Vec::new())));
        // From here on, the Box must be reclaimed on every error path.
        let res = unsafe { Self::create(entry, validation, selector.as_deref(), opts, messages) };
        match res {
            Ok(d) => Ok(d),
            Err(e) => {
                // SAFETY: created above and not shared with any live messenger (creation failed
                // and everything created was destroyed).
                drop(unsafe { Box::from_raw(messages) });
                Err(e)
            }
        }
    }

    unsafe fn create(
        entry: ash::Entry,
        validation: bool,
        selector: Option<&str>,
        opts: &DeviceOptions,
        messages: *mut Mutex<Vec<String>>,
    ) -> Result<Device> {
        let mut layers: Vec<*const std::ffi::c_char> = Vec::new();
        let mut inst_exts: Vec<*const std::ffi::c_char> = Vec::new();
        if validation {
            let avail = unsafe { entry.enumerate_instance_layer_properties() }
                .vk("vkEnumerateInstanceLayerProperties")?;
            let has = avail
                .iter()
                .any(|l| cstr_array_to_string(&l.layer_name) == "VK_LAYER_KHRONOS_validation");
            if !has {
                return Err(VkError::NoValidationLayer);
            }
            layers.push(VALIDATION_LAYER.as_ptr());
            inst_exts.push(ash::ext::debug_utils::NAME.as_ptr());
        }
        let app_name = CString::new("texstream").unwrap_or_default();
        let app = vk::ApplicationInfo::default()
            .application_name(&app_name)
            .engine_name(&app_name)
            .api_version(vk::API_VERSION_1_2);
        let mut dbg_ci = vk::DebugUtilsMessengerCreateInfoEXT::default()
            .message_severity(
                vk::DebugUtilsMessageSeverityFlagsEXT::WARNING
                    | vk::DebugUtilsMessageSeverityFlagsEXT::ERROR,
            )
            .message_type(
                vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                    | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                    | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
            )
            .pfn_user_callback(Some(debug_callback))
            .user_data(messages as *mut c_void);
        let mut ici = vk::InstanceCreateInfo::default()
            .application_info(&app)
            .enabled_layer_names(&layers)
            .enabled_extension_names(&inst_exts);
        if validation {
            ici = ici.push_next(&mut dbg_ci);
        }
        let instance =
            unsafe { entry.create_instance(&ici, None) }.map_err(crate::info::instance_error)?;
        let debug = if validation {
            let loader = ash::ext::debug_utils::Instance::new(&entry, &instance);
            match unsafe { loader.create_debug_utils_messenger(&dbg_ci, None) } {
                Ok(messenger) => Some(Debug { loader, messenger }),
                Err(e) => {
                    unsafe { instance.destroy_instance(None) };
                    return Err(VkError::Vk {
                        call: "vkCreateDebugUtilsMessengerEXT",
                        result: e,
                    });
                }
            }
        } else {
            None
        };
        // Anything failing below must destroy the instance (and messenger).
        let cleanup = |debug: &Option<Debug>| unsafe {
            if let Some(d) = debug {
                d.loader.destroy_debug_utils_messenger(d.messenger, None);
            }
            instance.destroy_instance(None);
        };
        match unsafe {
            Self::create_device(
                entry.clone(),
                &instance,
                selector,
                opts,
                validation,
                messages,
            )
        } {
            Ok(parts) => Ok(Self::assemble(
                entry, instance, debug, messages, parts, opts, validation,
            )),
            Err(e) => {
                cleanup(&debug);
                Err(e)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        entry: ash::Entry,
        instance: ash::Instance,
        debug: Option<Debug>,
        messages: *mut Mutex<Vec<String>>,
        p: DeviceParts,
        opts: &DeviceOptions,
        validation: bool,
    ) -> Device {
        log::info!(
            "texstream: opened `{}` (compute family {}, transfer family {:?}, validation {})",
            p.name,
            p.compute.family,
            p.transfer.as_ref().map(|q| q.family),
            validation
        );
        Device {
            inner: Arc::new(DeviceInner {
                entry,
                instance,
                debug,
                messages,
                physical: p.physical,
                device: p.device,
                properties: p.properties,
                memory_properties: p.memory_properties,
                name: p.name,
                compute: p.compute,
                transfer: p.transfer,
                memory: p.memory,
                pipeline_cache: p.pipeline_cache,
                cache_path: opts.pipeline_cache_path.clone(),
                limits: p.limits,
                features: p.features,
                pipelines: Mutex::new(HashMap::new()),
                recycler: Default::default(),
                pads_rows: match opts
                    .pads_image_rows
                    .or_else(|| std::env::var("TEXSTREAM_PAD_ROWS").ok().map(|v| v == "1"))
                {
                    Some(v) => std::sync::OnceLock::from(v),
                    None => std::sync::OnceLock::new(),
                },
                validation,
            }),
        }
    }

    unsafe fn create_device(
        _entry: ash::Entry,
        instance: &ash::Instance,
        selector: Option<&str>,
        opts: &DeviceOptions,
        _validation: bool,
        _messages: *mut Mutex<Vec<String>>,
    ) -> Result<DeviceParts> {
        let adapters = unsafe { adapters_of(instance) }?;
        let idx = select_adapter(&adapters, selector)?;
        let pds =
            unsafe { instance.enumerate_physical_devices() }.vk("vkEnumeratePhysicalDevices")?;
        let physical = pds[idx];
        let properties = unsafe { instance.get_physical_device_properties(physical) };
        let name = cstr_array_to_string(&properties.device_name);
        let memory_properties = unsafe { instance.get_physical_device_memory_properties(physical) };

        // Extensions.
        let exts = unsafe { instance.enumerate_device_extension_properties(physical) }
            .vk("vkEnumerateDeviceExtensionProperties")?;
        let has_ext = |n: &CStr| {
            exts.iter()
                .any(|e| cstr_array_to_string(&e.extension_name) == n.to_string_lossy())
        };

        // Features.
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut f11)
            .push_next(&mut f12);
        unsafe { instance.get_physical_device_features2(physical, &mut f2) };
        let base = f2.features;
        let mut coop_f = vk::PhysicalDeviceCooperativeMatrixFeaturesNV::default();
        let coop_ext = has_ext(ash::nv::cooperative_matrix::NAME);
        if coop_ext {
            let mut f2c = vk::PhysicalDeviceFeatures2::default().push_next(&mut coop_f);
            unsafe { instance.get_physical_device_features2(physical, &mut f2c) };
        }
        let mut sub = vk::PhysicalDeviceSubgroupProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut sub);
        unsafe { instance.get_physical_device_properties2(physical, &mut p2) };
        let coop_shape = coop_ext
            && !opts.no_cooperative_matrix
            && !env_flag("TEXSTREAM_NO_COOPMAT")
            && coop_f.cooperative_matrix == vk::TRUE
            && f12.shader_float16 == vk::TRUE
            && f12.vulkan_memory_model == vk::TRUE
            && sub.subgroup_size == 32
            && nv_coop_shapes(&_entry, instance, physical).iter().any(|p| {
                (p.m_size, p.n_size, p.k_size) == (16, 8, 16)
                    && p.a_type == vk::ComponentTypeNV::FLOAT16
                    && p.b_type == vk::ComponentTypeNV::FLOAT16
                    && p.c_type == vk::ComponentTypeNV::FLOAT32
                    && p.d_type == vk::ComponentTypeNV::FLOAT32
                    && p.scope == vk::ScopeNV::SUBGROUP
            });
        let features = DeviceFeatures {
            cooperative_matrix_f16: coop_shape,
            shader_float16: f12.shader_float16 == vk::TRUE,
            storage_buffer_16bit: f11.storage_buffer16_bit_access == vk::TRUE,
            memory_budget: has_ext(ash::ext::memory_budget::NAME),
            cooperative_matrix_khr: has_ext(ash::khr::cooperative_matrix::NAME),
            cooperative_matrix_nv: has_ext(ash::nv::cooperative_matrix::NAME),
            subgroup_size_control: has_ext(ash::ext::subgroup_size_control::NAME)
                || properties.api_version >= vk::API_VERSION_1_3,
            timeline_semaphore: f12.timeline_semaphore == vk::TRUE,
            host_query_reset: f12.host_query_reset == vk::TRUE,
            storage_image_read_without_format: base.shader_storage_image_read_without_format
                == vk::TRUE,
        };
        if !features.timeline_semaphore {
            return Err(VkError::MissingFeature {
                device: name,
                feature: "timelineSemaphore (Vulkan 1.2)".into(),
            });
        }

        // Queues: a compute family, plus a transfer-only family where there is one.
        let families = unsafe { instance.get_physical_device_queue_family_properties(physical) };
        let compute_family = families
            .iter()
            .position(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
            .ok_or_else(|| VkError::MissingFeature {
                device: name.clone(),
                feature: "a compute queue family".into(),
            })? as u32;
        let transfer_family = if opts.no_transfer_queue || env_flag("TEXSTREAM_NO_TRANSFER_QUEUE") {
            None
        } else {
            families
                .iter()
                .position(|f| {
                    f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                        && !f
                            .queue_flags
                            .intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS)
                })
                .map(|i| i as u32)
        };
        let prio = [1.0f32];
        let mut qcis = vec![vk::DeviceQueueCreateInfo::default()
            .queue_family_index(compute_family)
            .queue_priorities(&prio)];
        if let Some(t) = transfer_family {
            qcis.push(
                vk::DeviceQueueCreateInfo::default()
                    .queue_family_index(t)
                    .queue_priorities(&prio),
            );
        }

        let mut dev_exts: Vec<*const std::ffi::c_char> = Vec::new();
        if features.memory_budget {
            dev_exts.push(ash::ext::memory_budget::NAME.as_ptr());
        }
        let mut en11 = vk::PhysicalDeviceVulkan11Features::default()
            .storage_buffer16_bit_access(features.storage_buffer_16bit);
        let mut en12 = vk::PhysicalDeviceVulkan12Features::default()
            .timeline_semaphore(true)
            .host_query_reset(features.host_query_reset)
            .shader_float16(features.shader_float16)
            // The cooperative-matrix kernels use memory scope semantics (VulkanMemoryModel).
            .vulkan_memory_model(features.cooperative_matrix_f16);
        let en_base = vk::PhysicalDeviceFeatures::default()
            .shader_storage_image_extended_formats(
                base.shader_storage_image_extended_formats == vk::TRUE,
            )
            .shader_storage_image_write_without_format(
                base.shader_storage_image_write_without_format == vk::TRUE,
            );
        let mut en_coop =
            vk::PhysicalDeviceCooperativeMatrixFeaturesNV::default().cooperative_matrix(true);
        if features.cooperative_matrix_f16 {
            dev_exts.push(ash::nv::cooperative_matrix::NAME.as_ptr());
        }
        let mut dci = vk::DeviceCreateInfo::default()
            .queue_create_infos(&qcis)
            .enabled_extension_names(&dev_exts)
            .enabled_features(&en_base)
            .push_next(&mut en11)
            .push_next(&mut en12);
        if features.cooperative_matrix_f16 {
            dci = dci.push_next(&mut en_coop);
        }
        let device =
            unsafe { instance.create_device(physical, &dci, None) }.vk("vkCreateDevice")?;
        let compute = Queue {
            family: compute_family,
            handle: Mutex::new(unsafe { device.get_device_queue(compute_family, 0) }),
        };
        let transfer = transfer_family.map(|f| Queue {
            family: f,
            handle: Mutex::new(unsafe { device.get_device_queue(f, 0) }),
        });

        let destroy_device = |device: &ash::Device| unsafe { device.destroy_device(None) };
        let allocator = match Allocator::new(&AllocatorCreateDesc {
            instance: instance.clone(),
            device: device.clone(),
            physical_device: physical,
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
        let memory = MemoryTracker::new(allocator, &memory_properties, opts.memory_cap);

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

        let real = ImageLimits {
            max_image_dimension_2d: properties.limits.max_image_dimension2_d,
            max_image_array_layers: properties.limits.max_image_array_layers,
        };
        let limits = match opts.limits_override {
            Some(o) => ImageLimits {
                max_image_dimension_2d: o.max_image_dimension_2d.min(real.max_image_dimension_2d),
                max_image_array_layers: o.max_image_array_layers.min(real.max_image_array_layers),
            },
            None => real,
        };
        Ok(DeviceParts {
            physical,
            device,
            properties,
            memory_properties,
            name,
            compute,
            transfer,
            memory,
            pipeline_cache,
            limits,
            features,
        })
    }

    /// The raw ash device (for code inside vk-backend and kernel wrappers).
    pub fn raw(&self) -> &ash::Device {
        &self.inner.device
    }
    pub fn instance(&self) -> &ash::Instance {
        &self.inner.instance
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

    /// Whether optimal-tiling images here take memory for power-of-two row blocks rather than
    /// their rows (NVIDIA's block-linear layout: a 192-row image costs 256 rows). Probed once by
    /// comparing a 192- and a 256-row image's requirements; `FoldLayout::plan_padded` then picks
    /// folds with block-friendly heights.
    pub fn pads_image_rows(&self) -> bool {
        *self.inner.pads_rows.get_or_init(|| {
            let f = vk::Format::R16G16B16A16_SFLOAT;
            let need = |h| crate::resource::Image::memory_requirements(self, f, [256, h, 1]);
            match (need(192), need(256)) {
                (Ok(a), Ok(b)) => a.size >= b.size,
                _ => false,
            }
        })
    }
    pub fn features(&self) -> DeviceFeatures {
        self.inner.features
    }
    pub fn validation_enabled(&self) -> bool {
        self.inner.validation
    }
    /// The queue for a role; `Transfer` falls back to the compute queue without a dedicated family.
    pub fn queue(&self, kind: QueueKind) -> &Queue {
        match kind {
            QueueKind::Compute => &self.inner.compute,
            QueueKind::Transfer => self.inner.transfer.as_ref().unwrap_or(&self.inner.compute),
        }
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
        // SAFETY: the store lives as long as `inner`.
        let store = unsafe { &*self.inner.messages };
        store.lock().unwrap_or_else(|e| e.into_inner()).clone()
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

struct DeviceParts {
    physical: vk::PhysicalDevice,
    device: ash::Device,
    properties: vk::PhysicalDeviceProperties,
    memory_properties: vk::PhysicalDeviceMemoryProperties,
    name: String,
    compute: Queue,
    transfer: Option<Queue>,
    memory: MemoryTracker,
    pipeline_cache: vk::PipelineCache,
    limits: ImageLimits,
    features: DeviceFeatures,
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
            if let Some(d) = &self.debug {
                d.loader.destroy_debug_utils_messenger(d.messenger, None);
            }
            self.instance.destroy_instance(None);
            drop(Box::from_raw(self.messages));
        }
        let _ = &self.entry;
    }
}
