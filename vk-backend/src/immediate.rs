//! Immediate transfers: host data into and out of tensors and the weight atlas right away,
//! through a staging buffer and one recorder on the compute queue, submitted and waited for
//! (setup, tests, and a run's inputs and outputs). This sits above the recorder: `tensor.rs`
//! and `atlas.rs` describe the resources and record nothing, the recorder records over them.

use crate::atlas::{AtlasConfig, WeightAtlas};
use crate::device::{Device, QueueKind};
use crate::error::{Result, VkError};
use crate::layout::{self, Precision};
use crate::recorder::Recorder;
use crate::resource::Buffer;
use crate::tensor::Tensor;

impl Tensor {
    /// Creates a tensor and uploads `data` (NCHW order, `shape` element count).
    pub fn from_data(
        device: &Device,
        name: &str,
        shape: &[usize],
        precision: Precision,
        data: &[f32],
    ) -> Result<Tensor> {
        let t = Self::new(device, name, shape, precision)?;
        t.upload(data)?;
        Ok(t)
    }

    /// Uploads NCHW `data` now (staging buffer + copy on the compute queue, waits).
    pub fn upload(&self, data: &[f32]) -> Result<()> {
        let staging = Buffer::staging_upload(
            self.device(),
            "tensor upload staging",
            self.physical_bytes(),
        )?;
        self.upload_through(data, &staging)
    }

    /// Uploads NCHW `data` now through the caller's host-visible `staging` buffer (idle; when
    /// shorter than [`Self::physical_bytes`], in pieces), so repeated uploads allocate nothing
    /// (waits).
    pub fn upload_through(&self, data: &[f32], staging: &Buffer) -> Result<()> {
        if self.physical_bytes() <= staging.size() {
            // Converted straight into the mapped staging memory.
            staging.with_mapped(|m| self.pack_bytes_into(data, m))??;
            let mut rec = Recorder::new(self.device(), QueueKind::Compute)?;
            rec.copy_buffer_to_tensor(staging, 0, self)?;
            return rec.submit_and_wait();
        }
        // A staging buffer smaller than the tensor (it counts against the cap on UMA devices)
        // carries it in pieces, one copy and wait each.
        let bytes = self.pack_bytes(data)?;
        let bpt = self.precision().bytes_per_texel() as u64;
        for (first, count) in self.copy_chunks(staging.size())? {
            let range = (first * bpt) as usize..((first + count) * bpt) as usize;
            staging.write(0, &bytes[range])?;
            let mut rec = Recorder::new(self.device(), QueueKind::Compute)?;
            rec.copy_buffer_to_tensor_texels(staging, 0, self, (first, count))?;
            rec.submit_and_wait()?;
        }
        Ok(())
    }

    /// Downloads the tensor now as NCHW f32 values (waits).
    pub fn download(&self) -> Result<Vec<f32>> {
        let size = self.physical_bytes();
        let staging = Buffer::staging_download(self.device(), "tensor download staging", size)?;
        self.download_through(&staging)
    }

    /// Downloads the tensor now through the caller's host-visible `staging` buffer (idle; when
    /// shorter than [`Self::physical_bytes`], in pieces) as NCHW f32 values (waits).
    pub fn download_through(&self, staging: &Buffer) -> Result<Vec<f32>> {
        let size = self.physical_bytes();
        if size > staging.size() {
            let bpt = self.precision().bytes_per_texel() as u64;
            let mut bytes = vec![0u8; size as usize];
            for (first, count) in self.copy_chunks(staging.size())? {
                let mut rec = Recorder::new(self.device(), QueueKind::Compute)?;
                rec.copy_tensor_texels_to_buffer(self, (first, count), staging, 0)?;
                rec.submit_and_wait()?;
                let range = (first * bpt) as usize..((first + count) * bpt) as usize;
                staging.with_mapped(|m| bytes[range.clone()].copy_from_slice(&m[..range.len()]))?;
            }
            return Ok(self.unpack_bytes(&bytes));
        }
        let mut rec = Recorder::new(self.device(), QueueKind::Compute)?;
        rec.copy_tensor_to_buffer(self, staging, 0)?;
        rec.submit_and_wait()?;
        // Straight from the mapped staging memory, without a copy.
        staging.with_mapped(|m| self.unpack_bytes(&m[..(size as usize).min(m.len())]))
    }
}

impl WeightAtlas {
    /// Creates the atlas ([`AtlasConfig`]: slots, page format and height, page-table size) with
    /// every logical page unmapped (uploads the page table's initial contents and waits).
    pub fn new(device: &Device, config: AtlasConfig) -> Result<WeightAtlas> {
        let atlas = WeightAtlas::allocate(device, config)?;
        let bytes = atlas.initial_table();
        let staging =
            Buffer::staging_upload(device, "page table init staging", bytes.len() as u64)?;
        staging.write(0, &bytes)?;
        let mut rec = Recorder::new(device, QueueKind::Compute)?;
        rec.copy_buffer(
            &staging,
            0,
            atlas.page_table_buffer(),
            0,
            bytes.len() as u64,
        )?;
        rec.submit_and_wait()?;
        Ok(atlas)
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
        let dev = self.device();
        let staging = Buffer::staging_upload(dev, "page staging", bytes.len() as u64)?;
        staging.write(0, bytes)?;
        let mut rec = Recorder::new(dev, QueueKind::Compute)?;
        rec.upload_page(self, &staging, 0, slot)?;
        rec.update_page_table(self, &[(page, Some(slot))])?;
        rec.submit_and_wait()
    }

    /// Loads a whole weight space (texel values, 4 per texel, page order) into slots 0.. and maps
    /// page i -> slot i; pads the last page with zeros. For tests and fully-resident models.
    pub fn load_all_now(&self, texel_values: &[f32]) -> Result<()> {
        let per_page = self.texels_per_page() as usize * 4;
        let pages = texel_values.len().div_ceil(per_page).max(1);
        let logical_pages = self.config().logical_pages;
        if pages > self.slots() as usize || pages > logical_pages as usize {
            return Err(VkError::Atlas(format!(
                "{pages} pages do not fit {} slots / {logical_pages} logical pages",
                self.slots(),
            )));
        }
        let mut padded = texel_values.to_vec();
        padded.resize(pages * per_page, 0.0);
        let bytes = layout::texels_to_bytes(&padded, self.precision());
        let dev = self.device();
        let staging = Buffer::staging_upload(dev, "weights staging", bytes.len() as u64)?;
        staging.write(0, &bytes)?;
        let mut rec = Recorder::new(dev, QueueKind::Compute)?;
        let mut entries = Vec::new();
        for p in 0..pages as u32 {
            rec.upload_page(self, &staging, p as u64 * self.page_bytes(), p)?;
            entries.push((p, Some(p)));
        }
        rec.update_page_table(self, &entries)?;
        rec.submit_and_wait()
    }
}
