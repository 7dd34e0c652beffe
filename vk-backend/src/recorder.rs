//! Command recorder: many dispatches and copies in one command buffer, barriers inserted only
//! where a hazard exists, one submit with timeline-semaphore waits/signals, one fence per submit.

use std::collections::HashSet;
use std::sync::Arc;

use ash::vk;

use crate::atlas::WeightAtlas;
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError, VkResultExt};
use crate::pipeline::{BindingKind, Pipeline, WEIGHT_ATLAS_BINDING, WEIGHT_PAGE_TABLE_BINDING};
use crate::resource::{color_range, Buffer, Image};
use crate::sync::{SemaphoreSignal, SemaphoreWait};
use crate::tensor::{Tensor, TensorStorage};
use crate::timestamps::TimestampQueries;

/// How a kernel uses a bound resource (drives barrier insertion).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    ReadWrite,
}

impl Access {
    fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

#[derive(Clone, Copy)]
enum ArgRes<'a> {
    Tensor(&'a Tensor),
    Buffer(&'a Buffer),
}

/// One descriptor argument of a dispatch, in binding order.
#[derive(Clone, Copy)]
pub struct Arg<'a> {
    res: ArgRes<'a>,
    access: Access,
}

impl<'a> Arg<'a> {
    /// A tensor the kernel reads (binding kind `StorageImage`).
    pub fn input(t: &'a Tensor) -> Self {
        Arg {
            res: ArgRes::Tensor(t),
            access: Access::Read,
        }
    }
    /// A tensor the kernel writes.
    pub fn output(t: &'a Tensor) -> Self {
        Arg {
            res: ArgRes::Tensor(t),
            access: Access::Write,
        }
    }
    /// A tensor the kernel reads and writes.
    pub fn inout(t: &'a Tensor) -> Self {
        Arg {
            res: ArgRes::Tensor(t),
            access: Access::ReadWrite,
        }
    }
    /// A storage or uniform buffer with the given access.
    pub fn buffer(b: &'a Buffer, access: Access) -> Self {
        Arg {
            res: ArgRes::Buffer(b),
            access,
        }
    }
}

enum Keep {
    Image(#[allow(dead_code)] Image),
    Buffer(#[allow(dead_code)] Buffer),
    Pipeline(#[allow(dead_code)] Arc<Pipeline>),
    Atlas(#[allow(dead_code)] WeightAtlas),
    Semaphore(#[allow(dead_code)] crate::sync::TimelineSemaphore),
    Timestamps(#[allow(dead_code)] TimestampQueries),
}

/// Records work for one queue. Submit with [`Recorder::submit`] (returns a [`Submission`]) or
/// [`Recorder::submit_and_wait`]. Resources used are kept alive until the submission completes.
pub struct Recorder {
    device: Device,
    queue: QueueKind,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    desc_pools: Vec<vk::DescriptorPool>,
    keep: Vec<Keep>,
    /// Resource ids written / read since the last barrier.
    written: HashSet<u64>,
    read: HashSet<u64>,
    /// Images transitioned UNDEFINED -> GENERAL in this recorder.
    initialized: Vec<Image>,
    init_ids: HashSet<u64>,
    weights: Option<WeightAtlas>,
    /// Timestamp pools reset in this command buffer.
    reset_pools: HashSet<u64>,
    dispatches: u32,
    barriers: u32,
}

const POOL_SETS: u32 = 128;

impl Recorder {
    pub fn new(device: &Device, queue: QueueKind) -> Result<Recorder> {
        let dev = device.raw();
        let family = device.queue(queue).family;
        // SAFETY (block): valid create infos; objects destroyed on error.
        unsafe {
            let (pool, cmd) = match device.inner.recycler.take_commands(family) {
                Some(c) => c,
                None => {
                    let pool = dev
                        .create_command_pool(
                            &vk::CommandPoolCreateInfo::default()
                                .queue_family_index(family)
                                .flags(vk::CommandPoolCreateFlags::TRANSIENT),
                            None,
                        )
                        .vk("vkCreateCommandPool")?;
                    match dev.allocate_command_buffers(
                        &vk::CommandBufferAllocateInfo::default()
                            .command_pool(pool)
                            .level(vk::CommandBufferLevel::PRIMARY)
                            .command_buffer_count(1),
                    ) {
                        Ok(c) => (pool, c[0]),
                        Err(e) => {
                            dev.destroy_command_pool(pool, None);
                            return Err(e).vk("vkAllocateCommandBuffers");
                        }
                    }
                }
            };
            if let Err(e) = dev.begin_command_buffer(
                cmd,
                &vk::CommandBufferBeginInfo::default()
                    .flags(vk::CommandBufferUsageFlags::ONE_TIME_SUBMIT),
            ) {
                dev.destroy_command_pool(pool, None);
                return Err(e).vk("vkBeginCommandBuffer");
            }
            Ok(Recorder {
                device: device.clone(),
                queue,
                pool,
                cmd,
                desc_pools: Vec::new(),
                keep: Vec::new(),
                written: HashSet::new(),
                read: HashSet::new(),
                initialized: Vec::new(),
                init_ids: HashSet::new(),
                weights: None,
                reset_pools: HashSet::new(),
                dispatches: 0,
                barriers: 0,
            })
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }
    /// The raw command buffer (for kernels needing commands the recorder does not wrap).
    pub fn command_buffer(&self) -> vk::CommandBuffer {
        self.cmd
    }
    pub fn dispatch_count(&self) -> u32 {
        self.dispatches
    }
    pub fn barrier_count(&self) -> u32 {
        self.barriers
    }

    /// Binds the weight atlas that kernels with `uses_weights` read through `fetch_weight`.
    pub fn use_weights(&mut self, atlas: &WeightAtlas) {
        self.weights = Some(atlas.clone());
        self.keep.push(Keep::Atlas(atlas.clone()));
    }

    /// Transitions `image` to GENERAL now if no recorder has yet; for images that are later
    /// written by raw commands on another queue (the stream engine's transfer copies).
    pub fn init_image(&mut self, image: &Image) {
        self.keep_image(image);
    }

    /// The pipeline stages work on this recorder's queue runs in: a dedicated transfer queue
    /// supports no shader stage, so its barriers name only TRANSFER.
    fn work_stages(&self) -> vk::PipelineStageFlags {
        if self.on_transfer_only_queue() {
            vk::PipelineStageFlags::TRANSFER
        } else {
            vk::PipelineStageFlags::COMPUTE_SHADER | vk::PipelineStageFlags::TRANSFER
        }
    }

    /// The writes (`all == false`) or all accesses work on this recorder's queue makes.
    fn work_access(&self, all: bool) -> vk::AccessFlags {
        let transfer = if all {
            vk::AccessFlags::TRANSFER_READ | vk::AccessFlags::TRANSFER_WRITE
        } else {
            vk::AccessFlags::TRANSFER_WRITE
        };
        if self.on_transfer_only_queue() {
            transfer
        } else if all {
            transfer | vk::AccessFlags::SHADER_READ | vk::AccessFlags::SHADER_WRITE
        } else {
            transfer | vk::AccessFlags::SHADER_WRITE
        }
    }

    fn on_transfer_only_queue(&self) -> bool {
        self.queue == QueueKind::Transfer && self.device.has_dedicated_transfer_queue()
    }

    /// Inserts a full memory barrier between everything before and after (compute + transfer).
    pub fn barrier(&mut self) {
        let mb = vk::MemoryBarrier::default()
            .src_access_mask(self.work_access(false))
            .dst_access_mask(self.work_access(true));
        let stages = self.work_stages();
        // SAFETY: recording state.
        unsafe {
            self.device.raw().cmd_pipeline_barrier(
                self.cmd,
                stages,
                stages,
                vk::DependencyFlags::empty(),
                &[mb],
                &[],
                &[],
            )
        };
        self.written.clear();
        self.read.clear();
        self.barriers += 1;
    }

    /// Writes timestamp query `index` once every command recorded before it has completed
    /// (`BOTTOM_OF_PIPE`). To time a region, call [`Recorder::barrier`] and then write the start
    /// stamp (so the region's work cannot begin before it), record the work, then write the end
    /// stamp. The pool is reset in this command buffer before its first write here, so read its
    /// results ([`TimestampQueries::read_ns`]) before another recorder writes it.
    pub fn write_timestamp(&mut self, queries: &TimestampQueries, index: u32) -> Result<()> {
        if index >= queries.count() {
            return Err(VkError::Other(format!(
                "timestamp query {index} out of range ({} queries)",
                queries.count()
            )));
        }
        let family = self.device.queue(self.queue).family;
        if queries.family() != family {
            return Err(VkError::Other(format!(
                "timestamp queries were made for queue family {}, this recorder records for {family}",
                queries.family()
            )));
        }
        let dev = self.device.raw();
        if self.reset_pools.insert(queries.id()) {
            if self.on_transfer_only_queue() {
                // vkCmdResetQueryPool needs a compute or graphics queue: reset on the host now.
                if !self.device.features().host_query_reset {
                    return Err(VkError::Other(
                        "timestamps on the dedicated transfer queue need hostQueryReset".into(),
                    ));
                }
                // SAFETY: the caller read the pool's previous results; nothing pending uses it.
                unsafe { dev.reset_query_pool(queries.raw(), 0, queries.count()) };
            } else {
                // SAFETY: recording state, outside any render pass.
                unsafe { dev.cmd_reset_query_pool(self.cmd, queries.raw(), 0, queries.count()) };
            }
            self.keep.push(Keep::Timestamps(queries.clone()));
        }
        // SAFETY: recording state; the query was reset above in this command buffer.
        unsafe {
            dev.cmd_write_timestamp(
                self.cmd,
                vk::PipelineStageFlags::BOTTOM_OF_PIPE,
                queries.raw(),
                index,
            )
        };
        Ok(())
    }

    /// Declares the next operation's accesses; inserts a barrier on RAW/WAR/WAW hazards.
    fn access(&mut self, reads: &[u64], writes: &[u64]) {
        let hazard = reads.iter().any(|r| self.written.contains(r))
            || writes
                .iter()
                .any(|w| self.written.contains(w) || self.read.contains(w));
        if hazard {
            self.barrier();
        }
        self.read.extend(reads.iter().copied());
        self.written.extend(writes.iter().copied());
    }

    /// Transitions an image to GENERAL the first time any recorder touches it.
    fn ensure_initialized(&mut self, image: &Image) {
        if image.is_initialized() || self.init_ids.contains(&image.id()) {
            return;
        }
        // An image in shared memory may overlap one that earlier work (this or an earlier
        // submission) read or wrote: its transition waits for that work and its writes. A fresh
        // image of its own has nothing to wait for.
        let (src_stage, src_access) = if image.is_shared() {
            (self.work_stages(), self.work_access(false))
        } else {
            (
                vk::PipelineStageFlags::TOP_OF_PIPE,
                vk::AccessFlags::empty(),
            )
        };
        let b = vk::ImageMemoryBarrier::default()
            .src_access_mask(src_access)
            .dst_access_mask(self.work_access(true))
            .old_layout(vk::ImageLayout::UNDEFINED)
            .new_layout(vk::ImageLayout::GENERAL)
            .src_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .dst_queue_family_index(vk::QUEUE_FAMILY_IGNORED)
            .image(image.raw())
            .subresource_range(color_range(image.extent()[2]));
        // SAFETY: recording state.
        unsafe {
            self.device.raw().cmd_pipeline_barrier(
                self.cmd,
                src_stage,
                self.work_stages(),
                vk::DependencyFlags::empty(),
                &[],
                &[],
                &[b],
            )
        };
        self.init_ids.insert(image.id());
        self.initialized.push(image.clone());
    }

    fn keep_tensor(&mut self, t: &Tensor) -> u64 {
        match t.storage() {
            TensorStorage::Image(i) => {
                self.ensure_initialized(i);
                self.keep.push(Keep::Image(i.clone()));
                i.id()
            }
            TensorStorage::Buffer(b) => {
                self.keep.push(Keep::Buffer(b.clone()));
                b.id()
            }
        }
    }

    fn keep_image(&mut self, i: &Image) -> u64 {
        self.ensure_initialized(i);
        self.keep.push(Keep::Image(i.clone()));
        i.id()
    }

    fn keep_buffer(&mut self, b: &Buffer) -> u64 {
        self.keep.push(Keep::Buffer(b.clone()));
        b.id()
    }

    fn alloc_set(&mut self, layout: vk::DescriptorSetLayout) -> Result<vk::DescriptorSet> {
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

    /// The variant of `pipeline` matching the storage of the tensors in `args` (all tensors of one
    /// dispatch must be images, or all storage buffers) and the precision of the bound atlas.
    fn resolve_variant(&self, pipeline: &Arc<Pipeline>, args: &[Arg<'_>]) -> Result<Arc<Pipeline>> {
        let mut kind = None;
        for (i, arg) in args.iter().enumerate() {
            if let ArgRes::Tensor(t) = arg.res {
                let k = t.storage_kind();
                match kind {
                    None => kind = Some((k, i, t.name())),
                    Some((k0, i0, n0)) if k0 != k => {
                        return Err(VkError::Kernel {
                            kernel: pipeline.desc.name.to_string(),
                            reason: format!(
                                "binding {i0}: tensor `{n0}` is in {k0:?} storage but binding \
                                 {i}: tensor `{}` is in {k:?} storage; one dispatch needs one kind",
                                t.name()
                            ),
                        });
                    }
                    Some(_) => {}
                }
            }
        }
        let storage = kind.map_or(pipeline.storage, |(k, _, _)| k);
        // A kernel reading weights uses the variant built for the bound atlas's precision.
        let weights = match (&self.weights, pipeline.desc.uses_weights) {
            (Some(atlas), true) => atlas.precision(),
            _ => pipeline.weights,
        };
        if storage == pipeline.storage && weights == pipeline.weights {
            return Ok(pipeline.clone());
        }
        self.device
            .pipeline_mixed(&pipeline.desc, pipeline.precision, weights, storage)
    }

    /// Records one compute dispatch of `pipeline` with `args` bound to set 0 in binding order,
    /// `push` as push constants and `groups` workgroups. Kernels with `uses_weights` need
    /// [`Recorder::use_weights`] first. When the tensors are storage-buffer tensors the
    /// pipeline's `StorageKind::Buffer` variant is used instead (same shader source).
    pub fn dispatch(
        &mut self,
        pipeline: &Arc<Pipeline>,
        args: &[Arg<'_>],
        push: &[u8],
        groups: [u32; 3],
    ) -> Result<()> {
        let desc = pipeline.desc;
        let kerr = |reason: String| VkError::Kernel {
            kernel: desc.name.to_string(),
            reason,
        };
        let pipeline = &self.resolve_variant(pipeline, args)?;
        if args.len() != desc.bindings.len() {
            return Err(kerr(format!(
                "expected {} bindings, got {}",
                desc.bindings.len(),
                args.len()
            )));
        }
        if push.len() as u32 != desc.push_constant_bytes {
            return Err(kerr(format!(
                "push constants are {} bytes, the kernel declares {}",
                push.len(),
                desc.push_constant_bytes
            )));
        }
        if self.queue == QueueKind::Transfer && self.device.has_dedicated_transfer_queue() {
            return Err(kerr("dispatch recorded on the transfer queue".into()));
        }
        let weights_set = if desc.uses_weights {
            let atlas = self.weights.as_ref().ok_or_else(|| {
                kerr("kernel reads weights but no atlas was bound (use_weights)".into())
            })?;
            if atlas.precision() != pipeline.weights {
                return Err(kerr(format!(
                    "atlas precision {:?} differs from the kernel's {:?}",
                    atlas.precision(),
                    pipeline.weights
                )));
            }
            Some(atlas.clone())
        } else {
            None
        };

        let set = self.alloc_set(pipeline.set_layout)?;
        let mut image_infos = Vec::with_capacity(args.len());
        let mut buffer_infos = Vec::with_capacity(args.len());
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for (i, (arg, kind)) in args.iter().zip(desc.bindings).enumerate() {
            let id = match (arg.res, kind) {
                (ArgRes::Tensor(t), BindingKind::StorageImage) => {
                    if t.precision() != pipeline.precision {
                        return Err(kerr(format!(
                            "binding {i}: tensor `{}` is {:?}, the pipeline is {:?}",
                            t.name(),
                            t.precision(),
                            pipeline.precision
                        )));
                    }
                    // resolve_variant guarantees the storage matches the pipeline variant.
                    match t.storage() {
                        TensorStorage::Image(img) => image_infos.push((
                            i,
                            vk::DescriptorImageInfo::default()
                                .image_view(img.view())
                                .image_layout(vk::ImageLayout::GENERAL),
                        )),
                        TensorStorage::Buffer(b) => buffer_infos.push((
                            i,
                            BindingKind::StorageBuffer,
                            vk::DescriptorBufferInfo::default()
                                .buffer(b.raw())
                                .offset(0)
                                .range(vk::WHOLE_SIZE),
                        )),
                    }
                    self.keep_tensor(t)
                }
                (ArgRes::Buffer(b), BindingKind::StorageBuffer | BindingKind::UniformBuffer) => {
                    buffer_infos.push((
                        i,
                        *kind,
                        vk::DescriptorBufferInfo::default()
                            .buffer(b.raw())
                            .offset(0)
                            .range(vk::WHOLE_SIZE),
                    ));
                    self.keep_buffer(b)
                }
                _ => {
                    return Err(kerr(format!(
                        "binding {i}: argument does not match {kind:?}"
                    )))
                }
            };
            if arg.access.reads() {
                reads.push(id);
            }
            if arg.access.writes() {
                writes.push(id);
            }
        }
        let mut weight_infos = None;
        if let Some(atlas) = &weights_set {
            reads.extend_from_slice(&atlas.resource_ids());
            weight_infos = Some((
                vk::DescriptorImageInfo::default()
                    .image_view(atlas.image().view())
                    .image_layout(vk::ImageLayout::GENERAL),
                vk::DescriptorBufferInfo::default()
                    .buffer(atlas.page_table_buffer().raw())
                    .offset(0)
                    .range(vk::WHOLE_SIZE),
            ));
            let img = atlas.image().clone();
            self.ensure_initialized(&img);
        }
        let mut writes_vk = Vec::with_capacity(args.len());
        for (i, info) in &image_infos {
            writes_vk.push(
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(*i as u32)
                    .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
                    .image_info(std::slice::from_ref(info)),
            );
        }
        for (i, kind, info) in &buffer_infos {
            let ty = if *kind == BindingKind::UniformBuffer {
                vk::DescriptorType::UNIFORM_BUFFER
            } else {
                vk::DescriptorType::STORAGE_BUFFER
            };
            writes_vk.push(
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(*i as u32)
                    .descriptor_type(ty)
                    .buffer_info(std::slice::from_ref(info)),
            );
        }
        if let Some((ii, bi)) = &weight_infos {
            writes_vk.push(
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(WEIGHT_ATLAS_BINDING)
                    .descriptor_type(vk::DescriptorType::STORAGE_IMAGE)
                    .image_info(std::slice::from_ref(ii)),
            );
            writes_vk.push(
                vk::WriteDescriptorSet::default()
                    .dst_set(set)
                    .dst_binding(WEIGHT_PAGE_TABLE_BINDING)
                    .descriptor_type(vk::DescriptorType::STORAGE_BUFFER)
                    .buffer_info(std::slice::from_ref(bi)),
            );
        }
        self.access(&reads, &writes);
        let dev = self.device.raw();
        // SAFETY: recording state; all handles valid and kept alive by `keep`.
        unsafe {
            dev.update_descriptor_sets(&writes_vk, &[]);
            dev.cmd_bind_pipeline(self.cmd, vk::PipelineBindPoint::COMPUTE, pipeline.pipeline);
            dev.cmd_bind_descriptor_sets(
                self.cmd,
                vk::PipelineBindPoint::COMPUTE,
                pipeline.layout,
                0,
                &[set],
                &[],
            );
            if !push.is_empty() {
                dev.cmd_push_constants(
                    self.cmd,
                    pipeline.layout,
                    vk::ShaderStageFlags::COMPUTE,
                    0,
                    push,
                );
            }
            dev.cmd_dispatch(self.cmd, groups[0], groups[1], groups[2]);
        }
        self.keep.push(Keep::Pipeline(pipeline.clone()));
        self.dispatches += 1;
        Ok(())
    }

    /// Copies a staging buffer (tensor texels in physical order) into a tensor.
    pub fn copy_buffer_to_tensor(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Tensor,
    ) -> Result<()> {
        let all = dst.physical_bytes() / dst.precision().bytes_per_texel() as u64;
        self.copy_texels(src, src_offset, dst, (0, all), true)
    }

    /// Copies a tensor's texels (physical order) into a buffer.
    pub fn copy_tensor_to_buffer(
        &mut self,
        src: &Tensor,
        dst: &Buffer,
        dst_offset: u64,
    ) -> Result<()> {
        let all = src.physical_bytes() / src.precision().bytes_per_texel() as u64;
        self.copy_texels(dst, dst_offset, src, (0, all), false)
    }

    /// Copies physical texels `[first, first + count)` of `dst` from `src` at `src_offset`: part
    /// of an upload through a staging buffer smaller than the tensor. For images the range must
    /// be whole rows of one layer ([`Tensor::copy_chunks`] gives such ranges) or whole layers.
    pub fn copy_buffer_to_tensor_texels(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Tensor,
        range: (u64, u64),
    ) -> Result<()> {
        self.copy_texels(src, src_offset, dst, range, true)
    }

    /// Copies physical texels `[first, first + count)` of `src` into `dst` at `dst_offset`: part
    /// of a readback through a staging buffer smaller than the tensor (whole rows of one layer,
    /// or whole layers, for images).
    pub fn copy_tensor_texels_to_buffer(
        &mut self,
        src: &Tensor,
        range: (u64, u64),
        dst: &Buffer,
        dst_offset: u64,
    ) -> Result<()> {
        self.copy_texels(dst, dst_offset, src, range, false)
    }

    /// Copies physical texels `[first, first + count)` of `tensor` from (`into_tensor`) or to
    /// `buffer` at `buffer_offset`.
    fn copy_texels(
        &mut self,
        buffer: &Buffer,
        buffer_offset: u64,
        tensor: &Tensor,
        (first, count): (u64, u64),
        into_tensor: bool,
    ) -> Result<()> {
        let bid = self.keep_buffer(buffer);
        let tid = self.keep_tensor(tensor);
        if into_tensor {
            self.access(&[bid], &[tid]);
        } else {
            self.access(&[tid], &[bid]);
        }
        let bpt = tensor.precision().bytes_per_texel() as u64;
        check_range(buffer, buffer_offset, count * bpt)?;
        let dev = self.device.raw();
        match tensor.storage() {
            TensorStorage::Image(img) => {
                let region = texel_region(tensor, first, count)?.buffer_offset(buffer_offset);
                // SAFETY: recording state; sizes checked.
                unsafe {
                    if into_tensor {
                        dev.cmd_copy_buffer_to_image(
                            self.cmd,
                            buffer.raw(),
                            img.raw(),
                            vk::ImageLayout::GENERAL,
                            &[region],
                        )
                    } else {
                        dev.cmd_copy_image_to_buffer(
                            self.cmd,
                            img.raw(),
                            vk::ImageLayout::GENERAL,
                            buffer.raw(),
                            &[region],
                        )
                    }
                };
            }
            TensorStorage::Buffer(b) => {
                check_range(b, first * bpt, count * bpt)?;
                let (from, to, src_offset, dst_offset) = if into_tensor {
                    (buffer, b, buffer_offset, first * bpt)
                } else {
                    (b, buffer, first * bpt, buffer_offset)
                };
                let region = vk::BufferCopy {
                    src_offset,
                    dst_offset,
                    size: count * bpt,
                };
                // SAFETY: recording state; sizes checked.
                unsafe { dev.cmd_copy_buffer(self.cmd, from.raw(), to.raw(), &[region]) };
            }
        }
        Ok(())
    }

    /// Copies `width*height` texels from `src` at `src_offset` into one layer of an image
    /// (weight atlas pages).
    pub fn copy_buffer_to_image_layer(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Image,
        layer: u32,
    ) -> Result<()> {
        let [w, h, l] = dst.extent();
        if layer >= l {
            return Err(VkError::Other(format!(
                "layer {layer} out of range for image `{}` ({l} layers)",
                dst.name()
            )));
        }
        let texel = if dst.format() == vk::Format::R16G16B16A16_SFLOAT {
            8
        } else {
            16
        };
        check_range(src, src_offset, w as u64 * h as u64 * texel)?;
        let sid = self.keep_buffer(src);
        let did = self.keep_image(dst);
        self.access(&[sid], &[did]);
        let region = vk::BufferImageCopy::default()
            .buffer_offset(src_offset)
            .buffer_row_length(w)
            .buffer_image_height(h)
            .image_subresource(layers(layer, 1))
            .image_extent(vk::Extent3D {
                width: w,
                height: h,
                depth: 1,
            });
        // SAFETY: recording state; sizes checked.
        unsafe {
            self.device.raw().cmd_copy_buffer_to_image(
                self.cmd,
                src.raw(),
                dst.raw(),
                vk::ImageLayout::GENERAL,
                &[region],
            )
        };
        Ok(())
    }

    /// Copies between buffers.
    pub fn copy_buffer(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Buffer,
        dst_offset: u64,
        size: u64,
    ) -> Result<()> {
        check_range(src, src_offset, size)?;
        check_range(dst, dst_offset, size)?;
        let sid = self.keep_buffer(src);
        let did = self.keep_buffer(dst);
        self.access(&[sid], &[did]);
        let region = vk::BufferCopy {
            src_offset,
            dst_offset,
            size,
        };
        // SAFETY: recording state; sizes checked.
        unsafe {
            self.device
                .raw()
                .cmd_copy_buffer(self.cmd, src.raw(), dst.raw(), &[region])
        };
        Ok(())
    }

    /// Writes small data (<= 65536 bytes, multiple of 4) into a buffer inside the command stream.
    pub fn update_buffer(&mut self, dst: &Buffer, offset: u64, data: &[u8]) -> Result<()> {
        if data.is_empty() || data.len() > 65536 || data.len() & 3 != 0 || offset & 3 != 0 {
            return Err(VkError::Other(format!(
                "update_buffer: {} bytes at {offset} (need 4-byte aligned, 4..=65536)",
                data.len()
            )));
        }
        check_range(dst, offset, data.len() as u64)?;
        let did = self.keep_buffer(dst);
        self.access(&[], &[did]);
        // SAFETY: recording state; sizes checked.
        unsafe {
            self.device
                .raw()
                .cmd_update_buffer(self.cmd, dst.raw(), offset, data)
        };
        Ok(())
    }

    /// Sets every texel of a tensor to zero.
    pub fn clear_tensor(&mut self, t: &Tensor) -> Result<()> {
        let id = self.keep_tensor(t);
        self.access(&[], &[id]);
        let dev = self.device.raw();
        match t.storage() {
            TensorStorage::Image(img) => {
                let clear = vk::ClearColorValue { float32: [0.0; 4] };
                // SAFETY: recording state.
                unsafe {
                    dev.cmd_clear_color_image(
                        self.cmd,
                        img.raw(),
                        vk::ImageLayout::GENERAL,
                        &clear,
                        &[color_range(img.extent()[2])],
                    )
                };
            }
            TensorStorage::Buffer(b) => {
                // SAFETY: recording state.
                unsafe { dev.cmd_fill_buffer(self.cmd, b.raw(), 0, vk::WHOLE_SIZE, 0) };
            }
        }
        Ok(())
    }

    /// Ends recording and submits with GPU-side timeline waits/signals.
    pub fn submit(
        mut self,
        waits: &[SemaphoreWait],
        signals: &[SemaphoreSignal],
    ) -> Result<Submission> {
        let dev = self.device.raw().clone();
        // Make every write visible to the host (readback) and to later submissions.
        let mb = vk::MemoryBarrier::default()
            .src_access_mask(self.work_access(false))
            .dst_access_mask(vk::AccessFlags::HOST_READ);
        // SAFETY: recording state.
        unsafe {
            dev.cmd_pipeline_barrier(
                self.cmd,
                self.work_stages(),
                vk::PipelineStageFlags::HOST,
                vk::DependencyFlags::empty(),
                &[mb],
                &[],
                &[],
            );
            dev.end_command_buffer(self.cmd).vk("vkEndCommandBuffer")?;
        }
        let wait_sems: Vec<_> = waits.iter().map(|w| w.semaphore.raw()).collect();
        let wait_vals: Vec<_> = waits.iter().map(|w| w.value).collect();
        let wait_stages: Vec<_> = waits.iter().map(|w| w.stage).collect();
        let sig_sems: Vec<_> = signals.iter().map(|s| s.semaphore.raw()).collect();
        let sig_vals: Vec<_> = signals.iter().map(|s| s.value).collect();
        for w in waits {
            self.keep.push(Keep::Semaphore(w.semaphore.clone()));
        }
        for s in signals {
            self.keep.push(Keep::Semaphore(s.semaphore.clone()));
        }
        let mut tsi = vk::TimelineSemaphoreSubmitInfo::default()
            .wait_semaphore_values(&wait_vals)
            .signal_semaphore_values(&sig_vals);
        let cmds = [self.cmd];
        let si = vk::SubmitInfo::default()
            .wait_semaphores(&wait_sems)
            .wait_dst_stage_mask(&wait_stages)
            .command_buffers(&cmds)
            .signal_semaphores(&sig_sems)
            .push_next(&mut tsi);
        let fence = match self.device.inner.recycler.take_fence() {
            Some(f) => f,
            // SAFETY: valid create info.
            None => unsafe { dev.create_fence(&vk::FenceCreateInfo::default(), None) }
                .vk("vkCreateFence")?,
        };
        let res = {
            let q = self.device.queue(self.queue).lock();
            // SAFETY: queue externally synchronized by the lock; command buffer is executable.
            unsafe { dev.queue_submit(*q, &[si], fence) }
        };
        if let Err(e) = res {
            // SAFETY: never submitted (the fence is still unsignaled).
            unsafe { dev.destroy_fence(fence, None) };
            return Err(e).vk("vkQueueSubmit");
        }
        let family = self.device.queue(self.queue).family;
        for img in self.initialized.drain(..) {
            img.mark_initialized();
        }
        let sub = Submission {
            device: self.device.clone(),
            fence,
            family,
            pool: self.pool,
            cmd: self.cmd,
            desc_pools: std::mem::take(&mut self.desc_pools),
            keep: std::mem::take(&mut self.keep),
            done: false,
        };
        // Ownership of the pool moved into the submission.
        self.pool = vk::CommandPool::null();
        Ok(sub)
    }

    /// Submits without semaphores and waits for completion.
    pub fn submit_and_wait(self) -> Result<()> {
        self.submit(&[], &[])?.wait()
    }
}

fn layers(base: u32, count: u32) -> vk::ImageSubresourceLayers {
    vk::ImageSubresourceLayers {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        mip_level: 0,
        base_array_layer: base,
        layer_count: count,
    }
}

/// The image region of physical texels `[first, first + count)`: whole rows of one layer, or
/// whole layers.
fn texel_region(t: &Tensor, first: u64, count: u64) -> Result<vk::BufferImageCopy> {
    let l = t.layout();
    let (pw, ph, pl) = (l.pw as u64, l.ph as u64, l.pl as u64);
    let layer = first / (pw * ph);
    let y0 = first % (pw * ph) / pw;
    let rows = count / pw;
    let whole_layers = first.is_multiple_of(pw * ph) && count.is_multiple_of(pw * ph);
    let (height, layer_count) = if whole_layers {
        (ph, count / (pw * ph))
    } else {
        (rows, 1)
    };
    let fits = if whole_layers {
        layer_count > 0 && layer + layer_count <= pl
    } else {
        first.is_multiple_of(pw)
            && count.is_multiple_of(pw)
            && rows > 0
            && y0 + rows <= ph
            && layer < pl
    };
    if !fits {
        return Err(VkError::Other(format!(
            "texels {first}+{count} of `{}` are not whole rows of one layer or whole layers \
             ({pw}x{ph}x{pl})",
            t.name()
        )));
    }
    Ok(vk::BufferImageCopy::default()
        .buffer_row_length(l.pw)
        .buffer_image_height(height as u32)
        .image_subresource(layers(layer as u32, layer_count as u32))
        .image_offset(vk::Offset3D {
            x: 0,
            y: y0 as i32,
            z: 0,
        })
        .image_extent(vk::Extent3D {
            width: l.pw,
            height: height as u32,
            depth: 1,
        }))
}

fn check_range(b: &Buffer, offset: u64, size: u64) -> Result<()> {
    if offset + size > b.size() {
        return Err(VkError::Other(format!(
            "range {offset}+{size} exceeds buffer `{}` of {} bytes",
            b.name(),
            b.size()
        )));
    }
    Ok(())
}

impl Drop for Recorder {
    fn drop(&mut self) {
        // Only reached un-submitted (or after submit moved the pool out).
        let commands = (self.pool != vk::CommandPool::null()).then_some((self.pool, self.cmd));
        let family = self.device.queue(self.queue).family;
        // SAFETY: the command buffer was never submitted.
        unsafe {
            self.device.inner.recycler.give_back(
                self.device.raw(),
                family,
                commands,
                std::mem::take(&mut self.desc_pools),
                None,
            );
        }
    }
}

/// Work in flight. Waiting (or dropping) releases the command buffer and kept resources.
pub struct Submission {
    device: Device,
    fence: vk::Fence,
    family: u32,
    pool: vk::CommandPool,
    cmd: vk::CommandBuffer,
    desc_pools: Vec<vk::DescriptorPool>,
    keep: Vec<Keep>,
    done: bool,
}

impl Submission {
    /// Whether the GPU has finished this submission.
    pub fn is_complete(&self) -> Result<bool> {
        // SAFETY: valid fence.
        unsafe { self.device.raw().get_fence_status(self.fence) }.vk("vkGetFenceStatus")
    }

    /// Blocks until the GPU has finished this submission.
    pub fn wait(mut self) -> Result<()> {
        self.wait_inner()
    }

    fn wait_inner(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        // SAFETY: valid fence.
        unsafe {
            self.device
                .raw()
                .wait_for_fences(&[self.fence], true, u64::MAX)
        }
        .vk("vkWaitForFences")?;
        self.release();
        Ok(())
    }

    fn release(&mut self) {
        // SAFETY: the submission finished (or the device is lost); nothing uses these any more.
        unsafe {
            self.device.inner.recycler.give_back(
                self.device.raw(),
                self.family,
                Some((self.pool, self.cmd)),
                std::mem::take(&mut self.desc_pools),
                Some(self.fence),
            );
        }
        self.keep.clear();
        self.done = true;
    }
}

impl Drop for Submission {
    fn drop(&mut self) {
        if !self.done {
            // SAFETY: valid fence; wait so resources are not freed while in use.
            let _ = unsafe {
                self.device
                    .raw()
                    .wait_for_fences(&[self.fence], true, u64::MAX)
            };
            self.release();
        }
    }
}
