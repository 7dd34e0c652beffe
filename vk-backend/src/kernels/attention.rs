//! Fused scaled dot-product attention, `softmax(scale * Q K^T + mask) V`, with the softmax taken
//! online over blocks of keys, so the `[Sq, Sk]` scores never take memory (an encoder over 1500
//! frames would otherwise store 1500 x 1500 of them per head). Shader: `attention.comp`.
//!
//! Shapes follow the rank rule: Q `[.., Sq, D]`, K `[.., Sk, D]` (or `[.., D, Sk]`, a transposed
//! K that the graph already holds), V `[.., Sk, Dv]`, out `[.., Sq, Dv]`, with equal leading dims.
//! The last leading dim (the heads) is the packed channel axis, so one texel carries four heads.
//! The additive mask is `[.., Hm, Sk]` whose N, C and Hm are each 1 or full. D, Dv <= 128:
//! `attention.comp` up to 64, `attention_d128.comp` above (twice the threads a query row, so a
//! thread holds as many registers). Up to [`DECODE_MAX_ROWS`] query rows (a decoder's step),
//! `attention_decode.comp` instead: a workgroup a row, its threads spread over the keys.
//! Grouped-query attention: K and V may have fewer heads than Q, a divisor of Q's; query head
//! `h` reads key/value head `h / (Hq / Hkv)`. With [`AttentionOpts::merge_heads`] the output is
//! `[1, Sq, H * Dv]`, the heads side by side (what the exporters' Transpose and Reshape after
//! attention make of it). With [`AttentionOpts::split_heads`] Q, K or V is read from the
//! projection's rows `[1, S, H * D]` (what the exporters' Reshape and Transpose before attention
//! would make `[1, H, S, D]` of): everything below speaks of the operands' logical shapes.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch, launch_unfolded, unfolded};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::{nchw, Precision};
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const ATTENTION: KernelDesc = KernelDesc {
    name: "attention",
    bindings: &[BindingKind::StorageImage; 5],
    push_constant_bytes: 128,
    uses_weights: false,
};

const ATTENTION_D128: KernelDesc = KernelDesc {
    name: "attention_d128",
    ..ATTENTION
};

/// The blocked kernel on cooperative matrices (`attention_coop.comp`): see [`attention_uses_tensor_cores`].
const ATTENTION_COOP: KernelDesc = KernelDesc {
    name: "attention_coop",
    ..ATTENTION
};

const ATTENTION_DECODE: KernelDesc = KernelDesc {
    name: "attention_decode",
    ..ATTENTION
};

/// The decode kernel over one key span of several, and the merge of the spans: both also bind
/// the fp32 partial results (binding 5).
const ATTENTION_DECODE_SPLIT: KernelDesc = KernelDesc {
    name: "attention_decode_split",
    bindings: &[
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImageF32,
    ],
    ..ATTENTION
};
const ATTENTION_COMBINE: KernelDesc = KernelDesc {
    name: "attention_combine",
    ..ATTENTION_DECODE_SPLIT
};
/// The tensor-core kernel over one key span of several (binds the partials as the decode one).
const ATTENTION_COOP_SPLIT: KernelDesc = KernelDesc {
    name: "attention_coop_split",
    ..ATTENTION_DECODE_SPLIT
};
/// The tensor-core kernel with four query blocks a head lane (`attention_coop_wide.comp`), and
/// over one key span of several.
const ATTENTION_COOP_WIDE: KernelDesc = KernelDesc {
    name: "attention_coop_wide",
    ..ATTENTION
};
const ATTENTION_COOP_WIDE_SPLIT: KernelDesc = KernelDesc {
    name: "attention_coop_wide_split",
    ..ATTENTION_DECODE_SPLIT
};
/// The four tensor-core kernels in one pass over the keys (`attention_coop*_1p*.comp`: the
/// softmax's max and sum run along and the accumulators are rescaled where the max grows).
const ATTENTION_COOP_1P: KernelDesc = KernelDesc {
    name: "attention_coop_1p",
    ..ATTENTION
};
const ATTENTION_COOP_1P_SPLIT: KernelDesc = KernelDesc {
    name: "attention_coop_1p_split",
    ..ATTENTION_DECODE_SPLIT
};
const ATTENTION_COOP_WIDE_1P: KernelDesc = KernelDesc {
    name: "attention_coop_wide_1p",
    ..ATTENTION
};
const ATTENTION_COOP_WIDE_1P_SPLIT: KernelDesc = KernelDesc {
    name: "attention_coop_wide_1p_split",
    ..ATTENTION_DECODE_SPLIT
};
/// The wide kernels with three query blocks a head lane (`attention_coop_wide3*.comp`).
const ATTENTION_COOP_WIDE3: KernelDesc = KernelDesc {
    name: "attention_coop_wide3",
    ..ATTENTION
};
const ATTENTION_COOP_WIDE3_SPLIT: KernelDesc = KernelDesc {
    name: "attention_coop_wide3_split",
    ..ATTENTION_DECODE_SPLIT
};
const ATTENTION_COOP_WIDE3_1P: KernelDesc = KernelDesc {
    name: "attention_coop_wide3_1p",
    ..ATTENTION
};
const ATTENTION_COOP_WIDE3_1P_SPLIT: KernelDesc = KernelDesc {
    name: "attention_coop_wide3_1p_split",
    ..ATTENTION_DECODE_SPLIT
};

/// The portable kernels with K and V fp16 images under fp32 activations (a decoder's
/// key/value cache at half the bytes): the `_kv16` builds of the same shaders.
const KV16_BINDINGS: &[BindingKind] = &[
    BindingKind::StorageImage,
    BindingKind::StorageImageF16,
    BindingKind::StorageImageF16,
    BindingKind::StorageImage,
    BindingKind::StorageImage,
];
const KV16_SPLIT_BINDINGS: &[BindingKind] = &[
    BindingKind::StorageImage,
    BindingKind::StorageImageF16,
    BindingKind::StorageImageF16,
    BindingKind::StorageImage,
    BindingKind::StorageImage,
    BindingKind::StorageImageF32,
];
const ATTENTION_KV16: KernelDesc = KernelDesc {
    name: "attention_kv16",
    bindings: KV16_BINDINGS,
    ..ATTENTION
};
const ATTENTION_D128_KV16: KernelDesc = KernelDesc {
    name: "attention_d128_kv16",
    ..ATTENTION_KV16
};
const ATTENTION_DECODE_KV16: KernelDesc = KernelDesc {
    name: "attention_decode_kv16",
    ..ATTENTION_KV16
};
const ATTENTION_DECODE_SPLIT_KV16: KernelDesc = KernelDesc {
    name: "attention_decode_split_kv16",
    bindings: KV16_SPLIT_BINDINGS,
    ..ATTENTION
};
const ATTENTION_COMBINE_KV16: KernelDesc = KernelDesc {
    name: "attention_combine_kv16",
    ..ATTENTION_DECODE_SPLIT_KV16
};

/// Query rows up to which `attention_decode.comp` runs (one workgroup a row, its threads over
/// the keys): a decoder's step and short drafts. Above it the blocked kernels share each staged
/// key block among their rows.
pub const DECODE_MAX_ROWS: usize = 4;
/// Threads of `attention_decode.comp` (keys scored at once; head-dim texels accumulated at once).
const DECODE_THREADS: u64 = 256;
/// Keys `attention_decode.comp` takes a chunk (`KT`): a key span is a multiple of it.
const DECODE_CHUNK_KEYS: usize = 16;
/// Workgroups the decode kernel aims for by splitting each query row's keys into spans
/// (flash-decoding): one row a workgroup left an H200 running four of them (the 1.34 B decoder's
/// 16 heads, four a texel) with 128 streaming multiprocessors idle.
const DECODE_TARGET_GROUPS: usize = 128;
/// Threads a workgroup of `attention_combine.comp`.
const COMBINE_THREADS: u32 = 64;

/// The largest head dimension `attention.comp` holds in registers (`MAXD`), and its query rows
/// per workgroup (`BQ`).
const SMALL_HEAD_DIM: usize = 64;
const SMALL_ROWS_PER_GROUP: usize = 16;
/// The same for `attention_d128.comp`.
const LARGE_ROWS_PER_GROUP: usize = 8;

/// Query rows a workgroup of `attention_coop.comp` takes (`BQ`), and its threads (a subgroup
/// per head of a texel).
const COOP_ROWS_PER_GROUP: usize = 16;
const COOP_THREADS: u64 = 128;
/// Query blocks of [`COOP_ROWS_PER_GROUP`] rows a head lane of `attention_coop_wide.comp`
/// (`QB`) and of `attention_coop_wide3.comp`, and the largest head dimension they hold (`MAXD`).
const COOP_WIDE_BLOCKS: usize = 4;
const COOP_WIDE3_BLOCKS: usize = 3;
const COOP_WIDE_HEAD_DIM: usize = 64;
/// The fewest query rows the wide kernel takes by default: on an H200 (session 29, run 2) it
/// took the Whisper-tiny encoder's attention (1500 rows) from 1426 to 462 us a layer, and the
/// BERT-base-shaped encoder's (128 rows, 6 wide workgroups) from 40.2 to 47.3 us (39.6 only in
/// 8 spans of one key block).
const COOP_WIDE_MIN_ROWS: usize = 256;
/// Keys `attention_coop.comp` stages a block (`BK`): a key span is a multiple of it.
const COOP_BLOCK_KEYS: usize = 16;
/// Invocations of `attention_coop.comp` a multiprocessor the key spans aim for: 8 workgroups
/// (an H200's holds five at once, by their 41.5 KiB of shared memory). On an H200 (session 27,
/// run 1) the Whisper-tiny encoder's attention took 2380, 1817, 2009, 1842 and 1784 us a layer
/// with its keys in 1, 2, 3, 4 and 8 spans (188 workgroups unsplit); 8 a multiprocessor gives
/// it 6.
const COOP_INVOCATIONS_PER_MULTIPROCESSOR: usize = 8 * COOP_THREADS as usize;
/// The same for `attention_coop_wide.comp`: 0.69 workgroups of 512. On an H200 (session 29,
/// runs 2 and 2b) the two-pass kernel took the Whisper-tiny encoder's attention (48 wide
/// workgroups unsplit) to 562, 462, 514, 495, 561 and 712 us a layer in 6, 8, 12, 16, 24 and 47
/// spans, and 8 was the default. In one pass (session 33) 2 spans took 224 us against 236 in 8
/// on an H200 (run 1), and on an H100 (run 5) 1, 2, 3, 4 and 8 spans took 396, 223, 301, 245
/// and 237 us; this gives it 2.
const COOP_WIDE_INVOCATIONS_PER_MULTIPROCESSOR: usize = 352;
/// The fewest key blocks a span of `attention_coop.comp` takes by default, so that the partial
/// results and their merge stay small against the span's own work. The 1.34 B decoder's
/// 128-token prefill (32 workgroups unsplit) took 201, 116, 77 and 90 us a layer in 1, 2, 4
/// and 8 spans (run 1): 2 blocks gives it 4.
const COOP_MIN_SPAN_BLOCKS: usize = 2;

/// The largest head dimension the kernels take.
pub const ATTENTION_MAX_HEAD_DIM: usize = 128;

/// How Q, K and V are combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AttentionOpts {
    /// Multiplies Q K^T (before the mask is added).
    pub scale: f32,
    /// K is `[.., Sk, D]`; when false it is `[.., D, Sk]` (K^T).
    pub key_rows: bool,
    /// A row whose every key is masked to -inf gives 0 instead of NaN.
    pub nan_to_zero: bool,
    /// The output is `[1, Sq, H * Dv]` (heads side by side in each row, one value a texel)
    /// instead of `[1, H, Sq, Dv]`: the head merge exporters write after attention, in the store.
    /// Q must be `[1, H, Sq, D]`.
    pub merge_heads: bool,
    /// Operands read from a projection's rows; `None`: each is `[.., H, S, D]` as it is.
    pub split_heads: Option<SplitHeads>,
}

/// Which operands are a projection's rows `[1, S, H * D]`, read as the heads `[1, H, S, D]`
/// (K as `[1, H, Sk, D]`, so [`AttentionOpts::key_rows`] must be set where K is split), and
/// the head counts that divide their rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SplitHeads {
    /// Q's heads.
    pub heads: usize,
    /// K's and V's heads (a divisor of `heads`).
    pub kv_heads: usize,
    pub q: bool,
    pub k: bool,
    pub v: bool,
    /// K and V (both split) are given as their projections' packed rows `[4, H * D / 4, S]`
    /// (texel `(s, (h * D + x) / 4)` holding head `h`'s `x..x+3`), the shape
    /// [`attention_packed_kv_shapes`] names, instead of `[1, S, H * D]`.
    pub packed_kv: bool,
}

/// The logical shapes of Q, K and V under `opts` (the tensors' own where not split).
fn logical_shapes(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    opts: &AttentionOpts,
) -> Result<[Vec<usize>; 3]> {
    let Some(split) = opts.split_heads else {
        return Ok([q.shape().to_vec(), k.shape().to_vec(), v.shape().to_vec()]);
    };
    if split.k && !opts.key_rows {
        return Err(err(format!(
            "K `{}` is split into heads, which reads it by rows: key_rows must be set",
            k.name()
        )));
    }
    if split.packed_kv && !(split.k && split.v) {
        return Err(err(format!(
            "packed K `{}` and V `{}` must both be split into heads",
            k.name(),
            v.name()
        )));
    }
    let heads_of = |t: &Tensor, is_split: bool, heads: usize, packed: bool| -> Result<Vec<usize>> {
        if !is_split {
            return Ok(t.shape().to_vec());
        }
        if packed {
            return match *t.shape() {
                [4, texels, rows] if heads > 0 && (4 * texels).is_multiple_of(heads)
                    && (4 * texels / heads).is_multiple_of(4) =>
                {
                    Ok(vec![1, heads, rows, 4 * texels / heads])
                }
                _ => Err(err(format!(
                    "`{}` {:?} is not a projection's packed rows [4, H * D / 4, S] of {heads} heads \
                     with D a multiple of 4",
                    t.name(),
                    t.shape()
                ))),
            };
        }
        match *t.shape() {
            [1, rows, width] if heads > 0 && width.is_multiple_of(heads) => {
                Ok(vec![1, heads, rows, width / heads])
            }
            _ => Err(err(format!(
                "`{}` {:?} is not a projection's rows [1, S, H * D] of {heads} heads",
                t.name(),
                t.shape()
            ))),
        }
    };
    Ok([
        heads_of(q, split.q, split.heads, false)?,
        heads_of(k, split.k, split.kv_heads, split.packed_kv)?,
        heads_of(v, split.v, split.kv_heads, split.packed_kv)?,
    ])
}

/// Attention's operands: Q, K, V and the optional additive mask (shapes in the module doc).
#[derive(Debug, Clone, Copy)]
pub struct AttentionInputs<'a> {
    pub q: &'a Tensor,
    pub k: &'a Tensor,
    pub v: &'a Tensor,
    pub mask: Option<&'a Tensor>,
}

fn err(reason: String) -> crate::error::VkError {
    kerr("attention", reason)
}

/// `[Sk, D]` of K (logical shape `s`) under `opts`.
fn key_dims(k: &Tensor, s: &[usize], opts: &AttentionOpts) -> Result<(usize, usize)> {
    if s.len() < 2 {
        return Err(err(format!("K `{}` {s:?} has rank < 2", k.name())));
    }
    let (r, c) = (s[s.len() - 2], s[s.len() - 1]);
    Ok(if opts.key_rows { (r, c) } else { (c, r) })
}

/// Output shape `[.., Sq, Dv]`, after checking every operand against Q.
pub fn attention_shape(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    opts: &AttentionOpts,
) -> Result<Vec<usize>> {
    let [sq, sk_shape, sv] = logical_shapes(q, k, v, opts)?;
    let (sq, sk_shape, sv) = (sq.as_slice(), sk_shape.as_slice(), sv.as_slice());
    let rank = sq.len();
    if rank < 2 || sk_shape.len() != rank || sv.len() != rank {
        return Err(err(format!(
            "Q `{}` {sq:?}, K {sk_shape:?} and V {sv:?} need one rank >= 2",
            q.name(),
        )));
    }
    // Equal leading dims, except that K and V may have fewer heads (the last leading dim) when
    // they divide Q's (grouped-query attention).
    let lead_fits = |t: &[usize]| {
        if rank < 3 {
            return t[..rank - 2] == sq[..rank - 2];
        }
        let (h, qh) = (t[rank - 3], sq[rank - 3]);
        t[..rank - 3] == sq[..rank - 3] && h > 0 && qh.is_multiple_of(h)
    };
    let grouped_ok = rank < 3 || sk_shape[rank - 3] == sv[rank - 3];
    if !lead_fits(sk_shape) || !lead_fits(sv) || !grouped_ok {
        return Err(err(format!(
            "leading dims differ: Q {sq:?}, K {sk_shape:?}, V {sv:?} (K and V may only have fewer heads, a divisor of Q's)",
        )));
    }
    let (d, dv) = (sq[rank - 1], sv[rank - 1]);
    let (sk, kd) = key_dims(k, sk_shape, opts)?;
    if kd != d || sv[rank - 2] != sk {
        return Err(err(format!(
            "Q {sq:?} has head dim {d}, K {sk_shape:?} gives [Sk {sk}, D {kd}], V {sv:?}",
        )));
    }
    if d > ATTENTION_MAX_HEAD_DIM || dv > ATTENTION_MAX_HEAD_DIM || d == 0 || dv == 0 || sk == 0 {
        return Err(err(format!(
            "head dims D {d}, Dv {dv} must be 1..={ATTENTION_MAX_HEAD_DIM}, Sk {sk} >= 1"
        )));
    }
    if let Some(m) = mask {
        let [qn, qc, qh, _] = nchw(sq)?;
        let [mn, mc, mh, mw] = nchw(m.shape())?;
        let fits = |have: usize, full: usize| have == 1 || have == full;
        if !fits(mn, qn) || !fits(mc, qc) || !fits(mh, qh) || mw != sk {
            return Err(err(format!(
                "mask `{}` {:?} does not broadcast to [.., {}, {sk}] of Q {sq:?}",
                m.name(),
                m.shape(),
                sq[rank - 2]
            )));
        }
        if mn == qn && mn > 1 && m.shape().len() != rank {
            return Err(err(format!(
                "mask `{}` {:?}: a batched mask must have Q's rank",
                m.name(),
                m.shape()
            )));
        }
    }
    let mut out = sq.to_vec();
    out[rank - 1] = dv;
    if opts.merge_heads {
        return match out.as_slice() {
            [1, h, rows, dv] => Ok(vec![1, *rows, h * dv]),
            _ => Err(err(format!(
                "heads merge into [1, Sq, H * Dv] only from Q [1, H, Sq, D], not Q {sq:?}"
            ))),
        };
    }
    Ok(out)
}

/// How a decode step's query rows split their keys: `(splits, keys a span)`. One span unless
/// the rows alone leave most of [`DECODE_TARGET_GROUPS`] workgroups unused and the keys fill
/// more than one chunk.
fn decode_spans(rows: usize, sk: usize) -> (usize, usize) {
    let chunks = sk.div_ceil(DECODE_CHUNK_KEYS);
    let want = DECODE_TARGET_GROUPS
        .div_ceil(rows.max(1))
        .clamp(1, chunks.max(1));
    let span = chunks.div_ceil(want) * DECODE_CHUNK_KEYS;
    (sk.div_ceil(span), span)
}

/// How the tensor-core kernel's `groups` workgroups of `threads` invocations (query blocks over
/// every texel layer) split their `sk` keys: `(splits, keys a span)`. Each workgroup walks its
/// keys a block at a time, so where the workgroups' invocations are fewer than
/// [`COOP_INVOCATIONS_PER_MULTIPROCESSOR`] (or [`COOP_WIDE_INVOCATIONS_PER_MULTIPROCESSOR`]) a
/// multiprocessor, the keys split into spans of at least [`COOP_MIN_SPAN_BLOCKS`] blocks, each
/// span a workgroup of its own; or into the spans the device's options fix
/// ([`crate::DeviceOptions::attention_splits`]). A 1500-frame Whisper-tiny encoder layer makes
/// 48 wide workgroups and a 1.34 B decoder's 128-token prefill 32, for an H200's 132
/// multiprocessors.
fn coop_spans(
    features: &crate::DeviceFeatures,
    groups: usize,
    query_blocks: usize,
    sk: usize,
) -> (usize, usize) {
    let key_blocks = sk.div_ceil(COOP_BLOCK_KEYS).max(1);
    let want = match features.attention_splits {
        Some(n) => (n as usize).clamp(1, key_blocks),
        None => {
            let multiprocessors = features.multiprocessors() as usize;
            let (invocations, threads) = if query_blocks > 1 {
                (
                    COOP_WIDE_INVOCATIONS_PER_MULTIPROCESSOR,
                    COOP_THREADS as usize * query_blocks,
                )
            } else {
                (COOP_INVOCATIONS_PER_MULTIPROCESSOR, COOP_THREADS as usize)
            };
            (multiprocessors * invocations / threads)
                .div_ceil(groups.max(1))
                .clamp(1, (key_blocks / COOP_MIN_SPAN_BLOCKS).max(1))
        }
    };
    let span = key_blocks.div_ceil(want) * COOP_BLOCK_KEYS;
    (sk.div_ceil(span), span)
}

/// Q, K and V as the kernels see them (checked by `attention_shape`): their logical shapes,
/// and Q's batch, heads and rows under the rank rule.
struct Operands {
    shapes: [Vec<usize>; 3],
    n: usize,
    heads: usize,
    rows: usize,
}

impl Operands {
    fn new(q: &Tensor, k: &Tensor, v: &Tensor, opts: &AttentionOpts) -> Result<Operands> {
        let shapes = logical_shapes(q, k, v, opts)?;
        let [n, heads, rows, _] = nchw(&shapes[0])?;
        Ok(Operands {
            shapes,
            n,
            heads,
            rows,
        })
    }

    /// Texel layers of Q: N * ceil(H / 4).
    fn layers(&self) -> usize {
        self.n * self.heads.div_ceil(4)
    }

    /// Q's head dim `D` and V's `Dv` (their last axes).
    fn head_dims(&self) -> (usize, usize) {
        let last = |s: &[usize]| s.last().copied().unwrap_or(1);
        (last(&self.shapes[0]), last(&self.shapes[2]))
    }
}

/// The kernels attention runs on.
#[derive(Debug, Clone, Copy, PartialEq)]
enum AttentionKernel {
    /// `attention_decode.comp`: up to [`DECODE_MAX_ROWS`] query rows.
    Decode,
    /// `attention_coop.comp`: more rows, fp16, on a device with cooperative matrices;
    /// `attention_coop_wide.comp` (`blocks` 4) or `attention_coop_wide3.comp` (3) where
    /// `blocks` query blocks a head lane are more than one (head dims up to
    /// [`COOP_WIDE_HEAD_DIM`]); in one pass over the keys (`attention_coop*_1p*.comp`) where
    /// `one_pass`.
    TensorCores { blocks: usize, one_pass: bool },
    /// `attention.comp` / `attention_d128.comp`: more rows elsewhere, by head dim.
    Blocked { large_head: bool },
}

/// Which kernel runs, its query rows (`N * ceil(H / 4) * Sq`: texel layers times rows) and its
/// keys, and how the keys split into spans over workgroups (one span: no partial results).
#[derive(Debug, Clone, Copy)]
struct AttentionPlan {
    kernel: AttentionKernel,
    rows: usize,
    keys: usize,
    splits: usize,
    span: usize,
}

impl AttentionPlan {
    /// The partial results' fp32 tensor, `[1, 4, rows * splits, Dv + 2]`; `None` for one span.
    fn partials_shape(&self, dv: usize) -> Option<Vec<usize>> {
        (self.splits > 1).then(|| vec![1, 4, self.rows * self.splits, dv + 2])
    }

    /// The kernel's descriptor (`split`: over key spans; `cache_half`: K and V fp16 under fp32
    /// activations, the `_kv16` builds), query rows a workgroup and threads.
    fn kernel_desc(
        &self,
        split: bool,
        cache_half: bool,
    ) -> Result<(&'static KernelDesc, usize, u64)> {
        let pick = |plain, kv16| if cache_half { kv16 } else { plain };
        Ok(match (self.kernel, split) {
            (AttentionKernel::Decode, true) => (
                pick(&ATTENTION_DECODE_SPLIT, &ATTENTION_DECODE_SPLIT_KV16),
                1,
                DECODE_THREADS,
            ),
            (AttentionKernel::Decode, false) => (
                pick(&ATTENTION_DECODE, &ATTENTION_DECODE_KV16),
                1,
                DECODE_THREADS,
            ),
            (AttentionKernel::TensorCores { .. }, _) if cache_half => {
                return Err(err(
                    "the tensor-core kernels take K and V at the activations' precision".into(),
                ))
            }
            (AttentionKernel::TensorCores { blocks, one_pass }, split) => {
                let desc = match (blocks, one_pass, split) {
                    (1, false, false) => &ATTENTION_COOP,
                    (1, false, true) => &ATTENTION_COOP_SPLIT,
                    (1, true, false) => &ATTENTION_COOP_1P,
                    (1, true, true) => &ATTENTION_COOP_1P_SPLIT,
                    (COOP_WIDE3_BLOCKS, false, false) => &ATTENTION_COOP_WIDE3,
                    (COOP_WIDE3_BLOCKS, false, true) => &ATTENTION_COOP_WIDE3_SPLIT,
                    (COOP_WIDE3_BLOCKS, true, false) => &ATTENTION_COOP_WIDE3_1P,
                    (COOP_WIDE3_BLOCKS, true, true) => &ATTENTION_COOP_WIDE3_1P_SPLIT,
                    (_, false, false) => &ATTENTION_COOP_WIDE,
                    (_, false, true) => &ATTENTION_COOP_WIDE_SPLIT,
                    (_, true, false) => &ATTENTION_COOP_WIDE_1P,
                    (_, true, true) => &ATTENTION_COOP_WIDE_1P_SPLIT,
                };
                (
                    desc,
                    COOP_ROWS_PER_GROUP * blocks,
                    COOP_THREADS * blocks as u64,
                )
            }
            (AttentionKernel::Blocked { large_head: false }, _) => {
                (pick(&ATTENTION, &ATTENTION_KV16), SMALL_ROWS_PER_GROUP, 64)
            }
            (AttentionKernel::Blocked { large_head: true }, _) => (
                pick(&ATTENTION_D128, &ATTENTION_D128_KV16),
                LARGE_ROWS_PER_GROUP,
                64,
            ),
        })
    }
}

/// The plan for attention over Q and K (`ops`, checked by `attention_shape`) writing
/// `out_precision`.
fn attention_plan(
    q: &Tensor,
    k: &Tensor,
    ops: &Operands,
    opts: &AttentionOpts,
    out_precision: Precision,
) -> Result<AttentionPlan> {
    let rows = ops.layers() * ops.rows;
    let (keys, _) = key_dims(k, &ops.shapes[1], opts)?;
    let features = q.device().features();
    let (d, dv) = ops.head_dims();
    let large_head = dv.max(d) > SMALL_HEAD_DIM;
    let (kernel, (splits, span)) = if ops.rows <= DECODE_MAX_ROWS {
        (AttentionKernel::Decode, decode_spans(rows, keys))
    } else if on_tensor_cores(&features, out_precision) {
        let blocks = coop_query_blocks(&features, d.max(dv), ops.layers(), ops.rows, keys);
        let groups = ops.layers() * ops.rows.div_ceil(COOP_ROWS_PER_GROUP * blocks);
        // One pass over the keys unless the device's options ask for two: on an H100 (session
        // 32) the Whisper-tiny encoder's attention 290 -> 235 us a layer, a 1.34 B decoder's
        // 128-token prefill 82.7 -> 75.8, BERT-base's 40.0 -> 38.2.
        let one_pass = features.attention_one_pass != Some(false);
        (
            AttentionKernel::TensorCores { blocks, one_pass },
            coop_spans(&features, groups, blocks, keys),
        )
    } else {
        (AttentionKernel::Blocked { large_head }, (1, keys))
    };
    Ok(AttentionPlan {
        kernel,
        rows,
        keys,
        splits,
        span,
    })
}

/// The shape of the fp32 tensor [`attention_into`] needs for its partial results when the keys
/// split over workgroups (`[1, 4, rows * splits, Dv + 2]`: a decode step's, or a prefill's on
/// the tensor cores with too few query blocks to fill the device), or `None` when they do not.
/// The precision is Q's (the output's, as the runtime allocates it). A caller that passes no
/// such tensor gets the unsplit kernel.
pub fn attention_partials_shape(
    q: &Tensor,
    k: &Tensor,
    v: &Tensor,
    mask: Option<&Tensor>,
    opts: &AttentionOpts,
) -> Result<Option<Vec<usize>>> {
    attention_shape(q, k, v, mask, opts)?;
    let ops = Operands::new(q, k, v, opts)?;
    let plan = attention_plan(q, k, &ops, opts, q.precision())?;
    Ok(plan.partials_shape(ops.head_dims().1))
}

/// Whether attention with more than [`DECODE_MAX_ROWS`] query rows writing `out` runs on
/// cooperative matrices (`attention_coop.comp`, both products on the tensor cores): where the
/// device enabled them (as for MatMul, [`crate::DeviceFeatures::cooperative_matrix_f16`]) and
/// the tensors are fp16. The decode kernels run a step's few rows either way.
pub fn attention_uses_tensor_cores(device: &crate::device::Device, out: &Tensor) -> bool {
    on_tensor_cores(&device.features(), out.precision())
}

/// Query blocks of 16 rows a head lane the tensor-core attention over `rows` query rows a head
/// (`layers` texel layers of heads, `keys` keys) takes: 1 (`attention_coop.comp`) for head dims
/// over [`COOP_WIDE_HEAD_DIM`] or fewer than [`COOP_WIDE_MIN_ROWS`] rows; else 4
/// (`attention_coop_wide.comp`) or 3 (`attention_coop_wide3.comp`), whichever the workgroups'
/// waves make cheaper, or as the device's options fix them
/// ([`crate::DeviceOptions::attention_query_blocks`]). A workgroup's cost is taken as its key
/// span times its query blocks plus two (staging a key block costs about two blocks' products:
/// without its loads the Whisper-tiny encoder's attention took 151 us a layer against 225 on an
/// H200, session 37, run 1), once a wave of one workgroup a multiprocessor. Whisper-tiny's
/// encoder (two texel layers of heads, 1500 rows) then takes 3: 128 workgroups where 4 makes 96,
/// for an H200's 132 multiprocessors.
fn coop_query_blocks(
    features: &crate::DeviceFeatures,
    head_dim: usize,
    layers: usize,
    rows: usize,
    keys: usize,
) -> usize {
    if head_dim > COOP_WIDE_HEAD_DIM {
        return 1;
    }
    match features.attention_query_blocks {
        Some(n) if n as usize == COOP_WIDE_BLOCKS || n as usize == COOP_WIDE3_BLOCKS => n as usize,
        Some(_) => 1,
        None if rows < COOP_WIDE_MIN_ROWS => 1,
        None => {
            let multiprocessors = features.multiprocessors() as usize;
            let cost = |blocks: usize| {
                let groups = layers * rows.div_ceil(COOP_ROWS_PER_GROUP * blocks);
                let (splits, span) = coop_spans(features, groups, blocks, keys);
                (groups * splits).div_ceil(multiprocessors) * span * (blocks + 2)
            };
            if cost(COOP_WIDE3_BLOCKS) < cost(COOP_WIDE_BLOCKS) {
                COOP_WIDE3_BLOCKS
            } else {
                COOP_WIDE_BLOCKS
            }
        }
    }
}

fn on_tensor_cores(features: &crate::DeviceFeatures, out_precision: Precision) -> bool {
    features.cooperative_matrix_f16 && out_precision == Precision::F16
}

/// The `[4, H * Dv / 4, Sq]` shape in which [`attention_packed_into`] can write the attention
/// into `out`: the tensor-core MatMul's packed A of its merged heads `[1, Sq, H * Dv]`
/// ([`super::matmul_packed_a_shape`]), where it runs on the tensor cores over key spans (the
/// spans' merge writes it), merges its heads, has one batch and `Dv` is a multiple of 4; `None`
/// elsewhere, or where the device's options turn it off
/// ([`crate::DeviceOptions::attention_packed_out`]). The unsplit tensor-core kernels do not
/// write it: a packed store in them cost BERT-base's attention 37.5 -> 41.5 us a layer on an
/// H100 against 1-2 us of copy saved (session 38, run 1).
pub fn attention_packed_out_shape(
    inputs: &AttentionInputs<'_>,
    opts: &AttentionOpts,
    out: &Tensor,
) -> Result<Option<Vec<usize>>> {
    let &AttentionInputs { q, k, v, mask } = inputs;
    attention_shape(q, k, v, mask, opts)?;
    let ops = Operands::new(q, k, v, opts)?;
    let dv = ops.head_dims().1;
    let plan = attention_plan(q, k, &ops, opts, out.precision())?;
    let coop = matches!(plan.kernel, AttentionKernel::TensorCores { .. }) && plan.splits > 1;
    let fits = opts.merge_heads && ops.n == 1 && dv.is_multiple_of(4);
    let allowed = q.device().features().attention_packed_out != Some(false);
    Ok((coop && fits && allowed).then(|| vec![4, ops.heads * dv / 4, ops.rows]))
}

/// The shapes `[4, H * D / 4, Sk]` and `[4, H * Dv / 4, Sk]` (`H` key/value heads) in which the
/// projections of K and V, both split rows `[1, Sk, H * D]`, can write them packed for this
/// attention to read ([`SplitHeads::packed_kv`]): where it runs on the tensor cores, whose key
/// staging then fetches a texel for four of a head's values where a split row's texel holds one
/// (an H100's Whisper-tiny encoder spent 83 of its attention's 198 us a layer staging keys and
/// values from split rows, session 39, run 2), with one query block a head lane unless the
/// device's options ask for every tensor-core kernel ([`crate::DeviceOptions::attention_packed_kv`],
/// which can also turn it off), and `D` and `Dv` are multiples of 4. `None` elsewhere.
pub fn attention_packed_kv_shapes(
    inputs: &AttentionInputs<'_>,
    opts: &AttentionOpts,
    out_precision: Precision,
) -> Result<Option<[Vec<usize>; 2]>> {
    let &AttentionInputs { q, k, v, mask } = inputs;
    attention_shape(q, k, v, mask, opts)?;
    if !opts.split_heads.is_some_and(|s| s.k && s.v && !s.packed_kv) {
        return Ok(None);
    }
    let ops = Operands::new(q, k, v, opts)?;
    let (d, dv) = ops.head_dims();
    let plan = attention_plan(q, k, &ops, opts, out_precision)?;
    // The wide kernels (several query blocks a head lane) lost with packed operands: the
    // Whisper-tiny encoder's attention 209 -> 249 us a layer on an H100 (session 39, run 4),
    // where BERT-base's (one block) gained; they take them only where the options ask.
    let wanted = match q.device().features().attention_packed_kv {
        Some(on) => on,
        None => matches!(plan.kernel, AttentionKernel::TensorCores { blocks: 1, .. }),
    };
    let coop = matches!(plan.kernel, AttentionKernel::TensorCores { .. });
    if !coop || !wanted || !d.is_multiple_of(4) || !dv.is_multiple_of(4) {
        return Ok(None);
    }
    let packed = |t: &Tensor| match *t.shape() {
        [1, rows, width] => Some(vec![4, width / 4, rows]),
        _ => None,
    };
    Ok(packed(k).zip(packed(v)).map(|(k, v)| [k, v]))
}

/// Records `out = softmax(scale * Q K^T + mask) V` (the softmax over the keys). `partials`: the
/// fp32 tensor of [`attention_partials_shape`], when it gives one (the keys then split over
/// workgroups and a second dispatch merges the spans); `None` runs the unsplit kernel.
pub fn attention_into(
    rec: &mut Recorder,
    inputs: &AttentionInputs<'_>,
    opts: &AttentionOpts,
    out: &Tensor,
    partials: Option<&Tensor>,
) -> Result<()> {
    record_attention(rec, inputs, opts, (out, None), partials)
}

/// [`attention_into`] with the merged heads written only as `packed`, the next MatMul's packed
/// A (of [`attention_packed_out_shape`]; texel `(sq, (h * Dv + x) / 4)` holding head `h`'s
/// `x..x+3`), over key spans (`partials` is required); `out` gives the shapes and is not
/// written.
pub fn attention_packed_into(
    rec: &mut Recorder,
    inputs: &AttentionInputs<'_>,
    opts: &AttentionOpts,
    (out, packed): (&Tensor, &Tensor),
    partials: Option<&Tensor>,
) -> Result<()> {
    let want = attention_packed_out_shape(inputs, opts, out)?;
    if want.as_deref() != Some(packed.shape()) || packed.precision() != out.precision() {
        return Err(err(format!(
            "`{}` {:?} is not the packed output of `{}` {:?} (want {want:?})",
            packed.name(),
            packed.shape(),
            out.name(),
            out.shape()
        )));
    }
    if partials.is_none() {
        return Err(err(format!(
            "packed output `{}` without the partials its key spans need",
            packed.name()
        )));
    }
    record_attention(rec, inputs, opts, (out, Some(packed)), partials)
}

fn record_attention(
    rec: &mut Recorder,
    inputs: &AttentionInputs<'_>,
    opts: &AttentionOpts,
    (out, packed): (&Tensor, Option<&Tensor>),
    partials: Option<&Tensor>,
) -> Result<()> {
    let &AttentionInputs { q, k, v, mask } = inputs;
    let want = attention_shape(q, k, v, mask, opts)?;
    if out.shape() != want.as_slice() {
        return Err(err(format!(
            "output `{}` {:?}, expected {want:?}",
            out.name(),
            out.shape()
        )));
    }
    let ops = Operands::new(q, k, v, opts)?;
    let dv = ops.head_dims().1;
    let plan = attention_plan(q, k, &ops, opts, out.precision())?;
    // The key spans, where the caller gave the partials' tensor for them.
    let split = match (plan.partials_shape(dv), partials) {
        (Some(wanted), Some(p)) => {
            if p.shape() != wanted.as_slice() || p.precision() != Precision::F32 {
                return Err(err(format!(
                    "partials `{}` {:?} {:?}: expected an fp32 tensor {wanted:?}",
                    p.name(),
                    p.shape(),
                    p.precision()
                )));
            }
            Some(p)
        }
        _ => None,
    };
    // An fp16 key/value cache under fp32 activations: the `_kv16` kernels bind K and V as fp16
    // (any other mix of precisions is refused by the bindings' checks).
    let cache_half = out.precision() == Precision::F32
        && k.precision() == Precision::F16
        && v.precision() == Precision::F16;
    let (desc, rows_per_group, threads) = plan.kernel_desc(split.is_some(), cache_half)?;
    // Unsplit, the decode kernel takes every key as one span (the blocked kernels read neither).
    let (splits, span) = match split {
        Some(_) => (plan.splits, plan.span),
        None => (1, plan.keys),
    };
    let groups_per_layer = ops.rows.div_ceil(rows_per_group) * splits;
    let layers = ops.layers() as u64;
    let m = mask.unwrap_or(q);
    let ml = m.layout();
    let mut pc = PushConstants::new();
    // Each operand's logical h and w (a split one's [S, D], not its rows' [S, H * D]) and its
    // image's physical fold.
    for (t, shape) in [q, k, v].into_iter().zip(&ops.shapes) {
        let [_, _, h, w] = nchw(shape)?;
        let tl = t.layout();
        pc = pc.u32(h as u32).u32(w as u32).u32(tl.pw).u32(tl.ph);
    }
    // The output written is the packed copy where there is one.
    let target = packed.unwrap_or(out);
    for t in [target, m] {
        let tl = t.layout();
        pc = pc.u32(tl.h).u32(tl.w).u32(tl.pw).u32(tl.ph);
    }
    let split_heads = opts.split_heads.map_or(0, |s| {
        // Packed K and V: bits 9 and 10.
        (s.q as u32) << 4
            | (s.k as u32) << 5
            | (s.v as u32) << 6
            | (s.packed_kv as u32) << 9
            | (s.packed_kv as u32) << 10
    });
    let kv_heads = nchw(&ops.shapes[1])?[1];
    let pc = pc
        .u32(ops.n as u32)
        .u32(ops.heads as u32)
        .u32(ml.c)
        .u32(ml.n)
        .f32(opts.scale)
        .u32(
            mask.is_some() as u32
                | (opts.key_rows as u32) << 1
                | (opts.nan_to_zero as u32) << 2
                | (opts.merge_heads as u32) << 3
                | split_heads
                | (packed.is_some() as u32) << 7,
        )
        .u32(groups_per_layer as u32)
        .u32(kv_heads as u32)
        .u32(splits as u32)
        .u32(span as u32)
        .u32(split.map_or(1, |p| p.layout().pw))
        .u32(split.map_or(1, |p| p.layout().ph));
    let groups = dispatch_1d(
        rec.device(),
        layers * groups_per_layer as u64 * threads,
        threads as u32,
    );
    let args = [
        Arg::input(q),
        Arg::input(k),
        Arg::input(v),
        Arg::input(m),
        Arg::output(target),
    ];
    // The tensor-core and decode kernels read Q, K, V and the mask with LOAD_AT.
    let flat = unfolded(&[q, k, v, m]);
    let Some(partials) = split else {
        return launch_unfolded(rec, desc, out.precision(), &args, &pc, groups, flat);
    };
    let spans = [&args[..], &[Arg::output(partials)]].concat();
    launch_unfolded(rec, desc, out.precision(), &spans, &pc, groups, flat)?;
    // One invocation a (texel layer, query row, head-dim texel); packed, a (texel layer, query
    // row, four head-dim values), storing a texel for each of the layer's four heads.
    let merge = [&args[..], &[Arg::input(partials)]].concat();
    let per_row = if packed.is_some() { dv / 4 } else { dv };
    let groups = dispatch_1d(rec.device(), (plan.rows * per_row) as u64, COMBINE_THREADS);
    let combine = if cache_half {
        &ATTENTION_COMBINE_KV16
    } else {
        &ATTENTION_COMBINE
    };
    launch(rec, combine, out.precision(), &merge, &pc, groups)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H200's or H100's 132 multiprocessors of 64 warps.
    fn hopper() -> crate::DeviceFeatures {
        crate::DeviceFeatures {
            concurrent_invocations: 132 * 64 * 32,
            ..Default::default()
        }
    }

    #[test]
    fn query_blocks_fill_the_first_wave() {
        let f = hopper();
        // Whisper-tiny's encoder: 6 heads of 64 (two texel layers), 1500 rows and keys. Four
        // blocks make 96 workgroups in two key spans, three make 128: one wave either way.
        assert_eq!(coop_query_blocks(&f, 64, 2, 1500, 1500), 3);
        assert_eq!(
            coop_spans(&f, 2 * 1500_usize.div_ceil(48), 3, 1500),
            (2, 752)
        );
        // 2048 rows: four blocks fill one wave (128 workgroups), three would need two.
        assert_eq!(coop_query_blocks(&f, 64, 2, 2048, 2048), 4);
        // Too few rows, or heads too wide for the wide kernels: one block.
        assert_eq!(coop_query_blocks(&f, 64, 3, 128, 128), 1);
        assert_eq!(coop_query_blocks(&f, 128, 2, 1500, 1500), 1);
        // The device's options fix the blocks where the head dims allow them.
        for (fixed, want) in [(1, 1), (3, 3), (4, 4)] {
            let f = crate::DeviceFeatures {
                attention_query_blocks: Some(fixed),
                ..hopper()
            };
            assert_eq!(coop_query_blocks(&f, 64, 2, 1500, 1500), want);
            assert_eq!(coop_query_blocks(&f, 128, 2, 1500, 1500), 1);
        }
    }
}
