//! The packed model file format: fixed preamble, JSON header, 4 KiB-aligned page data.
//!
//! ```text
//! 0   8  magic "TXSTPACK"
//! 8   4  version (u32 LE) = FORMAT_VERSION
//! 12  4  flags (u32 LE): FLAG_PAGE_CRCS (1), or 0 in files written before it
//! 16  8  header_len (u64 LE): bytes of the JSON header at offset 64
//! 24  8  data_offset (u64 LE): multiple of 4096, >= 64 + header_len
//! 32  8  page_bytes (u64 LE)
//! 40  8  page_count (u64 LE)
//! 48  4  crc32 (IEEE) of bytes 0..48, then the header, then all page bytes
//! 52  4  header crc32 (IEEE) of bytes 0..48, then the header; 0 unless FLAG_PAGE_CRCS
//! 56  8  reserved (0)
//! 64     header: UTF-8 JSON of [`PackedHeader`]
//!        zero padding up to data_offset
//! data_offset + i * page_bytes: page i (texels in weight-space order, fp16 or fp32 LE, RGBA)
//! ```
//! With FLAG_PAGE_CRCS the header also lists each page's crc32 (`page_crcs`), so a reader can
//! verify the preamble and header at open and each page when it reads it, without reading the
//! whole file first; the whole-file crc32 at 48 is written either way.
//! JSON was chosen for the header because it is small next to the weights, self-describing and
//! easy to inspect (`dd bs=1 skip=64 count=header_len`).
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ir::passes::PassReport;
use crate::ir::Graph;

pub const MAGIC: &[u8; 8] = b"TXSTPACK";
pub const FORMAT_VERSION: u32 = 1;

/// Revision of the graph passes that produced a header's graph (the file layout is unchanged
/// between revisions): `run` recompiles ONNX sources whose packed file is older. 1: up to the
/// in-place Softmax, 2: Softmax writes over an input nothing else reads, 3: small fp16 tensors
/// are stored compensated (`compensated_pages`), 4: `[1, T, N]` heads run row-packed, 5: as
/// `[1, 4, T/4, N]`, 6: in-place elementwise ops, convolutions over a Concat split per input, wide
/// heads split into column pieces, 7: key/value caches as state written in place, LessOrEqual
/// and GreaterOrEqual, 8: large constant tables gathered by rows pack four rows a texel, 9: row
/// tables streamed by rows, 10: attention chains fused into one kernel, 11: heads tied to a row
/// table split into row-range pieces, 12: RMSNorm chains fused into one kernel,
/// 13: rotate-half RoPE chains fused into one kernel, 14: pages carry their own checksums,
/// 15: attention fused for head dims up to 128, tied heads in pieces as large as the largest
/// other step, 16: `Mul(x, Sigmoid(x))` fused into one SiLU (then into a MatMul's epilogue),
/// attention storing its heads side by side (the head merge's Transpose and Reshape gone),
/// 17: RoPE and cache writes reading the projection's rows (the head split's Reshape and
/// Transpose gone), 18: a Reshape copy read only by a Transpose copy folded into it, 19:
/// attention reading its operands from the projections' rows (the head splits gone), 20: 1-D
/// convolutions run 2-D between layout copies the arena places (no scratch of their own).
pub const COMPILER_REVISION: u32 = 20;
/// Preamble flag: the header CRC at bytes 52..56 and the header's `page_crcs` are present.
pub const FLAG_PAGE_CRCS: u32 = 1;
pub const PREAMBLE_BYTES: usize = 64;
pub const DATA_ALIGN: u64 = 4096;
/// Every page is this many texels wide (the atlas layer width).
pub const PAGE_WIDTH: u64 = 512;
/// Most rows of texels one page may have. A page is one layer of the weight atlas, and 4096 is
/// the `maxImageDimension2D` Vulkan guarantees on every device, so such a page fits any atlas:
/// 16 MiB at fp16, 32 MiB at fp32.
pub const MAX_PAGE_ROWS: u64 = 4096;

/// A page size that no atlas layer can hold.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PageSizeError {
    #[error("page size {page_bytes} bytes is not a positive multiple of {row_bytes} (one {PAGE_WIDTH}-texel row at {precision:?})")]
    NotWholeRows {
        page_bytes: u64,
        row_bytes: u64,
        precision: Precision,
    },
    #[error("page size {page_bytes} bytes is {rows} rows of {PAGE_WIDTH} texels at {precision:?}; an atlas layer's height must be a power of two (e.g. {lower} or {upper} bytes)")]
    RowsNotPowerOfTwo {
        page_bytes: u64,
        rows: u64,
        lower: u64,
        upper: u64,
        precision: Precision,
    },
    #[error("page size {page_bytes} bytes is over the {max_bytes}-byte limit at {precision:?}: a page is one atlas layer of {PAGE_WIDTH} texels by at most {MAX_PAGE_ROWS} rows (the image height every Vulkan device supports)")]
    TooLarge {
        page_bytes: u64,
        max_bytes: u64,
        precision: Precision,
    },
}

/// Texels in one page of `page_bytes` at `precision`, or why no atlas layer can hold such a
/// page (a power of two of whole rows of [`PAGE_WIDTH`] texels, at most [`MAX_PAGE_ROWS`] of
/// them). Checked before
/// anything of that size is allocated.
pub fn texels_per_page(page_bytes: u64, precision: Precision) -> Result<u64, PageSizeError> {
    let bytes_per_texel = precision.bytes_per_texel() as u64;
    let row_bytes = PAGE_WIDTH * bytes_per_texel;
    let max_bytes = MAX_PAGE_ROWS * row_bytes;
    if page_bytes > max_bytes {
        return Err(PageSizeError::TooLarge {
            page_bytes,
            max_bytes,
            precision,
        });
    }
    if page_bytes == 0 || !page_bytes.is_multiple_of(row_bytes) {
        return Err(PageSizeError::NotWholeRows {
            page_bytes,
            row_bytes,
            precision,
        });
    }
    let rows = page_bytes / row_bytes;
    if !rows.is_power_of_two() {
        let lower = 1u64 << (63 - rows.leading_zeros());
        return Err(PageSizeError::RowsNotPowerOfTwo {
            page_bytes,
            rows,
            lower: lower * row_bytes,
            upper: (lower * 2).min(MAX_PAGE_ROWS) * row_bytes,
            precision,
        });
    }
    Ok(page_bytes / bytes_per_texel)
}

/// Storage precision of the weight texels (the crate's one precision type).
pub use crate::precision::Precision;

/// How a weight tensor's values are ordered into texels (see the shared texel conventions).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WeightKind {
    /// B matrix [K, N]: texel (k/4)*N + n, RGBA = B[4*(k/4)+j, n]. Transposed operands (Gemm
    /// transB, MatMul transpose_b, LSTM W/R) are transposed at pack time, so this is always [K, N].
    MatrixKN { k: usize, n: usize },
    /// Conv filter [O, I/g, KH, KW]: texel ((o*KH+ky)*KW+kx)*ceil((I/g)/4) + i/4. ConvTranspose
    /// weights [I, O/g, KH, KW] are first rearranged per group to [O, I/g, KH, KW]
    /// (W'[g*Og+o, i, ky, kx] = W[g*Ig+i, o, ky, kx]), with no spatial flip.
    ConvFilter {
        o: usize,
        i_per_group: usize,
        kh: usize,
        kw: usize,
    },
    /// Depthwise filter [C, 1, KH, KW]: texel (ky*KW+kx)*ceil(C/4) + c/4.
    Depthwise { c: usize, kh: usize, kw: usize },
    /// Vector [C]: texel c/4. LSTM biases are stored as Wb + Rb ([4H]).
    Vector { c: usize },
    /// A lookup table [rows, width] read by rows (a vocabulary embedding a Gather reads by
    /// run-time ids, and the output head tied to it, which reads it as B^T): texel
    /// (r/4)*width + x, RGBA = T[4*(r/4)+j, x]. Four rows share a texel, and the rows a lookup
    /// needs lie on few pages.
    Rows { rows: usize, width: usize },
    /// Any other float constant operand, C4-packed like an activation (NC4HW4 after
    /// `ir::nchw`, linear texel order (layer*H + y)*W + x, no fold).
    Activation { shape: Vec<usize> },
}

/// One packed weight tensor in the model's weight space.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WeightEntry {
    /// The IR tensor this packs.
    pub tensor: usize,
    pub name: String,
    pub kind: WeightKind,
    /// Global texel index of its first texel.
    pub texel_offset: u64,
    pub texels: u64,
}

impl WeightEntry {
    /// The texels `(offset, count)` of this entry that input `slot` of a node running `op`
    /// reads: all of them, except for a column piece of a tied head (`Gemm::b_rows`), which
    /// reads only its rows' texel blocks.
    pub fn span_read_by(&self, op: &crate::ir::Op, slot: usize) -> (u64, u64) {
        match (op, slot, &self.kind) {
            (
                crate::ir::Op::Gemm {
                    b_rows: Some([r0, r1]),
                    ..
                },
                1,
                WeightKind::Rows { width, .. },
            ) => {
                // Clamped to the entry: a header's ranges are checked by shape inference.
                let width = *width as u64;
                let start = ((r0 / 4) as u64).saturating_mul(width).min(self.texels);
                let end = (r1.div_ceil(4) as u64)
                    .saturating_mul(width)
                    .min(self.texels);
                (self.texel_offset + start, end.saturating_sub(start))
            }
            _ => (self.texel_offset, self.texels),
        }
    }
}

/// One step of the load profile: one IR node, in execution order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepInfo {
    /// Index into `graph.nodes`.
    pub node: usize,
    pub name: String,
    pub op: String,
    /// (node input slot, index into `weights`) for each weight the node reads.
    pub weights: Vec<(usize, usize)>,
    /// Logical pages its weight texels touch, ascending.
    pub pages: Vec<u32>,
    pub flops: u64,
    /// Bytes moved: packed weight bytes + activation bytes read and written (C4-padded).
    pub bytes: u64,
    /// Bytes of activations live while this step runs (C4-padded at the stored precision).
    pub live_activation_bytes: u64,
    /// True for Reshape/Transpose nodes whose output is a view: no kernel runs.
    pub is_view: bool,
    /// A lookup of table rows by ids that arrive as a graph input: `pages` leaves the table out,
    /// since which of its pages the step reads is known only from the ids of each run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup: Option<Lookup>,
}

/// The table and the ids of a lookup step ([`StepInfo::lookup`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Lookup {
    /// Index into `weights` (a [`WeightKind::Rows`] table).
    pub weight: usize,
    /// The graph input whose values are the ids (through reshapes only).
    pub ids_input: String,
}

fn first_revision() -> u32 {
    1
}

/// The JSON header.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PackedHeader {
    pub source: String,
    pub precision: Precision,
    pub page_bytes: u64,
    pub page_width: u64,
    pub texels_per_page: u64,
    pub page_count: u64,
    /// The optimized IR. Float constants that were packed into pages are removed from
    /// `graph.constants` (see `weights`); integer/bool constants stay inline.
    pub graph: Graph,
    pub weights: Vec<WeightEntry>,
    pub steps: Vec<StepInfo>,
    pub peak_activation_bytes: u64,
    /// Reshape/Transpose nodes left as real copies.
    pub layout_transforms: usize,
    pub passes: PassReport,
    /// [`COMPILER_REVISION`] of the compiler that wrote this file (absent in older files: 1).
    #[serde(default = "first_revision")]
    pub compiler_revision: u32,
    /// Pages whose first `texels_per_page / 16` texels hold hi fp16 values with lo remainders
    /// right after them (see `packed::placement`); their page-table entries carry the
    /// compensated flag.
    #[serde(default)]
    pub compensated_pages: Vec<u32>,
    /// ONNX metadata_props (e.g. the recognizer's `character` dictionary).
    pub metadata: BTreeMap<String, String>,
    /// The activation precision measured for these weights (`texstream compile --activations
    /// auto`, [`crate::compile::precision`]); absent when none was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activations: Option<ActivationChoice>,
    /// CRC32 (IEEE) of each page's bytes, one per page, so a page can be verified when it is
    /// read ([`super::PackedModel::open_lazy`]). Empty in files written before them (no
    /// `FLAG_PAGE_CRCS`) and in headers built before the pages are written.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub page_crcs: Vec<u32>,
}

/// What the measurement chose, as the packed header records it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActivationChoice {
    pub precision: Precision,
    /// Largest error of fp16 activations (over these fp16 weights) against the fp32 model (fp32
    /// weights and activations), as a fraction of the output's range (max |a − b| ÷ (max b −
    /// min b)), over every output.
    pub fp16_error: f64,
    /// The same for fp32 activations over these fp16 weights.
    pub fp32_error: f64,
    /// The output the fp16 error was largest on.
    pub worst_output: String,
    pub tolerance: f64,
    /// The calibration inputs, as `name [shape]`.
    pub calibration: Vec<String>,
}
