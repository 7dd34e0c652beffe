//! Weight residency for preloaded runs: every page of the model's weight space is read once into a
//! weight atlas whose page table maps logical page i -> slot i.
use vk_backend::{AtlasConfig, Device, PageSource, WeightAtlas};

use super::error::{vk, Result, RuntimeError};
use crate::Precision;

/// The backend's texel format for a precision (the one conversion between the two enums).
pub fn vk_precision(p: Precision) -> vk_backend::Precision {
    match p {
        Precision::F16 => vk_backend::Precision::F16,
        Precision::F32 => vk_backend::Precision::F32,
    }
}

/// A fully resident weight space.
pub struct WeightResidency {
    pub atlas: WeightAtlas,
    pub pages: u64,
    pub bytes: u64,
}

impl WeightResidency {
    /// Creates an atlas with one slot per page (at least one) and loads every page.
    pub fn preload(
        device: &Device,
        src: &dyn PageSource,
        precision: Precision,
    ) -> Result<WeightResidency> {
        let pages = src.page_count() as u64;
        let page_bytes = src.page_bytes() as u64;
        let texels_per_page = page_bytes / precision.bytes_per_texel() as u64;
        let page_height = (texels_per_page / 512) as u32;
        let slots = pages.max(1) as u32;
        let atlas = WeightAtlas::new(
            device,
            AtlasConfig {
                slots,
                precision: vk_precision(precision),
                page_height: Some(page_height),
                logical_pages: slots,
            },
        )
        .map_err(vk("creating the weight atlas"))?;
        atlas
            .mark_compensated(&src.compensated_pages())
            .map_err(vk("marking compensated weight pages"))?;
        let mut buf = vec![0u8; page_bytes as usize];
        for p in 0..pages {
            src.read_page(p as u32, &mut buf)
                .map_err(|source| RuntimeError::PageRead {
                    source_name: src.name(),
                    page: p as u32,
                    source,
                })?;
            atlas
                .load_page_now(p as u32, p as u32, &buf)
                .map_err(vk(format!("loading weight page {p}")))?;
        }
        Ok(WeightResidency {
            atlas,
            pages,
            bytes: pages * page_bytes,
        })
    }
}
