//! Weight residency for preloaded runs: every page of the model's weight space is read once into a
//! weight atlas whose page table maps logical page i -> slot i.
use vk_backend::{AtlasConfig, Device, Precision, WeightAtlas};

use super::error::{vk, Result};
use crate::packed::{Packed, PackedError, PackedModel, StoredPrecision};

/// Where page bytes come from (a packed file, or a packed model still in memory).
pub trait PageSource {
    fn page_count(&self) -> u64;
    fn page_bytes(&self) -> u64;
    fn read_page(&self, page: u64, buf: &mut [u8]) -> std::result::Result<(), PackedError>;
    /// Pages stored compensated (the packed header's `compensated_pages`).
    fn compensated_pages(&self) -> Vec<u32>;
}

impl PageSource for PackedModel {
    fn page_count(&self) -> u64 {
        PackedModel::page_count(self)
    }
    fn page_bytes(&self) -> u64 {
        PackedModel::page_bytes(self)
    }
    fn read_page(&self, page: u64, buf: &mut [u8]) -> std::result::Result<(), PackedError> {
        PackedModel::read_page(self, page, buf)
    }
    fn compensated_pages(&self) -> Vec<u32> {
        self.header().compensated_pages.clone()
    }
}

impl PageSource for Packed {
    fn page_count(&self) -> u64 {
        self.header.page_count
    }
    fn page_bytes(&self) -> u64 {
        self.header.page_bytes
    }
    fn compensated_pages(&self) -> Vec<u32> {
        self.header.compensated_pages.clone()
    }
    fn read_page(&self, page: u64, buf: &mut [u8]) -> std::result::Result<(), PackedError> {
        let pb = self.header.page_bytes as usize;
        let start = page as usize * pb;
        match self.data.get(start..start + pb) {
            Some(src) if buf.len() == pb => {
                buf.copy_from_slice(src);
                Ok(())
            }
            _ => Err(PackedError::PageRange {
                file: self.header.source.clone().into(),
                page,
                count: self.header.page_count,
            }),
        }
    }
}

pub fn vk_precision(p: StoredPrecision) -> Precision {
    match p {
        StoredPrecision::F16 => Precision::F16,
        StoredPrecision::F32 => Precision::F32,
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
        precision: StoredPrecision,
    ) -> Result<WeightResidency> {
        let pages = src.page_count();
        let page_bytes = src.page_bytes();
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
            src.read_page(p, &mut buf)?;
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
