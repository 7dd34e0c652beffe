//! The weight atlas on the recorder: binding it for kernels that read weights
//! (`fetch_weight`), copying pages into its layers, and page-table updates in the command
//! stream (so work already recorded keeps the old mapping).

use super::{Keep, Recorder};
use crate::atlas::WeightAtlas;
use crate::error::Result;
use crate::resource::Buffer;

impl Recorder {
    /// Binds the weight atlas that kernels with `uses_weights` read through `fetch_weight`.
    pub fn use_weights(&mut self, atlas: &WeightAtlas) {
        self.weights = Some(atlas.clone());
        self.keep.push(Keep::Atlas(atlas.clone()));
    }

    /// Whether weight-space texel `texel` of the bound atlas is compensated
    /// ([`WeightAtlas::is_compensated_texel`]); false where no atlas is bound.
    pub(crate) fn weight_texel_compensated(&self, texel: u64) -> bool {
        self.weights
            .as_ref()
            .is_some_and(|atlas| atlas.is_compensated_texel(texel))
    }

    /// Whether `rows` filter rows of `row_texels` texels from weight-space texel `first` each
    /// lie in at most two pages of the bound atlas with no compensated texel
    /// ([`WeightAtlas::rows_plain`]); false where no atlas is bound.
    pub(crate) fn weight_rows_plain(&self, first: u64, rows: u64, row_texels: u64) -> bool {
        self.weights
            .as_ref()
            .is_some_and(|atlas| atlas.rows_plain(first, rows, row_texels))
    }

    /// Records a copy of one page (texels in page order, `atlas.page_bytes()` bytes at `offset`
    /// of `staging`) into atlas slot `slot`.
    pub fn upload_page(
        &mut self,
        atlas: &WeightAtlas,
        staging: &Buffer,
        offset: u64,
        slot: u32,
    ) -> Result<()> {
        atlas.check_slot(slot)?;
        let (layer, row) = atlas.slot_origin(slot);
        self.copy_buffer_to_image_rows(
            staging,
            offset,
            atlas.image(),
            layer,
            row,
            atlas.page_height(),
        )
    }

    /// Records page-table updates `(logical page, Some(slot) | None = unmapped)`; consecutive
    /// pages are merged into one `vkCmdUpdateBuffer`.
    pub fn update_page_table(
        &mut self,
        atlas: &WeightAtlas,
        entries: &[(u32, Option<u32>)],
    ) -> Result<()> {
        for w in atlas.table_writes(entries)? {
            self.update_buffer(atlas.page_table_buffer(), w.offset, &w.bytes)?;
        }
        Ok(())
    }
}
