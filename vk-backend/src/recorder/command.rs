//! A command as data: what the recorder emits into a command buffer, built first so that a
//! recorder capturing reusable commands ([`super::RecordedCommands`]) keeps it, and any other
//! emits it at once. Emitting a kept command again is a few `vkCmd*` calls: no descriptor
//! writes, no checks, no resource bookkeeping.

use ash::vk;

/// Push-constant bytes of one dispatch (Vulkan guarantees 128; no kernel declares more).
#[derive(Clone, Copy)]
pub(super) struct PushBytes {
    len: u8,
    bytes: [u8; 128],
}

impl PushBytes {
    pub(super) fn new(push: &[u8]) -> Option<PushBytes> {
        let mut bytes = [0u8; 128];
        bytes.get_mut(..push.len())?.copy_from_slice(push);
        Some(PushBytes {
            len: push.len() as u8,
            bytes,
        })
    }

    fn as_slice(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }
}

pub(super) enum Command {
    Dispatch {
        pipeline: vk::Pipeline,
        layout: vk::PipelineLayout,
        set: vk::DescriptorSet,
        push: PushBytes,
        groups: [u32; 3],
    },
    MemoryBarrier {
        src_stage: vk::PipelineStageFlags,
        dst_stage: vk::PipelineStageFlags,
        src_access: vk::AccessFlags,
        dst_access: vk::AccessFlags,
    },
    CopyBufferToImage {
        buffer: vk::Buffer,
        image: vk::Image,
        region: vk::BufferImageCopy,
    },
    CopyImageToBuffer {
        image: vk::Image,
        buffer: vk::Buffer,
        region: vk::BufferImageCopy,
    },
    CopyBuffer {
        src: vk::Buffer,
        dst: vk::Buffer,
        region: vk::BufferCopy,
    },
    UpdateBuffer {
        dst: vk::Buffer,
        offset: u64,
        data: Vec<u8>,
    },
    ClearImage {
        image: vk::Image,
        range: vk::ImageSubresourceRange,
    },
    FillBuffer {
        buffer: vk::Buffer,
    },
}

impl Command {
    /// Emits the command into `cmd`.
    ///
    /// # Safety
    /// `cmd` is recording, outside any render pass, and every handle the command names is
    /// valid (kept alive by the recorder or recording that holds the command).
    pub(super) unsafe fn emit(&self, dev: &ash::Device, cmd: vk::CommandBuffer) {
        // SAFETY (block): per this function's contract.
        unsafe {
            match self {
                Command::Dispatch {
                    pipeline,
                    layout,
                    set,
                    push,
                    groups,
                } => {
                    dev.cmd_bind_pipeline(cmd, vk::PipelineBindPoint::COMPUTE, *pipeline);
                    dev.cmd_bind_descriptor_sets(
                        cmd,
                        vk::PipelineBindPoint::COMPUTE,
                        *layout,
                        0,
                        &[*set],
                        &[],
                    );
                    if push.len > 0 {
                        dev.cmd_push_constants(
                            cmd,
                            *layout,
                            vk::ShaderStageFlags::COMPUTE,
                            0,
                            push.as_slice(),
                        );
                    }
                    dev.cmd_dispatch(cmd, groups[0], groups[1], groups[2]);
                }
                Command::MemoryBarrier {
                    src_stage,
                    dst_stage,
                    src_access,
                    dst_access,
                } => {
                    let mb = vk::MemoryBarrier::default()
                        .src_access_mask(*src_access)
                        .dst_access_mask(*dst_access);
                    dev.cmd_pipeline_barrier(
                        cmd,
                        *src_stage,
                        *dst_stage,
                        vk::DependencyFlags::empty(),
                        &[mb],
                        &[],
                        &[],
                    );
                }
                Command::CopyBufferToImage {
                    buffer,
                    image,
                    region,
                } => dev.cmd_copy_buffer_to_image(
                    cmd,
                    *buffer,
                    *image,
                    vk::ImageLayout::GENERAL,
                    std::slice::from_ref(region),
                ),
                Command::CopyImageToBuffer {
                    image,
                    buffer,
                    region,
                } => dev.cmd_copy_image_to_buffer(
                    cmd,
                    *image,
                    vk::ImageLayout::GENERAL,
                    *buffer,
                    std::slice::from_ref(region),
                ),
                Command::CopyBuffer { src, dst, region } => {
                    dev.cmd_copy_buffer(cmd, *src, *dst, std::slice::from_ref(region))
                }
                Command::UpdateBuffer { dst, offset, data } => {
                    dev.cmd_update_buffer(cmd, *dst, *offset, data)
                }
                Command::ClearImage { image, range } => dev.cmd_clear_color_image(
                    cmd,
                    *image,
                    vk::ImageLayout::GENERAL,
                    &vk::ClearColorValue { float32: [0.0; 4] },
                    std::slice::from_ref(range),
                ),
                Command::FillBuffer { buffer } => {
                    dev.cmd_fill_buffer(cmd, *buffer, 0, vk::WHOLE_SIZE, 0)
                }
            }
        }
    }
}
