//! RAII device buffers and images, allocated through the counted allocator.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::device::Device;
use crate::error::{Result, VkError, VkResultExt};
use crate::memory::{CountedAllocation, MemoryCategory};
pub use crate::types::StagingDirection;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

pub(crate) fn next_id() -> u64 {
    NEXT_ID.fetch_add(1, Ordering::Relaxed)
}

struct BufferInner {
    device: Device,
    buffer: vk::Buffer,
    alloc: Mutex<Option<CountedAllocation>>,
    size: u64,
    id: u64,
    name: String,
}

/// A counted Vulkan buffer. Cloning shares the same buffer (kept alive by recorders in flight).
#[derive(Clone)]
pub struct Buffer {
    inner: Arc<BufferInner>,
}

impl std::fmt::Debug for Buffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Buffer({}, {} bytes)", self.inner.name, self.inner.size)
    }
}

/// Smallest buffer created (a zero-size buffer is invalid; 4 keeps word-sized views legal).
const MIN_BUFFER_BYTES: u64 = 4;

/// The create info every buffer uses (so a requirements probe matches the real buffer).
fn buffer_create_info(
    families: &[u32],
    size: u64,
    usage: vk::BufferUsageFlags,
) -> vk::BufferCreateInfo<'_> {
    let ci = vk::BufferCreateInfo::default().size(size).usage(usage);
    if families.len() > 1 {
        ci.sharing_mode(vk::SharingMode::CONCURRENT)
            .queue_family_indices(families)
    } else {
        ci.sharing_mode(vk::SharingMode::EXCLUSIVE)
    }
}

impl StagingDirection {
    /// Whether a staging buffer of this direction on `device` is paid out of the memory cap:
    /// on devices whose host-visible memory is all device memory (UMA, lavapipe), so one
    /// two-way buffer costs the cap less than two.
    pub fn counts_against_cap(self, device: &Device) -> bool {
        let (_, location) = crate::conv::staging_buffer(self);
        device.memory().counts_against_cap(location)
    }
}

impl Buffer {
    /// A device-local storage buffer that copies may read and write (tensor storage, scratch).
    pub fn storage(
        device: &Device,
        name: &str,
        size: u64,
        category: MemoryCategory,
    ) -> Result<Buffer> {
        Buffer::new(
            device,
            name,
            size,
            vk::BufferUsageFlags::STORAGE_BUFFER
                | vk::BufferUsageFlags::TRANSFER_SRC
                | vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuOnly,
            category,
        )
    }

    /// Creates a buffer. `location` picks the memory (GpuOnly, CpuToGpu for staging uploads,
    /// GpuToCpu for readback); the allocation is counted under `category`.
    pub fn new(
        device: &Device,
        name: &str,
        size: u64,
        usage: vk::BufferUsageFlags,
        location: MemoryLocation,
        category: MemoryCategory,
    ) -> Result<Buffer> {
        let size = size.max(MIN_BUFFER_BYTES);
        let families = device.sharing_families();
        let ci = buffer_create_info(&families, size, usage);
        let raw = device.raw();
        // SAFETY: valid create info.
        let buffer = unsafe { raw.create_buffer(&ci, None) }.vk("vkCreateBuffer")?;
        let req = unsafe { raw.get_buffer_memory_requirements(buffer) };
        log::debug!(
            target: "texstream_vk::image",
            "buffer `{name}` {size} B {location:?}: {} B, alignment {}",
            req.size,
            req.alignment
        );
        let alloc = match device
            .memory()
            .allocate(name, req, location, true, category)
        {
            Ok(a) => a,
            Err(e) => {
                unsafe { raw.destroy_buffer(buffer, None) };
                return Err(e);
            }
        };
        // SAFETY: fresh allocation of the required size.
        if let Err(e) = unsafe {
            raw.bind_buffer_memory(buffer, alloc.allocation.memory(), alloc.allocation.offset())
        } {
            device.memory().free(alloc);
            unsafe { raw.destroy_buffer(buffer, None) };
            return Err(VkError::Vk {
                call: "vkBindBufferMemory",
                result: e,
            });
        }
        Ok(Buffer {
            inner: Arc::new(BufferInner {
                device: device.clone(),
                buffer,
                alloc: Mutex::new(Some(alloc)),
                size,
                id: next_id(),
                name: name.to_string(),
            }),
        })
    }

    /// A host-visible staging buffer for uploads (counted as `Staging`).
    pub fn staging_upload(device: &Device, name: &str, size: u64) -> Result<Buffer> {
        Buffer::staging(device, name, size, StagingDirection::Upload)
    }

    /// A host-visible staging buffer for `direction` (counted as `Staging`).
    pub fn staging(
        device: &Device,
        name: &str,
        size: u64,
        direction: StagingDirection,
    ) -> Result<Buffer> {
        let (usage, location) = crate::conv::staging_buffer(direction);
        Buffer::new(device, name, size, usage, location, MemoryCategory::Staging)
    }

    /// The memory [`Buffer::staging`] of `size` bytes needs (queried on a probe, no memory).
    pub fn staging_requirements(
        device: &Device,
        size: u64,
        direction: StagingDirection,
    ) -> Result<MemoryNeeds> {
        Buffer::memory_requirements(device, size, crate::conv::staging_buffer(direction).0)
    }

    /// The memory a buffer of `size` bytes with `usage` needs (queried on a probe, no memory).
    pub fn memory_requirements(
        device: &Device,
        size: u64,
        usage: vk::BufferUsageFlags,
    ) -> Result<MemoryNeeds> {
        let families = device.sharing_families();
        let ci = buffer_create_info(&families, size.max(MIN_BUFFER_BYTES), usage);
        let raw = device.raw();
        // SAFETY: valid create info; the probe never gets memory and is destroyed at once.
        let buffer = unsafe { raw.create_buffer(&ci, None) }.vk("vkCreateBuffer")?;
        let req = unsafe { raw.get_buffer_memory_requirements(buffer) };
        unsafe { raw.destroy_buffer(buffer, None) };
        Ok(req.into())
    }

    /// A host-visible staging buffer for readback (counted as `Staging`).
    pub fn staging_download(device: &Device, name: &str, size: u64) -> Result<Buffer> {
        Buffer::staging(device, name, size, StagingDirection::Download)
    }

    pub fn raw(&self) -> vk::Buffer {
        self.inner.buffer
    }
    pub fn size(&self) -> u64 {
        self.inner.size
    }
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether the memory behind the buffer is device-local (counted against the cap).
    pub fn is_device_local(&self) -> bool {
        self.inner
            .alloc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|a| a.device_local)
    }

    /// Copies bytes into a host-visible buffer at `offset`.
    pub fn write(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        let mut g = self.inner.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let slice = g
            .as_mut()
            .and_then(|a| a.mapped_slice_mut())
            .ok_or_else(|| {
                VkError::Other(format!("buffer `{}` is not host-visible", self.name()))
            })?;
        let end = offset as usize + bytes.len();
        if end > slice.len() {
            return Err(VkError::Other(format!(
                "write of {} bytes at {offset} overflows buffer `{}` ({} bytes)",
                bytes.len(),
                self.name(),
                slice.len()
            )));
        }
        slice[offset as usize..end].copy_from_slice(bytes);
        Ok(())
    }

    /// Runs `f` on the mapped bytes of a host-visible buffer (for writers that fill in place).
    pub fn with_mapped<R>(&self, f: impl FnOnce(&mut [u8]) -> R) -> Result<R> {
        let mut g = self.inner.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let slice = g
            .as_mut()
            .and_then(|a| a.mapped_slice_mut())
            .ok_or_else(|| {
                VkError::Other(format!("buffer `{}` is not host-visible", self.name()))
            })?;
        Ok(f(slice))
    }

    /// Reads bytes from a host-visible buffer.
    pub fn read(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        self.read_with(offset, len, <[u8]>::to_vec)
    }

    /// Calls `f` on `len` mapped bytes at `offset`, in place: a readback that converts what it
    /// reads (unpacking texels) needs no copy of the whole buffer first.
    pub fn read_with<R>(&self, offset: u64, len: usize, f: impl FnOnce(&[u8]) -> R) -> Result<R> {
        let g = self.inner.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let slice = g.as_ref().and_then(|a| a.mapped_slice()).ok_or_else(|| {
            VkError::Other(format!("buffer `{}` is not host-visible", self.name()))
        })?;
        let end = offset as usize + len;
        if end > slice.len() {
            return Err(VkError::Other(format!(
                "read of {len} bytes at {offset} overflows buffer `{}`",
                self.name()
            )));
        }
        Ok(f(&slice[offset as usize..end]))
    }
}

impl Drop for BufferInner {
    fn drop(&mut self) {
        // SAFETY: last owner; recorders keep clones until their submission completed.
        unsafe { self.device.raw().destroy_buffer(self.buffer, None) };
        if let Some(a) = self.alloc.lock().unwrap_or_else(|e| e.into_inner()).take() {
            self.device.memory().free(a);
        }
    }
}

struct ImageInner {
    device: Device,
    image: vk::Image,
    view: vk::ImageView,
    alloc: Mutex<Option<CountedAllocation>>,
    /// Keeps the shared allocation alive while the image is bound into it.
    #[allow(dead_code)]
    shared: Option<SharedMemory>,
    format: vk::Format,
    extent: [u32; 3],
    id: u64,
    /// Whether the image has been transitioned from UNDEFINED to GENERAL.
    initialized: AtomicBool,
    name: String,
}

/// A counted optimal-tiling 2D-array image kept in layout GENERAL, with a 2D-array view.
#[derive(Clone)]
pub struct Image {
    inner: Arc<ImageInner>,
}

impl std::fmt::Debug for Image {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Image({}, {:?}, {:?})",
            self.inner.name, self.inner.extent, self.inner.format
        )
    }
}

/// Memory an image needs (size, alignment, allowed memory types), as the driver reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryNeeds {
    pub size: u64,
    pub alignment: u64,
    pub type_bits: u32,
}

impl From<vk::MemoryRequirements> for MemoryNeeds {
    fn from(r: vk::MemoryRequirements) -> Self {
        MemoryNeeds {
            size: r.size,
            alignment: r.alignment.max(1),
            type_bits: r.memory_type_bits,
        }
    }
}

/// Offsets of images placed one after another in one [`SharedMemory`]; several layouts can
/// share one memory from offset 0 ([`SharedMemoryLayout::overlay`]) when their images are never
/// in use at the same time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SharedMemoryLayout {
    pub size: u64,
    pub alignment: u64,
    pub type_bits: u32,
}

impl Default for SharedMemoryLayout {
    fn default() -> Self {
        SharedMemoryLayout {
            size: 0,
            alignment: 1,
            type_bits: !0,
        }
    }
}

impl SharedMemoryLayout {
    /// Places an image with `needs` after the ones placed so far; returns its offset.
    pub fn push(&mut self, needs: MemoryNeeds) -> u64 {
        let offset = self.size.next_multiple_of(needs.alignment);
        self.size = offset + needs.size;
        self.alignment = self.alignment.max(needs.alignment);
        self.type_bits &= needs.type_bits;
        offset
    }

    /// The layout of a memory that holds `self` and `other`, both starting at offset 0.
    pub fn overlay(&self, other: &SharedMemoryLayout) -> SharedMemoryLayout {
        SharedMemoryLayout {
            size: self.size.max(other.size),
            alignment: self.alignment.max(other.alignment),
            type_bits: self.type_bits & other.type_bits,
        }
    }
}

/// One counted device allocation that images are placed into at offsets the caller chooses.
///
/// Images whose ranges overlap alias each other: the caller uses at most one of them at a time
/// and calls [`Image::discard`] on an image before using it again after another one wrote the
/// memory. The runtime uses this for activations of models that never run at the same time.
#[derive(Clone)]
pub struct SharedMemory {
    inner: Arc<SharedMemoryInner>,
}

struct SharedMemoryInner {
    device: Device,
    alloc: Mutex<Option<CountedAllocation>>,
    requirements: vk::MemoryRequirements,
    name: String,
}

impl SharedMemory {
    /// Allocates `requirements.size` bytes (counted under `category`, checked against the cap)
    /// in a device-local memory type allowed by `requirements.memory_type_bits`.
    pub fn new(
        device: &Device,
        name: &str,
        layout: &SharedMemoryLayout,
        category: MemoryCategory,
    ) -> Result<SharedMemory> {
        if layout.type_bits == 0 {
            return Err(VkError::Other(format!(
                "shared memory `{name}`: its images have no memory type in common"
            )));
        }
        let requirements = vk::MemoryRequirements {
            size: layout.size.max(1),
            alignment: layout.alignment,
            memory_type_bits: layout.type_bits,
        };
        let alloc = device.memory().allocate(
            name,
            requirements,
            MemoryLocation::GpuOnly,
            false,
            category,
        )?;
        Ok(SharedMemory {
            inner: Arc::new(SharedMemoryInner {
                device: device.clone(),
                alloc: Mutex::new(Some(alloc)),
                requirements,
                name: name.to_string(),
            }),
        })
    }

    pub fn size(&self) -> u64 {
        self.inner.requirements.size
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// (memory, offset of byte 0) for binding.
    fn binding(&self) -> Result<(vk::DeviceMemory, u64)> {
        let g = self.inner.alloc.lock().unwrap_or_else(|e| e.into_inner());
        let a = g
            .as_ref()
            .ok_or_else(|| VkError::Other(format!("shared memory `{}` was freed", self.name())))?;
        // SAFETY: the allocation stays alive while this SharedMemory (kept by its images) lives.
        Ok((unsafe { a.allocation.memory() }, a.allocation.offset()))
    }
}

impl Drop for SharedMemoryInner {
    fn drop(&mut self) {
        if let Some(a) = self.alloc.lock().unwrap_or_else(|e| e.into_inner()).take() {
            self.device.memory().free(a);
        }
    }
}

/// Where a new image's memory comes from.
enum ImageMemory<'a> {
    /// Its own counted allocation.
    Owned(MemoryCategory),
    /// `offset` bytes into a shared allocation (not counted again).
    Shared(&'a SharedMemory, u64),
}

fn image_create_info<'a>(
    families: &'a [u32],
    format: vk::Format,
    width: u32,
    height: u32,
    layers: u32,
) -> vk::ImageCreateInfo<'a> {
    let ci = vk::ImageCreateInfo::default()
        .image_type(vk::ImageType::TYPE_2D)
        .format(format)
        .extent(vk::Extent3D {
            width,
            height,
            depth: 1,
        })
        .mip_levels(1)
        .array_layers(layers)
        .samples(vk::SampleCountFlags::TYPE_1)
        .tiling(vk::ImageTiling::OPTIMAL)
        .usage(
            vk::ImageUsageFlags::STORAGE
                | vk::ImageUsageFlags::TRANSFER_SRC
                | vk::ImageUsageFlags::TRANSFER_DST
                | vk::ImageUsageFlags::SAMPLED,
        )
        .initial_layout(vk::ImageLayout::UNDEFINED);
    if families.len() > 1 {
        ci.sharing_mode(vk::SharingMode::CONCURRENT)
            .queue_family_indices(families)
    } else {
        ci.sharing_mode(vk::SharingMode::EXCLUSIVE)
    }
}

impl Image {
    /// Creates a `width x height x layers` 2D-array storage image.
    pub fn new_2d_array(
        device: &Device,
        name: &str,
        format: vk::Format,
        width: u32,
        height: u32,
        layers: u32,
        category: MemoryCategory,
    ) -> Result<Image> {
        Self::create(
            device,
            name,
            format,
            [width, height, layers],
            ImageMemory::Owned(category),
        )
    }

    /// Creates the same kind of image as [`Image::new_2d_array`], bound `offset` bytes into
    /// `memory` (which must satisfy [`Image::memory_requirements`] at that offset).
    pub fn new_2d_array_in(
        device: &Device,
        name: &str,
        format: vk::Format,
        [width, height, layers]: [u32; 3],
        memory: &SharedMemory,
        offset: u64,
    ) -> Result<Image> {
        Self::create(
            device,
            name,
            format,
            [width, height, layers],
            ImageMemory::Shared(memory, offset),
        )
    }

    /// The memory such an image needs on this device (queried on a probe image).
    pub fn memory_requirements(
        device: &Device,
        format: vk::Format,
        [width, height, layers]: [u32; 3],
    ) -> Result<MemoryNeeds> {
        let families = device.sharing_families();
        let ci = image_create_info(&families, format, width, height, layers);
        let raw = device.raw();
        // SAFETY: valid create info; the probe never gets memory and is destroyed at once.
        let image = unsafe { raw.create_image(&ci, None) }.vk("vkCreateImage")?;
        let req = unsafe { raw.get_image_memory_requirements(image) };
        unsafe { raw.destroy_image(image, None) };
        Ok(req.into())
    }

    fn create(
        device: &Device,
        name: &str,
        format: vk::Format,
        [width, height, layers]: [u32; 3],
        memory: ImageMemory<'_>,
    ) -> Result<Image> {
        let families = device.sharing_families();
        let ci = image_create_info(&families, format, width, height, layers);
        let raw = device.raw();
        // SAFETY: valid create info; sizes checked by the caller against the device limits.
        let image = unsafe { raw.create_image(&ci, None) }.vk("vkCreateImage")?;
        let req = unsafe { raw.get_image_memory_requirements(image) };
        // What the driver asks beyond the texels (tiling padding), one line an image, so a
        // card's extra bytes can be traced to the shapes that cost them.
        log::debug!(
            target: "texstream_vk::image",
            "image `{name}` {width}x{height}x{layers} {format:?}: {} B for {} B of texels, alignment {}, {}",
            req.size,
            crate::conv::texel_bytes(format) * width as u64 * height as u64 * layers as u64,
            req.alignment,
            match memory {
                ImageMemory::Owned(_) => "own allocation",
                ImageMemory::Shared(..) => "shared",
            }
        );
        let (alloc, shared, mem, offset) = match memory {
            ImageMemory::Owned(category) => {
                match device
                    .memory()
                    .allocate(name, req, MemoryLocation::GpuOnly, false, category)
                {
                    Ok(a) => {
                        // SAFETY: the allocation outlives the image (freed in Drop after it).
                        let (m, o) = (unsafe { a.allocation.memory() }, a.allocation.offset());
                        (Some(a), None, m, o)
                    }
                    Err(e) => {
                        unsafe { raw.destroy_image(image, None) };
                        return Err(e);
                    }
                }
            }
            ImageMemory::Shared(shared, offset) => {
                let fits = offset % req.alignment.max(1) == 0
                    && offset + req.size <= shared.size()
                    && req.memory_type_bits & shared.inner.requirements.memory_type_bits != 0;
                let binding = shared.binding();
                match binding {
                    Ok((m, base)) if fits => (None, Some(shared.clone()), m, base + offset),
                    Ok(_) => {
                        unsafe { raw.destroy_image(image, None) };
                        return Err(VkError::Other(format!(
                            "image `{name}` ({} B, alignment {}, types {:#x}) does not fit at \
                             offset {offset} of shared memory `{}` ({} B, types {:#x})",
                            req.size,
                            req.alignment,
                            req.memory_type_bits,
                            shared.name(),
                            shared.size(),
                            shared.inner.requirements.memory_type_bits
                        )));
                    }
                    Err(e) => {
                        unsafe { raw.destroy_image(image, None) };
                        return Err(e);
                    }
                }
            }
        };
        let fail = |alloc: Option<CountedAllocation>, call: &'static str, e: vk::Result| {
            if let Some(a) = alloc {
                device.memory().free(a);
            }
            unsafe { raw.destroy_image(image, None) };
            VkError::Vk { call, result: e }
        };
        // SAFETY: memory and offset satisfy the requirements (checked above for shared memory).
        if let Err(e) = unsafe { raw.bind_image_memory(image, mem, offset) } {
            return Err(fail(alloc, "vkBindImageMemory", e));
        }
        let vci = vk::ImageViewCreateInfo::default()
            .image(image)
            .view_type(vk::ImageViewType::TYPE_2D_ARRAY)
            .format(format)
            .subresource_range(color_range(layers));
        let view = match unsafe { raw.create_image_view(&vci, None) } {
            Ok(v) => v,
            Err(e) => return Err(fail(alloc, "vkCreateImageView", e)),
        };
        Ok(Image {
            inner: Arc::new(ImageInner {
                device: device.clone(),
                image,
                view,
                alloc: Mutex::new(alloc),
                shared,
                format,
                extent: [width, height, layers],
                id: next_id(),
                initialized: AtomicBool::new(false),
                name: name.to_string(),
            }),
        })
    }

    /// Declares the contents undefined (another image sharing the memory wrote it): the next
    /// recorder that touches the image transitions it from UNDEFINED again, which is what
    /// Vulkan requires of an aliased optimal-tiling image. Only while no submission uses it.
    pub fn discard(&self) {
        self.inner.initialized.store(false, Ordering::Release)
    }

    /// Whether the image lives in a [`SharedMemory`] rather than its own allocation.
    pub fn is_shared(&self) -> bool {
        self.inner.shared.is_some()
    }

    pub fn raw(&self) -> vk::Image {
        self.inner.image
    }
    pub fn view(&self) -> vk::ImageView {
        self.inner.view
    }
    pub fn format(&self) -> vk::Format {
        self.inner.format
    }
    /// `[width, height, layers]`.
    pub fn extent(&self) -> [u32; 3] {
        self.inner.extent
    }
    pub fn id(&self) -> u64 {
        self.inner.id
    }
    pub fn name(&self) -> &str {
        &self.inner.name
    }
    /// Bytes of device memory behind the image.
    pub fn allocated_bytes(&self) -> u64 {
        self.inner
            .alloc
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|a| a.size())
            .unwrap_or(0)
    }
    pub(crate) fn is_initialized(&self) -> bool {
        self.inner.initialized.load(Ordering::Acquire)
    }
    pub(crate) fn mark_initialized(&self) {
        self.inner.initialized.store(true, Ordering::Release)
    }
}

pub(crate) fn color_range(layers: u32) -> vk::ImageSubresourceRange {
    vk::ImageSubresourceRange {
        aspect_mask: vk::ImageAspectFlags::COLOR,
        base_mip_level: 0,
        level_count: 1,
        base_array_layer: 0,
        layer_count: layers,
    }
}

impl Drop for ImageInner {
    fn drop(&mut self) {
        // SAFETY: last owner; recorders keep clones until their submission completed.
        unsafe {
            self.device.raw().destroy_image_view(self.view, None);
            self.device.raw().destroy_image(self.image, None);
        }
        if let Some(a) = self.alloc.lock().unwrap_or_else(|e| e.into_inner()).take() {
            self.device.memory().free(a);
        }
    }
}
