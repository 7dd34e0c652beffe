//! Paged weight atlas: one 2D-array image whose layers are fixed-size pages, plus a page-table
//! storage buffer (logical page -> atlas layer) read by `fetch_weight` in `shaders/include/weights.glsl`.
//!
//! Page-table buffer layout (std430): `uint page_shift; uint num_pages; uint pad[2]; uint table[]`
//! where `page_shift = log2(texels per page)`; unmapped pages hold [`UNMAPPED`].

use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::layout::{Precision, PAGE_WIDTH};
use crate::memory::MemoryCategory;
use crate::recorder::Recorder;
use crate::resource::{Buffer, Image};

/// Page-table value of a logical page that is not resident.
pub const UNMAPPED: u32 = u32::MAX;
/// Page-table flag of a compensated page: `fetch_weight` adds the lo texel stored
/// `texels_per_page / 16` texels after each texel of the page's first sixteenth, scaled by
/// 1/2048 (hi + lo fp16 pairs for small tensors that need ~fp32 accuracy).
pub const COMPENSATED: u32 = 0x8000_0000;
const HEADER_WORDS: u64 = 4;

/// Atlas geometry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtlasConfig {
    /// Number of page slots (atlas layers).
    pub slots: u32,
    /// Texel format of pages.
    pub precision: Precision,
    /// Page height in texels (power of two); `None` = 1 MiB pages (256 at fp16, 128 at fp32).
    pub page_height: Option<u32>,
    /// Size of the page table: how many logical pages (across all models) can be addressed.
    pub logical_pages: u32,
}

struct Inner {
    device: Device,
    config: AtlasConfig,
    page_height: u32,
    image: Image,
    page_table: Buffer,
    /// Host mirror of the page table (what the last recorded/applied updates set).
    table: Mutex<Vec<u32>>,
    /// Logical pages whose mapped entries carry [`COMPENSATED`].
    compensated: Mutex<std::collections::HashSet<u32>>,
}

/// The paged weight atlas. Cloning shares it.
#[derive(Clone)]
pub struct WeightAtlas {
    inner: Arc<Inner>,
}

/// Counted bytes an atlas would take, from the driver's memory requirements (nothing allocated).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtlasNeeds {
    /// The atlas image with `config.slots` layers.
    pub image_bytes: u64,
    /// The page-table buffer.
    pub table_bytes: u64,
    /// The transient staging buffer that initializes the table, where it counts against the cap.
    pub table_staging_bytes: u64,
}

impl WeightAtlas {
    /// What [`WeightAtlas::new`] with `config` would allocate, without allocating.
    pub fn memory_needs(device: &Device, config: &AtlasConfig) -> Result<AtlasNeeds> {
        let page_height = config
            .page_height
            .unwrap_or_else(|| config.precision.default_page_height());
        let image = Image::memory_requirements(
            device,
            config.precision.vk_format(),
            [PAGE_WIDTH, page_height, config.slots.max(1)],
        )?;
        let table = (HEADER_WORDS + config.logical_pages.max(1) as u64) * 4;
        let buffer = Buffer::memory_requirements(
            device,
            table,
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
        )?;
        let staging = if device.memory().counts_against_cap(MemoryLocation::CpuToGpu) {
            Buffer::memory_requirements(device, table, vk::BufferUsageFlags::TRANSFER_SRC)?.size
        } else {
            0
        };
        Ok(AtlasNeeds {
            image_bytes: image.size,
            table_bytes: buffer.size,
            table_staging_bytes: staging,
        })
    }

    pub fn new(device: &Device, config: AtlasConfig) -> Result<WeightAtlas> {
        let page_height = config
            .page_height
            .unwrap_or_else(|| config.precision.default_page_height());
        let limits = device.properties().limits;
        if !page_height.is_power_of_two() || page_height > limits.max_image_dimension2_d {
            return Err(VkError::Atlas(format!(
                "page height {page_height} must be a power of two <= {}",
                limits.max_image_dimension2_d
            )));
        }
        if config.slots == 0 || config.slots > limits.max_image_array_layers {
            return Err(VkError::Atlas(format!(
                "{} page slots requested; one atlas image holds 1..={} layers on this device",
                config.slots, limits.max_image_array_layers
            )));
        }
        if config.logical_pages == 0 {
            return Err(VkError::Atlas("logical_pages must be at least 1".into()));
        }
        let image = Image::new_2d_array(
            device,
            "weight atlas",
            config.precision.vk_format(),
            PAGE_WIDTH,
            page_height,
            config.slots,
            MemoryCategory::Weights,
        )?;
        let table_bytes = (HEADER_WORDS + config.logical_pages as u64) * 4;
        let page_table = Buffer::new(
            device,
            "weight page table",
            table_bytes,
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuOnly,
            MemoryCategory::Weights,
        )?;
        let atlas = WeightAtlas {
            inner: Arc::new(Inner {
                device: device.clone(),
                config,
                page_height,
                image,
                page_table,
                table: Mutex::new(vec![UNMAPPED; config.logical_pages as usize]),
                compensated: Mutex::new(Default::default()),
            }),
        };
        // Initialize header + all-unmapped table on the GPU.
        let mut words = vec![atlas.page_shift(), config.logical_pages, 0, 0];
        words.extend(std::iter::repeat_n(UNMAPPED, config.logical_pages as usize));
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        let staging =
            Buffer::staging_upload(device, "page table init staging", bytes.len() as u64)?;
        staging.write(0, &bytes)?;
        let mut rec = Recorder::new(device, QueueKind::Compute)?;
        rec.copy_buffer(&staging, 0, &atlas.inner.page_table, 0, bytes.len() as u64)?;
        rec.submit_and_wait()?;
        Ok(atlas)
    }

    pub fn config(&self) -> AtlasConfig {
        self.inner.config
    }
    pub fn precision(&self) -> Precision {
        self.inner.config.precision
    }
    pub fn slots(&self) -> u32 {
        self.inner.config.slots
    }
    pub fn page_height(&self) -> u32 {
        self.inner.page_height
    }
    /// Texels per page (`512 * page_height`).
    pub fn texels_per_page(&self) -> u32 {
        PAGE_WIDTH * self.inner.page_height
    }
    /// Bytes per page at the atlas precision.
    pub fn page_bytes(&self) -> u64 {
        self.texels_per_page() as u64 * self.precision().bytes_per_texel() as u64
    }
    fn page_shift(&self) -> u32 {
        self.texels_per_page().trailing_zeros()
    }
    pub fn image(&self) -> &Image {
        &self.inner.image
    }
    pub fn page_table_buffer(&self) -> &Buffer {
        &self.inner.page_table
    }
    pub(crate) fn resource_ids(&self) -> [u64; 2] {
        [self.inner.image.id(), self.inner.page_table.id()]
    }
    /// Host mirror of the page table (logical page -> slot or `UNMAPPED`).
    pub fn page_table(&self) -> Vec<u32> {
        self.inner
            .table
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    fn check_slot(&self, slot: u32) -> Result<()> {
        if slot >= self.slots() {
            return Err(VkError::Atlas(format!(
                "slot {slot} out of range (0..{})",
                self.slots()
            )));
        }
        Ok(())
    }

    /// Records a copy of one page (texels in page order, `page_bytes()` bytes at `offset` of
    /// `staging`) into `slot`.
    pub fn record_page_upload(
        &self,
        rec: &mut Recorder,
        staging: &Buffer,
        offset: u64,
        slot: u32,
    ) -> Result<()> {
        self.check_slot(slot)?;
        rec.copy_buffer_to_image_layer(staging, offset, &self.inner.image, slot)
    }

    /// Marks logical pages as compensated (see [`COMPENSATED`]); their later mappings carry the
    /// flag. Mark a page before mapping it.
    pub fn mark_compensated(&self, pages: &[u32]) -> Result<()> {
        if let Some(&p) = pages
            .iter()
            .find(|&&p| p >= self.inner.config.logical_pages)
        {
            return Err(VkError::Atlas(format!(
                "compensated page {p} out of range (page table holds {})",
                self.inner.config.logical_pages
            )));
        }
        if self.texels_per_page() < 16 * 32 {
            return Err(VkError::Atlas(
                "pages below 512 texels cannot hold a compensated region".into(),
            ));
        }
        self.inner
            .compensated
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .extend(pages.iter().copied());
        Ok(())
    }

    /// Records page-table updates `(logical page, Some(slot) | None = unmapped)`; consecutive
    /// pages are merged into one `vkCmdUpdateBuffer`.
    pub fn record_page_table_update(
        &self,
        rec: &mut Recorder,
        entries: &[(u32, Option<u32>)],
    ) -> Result<()> {
        // Last entry per page wins; BTreeMap gives sorted runs.
        let mut map = std::collections::BTreeMap::new();
        for &(page, slot) in entries {
            if page >= self.inner.config.logical_pages {
                return Err(VkError::Atlas(format!(
                    "logical page {page} out of range (page table holds {})",
                    self.inner.config.logical_pages
                )));
            }
            if let Some(s) = slot {
                self.check_slot(s)?;
            }
            map.insert(page, slot.unwrap_or(UNMAPPED));
        }
        let mut table = self.inner.table.lock().unwrap_or_else(|e| e.into_inner());
        let compensated = self
            .inner
            .compensated
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let mut run: Vec<u32> = Vec::new();
        let mut run_start = 0u32;
        let flush = |rec: &mut Recorder, start: u32, run: &mut Vec<u32>| -> Result<()> {
            if run.is_empty() {
                return Ok(());
            }
            let bytes: Vec<u8> = run.iter().flat_map(|w| w.to_le_bytes()).collect();
            run.clear();
            rec.update_buffer(
                &self.inner.page_table,
                (HEADER_WORDS + start as u64) * 4,
                &bytes,
            )
        };
        for (page, v) in map {
            table[page as usize] = v;
            let v = if v != UNMAPPED && compensated.contains(&page) {
                v | COMPENSATED
            } else {
                v
            };
            if run.is_empty() || page != run_start + run.len() as u32 || run.len() >= 16384 {
                flush(rec, run_start, &mut run)?;
                run_start = page;
            }
            run.push(v);
        }
        flush(rec, run_start, &mut run)
    }

    /// Uploads page contents into `slot` and maps `page -> slot` now (waits). For setup/tests;
    /// the streaming runtime records these on its transfer queue instead.
    pub fn load_page_now(&self, page: u32, slot: u32, bytes: &[u8]) -> Result<()> {
        if bytes.len() as u64 != self.page_bytes() {
            return Err(VkError::Atlas(format!(
                "page data is {} bytes, a page is {} bytes",
                bytes.len(),
                self.page_bytes()
            )));
        }
        let dev = &self.inner.device;
        let staging = Buffer::staging_upload(dev, "page staging", bytes.len() as u64)?;
        staging.write(0, bytes)?;
        let mut rec = Recorder::new(dev, QueueKind::Compute)?;
        self.record_page_upload(&mut rec, &staging, 0, slot)?;
        self.record_page_table_update(&mut rec, &[(page, Some(slot))])?;
        rec.submit_and_wait()
    }

    /// Loads a whole weight space (texel values, 4 per texel, page order) into slots 0.. and maps
    /// page i -> slot i; pads the last page with zeros. For tests and fully-resident models.
    pub fn load_all_now(&self, texel_values: &[f32]) -> Result<()> {
        let per_page = self.texels_per_page() as usize * 4;
        let pages = texel_values.len().div_ceil(per_page).max(1);
        if pages > self.slots() as usize || pages > self.inner.config.logical_pages as usize {
            return Err(VkError::Atlas(format!(
                "{pages} pages do not fit {} slots / {} logical pages",
                self.slots(),
                self.inner.config.logical_pages
            )));
        }
        let mut padded = texel_values.to_vec();
        padded.resize(pages * per_page, 0.0);
        let bytes = crate::layout::texels_to_bytes(&padded, self.precision());
        let dev = &self.inner.device;
        let staging = Buffer::staging_upload(dev, "weights staging", bytes.len() as u64)?;
        staging.write(0, &bytes)?;
        let mut rec = Recorder::new(dev, QueueKind::Compute)?;
        let mut entries = Vec::new();
        for p in 0..pages as u32 {
            self.record_page_upload(&mut rec, &staging, p as u64 * self.page_bytes(), p)?;
            entries.push((p, Some(p)));
        }
        self.record_page_table_update(&mut rec, &entries)?;
        rec.submit_and_wait()
    }
}
