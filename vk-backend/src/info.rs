//! Read-only description of every Vulkan device (for `texstream devices`): type, versions, image
//! limits, queue families, memory heaps/types and the optional features texstream cares about.
//! Uses a plain instance (no layers), opens no logical device.

use std::ffi::CStr;

use ash::vk;

use crate::adapter::{adapters, dedicated_transfer_family, select_adapter, AdapterInfo};
use crate::conv::{
    component, device_type_name, driver_version, fixed_cstr as cstr, heap_flags, memory_flags,
    queue_flags, scope, tensor_format, version,
};
use crate::error::{Result, VkResultExt};
use crate::instance::{load_entry, plain_instance};
use crate::layout::Precision;

/// Limits that matter to texstream.
#[derive(Debug, Clone, Default)]
pub struct LimitsReport {
    pub max_image_dimension_2d: u32,
    pub max_image_array_layers: u32,
    pub max_storage_buffer_range: u32,
    pub max_push_constants_size: u32,
    pub max_compute_shared_memory_size: u32,
    pub max_compute_work_group_invocations: u32,
    pub max_compute_work_group_count: [u32; 3],
    pub timestamp_period_ns: f32,
    /// Default subgroup size (Vulkan 1.1).
    pub subgroup_size: Option<u32>,
    /// Range selectable with subgroup size control.
    pub min_subgroup_size: Option<u32>,
    pub max_subgroup_size: Option<u32>,
}

/// One queue family.
#[derive(Debug, Clone)]
pub struct QueueFamilyReport {
    pub index: u32,
    /// `GRAPHICS`, `COMPUTE`, `TRANSFER`, `SPARSE_BINDING`, ...
    pub flags: Vec<String>,
    pub count: u32,
    /// 0 = the family cannot write timestamps.
    pub timestamp_valid_bits: u32,
    pub min_image_transfer_granularity: [u32; 3],
}

/// One memory heap, with the `VK_EXT_memory_budget` reading where available.
#[derive(Debug, Clone)]
pub struct HeapReport {
    pub index: u32,
    pub size: u64,
    pub flags: Vec<String>,
    pub budget: Option<u64>,
    pub usage: Option<u64>,
}

/// One memory type.
#[derive(Debug, Clone)]
pub struct MemoryTypeReport {
    pub index: u32,
    pub heap_index: u32,
    /// `DEVICE_LOCAL`, `HOST_VISIBLE`, `HOST_COHERENT`, `HOST_CACHED`, ...
    pub flags: Vec<String>,
}

/// Optional capabilities (features, extensions, formats).
#[derive(Debug, Clone, Default)]
pub struct FeatureReport {
    pub shader_float16: bool,
    pub storage_buffer_16bit_access: bool,
    pub uniform_and_storage_buffer_16bit_access: bool,
    pub storage_push_constant_16: bool,
    pub shader_int8: bool,
    pub timeline_semaphore: bool,
    pub host_query_reset: bool,
    pub storage_image_read_without_format: bool,
    pub storage_image_write_without_format: bool,
    pub subgroup_size_control: bool,
    /// Subgroup arithmetic in the compute stage (the row normalizations reduce with it).
    pub subgroup_arithmetic: bool,
    pub cooperative_matrix_khr: bool,
    pub cooperative_matrix_nv: bool,
    pub memory_budget: bool,
    /// `R16G16B16A16_SFLOAT` optimal-tiling storage images (the default tensor format).
    pub rgba16f_storage_image: bool,
    /// `R32G32B32A32_SFLOAT` optimal-tiling storage images.
    pub rgba32f_storage_image: bool,
}

/// Everything `texstream devices` shows about one physical device.
#[derive(Debug, Clone)]
pub struct DeviceReport {
    pub index: usize,
    pub name: String,
    /// `discrete`, `integrated`, `virtual`, `cpu`, `other`.
    pub device_type: String,
    pub vendor_id: u32,
    pub device_id: u32,
    pub api_version: String,
    /// Decoded per vendor convention (NVIDIA, Intel on Windows) else as a Vulkan version.
    pub driver_version: String,
    pub driver_name: Option<String>,
    pub driver_info: Option<String>,
    /// Whether texstream can run on it (Vulkan 1.2, timeline semaphores, a compute queue,
    /// storage images in the tensor formats); else why not.
    pub usable: std::result::Result<(), Unusable>,
    /// The device texstream opens with the selector [`device_reports`] was given.
    pub default_choice: bool,
    pub limits: LimitsReport,
    pub queue_families: Vec<QueueFamilyReport>,
    /// A transfer-only family texstream would use for weight uploads.
    pub dedicated_transfer_family: Option<u32>,
    pub memory_heaps: Vec<HeapReport>,
    pub memory_types: Vec<MemoryTypeReport>,
    pub features: FeatureReport,
    /// Extensions of interest: (name, present).
    pub extensions: Vec<(String, bool)>,
    /// `VK_KHR_cooperative_matrix` shapes: "MxNxK A*B+C->R scope".
    pub cooperative_matrix_shapes: Vec<String>,
    /// Where the device sits on the PCI bus (`VK_EXT_pci_bus_info`), where it says.
    pub pci_address: Option<crate::placement::PciAddress>,
    /// The host cores its interrupts are routed to (`crate::placement`), where they can be read.
    pub interrupt_cores: Vec<usize>,
}

/// Why texstream cannot run on a device.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// The device's Vulkan version (below 1.2).
    #[error("Vulkan {0} < 1.2")]
    VulkanVersion(String),
    #[error("no timelineSemaphore")]
    NoTimelineSemaphore,
    #[error("no compute queue family")]
    NoComputeQueue,
    #[error("no RGBA16F/RGBA32F storage images")]
    NoTensorStorageImages,
}

/// Extensions listed by `texstream devices`.
pub const EXTENSIONS_OF_INTEREST: &[&CStr] = &[
    ash::khr::cooperative_matrix::NAME,
    ash::nv::cooperative_matrix::NAME,
    ash::ext::memory_budget::NAME,
    ash::ext::subgroup_size_control::NAME,
    ash::khr::shader_float16_int8::NAME,
    ash::khr::_16bit_storage::NAME,
    ash::khr::timeline_semaphore::NAME,
    ash::ext::host_query_reset::NAME,
    ash::khr::shader_integer_dot_product::NAME,
];

/// Describes every physical device and marks the one `Device::new` picks with `selector` (see
/// `DeviceOptions::device`). Errors only when no loader or instance is available; an empty list
/// means the loader found no driver.
pub fn device_reports(selector: Option<&str>) -> Result<Vec<DeviceReport>> {
    let entry = load_entry()?;
    // A 1.0-only loader rejects instances asking for more.
    // SAFETY: a plain loader query.
    let loader_version = unsafe { entry.try_enumerate_instance_version() }
        .ok()
        .flatten()
        .unwrap_or(vk::API_VERSION_1_0);
    let api = loader_version.min(vk::API_VERSION_1_3);
    let instance = plain_instance(&entry, api)?;
    let out = unsafe { reports(&entry, &instance, api, selector) };
    // SAFETY: nothing created from the instance outlives this call.
    unsafe { instance.destroy_instance(None) };
    out
}

unsafe fn reports(
    entry: &ash::Entry,
    instance: &ash::Instance,
    instance_api: u32,
    selector: Option<&str>,
) -> Result<Vec<DeviceReport>> {
    let list = adapters(instance)?;
    let mut reports = Vec::with_capacity(list.len());
    for a in &list {
        reports.push(unsafe { report(entry, instance, instance_api, a.info.index, a.physical) }?);
    }
    // Same choice as `Device::new`.
    let infos: Vec<AdapterInfo> = list.into_iter().map(|a| a.info).collect();
    if let Ok(i) = select_adapter(&infos, selector) {
        if let Some(r) = reports.iter_mut().find(|r| r.index == i) {
            r.default_choice = true;
        }
    }
    Ok(reports)
}

unsafe fn report(
    entry: &ash::Entry,
    instance: &ash::Instance,
    instance_api: u32,
    index: usize,
    pd: vk::PhysicalDevice,
) -> Result<DeviceReport> {
    let props = unsafe { instance.get_physical_device_properties(pd) };
    let api_version = props.api_version;
    // The *2 queries need a 1.1 instance and device.
    let has_11 = instance_api >= vk::API_VERSION_1_1 && api_version >= vk::API_VERSION_1_1;
    let exts = unsafe { instance.enumerate_device_extension_properties(pd) }
        .vk("vkEnumerateDeviceExtensionProperties")?;
    let ext_names: Vec<String> = exts.iter().map(|e| cstr(&e.extension_name)).collect();
    let has_ext = |n: &CStr| ext_names.iter().any(|e| *e == n.to_string_lossy());

    let mut limits = LimitsReport {
        max_image_dimension_2d: props.limits.max_image_dimension2_d,
        max_image_array_layers: props.limits.max_image_array_layers,
        max_storage_buffer_range: props.limits.max_storage_buffer_range,
        max_push_constants_size: props.limits.max_push_constants_size,
        max_compute_shared_memory_size: props.limits.max_compute_shared_memory_size,
        max_compute_work_group_invocations: props.limits.max_compute_work_group_invocations,
        max_compute_work_group_count: props.limits.max_compute_work_group_count,
        timestamp_period_ns: props.limits.timestamp_period,
        ..Default::default()
    };
    let mut features = FeatureReport {
        subgroup_size_control: has_ext(ash::ext::subgroup_size_control::NAME)
            || api_version >= vk::API_VERSION_1_3,
        cooperative_matrix_khr: has_ext(ash::khr::cooperative_matrix::NAME),
        cooperative_matrix_nv: has_ext(ash::nv::cooperative_matrix::NAME),
        memory_budget: has_ext(ash::ext::memory_budget::NAME),
        ..Default::default()
    };
    let base = unsafe { instance.get_physical_device_features(pd) };
    features.storage_image_read_without_format =
        base.shader_storage_image_read_without_format == vk::TRUE;
    features.storage_image_write_without_format =
        base.shader_storage_image_write_without_format == vk::TRUE;
    let (mut driver_name, mut driver_info) = (None, None);
    let mut budget = None;
    if has_11 {
        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default().push_next(&mut f11);
        let is_12 = api_version >= vk::API_VERSION_1_2 && instance_api >= vk::API_VERSION_1_2;
        if is_12 {
            f2 = f2.push_next(&mut f12);
        }
        unsafe { instance.get_physical_device_features2(pd, &mut f2) };
        features.storage_buffer_16bit_access = f11.storage_buffer16_bit_access == vk::TRUE;
        features.uniform_and_storage_buffer_16bit_access =
            f11.uniform_and_storage_buffer16_bit_access == vk::TRUE;
        features.storage_push_constant_16 = f11.storage_push_constant16 == vk::TRUE;
        if is_12 {
            features.shader_float16 = f12.shader_float16 == vk::TRUE;
            features.shader_int8 = f12.shader_int8 == vk::TRUE;
            features.timeline_semaphore = f12.timeline_semaphore == vk::TRUE;
            features.host_query_reset = f12.host_query_reset == vk::TRUE;
        }

        let mut sub = vk::PhysicalDeviceSubgroupProperties::default();
        let mut ssc = vk::PhysicalDeviceSubgroupSizeControlProperties::default();
        let mut drv = vk::PhysicalDeviceDriverProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut sub);
        if features.subgroup_size_control {
            p2 = p2.push_next(&mut ssc);
        }
        if is_12 || has_ext(ash::khr::driver_properties::NAME) {
            p2 = p2.push_next(&mut drv);
        }
        unsafe { instance.get_physical_device_properties2(pd, &mut p2) };
        limits.subgroup_size = Some(sub.subgroup_size);
        features.subgroup_arithmetic = crate::adapter::has_subgroup_arithmetic(&sub);
        if features.subgroup_size_control {
            limits.min_subgroup_size = Some(ssc.min_subgroup_size);
            limits.max_subgroup_size = Some(ssc.max_subgroup_size);
        }
        if is_12 || has_ext(ash::khr::driver_properties::NAME) {
            driver_name = Some(cstr(&drv.driver_name)).filter(|s| !s.is_empty());
            driver_info = Some(cstr(&drv.driver_info)).filter(|s| !s.is_empty());
        }
        if features.memory_budget {
            let mut b = vk::PhysicalDeviceMemoryBudgetPropertiesEXT::default();
            let mut m2 = vk::PhysicalDeviceMemoryProperties2::default().push_next(&mut b);
            unsafe { instance.get_physical_device_memory_properties2(pd, &mut m2) };
            budget = Some((b.heap_budget, b.heap_usage));
        }
    }

    let families = unsafe { instance.get_physical_device_queue_family_properties(pd) };
    let queue_families: Vec<QueueFamilyReport> = families
        .iter()
        .enumerate()
        .map(|(i, f)| QueueFamilyReport {
            index: i as u32,
            flags: queue_flags(f.queue_flags),
            count: f.queue_count,
            timestamp_valid_bits: f.timestamp_valid_bits,
            min_image_transfer_granularity: [
                f.min_image_transfer_granularity.width,
                f.min_image_transfer_granularity.height,
                f.min_image_transfer_granularity.depth,
            ],
        })
        .collect();
    let dedicated_transfer_family = dedicated_transfer_family(&families);

    let mem = unsafe { instance.get_physical_device_memory_properties(pd) };
    let memory_heaps = (0..mem.memory_heap_count as usize)
        .map(|i| HeapReport {
            index: i as u32,
            size: mem.memory_heaps[i].size,
            flags: heap_flags(mem.memory_heaps[i].flags),
            budget: budget.map(|b| b.0[i]),
            usage: budget.map(|b| b.1[i]),
        })
        .collect();
    let memory_types = (0..mem.memory_type_count as usize)
        .map(|i| MemoryTypeReport {
            index: i as u32,
            heap_index: mem.memory_types[i].heap_index,
            flags: memory_flags(mem.memory_types[i].property_flags),
        })
        .collect();

    let storage_image = |f: vk::Format| {
        let fp = unsafe { instance.get_physical_device_format_properties(pd, f) };
        fp.optimal_tiling_features
            .contains(vk::FormatFeatureFlags::STORAGE_IMAGE)
    };
    features.rgba16f_storage_image = storage_image(tensor_format(Precision::F16));
    features.rgba32f_storage_image = storage_image(tensor_format(Precision::F32));

    let pci_address = has_ext(ash::ext::pci_bus_info::NAME)
        .then(|| unsafe { crate::adapter::pci_address(instance, pd) });

    let mut cooperative_matrix_shapes = Vec::new();
    if features.cooperative_matrix_khr && has_11 {
        let cm = ash::khr::cooperative_matrix::Instance::new(entry, instance);
        if let Ok(list) = unsafe { cm.get_physical_device_cooperative_matrix_properties(pd) } {
            for p in list {
                cooperative_matrix_shapes.push(format!(
                    "{}x{}x{} {}*{}+{}->{} {}",
                    p.m_size,
                    p.n_size,
                    p.k_size,
                    component(p.a_type),
                    component(p.b_type),
                    component(p.c_type),
                    component(p.result_type),
                    scope(p.scope)
                ));
            }
        }
    }

    let extensions = EXTENSIONS_OF_INTEREST
        .iter()
        .map(|n| (n.to_string_lossy().into_owned(), has_ext(n)))
        .collect();

    let usable = if api_version < vk::API_VERSION_1_2 {
        Err(Unusable::VulkanVersion(version(api_version)))
    } else if !features.timeline_semaphore {
        Err(Unusable::NoTimelineSemaphore)
    } else if !families
        .iter()
        .any(|f| f.queue_flags.contains(vk::QueueFlags::COMPUTE))
    {
        Err(Unusable::NoComputeQueue)
    } else if !features.rgba16f_storage_image || !features.rgba32f_storage_image {
        Err(Unusable::NoTensorStorageImages)
    } else {
        Ok(())
    };

    Ok(DeviceReport {
        index,
        name: cstr(&props.device_name),
        device_type: device_type_name(props.device_type).into(),
        vendor_id: props.vendor_id,
        device_id: props.device_id,
        api_version: version(api_version),
        driver_version: driver_version(props.vendor_id, props.driver_version),
        driver_name,
        driver_info,
        usable,
        default_choice: false,
        limits,
        queue_families,
        dedicated_transfer_family,
        memory_heaps,
        memory_types,
        features,
        extensions,
        cooperative_matrix_shapes,
        interrupt_cores: pci_address
            .map(crate::placement::machine_interrupt_cores)
            .unwrap_or_default(),
        pci_address,
    })
}
