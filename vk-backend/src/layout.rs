//! Pure-CPU texel layouts (no Vulkan): the activation rank rule + C4 fold, and weight packing.
//!
//! The compiler packs weights offline with these functions and the shaders read them back through
//! `fetch_weight`, so packer and kernel agree by construction. All packers return a flat `Vec<f32>`
//! with 4 values (RGBA) per texel; convert with [`texels_to_bytes`].
//!
//! ## Activation rank rule (ranks 0..=6)
//! A shape is right-aligned into 6 dims `[d0, d1, d2, d3, d4, d5]` with leading 1s, then
//! `N = d0*d1*d2, C = d3, H = d4, W = d5`. So rank 0 -> all 1; rank 1 `[W]`; rank 2 `[H, W]`;
//! rank 3 `[C, H, W]`; rank 4 `[N, C, H, W]`; ranks 5/6 fold their leading dims into N.
//! The last axis is always W. Texel `(x = w, y = h, layer = n*ceil(C/4) + c/4)`, RGBA = `c % 4`,
//! padding channels are zero.
//!
//! ## Fold
//! Linear texel index `i = (layer*H + y)*W + x` maps to physical `(i % PW, (i / PW) % PH,
//! i / (PW*PH))`. When W, H and L fit the limits, `PW = W, PH = H, PL = L` (identity).

use half::f16;
use half::slice::HalfFloatSliceExt;

use crate::error::{Result, VkError};

/// Layers with fewer rows than this are folded into taller ones (where the driver pads them).
const SHORT_LAYER_ROWS: usize = 8;

/// Maximum tensor rank the activation layout supports.
pub const MAX_RANK: usize = 6;
/// Width of a weight page in texels (fixed by convention).
pub const PAGE_WIDTH: u32 = 512;

/// Storage precision of images and the atlas.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Precision {
    /// `R16G16B16A16_SFLOAT` (default).
    #[default]
    F16,
    /// `R32G32B32A32_SFLOAT`.
    F32,
}

impl Precision {
    pub fn bytes_per_texel(self) -> usize {
        match self {
            Precision::F16 => 8,
            Precision::F32 => 16,
        }
    }
    /// Default page height for 1 MiB pages of 512-texel rows.
    pub fn default_page_height(self) -> u32 {
        match self {
            Precision::F16 => 256,
            Precision::F32 => 128,
        }
    }
    /// Rounds a value the way storing it at this precision does.
    pub fn round(self, v: f32) -> f32 {
        match self {
            Precision::F16 => f16::from_f32(v).to_f32(),
            Precision::F32 => v,
        }
    }
}

/// Pads a shape of rank <= 6 to 6 dims, right-aligned with leading 1s.
pub fn dims6(shape: &[usize]) -> Result<[usize; 6]> {
    if shape.len() > MAX_RANK {
        return Err(VkError::BadShape {
            shape: shape.to_vec(),
            reason: format!(
                "rank {} exceeds the supported maximum of {MAX_RANK}",
                shape.len()
            ),
        });
    }
    let mut d = [1usize; 6];
    d[6 - shape.len()..].copy_from_slice(shape);
    Ok(d)
}

/// `[N, C, H, W]` of a shape under the rank rule.
pub fn nchw(shape: &[usize]) -> Result<[usize; 4]> {
    let d = dims6(shape)?;
    Ok([d[0] * d[1] * d[2], d[3], d[4], d[5]])
}

/// Where the texels of an activation tensor live: logical grid plus physical fold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FoldLayout {
    pub n: u32,
    pub c: u32,
    pub h: u32,
    pub w: u32,
    /// ceil(C/4)
    pub c4: u32,
    /// Physical image width, height and array layers.
    pub pw: u32,
    pub ph: u32,
    pub pl: u32,
}

/// How a device's optimal-tiling images take memory beyond their texels, which the folds avoid
/// (`Device::fold_layout` decides both).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ImagePadding {
    /// Heights pad to power-of-two row blocks of at most 128 rows (NVIDIA's block-linear
    /// layout: a 192-row image costs 256 rows).
    pub rows: bool,
    /// A tensor's layers under 8 rows stack into taller ones, and fewer than 8 rows in all fold
    /// into 8 narrower ones: where they pad to a tile height (NVIDIA: a `[1, 96, 1, 18710]`
    /// head took 8x its texels as one-row layers).
    pub short_layers: bool,
}

/// Rows an image of `rows` rows takes where the driver pads heights to power-of-two blocks of at
/// most 128 rows.
pub fn padded_rows(rows: u64) -> u64 {
    rows.next_multiple_of(rows.next_power_of_two().clamp(1, 128))
}

impl FoldLayout {
    /// Logical layers `N * ceil(C/4)`.
    pub fn layers(&self) -> u64 {
        self.n as u64 * self.c4 as u64
    }
    /// Logical texel count `L*H*W`.
    pub fn texels(&self) -> u64 {
        self.layers() * self.h as u64 * self.w as u64
    }
    /// Physical texel count `PW*PH*PL` (>= texels; the tail of the last layer is unused).
    pub fn physical_texels(&self) -> u64 {
        self.pw as u64 * self.ph as u64 * self.pl as u64
    }
    pub fn elements(&self) -> u64 {
        self.n as u64 * self.c as u64 * self.h as u64 * self.w as u64
    }
    pub fn is_identity(&self) -> bool {
        self.pw == self.w && self.ph == self.h && self.pl as u64 == self.layers()
    }
    /// Physical (x, y, layer) of a linear texel index.
    pub fn fold(&self, i: u64) -> (u32, u32, u32) {
        let pw = self.pw as u64;
        let ph = self.ph as u64;
        (
            (i % pw) as u32,
            ((i / pw) % ph) as u32,
            (i / (pw * ph)) as u32,
        )
    }

    /// Plans the image for `[N, C, H, W]` under the limits; `None` when no image can hold it
    /// (the caller then falls back to a counted storage buffer).
    /// [`FoldLayout::plan`] for a device whose images pad as `padding` says: short layers stack
    /// into taller ones only where they pad; and where image heights pad to power-of-two row
    /// blocks of at most 128 rows (`padding.rows`), where a fold into 128-row (or power-of-two)
    /// layers of the same width takes less padded memory, that fold. Kernels
    /// address texels through the linear fold, so any fold serves; the detector's
    /// `[1, 24, 192, 384]` maps take 4/3 of their texels as 192-row layers on NVIDIA and none
    /// as 128-row ones.
    pub fn plan_padded(
        nchw: [usize; 4],
        max_dim: u32,
        max_layers: u32,
        padding: ImagePadding,
    ) -> Result<Option<FoldLayout>> {
        let Some(base) = Self::plan_folding(nchw, max_dim, max_layers, padding.short_layers)?
        else {
            return Ok(None);
        };
        if !padding.rows {
            return Ok(Some(base));
        }
        let cost = |l: &FoldLayout| l.pw as u64 * padded_rows(l.ph as u64) * l.pl as u64;
        let total = base.texels();
        let (md, ml) = (max_dim as u64, max_layers as u64);
        let rows = total.div_ceil(base.pw as u64);
        // Same width in 128-row layers (or one power-of-two layer); or, for fewer than 128
        // rows, a power-of-two row count below them in one wider layer.
        let mut candidates = vec![(
            base.pw as u64,
            if rows >= 128 {
                128
            } else {
                rows.next_power_of_two()
            },
        )];
        if rows > 1 && rows < 128 {
            let ph = 1u64 << (63 - rows.leading_zeros());
            candidates.push((total.div_ceil(ph), ph));
        }
        let mut best = base;
        for (pw, ph) in candidates {
            let pl = total.div_ceil(pw * ph);
            if pw > md || ph > md || pl > ml {
                continue;
            }
            let alt = FoldLayout {
                pw: pw as u32,
                ph: ph as u32,
                pl: pl as u32,
                ..base
            };
            if cost(&alt) < cost(&best) {
                best = alt;
            }
        }
        Ok(Some(best))
    }

    /// The image for `[N, C, H, W]` under the limits, folded only where the limits require it
    /// (a device's padding is [`FoldLayout::plan_padded`]'s); `None` when no image can hold it.
    pub fn plan(nchw: [usize; 4], max_dim: u32, max_layers: u32) -> Result<Option<FoldLayout>> {
        Self::plan_folding(nchw, max_dim, max_layers, false)
    }

    fn plan_folding(
        nchw: [usize; 4],
        max_dim: u32,
        max_layers: u32,
        fold_short_layers: bool,
    ) -> Result<Option<FoldLayout>> {
        let [n, c, h, w] = nchw;
        let bad = |reason: &str| VkError::BadShape {
            shape: nchw.to_vec(),
            reason: reason.to_string(),
        };
        if n == 0 || c == 0 || h == 0 || w == 0 {
            return Err(bad("zero-sized dimension (empty tensors have no image)"));
        }
        let c4 = c.div_ceil(4);
        let layers = n as u64 * c4 as u64;
        let total = layers * h as u64 * w as u64;
        if total > u32::MAX as u64 {
            // Shaders index texels with 32-bit integers.
            return Ok(None);
        }
        let to32 = |v: usize| u32::try_from(v).map_err(|_| bad("dimension exceeds u32"));
        let (n32, c32, h32, w32) = (to32(n)?, to32(c)?, to32(h)?, to32(w)?);
        let (md, ml) = (max_dim as u64, max_layers as u64);
        // Layers only a few rows tall waste most of their memory on tiled GPUs (NVIDIA pads a
        // layer to its tile height: a [1, 96, 1, 18710] head took 8x its texels); their rows
        // stack in one layer instead, and where all of them together are still short (a
        // token's [1, 576] activation, one row), the texels fold into rows of a narrower width.
        let short_layers =
            fold_short_layers && h < SHORT_LAYER_ROWS && total >= SHORT_LAYER_ROWS as u64;
        let (pw, ph) = if (w as u64) <= md && (h as u64) <= md {
            if layers <= ml && !short_layers {
                return Ok(Some(FoldLayout {
                    n: n32,
                    c: c32,
                    h: h32,
                    w: w32,
                    c4: c4 as u32,
                    pw: w32,
                    ph: h32,
                    pl: layers as u32,
                }));
            }
            // Rows fit: keep W, grow the rows per layer (short layers: all rows in as few
            // layers as the height limit allows).
            let rows = total.div_ceil(w as u64);
            if short_layers && rows < SHORT_LAYER_ROWS as u64 {
                // Fewer rows than a tile in all: one layer of that many rows, narrower.
                let ph = SHORT_LAYER_ROWS as u64;
                (total.div_ceil(ph), ph)
            } else {
                let ph = if short_layers {
                    rows.min(md)
                } else {
                    rows.div_ceil(ml).max(h as u64)
                };
                (w as u64, ph.min(md))
            }
        } else {
            let pw = (w as u64).min(md);
            let rows = total.div_ceil(pw);
            (pw, rows.min(md))
        };
        let pl = total.div_ceil(pw * ph);
        if pl > ml {
            return Ok(None);
        }
        Ok(Some(FoldLayout {
            n: n32,
            c: c32,
            h: h32,
            w: w32,
            c4: c4 as u32,
            pw: pw as u32,
            ph: ph as u32,
            pl: pl as u32,
        }))
    }

    /// NCHW values -> physical texel stream (`physical_texels()*4` values, padding zero).
    pub fn pack(&self, data: &[f32]) -> Vec<f32> {
        let mut out = vec![0f32; self.physical_texels() as usize * 4];
        let (c, h, w, c4) = (
            self.c as usize,
            self.h as usize,
            self.w as usize,
            self.c4 as usize,
        );
        let hw = h * w;
        for n in 0..self.n as usize {
            for ch in 0..c {
                let layer = n * c4 + ch / 4;
                let src = &data[(n * c + ch) * hw..(n * c + ch + 1) * hw];
                let base = layer * hw;
                for (k, &v) in src.iter().enumerate() {
                    // Linear texel index == physical index (the fold is a reshape of one stream).
                    out[(base + k) * 4 + ch % 4] = v;
                }
            }
        }
        out
    }

    /// Physical texel stream -> NCHW values (inverse of `pack`).
    pub fn unpack(&self, texels: &[f32]) -> Vec<f32> {
        let (c, h, w, c4) = (
            self.c as usize,
            self.h as usize,
            self.w as usize,
            self.c4 as usize,
        );
        let hw = h * w;
        let mut out = vec![0f32; self.elements() as usize];
        for n in 0..self.n as usize {
            for ch in 0..c {
                let base = (n * c4 + ch / 4) * hw;
                let dst = &mut out[(n * c + ch) * hw..(n * c + ch + 1) * hw];
                for (k, d) in dst.iter_mut().enumerate() {
                    *d = texels[(base + k) * 4 + ch % 4];
                }
            }
        }
        out
    }

    /// Physical texel bytes (as stored at `precision`, possibly shorter than the image: missing
    /// texels read as 0) -> NCHW values. Reads only the lanes that hold elements, so a tensor
    /// with C = 1 converts a quarter of the bytes, with no intermediate texel buffer; large
    /// tensors are converted on several threads (readbacks sit on the pipeline's critical path).
    pub fn unpack_bytes(&self, bytes: &[u8], precision: Precision) -> Vec<f32> {
        let (c, c4) = (self.c as usize, self.c4 as usize);
        let hw = self.h as usize * self.w as usize;
        let bpv = precision.bytes_per_texel() / 4;
        let texel_bytes = 4 * bpv;
        // Elements `start..` in NCHW order: plane p = n * C + ch holds hw values, which sit in
        // lane ch % 4 of the texels from (n * C4 + ch / 4) * hw on. A run of a plane walks its
        // texels once (no per-value bounds checks or precision match); fp16 lanes are gathered
        // as bits and converted a slice at a time (F16C where the CPU has it).
        let fill = |start: usize, dst: &mut [f32]| {
            let (mut plane, mut k) = (start / hw, start % hw);
            let mut rest = dst;
            let mut bits = [f16::ZERO; PACK_CHUNK];
            while !rest.is_empty() {
                let (n, ch) = (plane / c, plane % c);
                let first = (n * c4 + ch / 4) * hw + k;
                let at = (ch % 4) * bpv;
                let take = (hw - k).min(rest.len());
                let (run, tail) = rest.split_at_mut(take);
                let from = (first * texel_bytes).min(bytes.len());
                let to = ((first + take) * texel_bytes).min(bytes.len());
                let texels = bytes[from..to].chunks_exact(texel_bytes);
                let got = texels.len();
                match precision {
                    Precision::F16 => {
                        // A chunk at a time on the stack: the lane's halves as whole 8-byte
                        // texels shifted, then converted.
                        let shift = 8 * at as u32;
                        let src = bytes[from..to].chunks(PACK_CHUNK * texel_bytes);
                        for (dst, src) in run[..got].chunks_mut(PACK_CHUNK).zip(src) {
                            for (b, t) in bits.iter_mut().zip(src.chunks_exact(8)) {
                                let word = u64::from_le_bytes(t.try_into().unwrap_or([0; 8]));
                                *b = f16::from_bits((word >> shift) as u16);
                            }
                            bits[..dst.len()].convert_to_f32_slice(dst);
                        }
                    }
                    Precision::F32 => {
                        for (d, t) in run.iter_mut().zip(texels) {
                            *d = f32::from_le_bytes([t[at], t[at + 1], t[at + 2], t[at + 3]]);
                        }
                    }
                }
                // Texels past the end of `bytes` read as 0.
                run[got..].fill(0.0);
                rest = tail;
                plane += 1;
                k = 0;
            }
        };
        let mut out = vec![0f32; self.elements() as usize];
        let threads = if out.len() >= PARALLEL_UNPACK_ELEMENTS {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
        } else {
            1
        };
        // One thread: no spawn (a thread's start and join cost a decode step's readback 0.2 ms).
        if threads == 1 {
            fill(0, &mut out);
            return out;
        }
        let chunk = out.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            for (i, dst) in out.chunks_mut(chunk).enumerate() {
                let fill = &fill;
                s.spawn(move || fill(i * chunk, dst));
            }
        });
        out
    }
}

impl FoldLayout {
    /// NCHW values -> the physical texel stream's bytes at `precision`, written straight into
    /// `out` (the first `out.len()` bytes of the stream: a buffer-backed tensor stores fewer
    /// texels than the image fold; padding lanes and texels are written as 0). The inverse of
    /// [`Self::unpack_bytes`] and the same as `texels_to_bytes(&self.pack(data), precision)`,
    /// without the two intermediate buffers; large tensors are converted on several threads
    /// (an input upload sits on the request's critical path). `data` must hold
    /// [`Self::elements`] values.
    pub fn pack_bytes_into(&self, data: &[f32], precision: Precision, out: &mut [u8]) {
        let (c, c4) = (self.c as usize, self.c4 as usize);
        let hw = (self.h as usize * self.w as usize).max(1);
        let layers = self.n as usize * c4;
        let bpv = precision.bytes_per_texel() / 4;
        // Texels `first..` into `dst` (whole texels), one run of a layer at a time: each lane
        // of the run is one channel plane's contiguous values. Each texel is written once, in
        // order, as one word (fp16: the four lanes' slices are converted first, with the CPU's
        // conversion instructions where it has them): four strided passes over the texels were
        // the slow part, and in write-combined staging memory partial writes are slower still.
        let fill = |first: usize, dst: &mut [u8]| {
            let texel_bytes = 4 * bpv;
            let end = first + dst.len() / texel_bytes;
            let mut t = first;
            while t < end {
                let (layer, k0) = (t / hw, t % hw);
                let run = (hw - k0).min(end - t);
                let off = (t - first) * texel_bytes;
                let seg = &mut dst[off..off + run * texel_bytes];
                let (n, cb) = (layer / c4.max(1), (layer % c4.max(1)) * 4);
                let src = |lane: usize| {
                    let ch = cb + lane;
                    (layer < layers && ch < c)
                        .then(|| data.get((n * c + ch) * hw + k0..)?.get(..run))
                        .flatten()
                };
                match precision {
                    Precision::F32 => {
                        let lanes = [src(0), src(1), src(2), src(3)];
                        for (i, texel) in seg.chunks_exact_mut(16).enumerate() {
                            let mut word = [0u8; 16];
                            for (lane, src) in lanes.iter().enumerate() {
                                if let Some(s) = src {
                                    word[4 * lane..4 * lane + 4]
                                        .copy_from_slice(&s[i].to_le_bytes());
                                }
                            }
                            texel.copy_from_slice(&word);
                        }
                    }
                    Precision::F16 => {
                        let lanes = [src(0), src(1), src(2), src(3)];
                        // Converted a chunk at a time on the stack: only the lanes that hold
                        // channels, and a tensor of one channel (a transformer's activations)
                        // writes each texel from one lane.
                        let mut halves = [[f16::ZERO; PACK_CHUNK]; 4];
                        let only_first = lanes[1..].iter().all(Option::is_none);
                        for (ci, chunk) in seg.chunks_mut(PACK_CHUNK * 8).enumerate() {
                            let (at, n) = (ci * PACK_CHUNK, chunk.len() / 8);
                            for (half, s) in halves.iter_mut().zip(&lanes) {
                                if let Some(s) = s {
                                    half[..n].convert_from_f32_slice(&s[at..at + n]);
                                }
                            }
                            let texels = chunk.chunks_exact_mut(8);
                            if only_first {
                                for (texel, a) in texels.zip(&halves[0]) {
                                    texel.copy_from_slice(&(a.to_bits() as u64).to_le_bytes());
                                }
                                continue;
                            }
                            for (i, texel) in texels.enumerate() {
                                let word = halves[0][i].to_bits() as u64
                                    | (halves[1][i].to_bits() as u64) << 16
                                    | (halves[2][i].to_bits() as u64) << 32
                                    | (halves[3][i].to_bits() as u64) << 48;
                                texel.copy_from_slice(&word.to_le_bytes());
                            }
                        }
                    }
                }
                t += run;
            }
        };
        let texel_bytes = 4 * bpv;
        let texels = out.len() / texel_bytes;
        let (whole, rest) = out.split_at_mut(texels * texel_bytes);
        rest.fill(0);
        let threads = if texels >= PARALLEL_PACK_TEXELS {
            std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
        } else {
            1
        };
        if threads == 1 {
            fill(0, whole);
            return;
        }
        let per = texels.div_ceil(threads).max(1);
        std::thread::scope(|s| {
            for (i, dst) in whole.chunks_mut(per * texel_bytes).enumerate() {
                let fill = &fill;
                s.spawn(move || fill(i * per, dst));
            }
        });
    }
}

/// Values packed densely in row-major order (`pack_dense.comp`: fp16 two bytes each, fp32 four)
/// -> `elements` f32 values; bytes past the end of `bytes` read as 0. Large readbacks are
/// converted on several threads, as [`FoldLayout::unpack_bytes`]'s are.
pub fn unpack_dense(bytes: &[u8], precision: Precision, elements: usize) -> Vec<f32> {
    let bpv = precision.bytes_per_texel() / 4;
    let fill = |start: usize, dst: &mut [f32]| {
        let from = (start * bpv).min(bytes.len());
        let to = ((start + dst.len()) * bpv).min(bytes.len());
        let src = &bytes[from..to];
        let got = src.len() / bpv;
        match precision {
            Precision::F16 => {
                let mut halves = [f16::ZERO; PACK_CHUNK];
                for (d, s) in dst[..got]
                    .chunks_mut(PACK_CHUNK)
                    .zip(src.chunks(2 * PACK_CHUNK))
                {
                    for (h, b) in halves.iter_mut().zip(s.chunks_exact(2)) {
                        *h = f16::from_le_bytes([b[0], b[1]]);
                    }
                    halves[..d.len()].convert_to_f32_slice(d);
                }
            }
            Precision::F32 => {
                for (d, b) in dst.iter_mut().zip(src.chunks_exact(4)) {
                    *d = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
                }
            }
        }
        dst[got..].fill(0.0);
    };
    let mut out = vec![0f32; elements];
    let threads = if elements >= PARALLEL_UNPACK_ELEMENTS {
        std::thread::available_parallelism().map_or(1, |n| n.get().min(8))
    } else {
        1
    };
    if threads == 1 {
        fill(0, &mut out);
        return out;
    }
    let chunk = elements.div_ceil(threads).max(1);
    std::thread::scope(|s| {
        for (i, dst) in out.chunks_mut(chunk).enumerate() {
            let fill = &fill;
            s.spawn(move || fill(i * chunk, dst));
        }
    });
    out
}

/// Texels an fp16 pack converts at a time (on the stack).
const PACK_CHUNK: usize = 256;

/// Readbacks at least this large are converted on several threads.
const PARALLEL_UNPACK_ELEMENTS: usize = 1 << 18;

/// Uploads of at least this many texels are packed on several threads. Below it the threads'
/// start costs more than they share: a BERT-shaped input's 98 304 texels packed in 0.039 ms on
/// one thread and 0.062 ms on two (this repository's CPU machine, session 30).
const PARALLEL_PACK_TEXELS: usize = 1 << 19;

fn check_len(what: &str, data: &[f32], expected: usize) -> Result<()> {
    if data.len() != expected {
        return Err(VkError::DataLength {
            name: what.to_string(),
            expected,
            got: data.len(),
        });
    }
    Ok(())
}

/// Texels of a MatMul/Gemm B matrix `[K, N]`: `ceil(K/4) * N`.
pub fn matrix_kn_texels(k: usize, n: usize) -> usize {
    k.div_ceil(4) * n
}

/// Packs B `[K, N]` (row-major): texel `t = (k/4)*N + n`, RGBA = `B[4*(k/4)+j, n]`, zero pad.
pub fn pack_matrix_kn(b: &[f32], k: usize, n: usize) -> Result<Vec<f32>> {
    check_len("matrix [K,N]", b, k * n)?;
    let mut out = vec![0f32; matrix_kn_texels(k, n) * 4];
    for kk in 0..k {
        for nn in 0..n {
            out[((kk / 4) * n + nn) * 4 + kk % 4] = b[kk * n + nn];
        }
    }
    Ok(out)
}

/// Texels of a non-depthwise conv filter `[O, I/g, KH, KW]`: `O*KH*KW*ceil((I/g)/4)`.
pub fn conv_filter_texels(o: usize, i_per_group: usize, kh: usize, kw: usize) -> usize {
    o * kh * kw * i_per_group.div_ceil(4)
}

/// Packs a conv filter `[O, I/g, KH, KW]`: texel `t = ((o*KH + ky)*KW + kx)*ceil((I/g)/4) + i/4`,
/// RGBA = `W[o, 4*(i/4)+j, ky, kx]`, zero pad.
pub fn pack_conv_filter(
    w: &[f32],
    o: usize,
    i_per_group: usize,
    kh: usize,
    kw: usize,
) -> Result<Vec<f32>> {
    check_len("conv filter [O,I/g,KH,KW]", w, o * i_per_group * kh * kw)?;
    let i4 = i_per_group.div_ceil(4);
    let mut out = vec![0f32; conv_filter_texels(o, i_per_group, kh, kw) * 4];
    for oo in 0..o {
        for ii in 0..i_per_group {
            for ky in 0..kh {
                for kx in 0..kw {
                    let t = ((oo * kh + ky) * kw + kx) * i4 + ii / 4;
                    out[t * 4 + ii % 4] = w[((oo * i_per_group + ii) * kh + ky) * kw + kx];
                }
            }
        }
    }
    Ok(out)
}

/// Texels of a depthwise filter `[C, 1, KH, KW]`: `KH*KW*ceil(C/4)`.
pub fn depthwise_filter_texels(c: usize, kh: usize, kw: usize) -> usize {
    kh * kw * c.div_ceil(4)
}

/// Packs a depthwise filter `[C, 1, KH, KW]`: texel `t = (ky*KW + kx)*ceil(C/4) + c/4`,
/// RGBA = `W[4*(c/4)+j, 0, ky, kx]`.
pub fn pack_depthwise_filter(w: &[f32], c: usize, kh: usize, kw: usize) -> Result<Vec<f32>> {
    check_len("depthwise filter [C,1,KH,KW]", w, c * kh * kw)?;
    let c4 = c.div_ceil(4);
    let mut out = vec![0f32; depthwise_filter_texels(c, kh, kw) * 4];
    for cc in 0..c {
        for ky in 0..kh {
            for kx in 0..kw {
                let t = (ky * kw + kx) * c4 + cc / 4;
                out[t * 4 + cc % 4] = w[(cc * kh + ky) * kw + kx];
            }
        }
    }
    Ok(out)
}

/// Texels of a ConvTranspose filter `[I, O/g, KH, KW]`: `O*KH*KW*ceil((I/g)/4)`.
pub fn conv_transpose_filter_texels(
    in_channels: usize,
    out_per_group: usize,
    groups: usize,
    kh: usize,
    kw: usize,
) -> usize {
    conv_filter_texels(out_per_group * groups, in_channels / groups.max(1), kh, kw)
}

/// Packs a ConvTranspose filter `[I, O/g, KH, KW]` (ONNX layout) in the conv filter layout of the
/// equivalent gather form: for output channel `o` (group `g = o / (O/g)`) and in-group input
/// channel `i`, texel `t = ((o*KH + ky)*KW + kx)*ceil((I/g)/4) + i/4`,
/// RGBA = `W[g*(I/g) + 4*(i/4)+j, o - g*(O/g), ky, kx]`, zero pad. Taps are not flipped: the
/// kernel gathers `x[iy]` with `oy = iy*stride - pad + ky*dilation`.
pub fn pack_conv_transpose_filter(
    w: &[f32],
    in_channels: usize,
    out_per_group: usize,
    groups: usize,
    kh: usize,
    kw: usize,
) -> Result<Vec<f32>> {
    check_len(
        "conv transpose filter [I,O/g,KH,KW]",
        w,
        in_channels * out_per_group * kh * kw,
    )?;
    if groups == 0 || !in_channels.is_multiple_of(groups) {
        return Err(VkError::BadShape {
            shape: vec![in_channels, out_per_group, kh, kw],
            reason: format!("groups {groups} must divide the input channels {in_channels}"),
        });
    }
    let icg = in_channels / groups;
    let o = out_per_group * groups;
    // Rearrange to [O, I/g, KH, KW], then use the conv packing.
    let mut t = vec![0f32; o * icg * kh * kw];
    for oo in 0..o {
        let (g, oj) = (oo / out_per_group, oo % out_per_group);
        for i in 0..icg {
            for k in 0..kh * kw {
                t[(oo * icg + i) * kh * kw + k] =
                    w[((g * icg + i) * out_per_group + oj) * kh * kw + k];
            }
        }
    }
    pack_conv_filter(&t, o, icg, kh, kw)
}

/// Texels of a vector `[C]`: `ceil(C/4)`.
pub fn vector_texels(c: usize) -> usize {
    c.div_ceil(4)
}

/// Packs a bias / per-channel vector `[C]`: texel `t = c/4`, RGBA = `v[4*(c/4)+j]`.
pub fn pack_vector(v: &[f32]) -> Vec<f32> {
    let mut out = vec![0f32; vector_texels(v.len()) * 4];
    out[..v.len()].copy_from_slice(v);
    out
}

/// Converts texel values to the byte form stored in images / the atlas.
pub fn texels_to_bytes(values: &[f32], precision: Precision) -> Vec<u8> {
    match precision {
        Precision::F16 => values
            .iter()
            .flat_map(|&v| f16::from_f32(v).to_le_bytes())
            .collect(),
        Precision::F32 => values.iter().flat_map(|&v| v.to_le_bytes()).collect(),
    }
}

/// Inverse of [`texels_to_bytes`].
pub fn bytes_to_texels(bytes: &[u8], precision: Precision) -> Vec<f32> {
    match precision {
        Precision::F16 => bytes
            .chunks_exact(2)
            .map(|b| f16::from_le_bytes([b[0], b[1]]).to_f32())
            .collect(),
        Precision::F32 => bytes
            .chunks_exact(4)
            .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn padded_folds_use_block_friendly_heights_only_when_cheaper() {
        use super::{padded_rows, FoldLayout, ImagePadding};
        const SHORT: ImagePadding = ImagePadding {
            rows: false,
            short_layers: true,
        };
        const BOTH: ImagePadding = ImagePadding {
            rows: true,
            short_layers: true,
        };
        assert_eq!(
            [12, 24, 192, 256, 300].map(padded_rows),
            [16, 32, 256, 256, 384]
        );
        let plain = FoldLayout::plan([1, 24, 192, 384], 32768, 2048)
            .unwrap()
            .unwrap();
        let same = FoldLayout::plan_padded([1, 24, 192, 384], 32768, 2048, SHORT).unwrap();
        assert_eq!(same, Some(plain));
        // The detector's stem map: 6 layers of 192 rows -> 9 layers of 128 rows, no padding.
        let l = FoldLayout::plan_padded([1, 24, 192, 384], 32768, 2048, BOTH)
            .unwrap()
            .unwrap();
        assert_eq!((l.pw, l.ph, l.pl), (384, 128, 9));
        assert!(l.physical_texels() >= l.texels());
        // Fewer than 128 rows: a power-of-two row count in a wider layer (the recognizer's
        // head pieces, 24 rows of 2079).
        let l = FoldLayout::plan_padded([1, 4, 24, 2079], 32768, 2048, BOTH)
            .unwrap()
            .unwrap();
        assert_eq!((l.pw, l.ph, l.pl), (3119, 16, 1));
        // Already block friendly, or no cheaper: unchanged.
        for nchw in [[1, 8, 64, 10], [1, 4, 130, 16], [1, 4, 8, 100]] {
            let base = FoldLayout::plan(nchw, 32768, 2048).unwrap();
            assert_eq!(
                FoldLayout::plan_padded(nchw, 32768, 2048, BOTH).unwrap(),
                base
            );
        }
    }

    use super::*;

    #[test]
    fn rank_rule() {
        assert_eq!(nchw(&[]).unwrap(), [1, 1, 1, 1]);
        assert_eq!(nchw(&[7]).unwrap(), [1, 1, 1, 7]);
        assert_eq!(nchw(&[3, 7]).unwrap(), [1, 1, 3, 7]);
        assert_eq!(nchw(&[5, 3, 7]).unwrap(), [1, 5, 3, 7]);
        assert_eq!(nchw(&[2, 5, 3, 7]).unwrap(), [2, 5, 3, 7]);
        assert_eq!(nchw(&[4, 2, 5, 3, 7]).unwrap(), [8, 5, 3, 7]);
        assert_eq!(nchw(&[2, 4, 2, 5, 3, 7]).unwrap(), [16, 5, 3, 7]);
        assert!(nchw(&[1; 7]).is_err());
    }

    #[test]
    fn fold_identity_and_folded() {
        let l = FoldLayout::plan([2, 5, 3, 7], 16384, 2048)
            .unwrap()
            .unwrap();
        assert!(l.is_identity());
        assert_eq!((l.pw, l.ph, l.pl, l.c4), (7, 3, 4, 2));
        // W beyond the limit: rows of 16 texels.
        let l = FoldLayout::plan([1, 1, 1, 100], 16, 2048).unwrap().unwrap();
        assert_eq!((l.pw, l.ph, l.pl), (16, 7, 1));
        // Too many layers: rows grow instead.
        let l = FoldLayout::plan([1, 40, 2, 3], 16, 4).unwrap().unwrap();
        assert!(l.physical_texels() >= l.texels());
        assert!(l.pl <= 4 && l.ph <= 16 && l.pw <= 16);
        // Nothing fits.
        assert!(FoldLayout::plan([1, 1, 1, 10_000], 16, 4)
            .unwrap()
            .is_none());
    }

    #[test]
    fn short_layers_keep_their_shape_where_they_do_not_pad() {
        let linear = ImagePadding::default();
        for nchw in [[1, 96, 1, 18710], [1, 384, 6, 80], [1, 768, 3, 80]] {
            let l = FoldLayout::plan_padded(nchw, 32768, 2048, linear)
                .unwrap()
                .unwrap();
            assert!(l.is_identity(), "{nchw:?}: {l:?}");
            let tiled = ImagePadding {
                short_layers: true,
                ..linear
            };
            let l = FoldLayout::plan_padded(nchw, 32768, 2048, tiled)
                .unwrap()
                .unwrap();
            assert!(!l.is_identity(), "{nchw:?}: {l:?}");
        }
    }

    #[test]
    fn short_layers_stack_their_rows() {
        let tiled = ImagePadding {
            short_layers: true,
            rows: false,
        };
        let plan = |nchw| {
            FoldLayout::plan_padded(nchw, 32768, 2048, tiled)
                .unwrap()
                .unwrap()
        };
        // A row-packed head: 24 layers one row tall become one layer of 24 rows.
        let l = plan([1, 96, 1, 18710]);
        assert_eq!((l.pw, l.ph, l.pl), (18710, 24, 1));
        let l = plan([1, 96, 1, 10]);
        assert_eq!((l.pw, l.ph, l.pl), (10, 24, 1));
        // A token's activation, one row of 1540 texels: eight rows of 193 (the last one short).
        let l = plan([1, 1, 1, 1540]);
        assert_eq!((l.pw, l.ph, l.pl), (193, 8, 1));
        assert!(l.physical_texels() >= l.texels());
        // Tall-enough layers, and fewer texels than one tile's rows, keep the identity fold.
        for nchw in [[1, 96, 8, 4096], [1, 4, 1, 7], [1, 1, 1, 1]] {
            assert!(plan(nchw).is_identity(), "{nchw:?}");
        }
    }

    #[test]
    fn pack_unpack_roundtrip_brute_force() {
        let l = FoldLayout::plan([2, 6, 3, 5], 4, 64).unwrap().unwrap();
        let data: Vec<f32> = (0..l.elements()).map(|i| i as f32 + 1.0).collect();
        let packed = l.pack(&data);
        // Brute force: element (n,c,h,w) sits at fold(linear texel) component c%4.
        for n in 0..2usize {
            for c in 0..6usize {
                for h in 0..3usize {
                    for w in 0..5usize {
                        let layer = n * 2 + c / 4;
                        let i = ((layer * 3 + h) * 5 + w) as u64;
                        let (x, y, z) = l.fold(i);
                        let phys =
                            ((z as u64 * l.ph as u64 + y as u64) * l.pw as u64 + x as u64) as usize;
                        assert_eq!(
                            packed[phys * 4 + c % 4],
                            data[((n * 6 + c) * 3 + h) * 5 + w]
                        );
                    }
                }
            }
        }
        assert_eq!(l.unpack(&packed), data);
        for p in [Precision::F16, Precision::F32] {
            let bytes = texels_to_bytes(&packed, p);
            let want: Vec<f32> = data.iter().map(|&v| p.round(v)).collect();
            assert_eq!(l.unpack_bytes(&bytes, p), want, "{p:?}");
        }
    }

    #[test]
    fn packing_into_bytes_matches_the_texel_packer() {
        // C not a multiple of 4, N > 1, both precisions, a stream cut short (buffer storage)
        // and one longer than the tensor (the fold's padding texels); one channel (one lane a
        // texel), runs longer than a conversion chunk; small and threaded sizes.
        for (shape, max_dim, threaded) in [
            ([2usize, 3, 5, 7], 8192, false),
            ([1, 6, 2, 3], 8192, false),
            ([1, 5, 1, 100], 16, false),
            ([1, 1, 7, 300], 8192, false),
            ([1, 3, 768, 768], 8192, true),
            ([1, 1, 1024, 600], 8192, true),
        ] {
            let l = FoldLayout::plan(shape, max_dim, 2048).unwrap().unwrap();
            let data: Vec<f32> = (0..l.elements() as usize)
                .map(|i| (i as f32 * 0.37).sin() * 100.0)
                .collect();
            assert_eq!(threaded, l.texels() as usize >= PARALLEL_PACK_TEXELS);
            for p in [Precision::F16, Precision::F32] {
                let want = texels_to_bytes(&l.pack(&data), p);
                // The whole stream, one texel short, and more than it.
                let texel = p.bytes_per_texel();
                for len in [want.len(), want.len() - texel, want.len() + 16] {
                    let mut got = vec![0xAAu8; len];
                    l.pack_bytes_into(&data, p, &mut got);
                    let m = len.min(want.len());
                    assert_eq!(&got[..m], &want[..m], "{shape:?} {p:?} {len}");
                    assert!(got[m..].iter().all(|&b| b == 0), "{shape:?} {p:?} tail");
                    if len == want.len() {
                        assert_eq!(
                            l.unpack_bytes(&got, p),
                            l.unpack(&bytes_to_texels(&want, p))
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn threaded_unpack_matches_texel_unpack() {
        // Above PARALLEL_UNPACK_ELEMENTS, C = 6 (a padded C4 block), folded rows.
        let l = FoldLayout::plan([2, 6, 150, 300], 512, 64)
            .unwrap()
            .unwrap();
        assert!(l.elements() as usize >= PARALLEL_UNPACK_ELEMENTS);
        let data: Vec<f32> = (0..l.elements())
            .map(|i| (i % 2048) as f32 - 1024.0)
            .collect();
        let packed = l.pack(&data);
        let bytes = texels_to_bytes(&packed, Precision::F16);
        assert_eq!(l.unpack_bytes(&bytes, Precision::F16), data);
        // A short buffer reads as zeros past its end.
        let cut = l.unpack_bytes(&bytes[..bytes.len() / 2], Precision::F16);
        assert_eq!(cut.len(), data.len());
        assert!(cut.contains(&0.0));
    }

    #[test]
    fn weight_packers_match_conventions() {
        // B [K=5, N=3]
        let b: Vec<f32> = (0..15).map(|i| i as f32).collect();
        let p = pack_matrix_kn(&b, 5, 3).unwrap();
        assert_eq!(p.len(), matrix_kn_texels(5, 3) * 4);
        for k in 0..5 {
            for n in 0..3 {
                assert_eq!(p[((k / 4) * 3 + n) * 4 + k % 4], b[k * 3 + n]);
            }
        }
        assert_eq!(p[(3 + 1) * 4 + 1], 0.0); // k=5 padding
                                             // Conv [O=2, I=5, 3, 3]
        let w: Vec<f32> = (0..90).map(|i| i as f32).collect();
        let p = pack_conv_filter(&w, 2, 5, 3, 3).unwrap();
        assert_eq!(p.len(), 2 * 9 * 2 * 4);
        assert_eq!(
            p[(((9 + 2 * 3 + 1) * 2) + 1) * 4],
            w[((5 + 4) * 3 + 2) * 3 + 1]
        );
        // Depthwise [C=6,1,3,3]
        let w: Vec<f32> = (0..54).map(|i| i as f32).collect();
        let p = pack_depthwise_filter(&w, 6, 3, 3).unwrap();
        assert_eq!(p[((3 + 2) * 2 + 1) * 4 + 1], w[(5 * 3 + 1) * 3 + 2]);
        assert_eq!(
            pack_vector(&[1.0, 2.0, 3.0, 4.0, 5.0]),
            vec![1., 2., 3., 4., 5., 0., 0., 0.]
        );
        assert!(pack_matrix_kn(&b, 4, 3).is_err());
    }
}
