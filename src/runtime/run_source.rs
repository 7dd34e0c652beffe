//! Packed model files as page sources for the stream engine (positioned reads from I/O threads).
use std::sync::Arc;

use crate::packed::PackedModel;
use vk_backend::PageSource;

/// A packed model shared by the engine's I/O threads.
pub struct PackedSource {
    model: Arc<PackedModel>,
}

impl PackedSource {
    pub fn new(model: Arc<PackedModel>) -> PackedSource {
        PackedSource { model }
    }
}

impl PageSource for PackedSource {
    fn page_bytes(&self) -> usize {
        self.model.page_bytes() as usize
    }
    fn page_count(&self) -> u32 {
        self.model.page_count() as u32
    }
    fn read_page(&self, page: u32, dst: &mut [u8]) -> std::io::Result<()> {
        self.model
            .read_page(page as u64, dst)
            .map_err(|e| std::io::Error::other(e.to_string()))
    }
    fn name(&self) -> String {
        self.model.path().display().to_string()
    }
    fn compensated_pages(&self) -> Vec<u32> {
        self.model.header().compensated_pages.clone()
    }
}
