//! Where each packed weight tensor's texels go in the model's weight space, including
//! compensated storage for small fp16 tensors.
//!
//! fp16 keeps 11 significant bits. In a deep convolutional network the rounding of a few small
//! tensors (biases, norm scales, the first layers' filters) is amplified ~30x by the time it
//! reaches the output; the PP-OCR detector's probability map moves by 1.1e-2 of its range from
//! weight rounding alone, and by 0.7e-2 when the tensors of at most 1024 values (0.7% of its
//! values) keep full precision (measured by rounding initializers in ONNX Runtime).
//!
//! A compensated tensor is stored as two fp16 texel streams: `hi = fp16(v)` and
//! `lo = fp16((v - hi) * 2048)`; `hi + lo / 2048` keeps ~22 significant bits (the scale keeps the
//! remainder out of fp16's subnormal range for all but the tiniest values). A *compensated page* reserves its
//! first `R = texels_per_page / 16` texels for the hi streams and the next `R` for the lo
//! streams at the same offsets; normal tensors fill the rest of the page. The page-table entry
//! of a compensated page carries a flag, and `fetch_weight` adds the lo texel for indices below
//! `R` on such pages (shaders/include/weights.glsl), so kernels need no change.

/// Texels at the start of a compensated page that hold hi values (the next as many hold lo).
pub fn compensated_region(texels_per_page: u64) -> u64 {
    texels_per_page / 16
}

/// The lo stream holds the remainder times this (must match `WEIGHT_LO_SCALE` in weights.glsl).
pub const LO_SCALE: f32 = 2048.0;

/// Lays texels into pages: normal tensors back to back in first-use order, compensated tensors
/// in the reserved region of the current compensated page.
pub struct Placement {
    tpp: u64,
    region: u64,
    /// Texel values (4 per texel) of the whole weight space so far; gaps are zero.
    values: Vec<f32>,
    /// Next free texel for normal tensors.
    cursor: u64,
    /// The compensated page being filled and the texels of its region used so far.
    open: Option<(u64, u64)>,
    compensated_pages: Vec<u64>,
}

impl Placement {
    pub fn new(texels_per_page: u64) -> Placement {
        Placement {
            tpp: texels_per_page,
            region: compensated_region(texels_per_page),
            values: Vec::new(),
            cursor: 0,
            open: None,
            compensated_pages: Vec::new(),
        }
    }

    /// Places a tensor's texels (4 values each) after the previous normal tensor, past any
    /// reserved region it would overlap. Returns its first texel.
    pub fn place(&mut self, texels: &[f32]) -> u64 {
        let count = (texels.len() / 4) as u64;
        let mut start = self.cursor;
        // A tensor that fits in a page but would straddle two starts on the next page: a step
        // runs only once every page it reads is resident, so straddling raises the smallest
        // cap by a page for the price of part of one page of padding here.
        let offset = start % self.tpp;
        if offset != 0 && count <= self.tpp && offset + count > self.tpp {
            start = start.next_multiple_of(self.tpp);
        }
        // Reserved regions sit at page starts; a tensor overlapping one moves past it.
        while let Some(&page) = self.compensated_pages.iter().find(|&&p| {
            let (r0, r1) = (p * self.tpp, p * self.tpp + 2 * self.region);
            start < r1 && start + count > r0
        }) {
            start = page * self.tpp + 2 * self.region;
        }
        self.write(start, texels);
        self.cursor = start + count;
        start
    }

    /// Places a tensor compensated (hi texels at the returned offset, lo texels `R` after), or
    /// returns None when it is larger than a page's region.
    pub fn place_compensated(&mut self, texels: &[f32]) -> Option<u64> {
        let count = (texels.len() / 4) as u64;
        if count == 0 || count > self.region {
            return None;
        }
        let (page, used) = match self.open {
            Some((page, used)) if used + count <= self.region => (page, used),
            _ => (self.open_page(), 0),
        };
        let hi: Vec<f32> = texels
            .iter()
            .map(|&v| half::f16::from_f32(v).to_f32())
            .collect();
        let lo: Vec<f32> = texels
            .iter()
            .zip(&hi)
            // A value past fp16's range is ±inf in hi (an attention mask's float minimum); its
            // remainder would be ∓inf, and hi + lo NaN.
            .map(|(&v, &h)| {
                if h.is_finite() {
                    (v - h) * LO_SCALE
                } else {
                    0.0
                }
            })
            .collect();
        let start = page * self.tpp + used;
        self.write(start, &hi);
        self.write(start + self.region, &lo);
        self.open = Some((page, used + count));
        Some(start)
    }

    /// Reserves the region of a new compensated page: the page the normal cursor is at when
    /// nothing of it is used yet, else the next one.
    fn open_page(&mut self) -> u64 {
        let page = self.cursor.div_ceil(self.tpp);
        if self.cursor == page * self.tpp {
            self.cursor = page * self.tpp + 2 * self.region;
        }
        self.compensated_pages.push(page);
        page
    }

    fn write(&mut self, texel: u64, texels: &[f32]) {
        let at = texel as usize * 4;
        if self.values.len() < at + texels.len() {
            self.values.resize(at + texels.len(), 0.0);
        }
        self.values[at..at + texels.len()].copy_from_slice(texels);
    }

    /// The texel values (gaps zero, not padded to whole pages), the page count and the
    /// compensated pages in ascending order.
    pub fn finish(self) -> (Vec<f32>, u64, Vec<u64>) {
        let texels = (self.values.len() / 4) as u64;
        let pages = texels.div_ceil(self.tpp);
        (self.values, pages, self.compensated_pages)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texels(n: usize, v: f32) -> Vec<f32> {
        vec![v; n * 4]
    }

    #[test]
    fn normal_tensors_skip_reserved_regions() {
        // 64 texels a page, region 4: a compensated page reserves texels [0, 8) of its page.
        let mut p = Placement::new(64);
        let c = p.place_compensated(&texels(3, 1.0)).unwrap();
        assert_eq!(c, 0);
        assert_eq!(p.place(&texels(10, 2.0)), 8);
        // Fills the region: a second compensated page opens at the next page start.
        let c2 = p.place_compensated(&texels(2, 3.0)).unwrap();
        assert_eq!(c2, 64);
        // 18 texels from 18 would overlap [64, 72): it moves to 72.
        assert_eq!(p.place(&texels(60, 4.0)), 72);
        assert_eq!(p.place_compensated(&texels(5, 1.0)), None);
        let (values, pages, comp) = p.finish();
        assert_eq!(comp, vec![0, 1]);
        assert_eq!(pages, 3);
        // Texels 18..64 are a gap.
        assert!(values[18 * 4..64 * 4].iter().all(|&v| v == 0.0));
    }

    #[test]
    fn hi_plus_lo_keeps_the_value() {
        let v = [0.1f32, -2.71, 1e-3, 7.77e3, 3e-4];
        let mut p = Placement::new(64);
        let off = p.place_compensated(&v).unwrap() as usize;
        let (values, _, _) = p.finish();
        for (j, &want) in v.iter().enumerate() {
            let hi = values[off * 4 + j];
            let lo = values[(off + 4) * 4 + j];
            // Both halves are what the file stores (fp16).
            let (hi16, lo16) = (
                half::f16::from_f32(hi).to_f32(),
                half::f16::from_f32(lo).to_f32(),
            );
            assert_eq!(hi16, hi);
            let got = hi16 as f64 + lo16 as f64 / LO_SCALE as f64;
            let err = (got - want as f64).abs() / (want as f64).abs();
            assert!(err < 2e-6, "{want}: {err}");
            let plain = (hi16 as f64 - want as f64).abs() / (want as f64).abs();
            assert!(err < plain || plain == 0.0);
        }
    }
}
