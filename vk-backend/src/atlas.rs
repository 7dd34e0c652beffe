//! Paged weight atlas: one 2D-array image whose layers hold fixed-size pages, plus a page-table
//! storage buffer (logical page -> atlas slot) read by `fetch_weight` in `shaders/include/weights.glsl`.
//!
//! A layer holds one page, or, where the slots outnumber the device's array layers (2048 on
//! most GPUs: 2 GiB of 1 MiB pages), a power of two of pages stacked down its rows: slot `s`
//! is rows `(s % k) * page_height ..` of layer `s / k` ([`WeightAtlas::slot_origin`]).
//!
//! Page-table buffer layout (std430): `uint page_shift; uint num_pages; uint stack_shift; uint pad;
//! uint table[]` where `page_shift = log2(texels per page)` and `stack_shift = log2(pages per
//! layer)`; unmapped pages hold [`UNMAPPED`].

use std::sync::{Arc, Mutex};

use ash::vk;
use gpu_allocator::MemoryLocation;

use crate::device::Device;
use crate::error::{Result, VkError};
use crate::layout::{Precision, PAGE_WIDTH};
use crate::memory::MemoryCategory;
use crate::resource::{Buffer, Image, StagingDirection};

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
    /// log2 of the pages one layer stacks.
    stack_shift: u32,
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

/// The device limits that decide how many pages an atlas layer stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StackLimits {
    /// Array layers one image may have.
    pub max_layers: u32,
    /// Pages one layer may stack (`max image height / page height`, a power of two).
    pub max_pages_per_layer: u32,
}

impl StackLimits {
    /// The limits of `device` for pages `page_height` rows high.
    pub fn of(device: &Device, page_height: u32) -> StackLimits {
        let l = device.image_limits();
        let per_layer = (l.max_image_dimension_2d / page_height.max(1)).max(1);
        StackLimits {
            max_layers: l.max_image_array_layers,
            // The largest power of two not above it.
            max_pages_per_layer: 1 << (31 - per_layer.leading_zeros()),
        }
    }

    /// Pages per layer for `slots` slots: 1 where they fit the layers, else the fewest (a
    /// power of two) that make them fit; `None` where no stacking does.
    pub fn pages_per_layer(&self, slots: u32) -> Option<u32> {
        let mut k = 1u32;
        while slots.div_ceil(k) > self.max_layers {
            k = k
                .checked_mul(2)
                .filter(|&k| k <= self.max_pages_per_layer)?;
        }
        Some(k)
    }

    /// The most of `slots` that an atlas can hold without a partly used layer: all of them
    /// where a layer holds one page, else a whole number of stacked layers (so an atlas of any
    /// count up to the result allocates no more than the result's pages).
    pub fn usable_slots(&self, slots: u64) -> u64 {
        let capped = slots.min(u32::MAX as u64) as u32;
        let k = match self.pages_per_layer(capped) {
            Some(k) => k,
            None => return self.max_layers as u64 * self.max_pages_per_layer as u64,
        };
        if k == 1 {
            slots
        } else {
            (capped / k * k) as u64
        }
    }
}

/// The atlas image's `[width, height, layers]` and log2 of its pages per layer.
fn geometry(device: &Device, config: &AtlasConfig, page_height: u32) -> Result<([u32; 3], u32)> {
    let limits = StackLimits::of(device, page_height);
    let slots = config.slots.max(1);
    let k = limits.pages_per_layer(slots).ok_or_else(|| {
        VkError::Atlas(format!(
            "{slots} page slots requested; this device's atlas holds at most {} ({} layers of {} \
             pages of {page_height} rows)",
            limits.max_layers as u64 * limits.max_pages_per_layer as u64,
            limits.max_layers,
            limits.max_pages_per_layer
        ))
    })?;
    Ok((
        [PAGE_WIDTH, page_height * k, slots.div_ceil(k)],
        k.trailing_zeros(),
    ))
}

impl WeightAtlas {
    /// What [`WeightAtlas::new`] with `config` would allocate, without allocating.
    pub fn memory_needs(device: &Device, config: &AtlasConfig) -> Result<AtlasNeeds> {
        let page_height = config
            .page_height
            .unwrap_or_else(|| config.precision.default_page_height());
        let (extent, _) = geometry(device, config, page_height)?;
        let image = Image::memory_requirements(
            device,
            crate::conv::tensor_format(config.precision),
            extent,
        )?;
        let table = table_bytes(config.logical_pages.max(1));
        let buffer = Buffer::memory_requirements(
            device,
            table,
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
        )?;
        // The transient init upload (`WeightAtlas::new`).
        let staging = if StagingDirection::Upload.counts_against_cap(device) {
            Buffer::staging_requirements(device, table, StagingDirection::Upload)?.size
        } else {
            0
        };
        Ok(AtlasNeeds {
            image_bytes: image.size,
            table_bytes: buffer.size,
            table_staging_bytes: staging,
        })
    }

    /// Allocates the atlas image and page table and fills the host mirror with
    /// [`UNMAPPED`]; the GPU table is still undefined ([`WeightAtlas::new`], in `immediate.rs`,
    /// uploads [`Self::initial_table`]).
    pub(crate) fn allocate(device: &Device, config: AtlasConfig) -> Result<WeightAtlas> {
        let page_height = config
            .page_height
            .unwrap_or_else(|| config.precision.default_page_height());
        let max_height = device.image_limits().max_image_dimension_2d;
        if !page_height.is_power_of_two() || page_height > max_height {
            return Err(VkError::Atlas(format!(
                "page height {page_height} must be a power of two <= {max_height}"
            )));
        }
        if config.slots == 0 {
            return Err(VkError::Atlas("an atlas needs at least one slot".into()));
        }
        if config.logical_pages == 0 {
            return Err(VkError::Atlas("logical_pages must be at least 1".into()));
        }
        let ([width, height, layers], stack_shift) = geometry(device, &config, page_height)?;
        let image = Image::new_2d_array(
            device,
            "weight atlas",
            crate::conv::tensor_format(config.precision),
            width,
            height,
            layers,
            MemoryCategory::Weights,
        )?;
        let page_table = Buffer::new(
            device,
            "weight page table",
            table_bytes(config.logical_pages),
            vk::BufferUsageFlags::STORAGE_BUFFER | vk::BufferUsageFlags::TRANSFER_DST,
            MemoryLocation::GpuOnly,
            MemoryCategory::Weights,
        )?;
        Ok(WeightAtlas {
            inner: Arc::new(Inner {
                device: device.clone(),
                config,
                page_height,
                stack_shift,
                image,
                page_table,
                table: Mutex::new(vec![UNMAPPED; config.logical_pages as usize]),
                compensated: Mutex::new(Default::default()),
            }),
        })
    }

    /// The page table's initial GPU contents: the header and every page unmapped.
    pub(crate) fn initial_table(&self) -> Vec<u8> {
        let pages = self.inner.config.logical_pages;
        let mut words = vec![self.page_shift(), pages, self.inner.stack_shift, 0];
        words.extend(std::iter::repeat_n(UNMAPPED, pages as usize));
        words.iter().flat_map(|w| w.to_le_bytes()).collect()
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
    /// Pages one layer of the image stacks (1 unless the slots outnumber the device's layers).
    pub fn pages_per_layer(&self) -> u32 {
        1 << self.inner.stack_shift
    }
    /// Where slot `slot` starts in the image: `(layer, first row)`.
    pub fn slot_origin(&self, slot: u32) -> (u32, u32) {
        let k = self.pages_per_layer();
        (slot / k, slot % k * self.inner.page_height)
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
    pub fn device(&self) -> &Device {
        &self.inner.device
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

    pub(crate) fn check_slot(&self, slot: u32) -> Result<()> {
        if slot >= self.slots() {
            return Err(VkError::Atlas(format!(
                "slot {slot} out of range (0..{})",
                self.slots()
            )));
        }
        Ok(())
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

    /// Whether weight-space texel `texel` lies in the compensated region (the first sixteenth) of
    /// a page marked compensated: a value that `fetch_weight` completes with its lo part.
    pub fn is_compensated_texel(&self, texel: u64) -> bool {
        let per_page = self.texels_per_page() as u64;
        let page = texel / per_page;
        texel % per_page < per_page / 16
            && u32::try_from(page).is_ok_and(|p| {
                self.inner
                    .compensated
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .contains(&p)
            })
    }

    /// Whether `rows` runs of `row_texels` consecutive weight-space texels, the first at `first`
    /// and each after the one before, each lie in at most two pages (a run no longer than a
    /// page), and none touches a compensated texel ([`Self::is_compensated_texel`]): a kernel may
    /// then find a run's pages once and read its texels from there (`weight_run` in
    /// `weights.glsl`).
    pub fn rows_plain(&self, first: u64, rows: u64, row_texels: u64) -> bool {
        let per_page = self.texels_per_page() as u64;
        if rows == 0 || row_texels == 0 {
            return true;
        }
        let end = first + rows * row_texels;
        let compensated = self
            .inner
            .compensated
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        row_texels <= per_page
            && !compensated.iter().any(|&p| {
                let region = p as u64 * per_page;
                region < end && first < region + per_page / 16
            })
    }

    /// Applies page-table updates `(logical page, Some(slot) | None = unmapped)` to the host
    /// mirror and returns the GPU writes that apply them (the recorder records them:
    /// [`crate::Recorder::update_page_table`]); consecutive pages are merged into one write.
    pub(crate) fn table_writes(&self, entries: &[(u32, Option<u32>)]) -> Result<Vec<TableWrite>> {
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
        let mut writes = Vec::new();
        let mut run: Vec<u32> = Vec::new();
        let mut run_start = 0u32;
        let mut flush = |start: u32, run: &mut Vec<u32>| {
            if !run.is_empty() {
                writes.push(TableWrite {
                    offset: (HEADER_WORDS + start as u64) * 4,
                    bytes: run.iter().flat_map(|w| w.to_le_bytes()).collect(),
                });
                run.clear();
            }
        };
        for (page, v) in map {
            table[page as usize] = v;
            let v = if v != UNMAPPED && compensated.contains(&page) {
                v | COMPENSATED
            } else {
                v
            };
            // 16384 entries are the 64 KiB `vkCmdUpdateBuffer` takes at most.
            if run.is_empty() || page != run_start + run.len() as u32 || run.len() >= 16384 {
                flush(run_start, &mut run);
                run_start = page;
            }
            run.push(v);
        }
        flush(run_start, &mut run);
        Ok(writes)
    }
}

/// One page-table write: `bytes` at byte `offset` of the page-table buffer.
pub(crate) struct TableWrite {
    pub offset: u64,
    pub bytes: Vec<u8>,
}

/// Bytes of a page table addressing `logical_pages` pages.
fn table_bytes(logical_pages: u32) -> u64 {
    (HEADER_WORDS + logical_pages as u64) * 4
}
