//! Transfer commands: buffer ↔ tensor copies (whole tensors, or whole rows of one layer / whole
//! layers of an image for staging buffers smaller than the tensor), buffer → image-layer and
//! buffer → buffer copies, in-stream buffer updates and tensor clears. Every one declares its
//! accesses, so barriers follow from the hazards.

use ash::vk;

use super::command::Command;
use super::Recorder;
use crate::error::{Result, VkError};
use crate::resource::{color_range, Buffer, Image};
use crate::tensor::{Tensor, TensorStorage};

impl Recorder {
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
        let command = match tensor.storage() {
            TensorStorage::Image(img) => {
                let region = texel_region(tensor, first, count)?.buffer_offset(buffer_offset);
                if into_tensor {
                    Command::CopyBufferToImage {
                        buffer: buffer.raw(),
                        image: img.raw(),
                        region,
                    }
                } else {
                    Command::CopyImageToBuffer {
                        image: img.raw(),
                        buffer: buffer.raw(),
                        region,
                    }
                }
            }
            TensorStorage::Buffer(b) => {
                check_range(b, first * bpt, count * bpt)?;
                let (from, to, src_offset, dst_offset) = if into_tensor {
                    (buffer, b, buffer_offset, first * bpt)
                } else {
                    (b, buffer, first * bpt, buffer_offset)
                };
                Command::CopyBuffer {
                    src: from.raw(),
                    dst: to.raw(),
                    region: vk::BufferCopy {
                        src_offset,
                        dst_offset,
                        size: count * bpt,
                    },
                }
            }
        };
        self.emit(command);
        Ok(())
    }

    /// Copies `width * rows` texels from `src` at `src_offset` into rows `first_row..` of one
    /// layer of an image (a weight atlas page).
    pub fn copy_buffer_to_image_rows(
        &mut self,
        src: &Buffer,
        src_offset: u64,
        dst: &Image,
        layer: u32,
        first_row: u32,
        rows: u32,
    ) -> Result<()> {
        let [w, h, l] = dst.extent();
        if layer >= l || rows == 0 || first_row.checked_add(rows).is_none_or(|end| end > h) {
            return Err(VkError::Other(format!(
                "rows {first_row}+{rows} of layer {layer} out of range for image `{}` ({h} rows, {l} layers)",
                dst.name()
            )));
        }
        let texel = crate::conv::texel_bytes(dst.format());
        check_range(src, src_offset, w as u64 * rows as u64 * texel)?;
        let sid = self.keep_buffer(src);
        let did = self.keep_image(dst);
        self.access(&[sid], &[did]);
        let region = vk::BufferImageCopy::default()
            .buffer_offset(src_offset)
            .buffer_row_length(w)
            .buffer_image_height(rows)
            .image_subresource(layers(layer, 1))
            .image_offset(vk::Offset3D {
                x: 0,
                y: first_row as i32,
                z: 0,
            })
            .image_extent(vk::Extent3D {
                width: w,
                height: rows,
                depth: 1,
            });
        self.emit(Command::CopyBufferToImage {
            buffer: src.raw(),
            image: dst.raw(),
            region,
        });
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
        self.emit(Command::CopyBuffer {
            src: src.raw(),
            dst: dst.raw(),
            region: vk::BufferCopy {
                src_offset,
                dst_offset,
                size,
            },
        });
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
        self.emit(Command::UpdateBuffer {
            dst: dst.raw(),
            offset,
            data: data.to_vec(),
        });
        Ok(())
    }

    /// Sets every texel of a tensor to zero.
    pub fn clear_tensor(&mut self, t: &Tensor) -> Result<()> {
        let id = self.keep_tensor(t);
        self.access(&[], &[id]);
        self.emit(match t.storage() {
            TensorStorage::Image(img) => Command::ClearImage {
                image: img.raw(),
                range: color_range(img.extent()[2]),
            },
            TensorStorage::Buffer(b) => Command::FillBuffer { buffer: b.raw() },
        });
        Ok(())
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
