//! Packed models as the page source of the stream engine and of preloaded runs
//! ([`vk_backend::PageSource`]): a packed file, read with positioned reads from the engine's I/O
//! threads, or a packed model still in memory (compiled from ONNX by `texstream infer`).
use vk_backend::PageSource;

use crate::packed::{Packed, PackedError, PackedModel};

impl PageSource for PackedModel {
    fn page_bytes(&self) -> usize {
        PackedModel::page_bytes(self) as usize
    }
    fn page_count(&self) -> u32 {
        PackedModel::page_count(self) as u32
    }
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()> {
        PackedModel::read_page(self, page as u64, dst).map_err(std::io::Error::other)
    }
    fn name(&self) -> String {
        self.path().display().to_string()
    }
    fn compensated_pages(&self) -> Vec<u32> {
        self.header().compensated_pages.clone()
    }
}

impl PageSource for Packed {
    fn page_bytes(&self) -> usize {
        self.header.page_bytes as usize
    }
    fn page_count(&self) -> u32 {
        self.header.page_count as u32
    }
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()> {
        let pb = self.header.page_bytes as usize;
        let start = page as usize * pb;
        match self.data.get(start..start + pb) {
            Some(src) if dst.len() == pb => {
                dst.copy_from_slice(src);
                Ok(())
            }
            _ => Err(std::io::Error::other(PackedError::PageRange {
                file: self.header.source.clone().into(),
                page: page as u64,
                count: self.header.page_count,
            })),
        }
    }
    fn name(&self) -> String {
        self.header.source.clone()
    }
    fn compensated_pages(&self) -> Vec<u32> {
        self.header.compensated_pages.clone()
    }
}

/// A packed file whose next page reads can be made to fail, shared by the engine's sessions:
/// fault injection for tests of how a request fails and the engine recovers when streaming
/// breaks mid-request.
pub struct FaultablePages {
    model: std::sync::Arc<PackedModel>,
    /// Page reads still to fail.
    faults: std::sync::Arc<std::sync::atomic::AtomicU32>,
}

impl FaultablePages {
    pub fn new(
        model: std::sync::Arc<PackedModel>,
        faults: std::sync::Arc<std::sync::atomic::AtomicU32>,
    ) -> FaultablePages {
        FaultablePages { model, faults }
    }
}

impl PageSource for FaultablePages {
    fn page_bytes(&self) -> usize {
        PageSource::page_bytes(&*self.model)
    }
    fn page_count(&self) -> u32 {
        PageSource::page_count(&*self.model)
    }
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        let injected = self
            .faults
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1))
            .is_ok();
        if injected {
            return Err(std::io::Error::other(format!(
                "{}: page {page}: injected read failure",
                self.model.path().display()
            )));
        }
        PageSource::read_page(&*self.model, page, dst)
    }
    fn name(&self) -> String {
        PageSource::name(&*self.model)
    }
    fn compensated_pages(&self) -> Vec<u32> {
        PageSource::compensated_pages(&*self.model)
    }
}
