//! Descriptor sets of a recorder's dispatches: allocated from pools the recorder owns until its
//! submission completes (then recycled for the next recorder), and written in one update.

use ash::vk;

use super::Recorder;
use crate::error::{Result, VkResultExt};

/// Sets per descriptor pool.
const POOL_SETS: u32 = 128;

impl Recorder {
    /// A descriptor set of `layout` from this recorder's newest pool, or from a fresh (or
    /// recycled) pool when that one is full.
    pub(super) fn alloc_set(
        &mut self,
        layout: vk::DescriptorSetLayout,
    ) -> Result<vk::DescriptorSet> {
        let dev = self.device.raw().clone();
        let layouts = [layout];
        if let Some(&pool) = self.desc_pools.last() {
            let ai = vk::DescriptorSetAllocateInfo::default()
                .descriptor_pool(pool)
                .set_layouts(&layouts);
            // SAFETY: valid pool and layout.
            match unsafe { dev.allocate_descriptor_sets(&ai) } {
                Ok(s) => return Ok(s[0]),
                Err(vk::Result::ERROR_OUT_OF_POOL_MEMORY)
                | Err(vk::Result::ERROR_FRAGMENTED_POOL) => {}
                Err(e) => return Err(e).vk("vkAllocateDescriptorSets"),
            }
        }
        let sizes = [
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_IMAGE,
                descriptor_count: POOL_SETS * 6,
            },
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::STORAGE_BUFFER,
                // Storage-buffer kernel variants bind every tensor as a buffer.
                descriptor_count: POOL_SETS * 6,
            },
            vk::DescriptorPoolSize {
                ty: vk::DescriptorType::UNIFORM_BUFFER,
                descriptor_count: POOL_SETS,
            },
        ];
        let ci = vk::DescriptorPoolCreateInfo::default()
            .max_sets(POOL_SETS)
            .pool_sizes(&sizes);
        let pool = match self.device.inner.recycler.take_descriptor_pool() {
            Some(p) => p,
            // SAFETY: valid create info.
            None => {
                unsafe { dev.create_descriptor_pool(&ci, None) }.vk("vkCreateDescriptorPool")?
            }
        };
        self.desc_pools.push(pool);
        let ai = vk::DescriptorSetAllocateInfo::default()
            .descriptor_pool(pool)
            .set_layouts(&layouts);
        // SAFETY: fresh pool.
        unsafe { dev.allocate_descriptor_sets(&ai) }
            .map(|s| s[0])
            .vk("vkAllocateDescriptorSets")
    }
}

/// The bindings of one descriptor set, collected and then written with one
/// `vkUpdateDescriptorSets`.
#[derive(Default)]
pub(super) struct SetWrites {
    images: Vec<(u32, vk::DescriptorImageInfo)>,
    buffers: Vec<(u32, vk::DescriptorType, vk::DescriptorBufferInfo)>,
}

impl SetWrites {
    /// A storage image (in GENERAL layout) at `binding`.
    pub fn storage_image(&mut self, binding: u32, view: vk::ImageView) {
        self.images.push((
            binding,
            vk::DescriptorImageInfo::default()
                .image_view(view)
                .image_layout(vk::ImageLayout::GENERAL),
        ));
    }

    /// The whole of `buffer` at `binding`, as a storage or uniform buffer (`ty`).
    pub fn buffer(&mut self, binding: u32, ty: vk::DescriptorType, buffer: vk::Buffer) {
        self.buffers.push((
            binding,
            ty,
            vk::DescriptorBufferInfo::default()
                .buffer(buffer)
                .offset(0)
                .range(vk::WHOLE_SIZE),
        ));
    }

    /// Writes every collected binding into `set`.
    ///
    /// # Safety
    /// `set` and every handle collected must be valid, and `set` not in use by pending work.
    pub unsafe fn apply(&self, device: &ash::Device, set: vk::DescriptorSet) {
        let mut writes = Vec::with_capacity(self.images.len() + self.buffers.len());
        for (binding, info) in &self.images {
            writes.push(
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(*binding)
                    .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
                    .image_info(std::slice::from_ref(info)),
            );
        }
        for (binding, ty, info) in &self.buffers {
            writes.push(
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(*binding)
                    .descriptor_type(*ty)
                    .buffer_info(std::slice::from_ref(info)),
            );
        }
        // SAFETY: per this function's contract.
        unsafe { device.update_descriptor_sets(&writes, &[]) };
    }
}
