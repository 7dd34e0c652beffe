//! 2.5D texture tensors: activations as C4-packed (NC4HW4) optimal-tiling 2D-array images.
//!
//! See [`crate::layout`] for the rank rule and the fold. A tensor whose texels no image can hold
//! under the device limits falls back to a storage buffer with the same linear texel order; the
//! fallback is logged and counted in [`crate::MemoryStats`] (`fallback_tensors`, `fallback_bytes`).
//! Kernels run on fallback tensors through their storage-buffer variant (see [`StorageKind`]).
//!
//! Tensors can also be created in storage buffers on purpose ([`Tensor::with_storage`] with
//! `StorageKind::Buffer`, counted allocations but not fallbacks) for the texture-vs-buffer
//! benchmark.

use std::sync::Arc;

use crate::device::Device;
use crate::error::{Result, VkError};
use crate::layout::{self, FoldLayout, Precision};
use crate::memory::MemoryCategory;
use crate::pipeline::StorageKind;
use crate::resource::{Buffer, Image, MemoryNeeds, SharedMemory};

/// Where a tensor's texels live.
#[derive(Clone, Debug)]
pub enum TensorStorage {
    Image(Image),
    /// Counted, reported fallback: texel `i` at byte `i * bytes_per_texel`.
    Buffer(Buffer),
}

struct FallbackGuard {
    device: Device,
    bytes: u64,
}

impl Drop for FallbackGuard {
    fn drop(&mut self) {
        self.device.memory().record_fallback(self.bytes, -1);
    }
}

/// An activation tensor. Cloning shares the same storage.
#[derive(Clone)]
pub struct Tensor {
    name: Arc<str>,
    shape: Vec<usize>,
    layout: FoldLayout,
    precision: Precision,
    storage: TensorStorage,
    device: Device,
    _fallback: Option<Arc<FallbackGuard>>,
}

impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Tensor({}, {:?}, {:?}, {:?})",
            self.name, self.shape, self.precision, self.layout
        )
    }
}

/// Push-constant form of a tensor's addressing (matches `TensorDesc` in `shaders/include/tensor.glsl`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TensorDesc {
    pub n: u32,
    pub c: u32,
    pub h: u32,
    pub w: u32,
    pub c4: u32,
    pub pw: u32,
    pub ph: u32,
    pub pl: u32,
}

impl TensorDesc {
    pub fn words(&self) -> [u32; 8] {
        [
            self.n, self.c, self.h, self.w, self.c4, self.pw, self.ph, self.pl,
        ]
    }
}

impl Tensor {
    /// Creates an activation tensor (category `Activations`).
    pub fn new(
        device: &Device,
        name: &str,
        shape: &[usize],
        precision: Precision,
    ) -> Result<Tensor> {
        Self::with_category(device, name, shape, precision, MemoryCategory::Activations)
    }

    /// Creates a tensor counted under `category` (e.g. `Weights` for constant operands).
    pub fn with_category(
        device: &Device,
        name: &str,
        shape: &[usize],
        precision: Precision,
        category: MemoryCategory,
    ) -> Result<Tensor> {
        Self::with_storage(device, name, shape, precision, category, StorageKind::Image)
    }

    /// Creates an activation tensor in a storage buffer (benchmarks; see [`StorageKind`]).
    pub fn new_buffer(
        device: &Device,
        name: &str,
        shape: &[usize],
        precision: Precision,
    ) -> Result<Tensor> {
        Self::with_storage(
            device,
            name,
            shape,
            precision,
            MemoryCategory::Activations,
            StorageKind::Buffer,
        )
    }

    /// Creates a tensor in the requested storage. `Image` may still fall back to a (counted,
    /// logged) buffer when no image layout fits; `Buffer` always makes a storage buffer with the
    /// same texel order (identity fold), which is not counted as a fallback.
    pub fn with_storage(
        device: &Device,
        name: &str,
        shape: &[usize],
        precision: Precision,
        category: MemoryCategory,
        storage: StorageKind,
    ) -> Result<Tensor> {
        if storage == StorageKind::Buffer {
            let nchw = layout::nchw(shape)?;
            let l = Self::linear_layout(shape, nchw)?;
            let buf = Self::tensor_buffer(device, name, shape, &l, precision, category)?;
            return Ok(Tensor {
                name: name.into(),
                shape: shape.to_vec(),
                layout: l,
                precision,
                storage: TensorStorage::Buffer(buf),
                device: device.clone(),
                _fallback: None,
            });
        }
        let nchw = layout::nchw(shape)?;
        let limits = device.image_limits();
        let planned = device.fold_layout(nchw)?;
        let (layout, storage, fallback) = match planned {
            Some(l) => {
                let img = Image::new_2d_array(
                    device,
                    name,
                    crate::conv::tensor_format(precision),
                    l.pw,
                    l.ph,
                    l.pl,
                    category,
                )?;
                (l, TensorStorage::Image(img), None)
            }
            None => {
                let l = Self::linear_layout(shape, nchw)?;
                let bytes = l.texels() * precision.bytes_per_texel() as u64;
                let buf = Self::tensor_buffer(device, name, shape, &l, precision, category)?;
                log::warn!(
                    "tensor `{name}` {shape:?}: no image layout fits the device limits \
                     ({limits:?}); using a storage-buffer fallback of {bytes} bytes"
                );
                device.memory().record_fallback(bytes, 1);
                let guard = Arc::new(FallbackGuard {
                    device: device.clone(),
                    bytes,
                });
                (l, TensorStorage::Buffer(buf), Some(guard))
            }
        };
        Ok(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            layout,
            precision,
            storage,
            device: device.clone(),
            _fallback: fallback,
        })
    }

    /// The image fold a tensor of `shape` gets on `device`, and that image's memory
    /// requirements; `None` where it would fall back to a storage buffer.
    pub fn image_requirements(
        device: &Device,
        shape: &[usize],
        precision: Precision,
    ) -> Result<Option<(FoldLayout, MemoryNeeds)>> {
        let Some(l) = device.fold_layout(layout::nchw(shape)?)? else {
            return Ok(None);
        };
        let req = Image::memory_requirements(
            device,
            crate::conv::tensor_format(precision),
            [l.pw, l.ph, l.pl],
        )?;
        Ok(Some((l, req)))
    }

    /// Marks an image tensor's contents undefined (see [`Image::discard`]); no-op for buffers.
    pub fn discard(&self) {
        if let TensorStorage::Image(img) = &self.storage {
            img.discard();
        }
    }

    /// Creates an image tensor bound `offset` bytes into `memory` (see [`SharedMemory`] for the
    /// aliasing rules). Fails where the shape has no image layout or the image does not fit.
    pub fn new_in(
        device: &Device,
        name: &str,
        shape: &[usize],
        precision: Precision,
        memory: &SharedMemory,
        offset: u64,
    ) -> Result<Tensor> {
        let (l, _) = Self::image_requirements(device, shape, precision)?.ok_or_else(|| {
            VkError::BadShape {
                shape: shape.to_vec(),
                reason: "no image layout fits the device limits, so it cannot be placed in \
                         shared image memory"
                    .into(),
            }
        })?;
        let img = Image::new_2d_array_in(
            device,
            name,
            crate::conv::tensor_format(precision),
            [l.pw, l.ph, l.pl],
            memory,
            offset,
        )?;
        Ok(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            layout: l,
            precision,
            storage: TensorStorage::Image(img),
            device: device.clone(),
            _fallback: None,
        })
    }

    /// The identity-fold layout of a buffer tensor (texel i at index i).
    fn linear_layout(shape: &[usize], nchw: [usize; 4]) -> Result<FoldLayout> {
        let [n, c, h, w] = nchw;
        let c4 = c.div_ceil(4);
        let too_large = || VkError::BadShape {
            shape: shape.to_vec(),
            reason: "too large even for a buffer tensor".into(),
        };
        let u = |v: usize| u32::try_from(v).map_err(|_| too_large());
        Ok(FoldLayout {
            n: u(n)?,
            c: u(c)?,
            h: u(h)?,
            w: u(w)?,
            c4: u(c4)?,
            pw: u(w)?,
            ph: u(h)?,
            pl: u(n.checked_mul(c4).ok_or_else(too_large)?)?,
        })
    }

    /// A device-local storage buffer for a buffer tensor, within `maxStorageBufferRange`.
    fn tensor_buffer(
        device: &Device,
        name: &str,
        shape: &[usize],
        l: &FoldLayout,
        precision: Precision,
        category: MemoryCategory,
    ) -> Result<Buffer> {
        let bytes = l.texels() * precision.bytes_per_texel() as u64;
        let max_range = device.properties().limits.max_storage_buffer_range as u64;
        if bytes > max_range {
            return Err(VkError::BadShape {
                shape: shape.to_vec(),
                reason: format!(
                    "{bytes} bytes exceed the device's maxStorageBufferRange of {max_range} \
                     bytes, so neither an image nor a storage buffer can hold it"
                ),
            });
        }
        Buffer::storage(device, name, bytes, category)
    }

    /// A tensor with logical `shape` over this tensor's storage (same image or buffer, same
    /// physical fold `pw`/`ph`/`pl`): linear texel `i` of the new shape lands where linear texel
    /// `i` of `self` is stored. Used for views (reshapes that keep the C4 texel order) and for
    /// reusing a dead tensor's memory. The new shape's texels must fit the storage.
    pub fn reinterpret(&self, name: &str, shape: &[usize]) -> Result<Tensor> {
        let [n, c, h, w] = layout::nchw(shape)?;
        let bad = |reason: String| VkError::BadShape {
            shape: shape.to_vec(),
            reason,
        };
        let u = |v: usize| u32::try_from(v).map_err(|_| bad("dimension too large".into()));
        let l = FoldLayout {
            n: u(n)?,
            c: u(c)?,
            h: u(h)?,
            w: u(w)?,
            c4: u(c.div_ceil(4))?,
            pw: self.layout.pw,
            ph: self.layout.ph,
            pl: self.layout.pl,
        };
        let capacity = match self.storage {
            TensorStorage::Image(_) => self.layout.physical_texels(),
            TensorStorage::Buffer(_) => self.layout.texels(),
        };
        if l.texels() > capacity {
            return Err(bad(format!(
                "{} texels do not fit the {capacity} texels of `{}`",
                l.texels(),
                self.name
            )));
        }
        Ok(Tensor {
            name: name.into(),
            shape: shape.to_vec(),
            layout: l,
            precision: self.precision,
            storage: self.storage.clone(),
            device: self.device.clone(),
            _fallback: self._fallback.clone(),
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }
    /// The logical (ONNX) shape.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }
    pub fn layout(&self) -> &FoldLayout {
        &self.layout
    }
    pub fn precision(&self) -> Precision {
        self.precision
    }
    pub fn storage(&self) -> &TensorStorage {
        &self.storage
    }
    pub fn device(&self) -> &Device {
        &self.device
    }
    pub fn image(&self) -> Option<&Image> {
        match &self.storage {
            TensorStorage::Image(i) => Some(i),
            TensorStorage::Buffer(_) => None,
        }
    }
    /// Whether this is an image tensor that had to fall back to a storage buffer.
    pub fn is_fallback(&self) -> bool {
        self._fallback.is_some()
    }
    /// Image or storage buffer (a fallback tensor reports `Buffer`).
    pub fn storage_kind(&self) -> StorageKind {
        match self.storage {
            TensorStorage::Image(_) => StorageKind::Image,
            TensorStorage::Buffer(_) => StorageKind::Buffer,
        }
    }
    /// Number of logical elements.
    pub fn elements(&self) -> usize {
        self.shape.iter().product()
    }
    /// Bytes of the physical texel stream (what a staging copy moves).
    pub fn physical_bytes(&self) -> u64 {
        let texels = match self.storage {
            TensorStorage::Image(_) => self.layout.physical_texels(),
            TensorStorage::Buffer(_) => self.layout.texels(),
        };
        texels * self.precision.bytes_per_texel() as u64
    }
    /// Push-constant descriptor for shaders.
    pub fn desc(&self) -> TensorDesc {
        let l = &self.layout;
        TensorDesc {
            n: l.n,
            c: l.c,
            h: l.h,
            w: l.w,
            c4: l.c4,
            pw: l.pw,
            ph: l.ph,
            pl: l.pl,
        }
    }

    fn check_len(&self, data: &[f32]) -> Result<()> {
        if data.len() != self.elements() {
            return Err(VkError::DataLength {
                name: self.name.to_string(),
                expected: self.elements(),
                got: data.len(),
            });
        }
        Ok(())
    }

    /// Host NCHW values -> staging bytes in this tensor's physical texel order.
    pub fn pack_bytes(&self, data: &[f32]) -> Result<Vec<u8>> {
        self.check_len(data)?;
        let mut out = vec![0u8; self.physical_bytes() as usize];
        self.layout.pack_bytes_into(data, self.precision, &mut out);
        Ok(out)
    }

    /// NCHW values straight into the first [`Self::physical_bytes`] of `out` (staging memory).
    pub fn pack_bytes_into(&self, data: &[f32], out: &mut [u8]) -> Result<()> {
        self.check_len(data)?;
        let n = self.physical_bytes() as usize;
        let Some(dst) = out.get_mut(..n) else {
            return Err(VkError::Other(format!(
                "{} bytes of staging for the {n} of `{}`",
                out.len(),
                self.name
            )));
        };
        self.layout.pack_bytes_into(data, self.precision, dst);
        Ok(())
    }

    /// Staging bytes -> NCHW values.
    pub fn unpack_bytes(&self, bytes: &[u8]) -> Vec<f32> {
        self.layout.unpack_bytes(bytes, self.precision)
    }

    /// Physical texel ranges `(first, count)` of at most `max_bytes` each that cover the tensor
    /// in order, each one copy: whole rows of one layer for images. Fails when one row is
    /// larger than `max_bytes`.
    pub fn copy_chunks(&self, max_bytes: u64) -> Result<Vec<(u64, u64)>> {
        let bpt = self.precision.bytes_per_texel() as u64;
        let total = self.physical_bytes() / bpt;
        let max_texels = max_bytes / bpt;
        let (unit, units_per_layer, layers) = match self.storage {
            TensorStorage::Image(_) => {
                let l = &self.layout;
                (l.pw as u64, l.ph as u64, l.pl as u64)
            }
            TensorStorage::Buffer(_) => (1, total, 1),
        };
        let per_chunk = max_texels / unit;
        if per_chunk == 0 {
            return Err(VkError::Other(format!(
                "a {max_bytes}-byte staging buffer cannot hold one {}-byte row of `{}`",
                unit * bpt,
                self.name
            )));
        }
        let mut chunks = Vec::new();
        for layer in 0..layers {
            let mut u = 0;
            while u < units_per_layer {
                let n = per_chunk.min(units_per_layer - u);
                chunks.push(((layer * units_per_layer + u) * unit, n * unit));
                u += n;
            }
        }
        Ok(chunks)
    }
}
