//! Adapters (physical devices): the one enumeration and ranking that both `Device::new` and
//! the `texstream devices` report use, and the capabilities `Device::new` finds on the chosen
//! adapter before it creates the logical device: features, cooperative-matrix shapes, queue
//! families and image limits.

use std::ffi::CStr;

use ash::vk;

use crate::conv::{device_type_rank, fixed_cstr};
use crate::error::{Result, VkError, VkResultExt};
use crate::instance::{load_entry, plain_instance};

/// Summary of one physical device, as enumerated.
#[derive(Debug, Clone)]
pub struct AdapterInfo {
    pub index: usize,
    pub name: String,
    pub device_type: vk::PhysicalDeviceType,
    pub api_version: u32,
}

/// A physical device and its summary.
pub(crate) struct Adapter {
    pub physical: vk::PhysicalDevice,
    pub info: AdapterInfo,
}

/// Every physical device `instance` sees, in enumeration order.
pub(crate) fn adapters(instance: &ash::Instance) -> Result<Vec<Adapter>> {
    // SAFETY: valid instance; properties of the devices it returned.
    let physicals =
        unsafe { instance.enumerate_physical_devices() }.vk("vkEnumeratePhysicalDevices")?;
    Ok(physicals
        .into_iter()
        .enumerate()
        .map(|(index, physical)| {
            let p = unsafe { instance.get_physical_device_properties(physical) };
            Adapter {
                physical,
                info: AdapterInfo {
                    index,
                    name: fixed_cstr(&p.device_name),
                    device_type: p.device_type,
                    api_version: p.api_version,
                },
            }
        })
        .collect())
}

/// Lists the physical devices without opening one.
pub fn enumerate_adapters() -> Result<Vec<AdapterInfo>> {
    let entry = load_entry()?;
    let instance = plain_instance(&entry, vk::API_VERSION_1_2)?;
    let out = adapters(&instance).map(|list| list.into_iter().map(|a| a.info).collect());
    // SAFETY: nothing created from the instance outlives this call.
    unsafe { instance.destroy_instance(None) };
    out
}

/// Picks an adapter: by index, by name substring, else by type preference (discrete >
/// integrated > virtual > CPU); only Vulkan 1.2 adapters qualify.
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
                return usable
                    .iter()
                    .find(|a| a.index == i)
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
            .min_by_key(|a| (device_type_rank(a.device_type), a.index))
            .map(|a| a.index)
            .unwrap_or(usable[0].index)),
    }
}

/// The first transfer-only queue family (no compute, no graphics): the dedicated copy engine
/// weight uploads use where a device has one.
pub(crate) fn dedicated_transfer_family(families: &[vk::QueueFamilyProperties]) -> Option<u32> {
    families
        .iter()
        .position(|f| {
            f.queue_flags.contains(vk::QueueFlags::TRANSFER)
                && !f
                    .queue_flags
                    .intersects(vk::QueueFlags::COMPUTE | vk::QueueFlags::GRAPHICS)
        })
        .map(|i| i as u32)
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
    /// The compute stage has subgroup arithmetic (`subgroupAdd`, `subgroupMax`): the row
    /// normalizations reduce with it (`*_subgroup.comp`).
    pub subgroup_arithmetic: bool,
    pub timeline_semaphore: bool,
    pub storage_image_read_without_format: bool,
    /// `hostQueryReset` (Vulkan 1.2): enabled where supported; the stream engine's timestamps use it.
    pub host_query_reset: bool,
    /// `VK_NV_cooperative_matrix` enabled with the fp16 16x8x16 (fp32 accumulate) subgroup shape,
    /// `shaderFloat16` and 32-wide subgroups: MatMul with constant B uses tensor-core kernels.
    pub cooperative_matrix_f16: bool,
    /// About how many invocations the device runs at once: streaming multiprocessors x warps
    /// x subgroup width where `VK_NV_shader_sm_builtins` tells, else a figure by device type.
    /// Kernels size their work splits by it (a CPU device gains nothing from many small
    /// invocations; a large GPU idles without them).
    pub concurrent_invocations: u64,
    /// The tile every cooperative-matrix convolution runs on, where the device's options fix
    /// one ([`crate::DeviceOptions::coop_conv_tile`]); `None` picks by shape.
    pub coop_conv_tile: Option<crate::kernels::CoopTile>,
    /// The GEMV staging divisor the device's options fix ([`crate::DeviceOptions::gemv_spread`]);
    /// `None`: 4.
    pub gemv_spread: Option<u32>,
    /// Few-row MatMuls on the deep GEMV or not, where the device's options fix it
    /// ([`crate::DeviceOptions::gemv_deep`]); `None`: by shape.
    pub gemv_deep: Option<bool>,
    /// The fewest output tiles a tensor-core MatMul takes, where the device's options fix it
    /// ([`crate::DeviceOptions::coop_min_tiles`]); `None`: one per eight streaming multiprocessors.
    pub coop_min_tiles: Option<u64>,
    /// The rows of every tensor-core MatMul's tiles, where the device's options fix them
    /// ([`crate::DeviceOptions::coop_rows`]); `None`: by shape ([`crate::kernels::coop_rows`]).
    pub coop_rows: Option<u32>,
    /// Columns of the tensor-core MatMul's tiles over a packed A, where the device's options fix
    /// them ([`crate::DeviceOptions::coop_cols`]); `None`: by shape ([`crate::kernels::coop_cols`]).
    pub coop_cols: Option<u32>,
    /// The key spans of every tensor-core attention, where the device's options fix them
    /// ([`crate::DeviceOptions::attention_splits`]); `None`: by shape.
    pub attention_splits: Option<u32>,
    /// Attention operands split into heads are copied into heads first rather than read from
    /// their rows, where the device's options ask for it
    /// ([`crate::DeviceOptions::attention_head_copies`]).
    pub attention_head_copies: bool,
    /// Query blocks a head lane of every tensor-core attention, where the device's options fix
    /// them ([`crate::DeviceOptions::attention_query_blocks`]); `None`: by shape.
    pub attention_query_blocks: Option<u32>,
    /// Tensor-core MatMuls read A from a four-values-a-texel copy or not, where the device's
    /// options fix it ([`crate::DeviceOptions::matmul_packed_a`]); `None`: by shape.
    pub matmul_packed_a: Option<bool>,
    /// Tensor-core MatMuls write an output only the next MatMul reads as that one's packed A
    /// ([`crate::DeviceOptions::matmul_packed_out`]); `None`: wherever it can.
    pub matmul_packed_out: Option<bool>,
    /// Row norms write an output only tensor-core MatMuls read as their packed A
    /// ([`crate::DeviceOptions::norm_packed_out`]); `None`: wherever they can.
    pub norm_packed_out: Option<bool>,
    /// The tensor-core attention writes merged heads only the next MatMul reads as its packed A
    /// ([`crate::DeviceOptions::attention_packed_out`]); `None`: wherever it can.
    pub attention_packed_out: Option<bool>,
    /// Key and value projections write rows only the tensor-core attention reads packed
    /// ([`crate::DeviceOptions::attention_packed_kv`]); `None`: for the one-block kernels.
    pub attention_packed_kv: Option<bool>,
    /// k a step of the tensor-core MatMuls, where the device's options fix it
    /// ([`crate::DeviceOptions::coop_step_k`]); `None`: by shape.
    pub coop_step_k: Option<u32>,
    /// Reduction spans of tensor-core MatMuls, where the device's options fix them
    /// ([`crate::DeviceOptions::matmul_split_k`]); `None`: by shape.
    pub matmul_split_k: Option<u32>,
    /// Reduction spans of every tensor-core convolution on the small or wide tile, where the
    /// device's options fix them ([`crate::DeviceOptions::conv_split_k`]); `None`: by shape.
    pub conv_split_k: Option<u32>,
    /// Fewest output pixels of a tensor-core convolution, where the device's options fix it
    /// ([`crate::DeviceOptions::coop_conv_min_pixels`]); `None`: the small tile's 16.
    pub coop_conv_min_pixels: Option<u32>,
    /// Short-row norms in row groups or not, where the device's options fix it
    /// ([`crate::DeviceOptions::norm_row_groups`]); `None`: by shape.
    pub norm_row_groups: Option<bool>,
    /// Few-row norms on 1024 invocations a row or not, where the device's options fix it
    /// ([`crate::DeviceOptions::norm_wide_rows`]); `None`: by shape.
    pub norm_wide_rows: Option<bool>,
    /// The tensor-core attention in one pass over the keys or two, where the device's options
    /// fix it ([`crate::DeviceOptions::attention_one_pass`]); `None`: one.
    pub attention_one_pass: Option<bool>,
    /// Outputs read back as dense values or as texel copies, where the device's options fix it
    /// ([`crate::DeviceOptions::dense_readback`]); `None`: dense.
    pub dense_readback: Option<bool>,
}

/// [`DeviceFeatures::runs_few_invocations`]: below this many invocations at once.
const FEW_INVOCATIONS: u64 = 1 << 12;

impl DeviceFeatures {
    /// Whether the device runs few invocations at once (a CPU driver such as lavapipe: a few
    /// threads of SIMD lanes). There shared memory and barriers cost more than the loads they
    /// save, and memory latency needs no hiding: some kernels take other shapes there
    /// (`kernels::pool`'s narrow global pools, `kernels::matmul`'s short MatMuls).
    pub fn runs_few_invocations(&self) -> bool {
        self.concurrent_invocations < FEW_INVOCATIONS
    }

    /// About how many streaming multiprocessors the device has: one per 2048 of
    /// [`Self::concurrent_invocations`] (64 warps of 32), at least one. Kernels size their
    /// workgroup counts and splits against it.
    pub fn multiprocessors(&self) -> u64 {
        (self.concurrent_invocations / 2048).max(1)
    }
}

/// Whether compute shaders have subgroup arithmetic (`subgroupAdd`, `subgroupMax`).
pub(crate) fn has_subgroup_arithmetic(sub: &vk::PhysicalDeviceSubgroupProperties) -> bool {
    sub.supported_stages.contains(vk::ShaderStageFlags::COMPUTE)
        && sub
            .supported_operations
            .contains(vk::SubgroupFeatureFlags::BASIC | vk::SubgroupFeatureFlags::ARITHMETIC)
}

/// Where a device sits on the PCI bus.
///
/// # Safety
/// `physical` belongs to `instance`, and it has `VK_EXT_pci_bus_info`.
pub(crate) unsafe fn pci_address(
    instance: &ash::Instance,
    physical: vk::PhysicalDevice,
) -> crate::placement::PciAddress {
    let mut pci = vk::PhysicalDevicePCIBusInfoPropertiesEXT::default();
    let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut pci);
    unsafe { instance.get_physical_device_properties2(physical, &mut p2) };
    crate::placement::PciAddress {
        domain: pci.pci_domain,
        bus: pci.pci_bus,
        device: pci.pci_device,
        function: pci.pci_function,
    }
}

/// What an adapter offers (`Device::new` then turns off what its options ask it not to use).
pub(crate) struct Capabilities {
    pub physical: vk::PhysicalDevice,
    pub name: String,
    pub properties: vk::PhysicalDeviceProperties,
    pub memory_properties: vk::PhysicalDeviceMemoryProperties,
    pub features: DeviceFeatures,
    /// Vulkan 1.0 features, of which the storage-image format ones are enabled.
    pub base_features: vk::PhysicalDeviceFeatures,
    pub compute_family: u32,
    /// A transfer-only family, where there is one.
    pub transfer_family: Option<u32>,
    /// Image limits, which decide folding.
    pub limits: ImageLimits,
    /// Where the device sits on the PCI bus (`VK_EXT_pci_bus_info`), where it says.
    pub pci_address: Option<crate::placement::PciAddress>,
}

impl Capabilities {
    /// Queries `adapter` for what texstream needs and can use; errors when it lacks timeline
    /// semaphores or a compute queue.
    ///
    /// # Safety
    /// `adapter` must come from `instance`, which `entry` loaded.
    pub unsafe fn probe(
        entry: &ash::Entry,
        instance: &ash::Instance,
        adapter: &Adapter,
    ) -> Result<Capabilities> {
        let physical = adapter.physical;
        let name = adapter.info.name.clone();
        let properties = unsafe { instance.get_physical_device_properties(physical) };
        let memory_properties = unsafe { instance.get_physical_device_memory_properties(physical) };

        let exts = unsafe { instance.enumerate_device_extension_properties(physical) }
            .vk("vkEnumerateDeviceExtensionProperties")?;
        let has_ext = |n: &CStr| {
            exts.iter()
                .any(|e| fixed_cstr(&e.extension_name) == n.to_string_lossy())
        };

        let mut f11 = vk::PhysicalDeviceVulkan11Features::default();
        let mut f12 = vk::PhysicalDeviceVulkan12Features::default();
        let mut f2 = vk::PhysicalDeviceFeatures2::default()
            .push_next(&mut f11)
            .push_next(&mut f12);
        unsafe { instance.get_physical_device_features2(physical, &mut f2) };
        let base_features = f2.features;
        let mut coop_f = vk::PhysicalDeviceCooperativeMatrixFeaturesNV::default();
        let coop_ext = has_ext(ash::nv::cooperative_matrix::NAME);
        if coop_ext {
            let mut f2c = vk::PhysicalDeviceFeatures2::default().push_next(&mut coop_f);
            unsafe { instance.get_physical_device_features2(physical, &mut f2c) };
        }
        let mut sub = vk::PhysicalDeviceSubgroupProperties::default();
        let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut sub);
        unsafe { instance.get_physical_device_properties2(physical, &mut p2) };
        let sm_builtins = has_ext(ash::nv::shader_sm_builtins::NAME).then(|| {
            let mut sm = vk::PhysicalDeviceShaderSMBuiltinsPropertiesNV::default();
            let mut p2 = vk::PhysicalDeviceProperties2::default().push_next(&mut sm);
            unsafe { instance.get_physical_device_properties2(physical, &mut p2) };
            (sm.shader_sm_count, sm.shader_warps_per_sm)
        });
        let concurrent_invocations =
            concurrent_invocations(properties.device_type, sm_builtins, sub.subgroup_size);
        let pci_address = has_ext(ash::ext::pci_bus_info::NAME)
            .then(|| unsafe { pci_address(instance, physical) });
        let coop_shape = coop_ext
            && coop_f.cooperative_matrix == vk::TRUE
            && f12.shader_float16 == vk::TRUE
            && f12.vulkan_memory_model == vk::TRUE
            && sub.subgroup_size == 32
            && nv_coop_shapes(entry, instance, physical).iter().any(|p| {
                (p.m_size, p.n_size, p.k_size) == (16, 8, 16)
                    && p.a_type == vk::ComponentTypeNV::FLOAT16
                    && p.b_type == vk::ComponentTypeNV::FLOAT16
                    && p.c_type == vk::ComponentTypeNV::FLOAT32
                    && p.d_type == vk::ComponentTypeNV::FLOAT32
                    && p.scope == vk::ScopeNV::SUBGROUP
            });
        let features = DeviceFeatures {
            cooperative_matrix_f16: coop_shape,
            concurrent_invocations,
            coop_conv_tile: None,
            gemv_spread: None,
            gemv_deep: None,
            coop_min_tiles: None,
            coop_rows: None,
            coop_cols: None,
            attention_splits: None,
            attention_head_copies: false,
            attention_query_blocks: None,
            matmul_packed_a: None,
            matmul_packed_out: None,
            norm_packed_out: None,
            attention_packed_out: None,
            attention_packed_kv: None,
            coop_step_k: None,
            matmul_split_k: None,
            conv_split_k: None,
            coop_conv_min_pixels: None,
            norm_row_groups: None,
            norm_wide_rows: None,
            attention_one_pass: None,
            dense_readback: None,
            shader_float16: f12.shader_float16 == vk::TRUE,
            storage_buffer_16bit: f11.storage_buffer16_bit_access == vk::TRUE,
            memory_budget: has_ext(ash::ext::memory_budget::NAME),
            cooperative_matrix_khr: has_ext(ash::khr::cooperative_matrix::NAME),
            cooperative_matrix_nv: has_ext(ash::nv::cooperative_matrix::NAME),
            subgroup_arithmetic: has_subgroup_arithmetic(&sub),
            subgroup_size_control: has_ext(ash::ext::subgroup_size_control::NAME)
                || properties.api_version >= vk::API_VERSION_1_3,
            timeline_semaphore: f12.timeline_semaphore == vk::TRUE,
            host_query_reset: f12.host_query_reset == vk::TRUE,
            storage_image_read_without_format: base_features
                .shader_storage_image_read_without_format
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
        let transfer_family = dedicated_transfer_family(&families);
        let limits = ImageLimits {
            max_image_dimension_2d: properties.limits.max_image_dimension2_d,
            max_image_array_layers: properties.limits.max_image_array_layers,
        };
        Ok(Capabilities {
            physical,
            name,
            properties,
            memory_properties,
            features,
            base_features,
            compute_family,
            transfer_family,
            limits,
            pci_address,
        })
    }
}

/// [`DeviceFeatures::concurrent_invocations`]: from the SM count and warps per SM where the
/// driver reports them, else by device type (a discrete GPU of a few dozen compute units, an
/// integrated one, a CPU implementation such as lavapipe: a few threads of SIMD lanes, where a
/// split reduction only adds work, so just the smallest outputs split).
fn concurrent_invocations(
    device_type: vk::PhysicalDeviceType,
    sm_builtins: Option<(u32, u32)>,
    subgroup_size: u32,
) -> u64 {
    match sm_builtins {
        Some((sms, warps)) if sms > 0 && warps > 0 => {
            sms as u64 * warps as u64 * subgroup_size.max(1) as u64
        }
        _ => match device_type {
            vk::PhysicalDeviceType::DISCRETE_GPU => 1 << 17,
            // A few threads of 8-16 lanes: more invocations only queue (a split costs there).
            vk::PhysicalDeviceType::CPU => 1 << 7,
            _ => 1 << 15,
        },
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn adapter(index: usize, name: &str, t: vk::PhysicalDeviceType, api: u32) -> AdapterInfo {
        AdapterInfo {
            index,
            name: name.into(),
            device_type: t,
            api_version: api,
        }
    }

    fn list() -> Vec<AdapterInfo> {
        use vk::PhysicalDeviceType as T;
        vec![
            adapter(0, "llvmpipe (LLVM 15)", T::CPU, vk::API_VERSION_1_3),
            adapter(1, "Old GPU", T::DISCRETE_GPU, vk::API_VERSION_1_1),
            adapter(2, "Intel UHD", T::INTEGRATED_GPU, vk::API_VERSION_1_3),
            adapter(3, "NVIDIA H200", T::DISCRETE_GPU, vk::API_VERSION_1_3),
        ]
    }

    #[test]
    fn prefers_a_discrete_vulkan_1_2_device() {
        assert_eq!(select_adapter(&list(), None).unwrap(), 3);
        assert_eq!(select_adapter(&list(), Some("  ")).unwrap(), 3);
    }

    #[test]
    fn selects_by_index_or_name_substring() {
        assert_eq!(select_adapter(&list(), Some("2")).unwrap(), 2);
        assert_eq!(select_adapter(&list(), Some("llvmPIPE")).unwrap(), 0);
        // Below Vulkan 1.2, by index or by name.
        assert!(select_adapter(&list(), Some("1")).is_err());
        assert!(select_adapter(&list(), Some("old")).is_err());
        let e = select_adapter(&list(), Some("radeon")).unwrap_err();
        assert!(e.to_string().contains("radeon") && e.to_string().contains("#3 NVIDIA H200"));
    }

    #[test]
    fn no_usable_adapter_is_an_error() {
        assert!(select_adapter(&[], None).is_err());
        assert!(select_adapter(&list()[1..2], None).is_err());
    }
}
