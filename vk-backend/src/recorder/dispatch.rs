//! Compute dispatches: a kernel's arguments ([`Arg`], in binding order, with their access),
//! checked against its declaration, bound to set 0 (plus the weight atlas at bindings 16/17
//! for kernels that read weights), with push constants.

use std::sync::Arc;

use ash::vk;

use super::command::{Command, PushBytes};
use super::descriptors::SetWrites;
use super::hazard::Access;
use super::{Keep, Recorder};
use crate::conv;
use crate::error::{Result, VkError};
use crate::pipeline::{
    BindingKind, Pipeline, StorageKind, WEIGHT_ATLAS_BINDING, WEIGHT_PAGE_TABLE_BINDING,
};
use crate::resource::Buffer;
use crate::tensor::{Tensor, TensorStorage};

#[derive(Clone, Copy)]
pub(super) enum ArgRes<'a> {
    Tensor(&'a Tensor),
    Buffer(&'a Buffer),
}

/// One descriptor argument of a dispatch, in binding order.
#[derive(Clone, Copy)]
pub struct Arg<'a> {
    pub(super) res: ArgRes<'a>,
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

impl Recorder {
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
        if self.on_transfer_only_queue() {
            return Err(kerr("dispatch recorded on the transfer queue".into()));
        }
        let weights = if desc.uses_weights {
            let atlas = self.weights.clone().ok_or_else(|| {
                kerr("kernel reads weights but no atlas was bound (use_weights)".into())
            })?;
            if atlas.precision() != pipeline.weights {
                return Err(kerr(format!(
                    "atlas precision {:?} differs from the kernel's {:?}",
                    atlas.precision(),
                    pipeline.weights
                )));
            }
            Some(atlas)
        } else {
            None
        };

        let set = self.alloc_set(pipeline.set_layout)?;
        let mut bindings = SetWrites::default();
        let mut reads = Vec::new();
        let mut writes = Vec::new();
        for (i, (arg, kind)) in args.iter().zip(desc.bindings).enumerate() {
            let binding = i as u32;
            let id = match (arg.res, kind) {
                (
                    ArgRes::Tensor(t),
                    BindingKind::StorageImage
                    | BindingKind::StorageImageF32
                    | BindingKind::StorageImageF16,
                ) => {
                    let want = match kind {
                        BindingKind::StorageImageF32 => crate::layout::Precision::F32,
                        BindingKind::StorageImageF16 => crate::layout::Precision::F16,
                        _ => pipeline.precision,
                    };
                    if t.precision() != want {
                        return Err(kerr(format!(
                            "binding {i}: tensor `{}` is {:?}, the binding takes {want:?}",
                            t.name(),
                            t.precision(),
                        )));
                    }
                    // resolve_variant guarantees the storage matches the pipeline variant.
                    match t.storage() {
                        TensorStorage::Image(img) => bindings.storage_image(binding, img.view()),
                        TensorStorage::Buffer(b) => bindings.buffer(
                            binding,
                            conv::descriptor_type(*kind, StorageKind::Buffer),
                            b.raw(),
                        ),
                    }
                    self.keep_tensor(t)
                }
                (ArgRes::Buffer(b), BindingKind::StorageBuffer | BindingKind::UniformBuffer) => {
                    bindings.buffer(
                        binding,
                        conv::descriptor_type(*kind, pipeline.storage),
                        b.raw(),
                    );
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
        if let Some(atlas) = &weights {
            reads.extend_from_slice(&atlas.resource_ids());
            bindings.storage_image(WEIGHT_ATLAS_BINDING, atlas.image().view());
            bindings.buffer(
                WEIGHT_PAGE_TABLE_BINDING,
                vk::DescriptorType::STORAGE_BUFFER,
                atlas.page_table_buffer().raw(),
            );
            self.ensure_initialized(atlas.image());
        }
        self.access(&reads, &writes);
        let push = PushBytes::new(push)
            .ok_or_else(|| kerr(format!("{} push-constant bytes, at most 128", push.len())))?;
        // SAFETY: `set` is fresh, every handle collected is kept alive by `keep`.
        unsafe { bindings.apply(self.device.raw(), set) };
        self.emit(Command::Dispatch {
            pipeline: pipeline.pipeline,
            layout: pipeline.layout,
            set,
            push,
            groups,
        });
        self.keep.push(Keep::Pipeline(pipeline.clone()));
        self.dispatches += 1;
        Ok(())
    }
}
