//! Packed model files as page sources for the stream engine (positioned reads from I/O threads).
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::packed::PackedModel;
use vk_backend::PageSource;

/// A packed model shared by the engine's I/O threads.
pub struct PackedSource {
    model: Arc<PackedModel>,
    /// Page reads still to fail (fault injection for tests: how a request fails and the engine
    /// recovers when streaming breaks mid-request).
    faults: Arc<AtomicU32>,
}

impl PackedSource {
    pub fn new(model: Arc<PackedModel>) -> PackedSource {
        Self::with_faults(model, Arc::new(AtomicU32::new(0)))
    }

    /// A source whose next `faults` page reads (shared with other sources) fail.
    pub fn with_faults(model: Arc<PackedModel>, faults: Arc<AtomicU32>) -> PackedSource {
        PackedSource { model, faults }
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
