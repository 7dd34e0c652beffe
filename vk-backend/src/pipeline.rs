//! Compute pipelines from embedded SPIR-V, cached per (kernel, precision) in the device.

use std::sync::Arc;

use ash::vk;

use crate::device::Device;
use crate::error::{Result, VkError, VkResultExt};
use crate::layout::Precision;
pub use crate::types::{BindingKind, StorageKind};

/// Static description of a kernel: everything needed to build its pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct KernelDesc {
    /// Shader file stem: `shaders/<name>.comp`.
    pub name: &'static str,
    /// Set 0 bindings, binding `i` = `bindings[i]`.
    pub bindings: &'static [BindingKind],
    /// Size of the push-constant block in bytes (<= 128 to run everywhere).
    pub push_constant_bytes: u32,
    /// Whether the shader includes `weights.glsl` (set 1 = weight atlas + page table).
    pub uses_weights: bool,
}

/// The specialization constants a pipeline is built with (a shader without one ignores its
/// entry).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Specialization {
    /// Constant 0, `UNFOLDED_OPERANDS` (tensor.glsl): every tensor the kernel reads with
    /// `LOAD_AT` is unfolded (physical width and height equal to the logical ones), so their
    /// coordinates skip the fold's test and divisions.
    pub unfolded: bool,
    /// Constant 1, `INPUT_SCALED` (include/conv_input_scale.glsl): the convolution multiplies its
    /// input's channels by an input scale. Tested at run time inside the reduction loop, it
    /// cost llvmpipe a third more time on every convolution, scaled or not (the PP-OCR
    /// recognizer's 135 -> 190 ms, session 42).
    pub input_scaled: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PipelineKey {
    name: &'static str,
    precision: Precision,
    weights: Precision,
    storage: StorageKind,
    spec: Specialization,
}

/// A built compute pipeline with its layouts.
pub struct Pipeline {
    pub(crate) desc: KernelDesc,
    pub(crate) precision: Precision,
    /// Precision of the weight atlas the kernel reads (the activations' unless mixed).
    pub(crate) weights: Precision,
    pub(crate) storage: StorageKind,
    /// The specialization constants it was built with.
    pub(crate) spec: Specialization,
    pub(crate) pipeline: vk::Pipeline,
    pub(crate) layout: vk::PipelineLayout,
    pub(crate) set_layout: vk::DescriptorSetLayout,
}

impl Pipeline {
    pub fn desc(&self) -> &KernelDesc {
        &self.desc
    }
    pub fn precision(&self) -> Precision {
        self.precision
    }
    /// Precision of the weight atlas this variant reads.
    pub fn weight_precision(&self) -> Precision {
        self.weights
    }
    /// Whether activation tensors are bound as images or storage buffers.
    pub fn storage(&self) -> StorageKind {
        self.storage
    }
    pub(crate) fn destroy(&self, device: &ash::Device) {
        // SAFETY: called once from DeviceInner::drop after the device is idle.
        unsafe {
            device.destroy_pipeline(self.pipeline, None);
            device.destroy_pipeline_layout(self.layout, None);
            device.destroy_descriptor_set_layout(self.set_layout, None);
        }
    }
}

/// Binding of the weight atlas image in set 0 of kernels with `uses_weights` (see weights.glsl).
pub const WEIGHT_ATLAS_BINDING: u32 = 16;
/// Binding of the page-table buffer in set 0 of kernels with `uses_weights`.
pub const WEIGHT_PAGE_TABLE_BINDING: u32 = 17;
/// The most bytes a kernel's SPIR-V read from [`crate::DeviceOptions::shader_dir`] may take (the
/// largest embedded kernel is about 110 KiB).
const MAX_SHADER_FILE_BYTES: u64 = 16 << 20;

impl Device {
    /// The (image-variant) pipeline for `desc` at `precision`, built on first use and cached.
    /// The recorder switches to the storage-buffer variant by itself when the bound tensors are
    /// buffer tensors.
    pub fn pipeline(&self, desc: &KernelDesc, precision: Precision) -> Result<Arc<Pipeline>> {
        self.pipeline_variant(desc, precision, StorageKind::Image)
    }

    /// The pipeline for `desc` at `precision` with activation tensors in `storage`, built on first
    /// use and cached per (name, precision, storage).
    pub fn pipeline_variant(
        &self,
        desc: &KernelDesc,
        precision: Precision,
        storage: StorageKind,
    ) -> Result<Arc<Pipeline>> {
        self.pipeline_mixed(desc, precision, precision, storage)
    }

    /// The pipeline for `desc` with activations at `precision`, reading a weight atlas at
    /// `weights` (fp16 weights under fp32 activations is the one mixed pair built), cached per
    /// (name, precision, weights, storage). The recorder picks the variant matching the bound atlas.
    pub fn pipeline_mixed(
        &self,
        desc: &KernelDesc,
        precision: Precision,
        weights: Precision,
        storage: StorageKind,
    ) -> Result<Arc<Pipeline>> {
        self.pipeline_specialized(desc, precision, weights, storage, Specialization::default())
    }

    /// [`Self::pipeline`] built with the specialization constants `spec`. The recorder keeps
    /// them when it switches to the variant for the bound atlas or storage.
    pub fn pipeline_with(
        &self,
        desc: &KernelDesc,
        precision: Precision,
        spec: Specialization,
    ) -> Result<Arc<Pipeline>> {
        self.pipeline_specialized(desc, precision, precision, StorageKind::Image, spec)
    }

    /// The pipeline for `desc` at (`precision`, `weights`, `storage`) with the specialization
    /// `spec`, cached per all five.
    pub(crate) fn pipeline_specialized(
        &self,
        desc: &KernelDesc,
        precision: Precision,
        weights: Precision,
        storage: StorageKind,
        spec: Specialization,
    ) -> Result<Arc<Pipeline>> {
        // Kernels that never read the atlas have one variant per activation precision.
        let weights = if desc.uses_weights {
            weights
        } else {
            precision
        };
        let key = PipelineKey {
            name: desc.name,
            precision,
            weights,
            storage,
            spec,
        };
        let mut map = self
            .inner
            .pipelines
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(p) = map.get(&key) {
            if p.desc != *desc {
                return Err(VkError::Kernel {
                    kernel: desc.name.into(),
                    reason: "two different KernelDesc values use the same shader name".into(),
                });
            }
            return Ok(p.clone());
        }
        let p = Arc::new(self.build_pipeline(desc, precision, weights, storage, spec)?);
        map.insert(key, p.clone());
        Ok(p)
    }

    /// The SPIR-V of `name`'s variant read from [`crate::DeviceOptions::shader_dir`], and its
    /// path, where that directory has a file for it.
    fn shader_override(
        &self,
        name: &str,
        precision: Precision,
        weights: Precision,
        storage: StorageKind,
    ) -> Result<Option<(Vec<u8>, std::path::PathBuf)>> {
        let (Some(dir), Some(suffix)) = (
            self.shader_dir(),
            crate::shaders::variant_suffix(precision, weights, storage),
        ) else {
            return Ok(None);
        };
        let path = dir.join(format!("{name}.{suffix}.spv"));
        let failed = |reason: String| VkError::Kernel {
            kernel: name.into(),
            reason,
        };
        let size = match std::fs::metadata(&path) {
            Ok(m) => m.len(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(failed(format!("reading {}: {e}", path.display()))),
        };
        // A file far past any kernel's size is not read whole.
        if size > MAX_SHADER_FILE_BYTES {
            return Err(failed(format!(
                "{} is {size} bytes, more than the {MAX_SHADER_FILE_BYTES} a kernel's SPIR-V may take",
                path.display()
            )));
        }
        std::fs::read(&path)
            .map(|bytes| Some((bytes, path.clone())))
            .map_err(|e| failed(format!("reading {}: {e}", path.display())))
    }

    fn build_pipeline(
        &self,
        desc: &KernelDesc,
        precision: Precision,
        weights: Precision,
        storage: StorageKind,
        spec: Specialization,
    ) -> Result<Pipeline> {
        let spirv = crate::shaders::spirv_variant(desc.name, precision, weights, storage)
            .ok_or_else(|| {
                if weights == precision {
                    VkError::NoShader(desc.name.to_string())
                } else {
                    VkError::Kernel {
                        kernel: desc.name.into(),
                        reason: format!(
                            "no variant reads a {weights:?} weight atlas with {precision:?} \
                             activations (fp16 weights under fp32 activations is the mixed pair)"
                        ),
                    }
                }
            })?;
        let (spirv, from) = match self.shader_override(desc.name, precision, weights, storage)? {
            Some((bytes, path)) => (std::borrow::Cow::Owned(bytes), Some(path)),
            None => (std::borrow::Cow::Borrowed(spirv), None),
        };
        let code = ash::util::read_spv(&mut std::io::Cursor::new(&spirv[..])).map_err(|e| {
            VkError::Kernel {
                kernel: desc.name.into(),
                reason: match &from {
                    Some(path) => format!("bad SPIR-V in {}: {e}", path.display()),
                    None => format!("bad SPIR-V: {e}"),
                },
            }
        })?;
        if let Some(path) = from {
            self.note_shader_override(path);
        }
        let dev = self.raw();
        if desc.bindings.len() > WEIGHT_ATLAS_BINDING as usize {
            return Err(VkError::Kernel {
                kernel: desc.name.into(),
                reason: format!("more than {WEIGHT_ATLAS_BINDING} bindings"),
            });
        }
        let mut bindings: Vec<_> = desc
            .bindings
            .iter()
            .enumerate()
            .map(|(i, k)| {
                vk::DescriptorSetLayoutBinding::default()
                    .binding(i as u32)
                    .descriptor_type(crate::conv::descriptor_type(*k, storage))
                    .descriptor_count(1)
                    .stage_flags(vk::ShaderStageFlags::COMPUTE)
            })
            .collect();
        if desc.uses_weights {
            // Weights sit in set 0 at fixed bindings so every kernel needs exactly one set.
            for (b, ty) in [
                (WEIGHT_ATLAS_BINDING, vk::DescriptorType::STORAGE_IMAGE),
                (
                    WEIGHT_PAGE_TABLE_BINDING,
                    vk::DescriptorType::STORAGE_BUFFER,
                ),
            ] {
                bindings.push(
                    vk::DescriptorSetLayoutBinding::default()
                        .binding(b)
                        .descriptor_type(ty)
                        .descriptor_count(1)
                        .stage_flags(vk::ShaderStageFlags::COMPUTE),
                );
            }
        }
        // SAFETY (whole block): valid create infos; objects destroyed on error.
        unsafe {
            let set_layout = dev
                .create_descriptor_set_layout(
                    &vk::DescriptorSetLayoutCreateInfo::default().bindings(&bindings),
                    None,
                )
                .vk("vkCreateDescriptorSetLayout")?;
            let set_layouts = vec![set_layout];
            let ranges = [vk::PushConstantRange::default()
                .stage_flags(vk::ShaderStageFlags::COMPUTE)
                .offset(0)
                .size(desc.push_constant_bytes)];
            let mut lci = vk::PipelineLayoutCreateInfo::default().set_layouts(&set_layouts);
            if desc.push_constant_bytes > 0 {
                lci = lci.push_constant_ranges(&ranges);
            }
            let cleanup_layouts = || {
                for l in &set_layouts {
                    dev.destroy_descriptor_set_layout(*l, None);
                }
            };
            let layout = match dev.create_pipeline_layout(&lci, None) {
                Ok(l) => l,
                Err(e) => {
                    cleanup_layouts();
                    return Err(e).vk("vkCreatePipelineLayout");
                }
            };
            let module = match dev
                .create_shader_module(&vk::ShaderModuleCreateInfo::default().code(&code), None)
            {
                Ok(m) => m,
                Err(e) => {
                    dev.destroy_pipeline_layout(layout, None);
                    cleanup_layouts();
                    return Err(e).vk("vkCreateShaderModule");
                }
            };
            // The constants of `Specialization`, one Bool32 each; shaders without one ignore
            // its entry.
            let bool_size = std::mem::size_of::<vk::Bool32>();
            let entries = [0u32, 1].map(|id| vk::SpecializationMapEntry {
                constant_id: id,
                offset: id * bool_size as u32,
                size: bool_size,
            });
            let mut values = Vec::with_capacity(2 * bool_size);
            for flag in [spec.unfolded, spec.input_scaled] {
                values.extend_from_slice(&vk::Bool32::from(flag).to_le_bytes());
            }
            let specialization = vk::SpecializationInfo::default()
                .map_entries(&entries)
                .data(&values);
            let stage = vk::PipelineShaderStageCreateInfo::default()
                .stage(vk::ShaderStageFlags::COMPUTE)
                .module(module)
                .name(c"main")
                .specialization_info(&specialization);
            let ci = vk::ComputePipelineCreateInfo::default()
                .stage(stage)
                .layout(layout);
            let res = dev.create_compute_pipelines(self.inner.pipeline_cache, &[ci], None);
            dev.destroy_shader_module(module, None);
            let pipeline = match res {
                Ok(p) => p[0],
                Err((_, e)) => {
                    dev.destroy_pipeline_layout(layout, None);
                    cleanup_layouts();
                    return Err(e).vk("vkCreateComputePipelines");
                }
            };
            Ok(Pipeline {
                desc: *desc,
                precision,
                weights,
                storage,
                spec,
                pipeline,
                layout,
                set_layout,
            })
        }
    }
}
