//! MatMul / Gemm: numpy batch broadcasting, transposes, alpha/beta, fused bias and activation.
//!
//! B is either a runtime activation tensor or a constant `[K, N]` matrix in the weight space
//! (packed by [`crate::layout::pack_matrix_kn`], read through `fetch_weight`). Gemm's transB on a
//! constant B is applied by the packer (transpose before packing), so constant B is always `[K, N]`.
//! Bias (Gemm C, or a fused MatMul+Add) is a constant read through `fetch_weight`, packed by
//! [`crate::layout::pack_vector`] from C's row-major values; C of shape `[]`, `[N]`, `[1, N]`,
//! `[M, 1]` or `[M, N]` broadcasts over `[M, N]` and over every batch. A run-time (activation) C
//! of the same shapes (Gemm's C as a graph input) is fused too: [`matmul_tensor_bias_into`].
//! Shaders: `matmul.comp`, `matmul_bias.comp`, `matmul_const.comp`, `matmul_tbias.comp`,
//! `matmul_const_tbias.comp` (body in `include/matmul_body.glsl`), `matmul_const_gemv.comp` for
//! a few rows against a constant B, `matmul_const_short.comp` for a few lane-batched rows on CPU
//! drivers, `matmul_const_coop.comp` on cooperative matrices (its variants in
//! `include/matmul_coop_body.glsl`'s defines), `matmul_pack_a.comp` for their
//! four-values-a-texel copy of A, and `matmul_splitk_combine.comp` to finish one split over
//! reduction spans (the `_splitk` variants).

use crate::error::{Result, VkError};
use crate::kernels::elementwise::{broadcast_shape, UnaryOp};
use crate::kernels::launch::{
    alloc_like, launch, launch_unfolded, unfolded, IMAGES_2, IMAGES_3, IMAGES_4,
};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::dims6;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const PUSH_BYTES: u32 = 128;

const MATMUL: KernelDesc = KernelDesc {
    name: "matmul",
    bindings: IMAGES_3,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: false,
};

const MATMUL_BIAS: KernelDesc = KernelDesc {
    name: "matmul_bias",
    bindings: IMAGES_3,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: true,
};

const MATMUL_CONST: KernelDesc = KernelDesc {
    name: "matmul_const",
    bindings: IMAGES_2,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: true,
};

/// `matmul_const_short.comp`: a few lane-batched rows against a constant packed B (see
/// [`uses_short`]).
const MATMUL_CONST_SHORT: KernelDesc = KernelDesc {
    name: "matmul_const_short",
    ..MATMUL_CONST
};
/// Most rows a workgroup of `matmul_const_short.comp` takes (its MR), and its columns.
const SHORT_BLOCK_ROWS: usize = 8;
const SHORT_COLS: usize = 64;
/// Most rows a MatMul runs on `matmul_const_short.comp` with.
pub const SHORT_MAX_ROWS: usize = 16;

/// Output tile edge of `matmul_const_coop.comp`.
const COOP_TILE: usize = 64;
/// Columns of the tensor-core kernel's wide tiles (`matmul_const_coop_pa_n96.comp`).
const COOP_WIDE_COLS: usize = 96;

/// `matmul_const.comp` on cooperative matrices (see [`uses_cooperative_matrix`]).
const MATMUL_CONST_COOP: KernelDesc = KernelDesc {
    name: "matmul_const_coop",
    bindings: IMAGES_2,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: true,
};

/// The same for a B stored by rows (`MatRhs::WeightRows`): `matmul_const_coop_rows.comp`.
const MATMUL_CONST_COOP_ROWS: KernelDesc = KernelDesc {
    name: "matmul_const_coop_rows",
    ..MATMUL_CONST_COOP
};

/// [`MATMUL_CONST_COOP`] on 32-row tiles (see [`coop_rows`]).
const MATMUL_CONST_COOP_M32: KernelDesc = KernelDesc {
    name: "matmul_const_coop_m32",
    ..MATMUL_CONST_COOP
};

/// [`MATMUL_CONST_COOP_ROWS`] on 32-row tiles.
const MATMUL_CONST_COOP_ROWS_M32: KernelDesc = KernelDesc {
    name: "matmul_const_coop_rows_m32",
    ..MATMUL_CONST_COOP
};

/// `matmul_store.glsl`'s `PACKED_OUT`: the output goes to its packed copy.
const PACKED_OUT_FLAG: u32 = 1 << 26;

/// `matmul_pack_a.comp`: A's `[4, K/4, M]` copy (see [`matmul_pack_a_into`]).
const MATMUL_PACK_A: KernelDesc = KernelDesc {
    name: "matmul_pack_a",
    bindings: IMAGES_2,
    push_constant_bytes: 64,
    uses_weights: false,
};

/// The tensor-core kernels reading A from its `[4, K/4, M]` copy (see [`matmul_packed_a_shape`]).
const MATMUL_CONST_COOP_PA: KernelDesc = KernelDesc {
    name: "matmul_const_coop_pa",
    ..MATMUL_CONST_COOP
};
const MATMUL_CONST_COOP_PA_M32: KernelDesc = KernelDesc {
    name: "matmul_const_coop_pa_m32",
    ..MATMUL_CONST_COOP
};
const MATMUL_CONST_COOP_ROWS_PA: KernelDesc = KernelDesc {
    name: "matmul_const_coop_rows_pa",
    ..MATMUL_CONST_COOP
};
const MATMUL_CONST_COOP_ROWS_PA_M32: KernelDesc = KernelDesc {
    name: "matmul_const_coop_rows_pa_m32",
    ..MATMUL_CONST_COOP
};

/// The tensor-core kernels taking 128 k a step (see [`crate::DeviceOptions::coop_step_k`]).
const MATMUL_CONST_COOP_K128: KernelDesc = KernelDesc {
    name: "matmul_const_coop_k128",
    ..MATMUL_CONST_COOP
};
const MATMUL_CONST_COOP_K128_M32: KernelDesc = KernelDesc {
    name: "matmul_const_coop_k128_m32",
    ..MATMUL_CONST_COOP
};
const MATMUL_CONST_COOP_PA_K128: KernelDesc = KernelDesc {
    name: "matmul_const_coop_pa_k128",
    ..MATMUL_CONST_COOP
};
const MATMUL_CONST_COOP_PA_K128_M32: KernelDesc = KernelDesc {
    name: "matmul_const_coop_pa_k128_m32",
    ..MATMUL_CONST_COOP
};

/// The tensor-core kernel over a packed A on 64x96 tiles ([`coop_cols`]).
const MATMUL_CONST_COOP_PA_N96: KernelDesc = KernelDesc {
    name: "matmul_const_coop_pa_n96",
    ..MATMUL_CONST_COOP
};

/// The tensor-core kernel for B stored by rows or not, 32-row tiles or 64, A packed or not,
/// 128 k a step or 64 (B by rows takes 64).
fn coop_kernel(rows: bool, m32: bool, packed: bool, deep: bool) -> &'static KernelDesc {
    match (rows, m32, packed, deep) {
        (true, true, false, _) => &MATMUL_CONST_COOP_ROWS_M32,
        (true, false, false, _) => &MATMUL_CONST_COOP_ROWS,
        (true, true, true, _) => &MATMUL_CONST_COOP_ROWS_PA_M32,
        (true, false, true, _) => &MATMUL_CONST_COOP_ROWS_PA,
        (false, true, false, false) => &MATMUL_CONST_COOP_M32,
        (false, false, false, false) => &MATMUL_CONST_COOP,
        (false, true, true, false) => &MATMUL_CONST_COOP_PA_M32,
        (false, false, true, false) => &MATMUL_CONST_COOP_PA,
        (false, true, false, true) => &MATMUL_CONST_COOP_K128_M32,
        (false, false, false, true) => &MATMUL_CONST_COOP_K128,
        (false, true, true, true) => &MATMUL_CONST_COOP_PA_K128_M32,
        (false, false, true, true) => &MATMUL_CONST_COOP_PA_K128,
    }
}

/// The tensor-core kernels over one reduction span of several (see [`matmul_split_k_shape`]),
/// and the kernel that sums the spans and finishes the MatMul: all bind A, the output and the
/// fp32 partial results (binding 2).
const SPLITK_BINDINGS: &[BindingKind] = &[
    BindingKind::StorageImage,
    BindingKind::StorageImage,
    BindingKind::StorageImageF32,
];
const MATMUL_CONST_COOP_SPLITK: KernelDesc = KernelDesc {
    name: "matmul_const_coop_splitk",
    bindings: SPLITK_BINDINGS,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: true,
};
const MATMUL_CONST_COOP_M32_SPLITK: KernelDesc = KernelDesc {
    name: "matmul_const_coop_m32_splitk",
    ..MATMUL_CONST_COOP_SPLITK
};
const MATMUL_CONST_COOP_ROWS_SPLITK: KernelDesc = KernelDesc {
    name: "matmul_const_coop_rows_splitk",
    ..MATMUL_CONST_COOP_SPLITK
};
const MATMUL_CONST_COOP_ROWS_M32_SPLITK: KernelDesc = KernelDesc {
    name: "matmul_const_coop_rows_m32_splitk",
    ..MATMUL_CONST_COOP_SPLITK
};
const MATMUL_CONST_COOP_K128_SPLITK: KernelDesc = KernelDesc {
    name: "matmul_const_coop_k128_splitk",
    ..MATMUL_CONST_COOP_SPLITK
};
const MATMUL_CONST_COOP_K128_M32_SPLITK: KernelDesc = KernelDesc {
    name: "matmul_const_coop_k128_m32_splitk",
    ..MATMUL_CONST_COOP_SPLITK
};
const MATMUL_SPLITK_COMBINE: KernelDesc = KernelDesc {
    name: "matmul_splitk_combine",
    ..MATMUL_CONST_COOP_SPLITK
};
/// Invocations a workgroup of `matmul_splitk_combine.comp`.
const COMBINE_THREADS: u32 = 64;

/// The split tensor-core kernel for B stored by rows or not, on 32-row tiles or 64, 128 k a step
/// or 64 (B by rows takes 64; a split MatMul reads A as it is).
fn split_kernel(rows: bool, m32: bool, deep: bool) -> &'static KernelDesc {
    match (rows, m32, deep) {
        (false, false, false) => &MATMUL_CONST_COOP_SPLITK,
        (false, true, false) => &MATMUL_CONST_COOP_M32_SPLITK,
        (false, false, true) => &MATMUL_CONST_COOP_K128_SPLITK,
        (false, true, true) => &MATMUL_CONST_COOP_K128_M32_SPLITK,
        (true, false, _) => &MATMUL_CONST_COOP_ROWS_SPLITK,
        (true, true, _) => &MATMUL_CONST_COOP_ROWS_M32_SPLITK,
    }
}

/// k a step of the tensor-core kernel for `b` on this device: for a B packed [K, N], 128 unless
/// the options fix 64 ([`crate::DeviceOptions::coop_step_k`]); a B stored by rows takes 64. On
/// an H200 (session 31, run 1; with A packed, below) 128 took the 1.34 B prefill's gate/up
/// projections from 143 to 110 us, its down projection from 164 to 146, BERT-base's MLP down
/// projection from 73 to 61; alone, without A packed, gate/up got slower (156 us).
fn coop_step_k(features: &crate::DeviceFeatures, b: &MatRhs<'_>) -> usize {
    if features.coop_step_k != Some(64) && matches!(b, MatRhs::Weights { .. }) {
        128
    } else {
        64
    }
}
/// The fewest steps a span takes when the spans are picked by shape.
const SPLIT_MIN_STEPS: usize = 4;
/// The most spans a MatMul is split into (flags bits 24-29 hold spans - 1).
const SPLIT_MAX_SPANS: usize = 64;

/// Reduction spans for a tensor-core MatMul of `workgroups` output tiles over `k` on steps of
/// `step_k`: the number the device's options fix ([`crate::DeviceOptions::matmul_split_k`]), at
/// most one a step; else by shape, only where the tiles leave half the multiprocessors (about
/// one per 2048 concurrent invocations) idle: as many as keep the tiles times the spans within
/// two workgroups a multiprocessor, with at least [`SPLIT_MIN_STEPS`] steps each. No span is
/// left empty. 1: no split. On an H200 (session 31, run 1) the 1.34 B prefill's key/value
/// projections (32 tiles, K 2048) took 22 us in 4 spans against 40, and BERT-base's MLP down
/// projection (48 tiles, K 3072) 48 in 5 against 61; its query/output projections (128 tiles)
/// took 66 in 2 spans against 53, so a MatMul with more tiles than half the multiprocessors
/// stays whole.
fn split_k_spans(
    features: &crate::DeviceFeatures,
    workgroups: u64,
    k: usize,
    step_k: usize,
) -> usize {
    let steps = k.div_ceil(step_k);
    let want = match features.matmul_split_k {
        Some(n) => n as usize,
        None => {
            let multiprocessors = features.multiprocessors();
            if 2 * workgroups > multiprocessors {
                return 1;
            }
            let room = (2 * multiprocessors / workgroups.max(1)) as usize;
            room.min(steps / SPLIT_MIN_STEPS)
        }
    };
    let want = want.clamp(1, steps.min(SPLIT_MAX_SPANS));
    steps.div_ceil(steps.div_ceil(want))
}

/// `matmul_const_gemv.comp`: a few rows against a constant B (see [`uses_gemv`]).
const MATMUL_CONST_GEMV: KernelDesc = KernelDesc {
    name: "matmul_const_gemv",
    bindings: IMAGES_2,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: true,
};

/// `matmul_const_gemv_deep.comp`: the same with 16 weight texels an invocation in flight.
const MATMUL_CONST_GEMV_DEEP: KernelDesc = KernelDesc {
    name: "matmul_const_gemv_deep",
    ..MATMUL_CONST_GEMV
};

/// Most rows `matmul_const_gemv.comp` takes (its MAX_ROWS).
pub const GEMV_MAX_ROWS: usize = 4;
/// The staging divisor `MP` of `matmul_const_gemv.comp` (1, 2 or 4, at least the rows rounded up
/// to a power of two): a workgroup takes `4 * MP` output columns. 4 (16 columns) unless the
/// device's options fix another: on an H200 the 1.34 B decoder's 168 projections took 4.67 ms a
/// step at 16 columns against 4.90 at 4, which spread one row over four times the workgroups
/// (`measurements/h200-2026-12-03-s17/run1`).
fn gemv_spread(device: &crate::device::Device, m: usize) -> usize {
    let smallest = m.max(1).next_power_of_two();
    let mp = device.features().gemv_spread.map_or(4, |f| f as usize);
    mp.clamp(smallest, 4)
}

/// Whether a GEMV runs on the deep variant: only where the device's options ask for it. The
/// deep variant halves the chunks (each a round trip to memory) but takes twice the shared
/// memory, so fewer of its workgroups run at once. On an H200 (the 1.34 B decoder's step,
/// `measurements/h200-2026-12-03-s18`) it took the gate and up projections (K 2048, N 6656,
/// 416 workgroups) from 34.4 to 50.5 us; in run 1 the down projection (K 6656) went from 50.6 to
/// 44.2 us and the key/value ones from 16.2 to 14.1, but picking it for those alone (K >= 2 N)
/// gave a slower step in run 2 (8.46 against 7.84 ms; down 55.5 against 50.9 us).
fn gemv_deep(device: &crate::device::Device) -> bool {
    device.features().gemv_deep.unwrap_or(false)
}

const MATMUL_TBIAS: KernelDesc = KernelDesc {
    name: "matmul_tbias",
    bindings: IMAGES_4,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: false,
};

const MATMUL_CONST_TBIAS: KernelDesc = KernelDesc {
    name: "matmul_const_tbias",
    bindings: IMAGES_3,
    push_constant_bytes: PUSH_BYTES,
    uses_weights: true,
};

/// Output tile per workgroup (texels): must match TM/TN in `matmul_body.glsl`.
const TILE: usize = 32;

/// The right-hand operand of a MatMul.
#[derive(Debug, Clone, Copy)]
pub enum MatRhs<'a> {
    /// A runtime activation `[..., K, N]` (`[..., N, K]` with `trans_b`).
    Tensor(&'a Tensor),
    /// A constant `[K, N]` packed by `layout::pack_matrix_kn` at `texel_offset` in the weight space.
    Weights {
        texel_offset: u32,
        k: usize,
        n: usize,
    },
    /// A constant B stored by rows, as B^T `[N, K]` packed by `layout::pack_matrix_kn` with
    /// `k = N, n = K` (texel (n/4)*K + k, lane n%4): a lookup table that a tied output head
    /// reads whole (see [`crate::kernels::gather_rows_into`]). Runs on the portable kernel.
    WeightRows {
        texel_offset: u32,
        k: usize,
        n: usize,
    },
}

/// Constant bias `C` broadcast to `[M, N]`, packed by `layout::pack_vector` (row-major values).
/// `per_row`: C varies along M; `per_col`: C varies along N. `[N]` = `{per_row: false, per_col: true}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatBias {
    pub texel_offset: u32,
    pub per_row: bool,
    pub per_col: bool,
}

/// MatMul/Gemm parameters: `out = act(alpha * op(A) op(B) + beta * C)`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatMulOpts {
    pub trans_a: bool,
    /// Only for an activation B (constant B is packed already transposed to `[K, N]`).
    pub trans_b: bool,
    pub alpha: f32,
    pub beta: f32,
    pub bias: Option<MatBias>,
    /// Fused activation applied last (`None` = identity).
    pub activation: Option<UnaryOp>,
}

impl Default for MatMulOpts {
    fn default() -> Self {
        MatMulOpts {
            trans_a: false,
            trans_b: false,
            alpha: 1.0,
            beta: 1.0,
            bias: None,
            activation: None,
        }
    }
}

fn err(reason: String) -> VkError {
    VkError::Kernel {
        kernel: "matmul".into(),
        reason,
    }
}

struct Plan {
    out_shape: Vec<usize>,
    m: usize,
    k: usize,
    n: usize,
    a_mask: u32,
    b_mask: u32,
}

fn batch_mask(operand: &[usize], out6: &[usize; 6]) -> Result<u32> {
    let d = dims6(operand)?;
    let mut m = 0;
    for k in 0..4 {
        if d[k] != out6[k] {
            m |= 1 << k;
        }
    }
    Ok(m)
}

fn plan(a: &Tensor, b: &MatRhs<'_>, opts: &MatMulOpts) -> Result<Plan> {
    let sa = a.shape();
    if sa.is_empty() {
        return Err(err(format!("A `{}` is a scalar", a.name())));
    }
    if sa.len() == 1 && opts.trans_a {
        return Err(err(format!(
            "A `{}` is 1-D; trans_a needs rank >= 2",
            a.name()
        )));
    }
    // A [K] is [1, K]; its output drops M, which has the same texel layout as [.., 1, N] when the
    // batch is empty (checked below).
    let (a_batch, m, ka): (&[usize], usize, usize) = if sa.len() == 1 {
        (&[], 1, sa[0])
    } else {
        let (r, c) = (sa[sa.len() - 2], sa[sa.len() - 1]);
        let (m, k) = if opts.trans_a { (c, r) } else { (r, c) };
        (&sa[..sa.len() - 2], m, k)
    };
    let (b_batch, kb, n): (&[usize], usize, usize) = match b {
        MatRhs::Tensor(t) => {
            let sb = t.shape();
            if sb.len() < 2 {
                return Err(err(format!(
                    "B `{}` has shape {sb:?}; 1-D B is not supported (reshape it to [K, 1] \
                     and the output to [..., M])",
                    t.name()
                )));
            }
            let (r, c) = (sb[sb.len() - 2], sb[sb.len() - 1]);
            let (k, n) = if opts.trans_b { (c, r) } else { (r, c) };
            (&sb[..sb.len() - 2], k, n)
        }
        MatRhs::Weights { k, n, .. } | MatRhs::WeightRows { k, n, .. } => {
            if opts.trans_b {
                return Err(err(
                    "constant B must be packed as [K, N] (transpose before packing); trans_b is \
                     only for an activation B"
                        .into(),
                ));
            }
            (&[], *k, *n)
        }
    };
    if ka != kb {
        return Err(err(format!(
            "inner dimensions differ: A `{}` {:?} gives K = {ka}, B gives K = {kb}",
            a.name(),
            sa
        )));
    }
    if m == 0 || n == 0 || ka == 0 {
        return Err(err(format!("empty matrix: M = {m}, K = {ka}, N = {n}")));
    }
    let batch = broadcast_shape(a_batch, b_batch)?;
    let mut out_shape = batch.clone();
    if sa.len() == 1 {
        if !batch.is_empty() {
            return Err(err(format!(
                "1-D A `{}` with a batched B: unsqueeze A to [1, K] first",
                a.name()
            )));
        }
    } else {
        out_shape.push(m);
    }
    out_shape.push(n);
    let out6 = dims6(&out_shape)?;
    let a_mask = batch_mask(sa, &out6)?;
    let b_mask = match b {
        MatRhs::Tensor(t) => batch_mask(t.shape(), &out6)?,
        MatRhs::Weights { .. } | MatRhs::WeightRows { .. } => 0xF,
    };
    Ok(Plan {
        out_shape,
        m,
        k: ka,
        n,
        a_mask,
        b_mask,
    })
}

/// Output shape of `A x B` under `opts` (numpy matmul broadcasting of the batch dims).
pub fn matmul_shape(a: &Tensor, b: MatRhs<'_>, opts: &MatMulOpts) -> Result<Vec<usize>> {
    Ok(plan(a, &b, opts)?.out_shape)
}

/// Records `out = act(alpha * op(A) op(B) + beta * bias)`. Constant B or a bias needs
/// `rec.use_weights(..)` first.
pub fn matmul_into(
    rec: &mut Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<()> {
    record(rec, a, Scratch::default(), b, None, opts, out)
}

/// The shape of the copy of A that [`matmul_packed_into`] reads, `[4, K/4, M]` (texel
/// `(m, k/4)` holding `k..k+3` of row `m`: a quarter of the texels A takes one value a texel),
/// where the MatMul runs on the tensor cores, A is one matrix (no batch) with K a multiple of 4,
/// the reduction is not split ([`matmul_split_k_shape`]) and the device's options do not turn it
/// off ([`crate::DeviceOptions::matmul_packed_a`]); `None` elsewhere (run [`matmul_into`]). On
/// an H200 (session 31, run 1; on 128 k a step) the 1.34 B prefill's GPU time went 21.2 -> 18.2
/// ms with it and BERT-base's 2.97 -> 2.85; the Whisper-tiny encoder's stayed level (its
/// 384-wide projections 42.0 -> 42.3 us, its MLP down projection 116 -> 98).
pub fn matmul_packed_a_shape(
    rec: &Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<Option<Vec<usize>>> {
    if rec.device().features().matmul_packed_a == Some(false) {
        return Ok(None);
    }
    let p = plan(a, &b, opts)?;
    let o6 = dims6(&p.out_shape)?;
    let one_matrix = a.shape().len() >= 2 && a.elements() == p.m * p.k;
    let coop = runs_on_tensor_cores(rec, &b, (o6[3], p.m), out, opts);
    let split = split_shape(rec, &b, &p, &o6, out, opts).is_some();
    Ok(
        (coop && !split && one_matrix && p.k % 4 == 0 && out.layout().layers() == 1)
            .then(|| vec![4, p.k / 4, p.m]),
    )
}

/// The shape of the fp32 partial results [`matmul_split_into`] needs,
/// `[1, 4, spans * layers * M, ceil(N / 4)]` (per span, layer and row, N values four a texel),
/// where the MatMul runs on the tensor cores and its reduction is split (`split_k_spans`: by
/// shape, or as [`crate::DeviceOptions::matmul_split_k`] fixes); `None` elsewhere (run
/// [`matmul_into`]). A split MatMul reads A as it is (no packed copy).
pub fn matmul_split_k_shape(
    rec: &Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<Option<Vec<usize>>> {
    let p = plan(a, &b, opts)?;
    let o6 = dims6(&p.out_shape)?;
    Ok(split_shape(rec, &b, &p, &o6, out, opts))
}

/// [`matmul_into`] with the reduction split into spans over workgroups: each span's tile goes
/// to `partials` (an fp32 tensor of [`matmul_split_k_shape`]), and a second kernel sums the
/// spans and applies alpha, the bias and the activation.
pub fn matmul_split_into(
    rec: &mut Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
    partials: &Tensor,
) -> Result<()> {
    let scratch = Scratch {
        partials: Some(partials),
        ..Scratch::default()
    };
    record(rec, a, scratch, b, None, opts, out)
}

/// [`matmul_split_k_shape`] for the plan `p` (output dims `o6`).
fn split_shape(
    rec: &Recorder,
    b: &MatRhs<'_>,
    p: &Plan,
    o6: &[usize; 6],
    out: &Tensor,
    opts: &MatMulOpts,
) -> Option<Vec<usize>> {
    if !runs_on_tensor_cores(rec, b, (o6[3], p.m), out, opts) {
        return None;
    }
    let features = rec.device().features();
    let layers = out.layout().layers();
    let workgroups =
        (p.m.div_ceil(coop_rows(&features, out)) * p.n.div_ceil(COOP_TILE)) as u64 * layers;
    let spans = split_k_spans(&features, workgroups, p.k, coop_step_k(&features, b));
    (spans > 1).then(|| vec![1, 4, spans * layers as usize * p.m, p.n.div_ceil(4)])
}

/// Records A's copy into `packed` (`[4, K/4, M]` for an A of M rows of K: texel `(m, k/4)`
/// holds `k..k+3` of row `m`) for [`matmul_packed_into`]. One copy serves every MatMul of A.
pub fn matmul_pack_a_into(rec: &mut Recorder, a: &Tensor, packed: &Tensor) -> Result<()> {
    let &[four, k4, m] = packed.shape() else {
        return Err(err(format!(
            "packed A `{}` {:?} is not [4, K/4, M]",
            packed.name(),
            packed.shape()
        )));
    };
    if four != 4 || a.elements() != m * k4 * 4 || a.shape().last() != Some(&(k4 * 4)) {
        return Err(err(format!(
            "packed A `{}` {:?} does not hold A `{}` {:?}",
            packed.name(),
            packed.shape(),
            a.name(),
            a.shape()
        )));
    }
    let pc = PushConstants::new().tensor(packed.desc()).tensor(a.desc());
    let groups = [m.div_ceil(64) as u32, k4.div_ceil(4) as u32, 1];
    let args = [Arg::input(a), Arg::output(packed)];
    let flat = unfolded(&[a]);
    launch_unfolded(rec, &MATMUL_PACK_A, a.precision(), &args, &pc, groups, flat)
}

/// [`matmul_into`] reading A from `packed`, a tensor of [`matmul_packed_a_shape`] that
/// [`matmul_pack_a_into`] has filled with A's copy (`a` gives the shapes).
pub fn matmul_packed_into(
    rec: &mut Recorder,
    a: &Tensor,
    packed: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<()> {
    check_packed_a(rec, a, packed, b, opts, out)?;
    record(
        rec,
        a,
        Scratch {
            packed_a: Some(packed),
            ..Scratch::default()
        },
        b,
        None,
        opts,
        out,
    )
}

/// Refuses a packed A that is not the copy [`matmul_packed_a_shape`] gives this MatMul.
fn check_packed_a(
    rec: &Recorder,
    a: &Tensor,
    packed: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<()> {
    let want = matmul_packed_a_shape(rec, a, b, opts, out)?;
    if want.as_deref() != Some(packed.shape()) {
        return Err(err(format!(
            "packed A `{}` {:?}: this MatMul takes {want:?}",
            packed.name(),
            packed.shape()
        )));
    }
    Ok(())
}

/// The shape of the packed copy of `out` that [`matmul_packed_out_into`] writes instead of
/// `out`: `[4, N/4, M]`, the `[4, K/4, M]` copy of A that a next MatMul reading `out` as its A
/// takes ([`matmul_packed_a_shape`]), so that it needs no copy and this MatMul a quarter of the
/// stores. Unless the device's options turn it off ([`crate::DeviceOptions::matmul_packed_out`]),
/// where the MatMul runs on the tensor cores, unsplit, and `out` is one matrix with N a multiple
/// of 4; `None` elsewhere.
pub fn matmul_packed_out_shape(
    rec: &Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<Option<Vec<usize>>> {
    let p = plan(a, &b, opts)?;
    let o6 = dims6(&p.out_shape)?;
    Ok(packed_out_shape(rec, &b, &p, &o6, out, opts))
}

/// [`matmul_packed_out_shape`] for the plan `p` (output dims `o6`).
fn packed_out_shape(
    rec: &Recorder,
    b: &MatRhs<'_>,
    p: &Plan,
    o6: &[usize; 6],
    out: &Tensor,
    opts: &MatMulOpts,
) -> Option<Vec<usize>> {
    if rec.device().features().matmul_packed_out == Some(false) {
        return None;
    }
    let coop = runs_on_tensor_cores(rec, b, (o6[3], p.m), out, opts);
    let split = split_shape(rec, b, p, o6, out, opts).is_some();
    let one_matrix = out.elements() == p.m * p.n && out.layout().layers() == 1;
    (coop && !split && one_matrix && p.n.is_multiple_of(4)).then(|| vec![4, p.n / 4, p.m])
}

/// Records the MatMul (reading A from its packed copy `packed_a` where given, as
/// [`matmul_packed_into`]) with its output written to `packed_out`, a tensor of
/// [`matmul_packed_out_shape`], instead of `out` (which gives the shapes and is not written):
/// `packed_out` is then what the next MatMul's [`matmul_packed_into`] reads as its packed A.
pub fn matmul_packed_out_into(
    rec: &mut Recorder,
    a: &Tensor,
    packed_a: Option<&Tensor>,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    (out, packed_out): (&Tensor, &Tensor),
) -> Result<()> {
    if let Some(packed) = packed_a {
        check_packed_a(rec, a, packed, b, opts, out)?;
    }
    let scratch = Scratch {
        packed_a,
        packed_out: Some(packed_out),
        ..Scratch::default()
    };
    record(rec, a, scratch, b, None, opts, out)
}

/// Records `out = act(alpha * op(A) op(B) + beta * C)` with a run-time tensor `c` (Gemm's C as a
/// graph input): `c` is `[]`, `[N]`, `[1, N]`, `[M, 1]` or `[M, N]` (leading 1s allowed) and
/// broadcasts over `[M, N]` and every batch. `opts.bias` must be `None`. A constant B needs
/// `rec.use_weights(..)` first.
pub fn matmul_tensor_bias_into(
    rec: &mut Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    c: &Tensor,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<()> {
    if opts.bias.is_some() {
        return Err(err(
            "a tensor C and a constant bias together are not supported".into(),
        ));
    }
    record(rec, a, Scratch::default(), b, Some(c), opts, out)
}

/// `(per_row, per_col, physical width | height << 16)` of a tensor C broadcast to `[M, N]`.
fn tensor_bias(c: &Tensor, m: usize, n: usize) -> Result<(bool, bool, u32)> {
    let cs = c.shape();
    let r = cs.len();
    let dim = |i: usize| if i < r { cs[r - 1 - i] } else { 1 };
    let (ch, cw) = (dim(1), dim(0));
    let d = c.desc();
    let ok = cs[..r.saturating_sub(2)].iter().all(|&v| v == 1)
        && (ch == 1 || ch == m)
        && (cw == 1 || cw == n)
        && (d.n, d.c, d.h as usize, d.w as usize) == (1, 1, ch, cw);
    if !ok {
        return Err(err(format!(
            "C `{}` {cs:?} does not broadcast to [M, N] = [{m}, {n}]",
            c.name()
        )));
    }
    if d.pw > 0xFFFF || d.ph > 0xFFFF {
        return Err(err(format!(
            "C `{}` {cs:?}: physical size {}x{} too large",
            c.name(),
            d.pw,
            d.ph
        )));
    }
    Ok((ch != 1, cw != 1, d.pw | (d.ph << 16)))
}

/// What a MatMul reads or writes besides its operands: A's `[4, K/4, M]` copy, which the
/// tensor-core kernel then reads instead of A, or the partial results of a split reduction; and
/// the packed copy of its output it writes instead of the output itself.
#[derive(Clone, Copy, Default)]
struct Scratch<'a> {
    packed_a: Option<&'a Tensor>,
    partials: Option<&'a Tensor>,
    packed_out: Option<&'a Tensor>,
}

fn record(
    rec: &mut Recorder,
    a: &Tensor,
    scratch: Scratch<'_>,
    b: MatRhs<'_>,
    c: Option<&Tensor>,
    opts: &MatMulOpts,
    out: &Tensor,
) -> Result<()> {
    let Scratch {
        packed_a,
        partials,
        packed_out,
    } = scratch;
    let p = plan(a, &b, opts)?;
    if packed_a.is_some() && partials.is_some() {
        return Err(err("a packed A and a split reduction together".into()));
    }
    if partials.is_some() && packed_out.is_some() {
        return Err(err("a packed output and a split reduction together".into()));
    }
    if dims6(out.shape())? != dims6(&p.out_shape)? {
        return Err(err(format!(
            "output `{}` has shape {:?}, expected {:?}",
            out.name(),
            out.shape(),
            p.out_shape
        )));
    }
    let o6 = dims6(&p.out_shape)?;
    if o6[1] > 0xFFFF || o6[2] > 0xFFFF {
        return Err(err(format!(
            "batch dims {:?} too large (d1, d2 must be < 65536)",
            p.out_shape
        )));
    }
    let layers = out.layout().layers();
    let limits = rec
        .device()
        .properties()
        .limits
        .max_compute_work_group_count;
    let gemv = c.is_none() && uses_gemv(&b, o6[3], p.m);
    let coop = c.is_none() && runs_on_tensor_cores(rec, &b, (o6[3], p.m), out, opts);
    let short = c.is_none()
        && !coop
        && partials.is_none()
        && packed_a.is_none()
        && packed_out.is_none()
        && uses_short(rec.device(), &b, o6[3], p.m);
    let (tile_cols, tile_rows) = if coop {
        let features = rec.device().features();
        let rows = coop_rows(&features, out);
        // 96 columns only on the packed-A kernel of 64 rows, in one span.
        let cols = match (rows, packed_a, partials, &b) {
            (COOP_TILE, Some(_), None, MatRhs::Weights { .. }) => coop_cols(&features, out),
            _ => COOP_TILE,
        };
        (cols, rows)
    } else {
        (TILE, TILE)
    };
    let spread = gemv.then(|| gemv_spread(rec.device(), p.m));
    // A split reduction's spans run side by side in the dispatch's layer dimension.
    let spans = match partials {
        None => 1,
        Some(t) => {
            let want = c
                .is_none()
                .then(|| split_shape(rec, &b, &p, &o6, out, opts))
                .flatten();
            match want {
                Some(w)
                    if t.shape() == w.as_slice()
                        && t.precision() == crate::layout::Precision::F32 =>
                {
                    w[2] / (layers as usize * p.m)
                }
                _ => {
                    return Err(err(format!(
                        "partials `{}` {:?} {:?}: this MatMul takes {want:?} in fp32",
                        t.name(),
                        t.shape(),
                        t.precision()
                    )))
                }
            }
        }
    };
    let groups = if let Some(mp) = spread {
        [p.n.div_ceil(4 * mp) as u64, 1, layers]
    } else if short {
        [
            p.n.div_ceil(SHORT_COLS) as u64,
            p.m.div_ceil(SHORT_BLOCK_ROWS) as u64,
            layers,
        ]
    } else {
        [
            p.n.div_ceil(tile_cols) as u64,
            p.m.div_ceil(tile_rows) as u64,
            layers * spans as u64,
        ]
    };
    for (g, lim) in groups.iter().zip(limits) {
        if *g > lim as u64 {
            return Err(err(format!(
                "output {:?} needs {groups:?} workgroups, the device allows {limits:?}",
                p.out_shape
            )));
        }
    }
    let (act, act_a, act_b) = opts.activation.unwrap_or(UnaryOp::Identity).code();
    let mut flags = p.a_mask | (p.b_mask << 4) | (act << 16);
    if opts.trans_a {
        flags |= 1 << 8;
    }
    if opts.trans_b {
        flags |= 1 << 9;
    }
    if o6[3] == 1 {
        // Only lane 0 is real: dot-product path.
        flags |= 1 << 13;
    }
    if matches!(b, MatRhs::WeightRows { .. }) {
        flags |= 1 << 14;
    }
    if let Some(mp) = spread {
        flags |= mp.trailing_zeros() << 24;
    }
    if spans > 1 {
        flags |= (spans as u32 - 1) << 24;
    }
    let mut bias_offset = 0;
    if let Some(bias) = opts.bias {
        flags |= 1 << 12;
        if bias.per_row {
            flags |= 1 << 10;
        }
        if bias.per_col {
            flags |= 1 << 11;
        }
        bias_offset = bias.texel_offset;
    }
    if let Some(c) = c {
        let (per_row, per_col, phys) = tensor_bias(c, p.m, p.n)?;
        flags |= 1 << 12;
        if per_row {
            flags |= 1 << 10;
        }
        if per_col {
            flags |= 1 << 11;
        }
        bias_offset = phys;
    }
    let b_desc = match b {
        MatRhs::Tensor(t) => t.desc(),
        MatRhs::Weights { texel_offset, .. } | MatRhs::WeightRows { texel_offset, .. } => {
            // The partial results' fold rides in the rest (include/matmul_partials.glsl).
            let fold = partials.map_or((0, 0), |t| (t.layout().pw, t.layout().ph));
            crate::tensor::TensorDesc {
                n: texel_offset,
                pw: fold.0,
                ph: fold.1,
                ..Default::default()
            }
        }
    };
    if packed_a.is_some() && !coop {
        return Err(err("a packed A outside the tensor-core kernels".into()));
    }
    if let Some(po) = packed_out {
        let want = packed_out_shape(rec, &b, &p, &o6, out, opts);
        if want.as_deref() != Some(po.shape()) || po.precision() != out.precision() {
            return Err(err(format!(
                "packed output `{}` {:?}: this MatMul writes {want:?}",
                po.name(),
                po.shape()
            )));
        }
        flags |= PACKED_OUT_FLAG;
    }
    // A packed output is written, and described to the kernel, in place of the output.
    let written = packed_out.unwrap_or(out);
    let a_read = packed_a.unwrap_or(a);
    let pc = PushConstants::new()
        .tensor(written.desc())
        .tensor(a_read.desc())
        .tensor(b_desc)
        .u32(o6[1] as u32 | ((o6[2] as u32) << 16))
        .u32(flags)
        .f32(opts.alpha)
        .f32(opts.beta)
        .f32(act_a)
        .f32(act_b)
        .u32(bias_offset)
        .u32(p.k as u32);
    let groups = [groups[0] as u32, groups[1] as u32, groups[2] as u32];
    match (b, c) {
        (MatRhs::Tensor(bt), Some(c)) => {
            let args = [
                Arg::input(a),
                Arg::input(bt),
                Arg::input(c),
                Arg::output(out),
            ];
            launch(rec, &MATMUL_TBIAS, out.precision(), &args, &pc, groups)
        }
        (MatRhs::Weights { .. } | MatRhs::WeightRows { .. }, Some(c)) => {
            let args = [Arg::input(a), Arg::input(c), Arg::output(out)];
            launch(
                rec,
                &MATMUL_CONST_TBIAS,
                out.precision(),
                &args,
                &pc,
                groups,
            )
        }
        (MatRhs::Tensor(bt), None) => {
            let desc = if opts.bias.is_some() {
                &MATMUL_BIAS
            } else {
                &MATMUL
            };
            let args = [Arg::input(a), Arg::input(bt), Arg::output(out)];
            launch(rec, desc, out.precision(), &args, &pc, groups)
        }
        (MatRhs::Weights { .. } | MatRhs::WeightRows { .. }, None) => {
            // The tensor-core kernels and matmul_const_short.comp read A with LOAD_AT.
            let flat = (coop || short) && unfolded(&[a_read]);
            if let Some(parts) = partials {
                let rows = matches!(b, MatRhs::WeightRows { .. });
                let deep = coop_step_k(&rec.device().features(), &b) == 128;
                let desc = split_kernel(rows, tile_rows == 32, deep);
                let args = [Arg::input(a_read), Arg::output(out), Arg::output(parts)];
                launch_unfolded(rec, desc, out.precision(), &args, &pc, groups, flat)?;
                // One invocation a texel of one span's partials: four columns of a row.
                let texels = layers * (p.m * p.n.div_ceil(4)) as u64;
                let groups = dispatch_1d(rec.device(), texels, COMBINE_THREADS);
                let args = [Arg::input(a_read), Arg::output(out), Arg::input(parts)];
                return launch(
                    rec,
                    &MATMUL_SPLITK_COMBINE,
                    out.precision(),
                    &args,
                    &pc,
                    groups,
                );
            }
            let desc = if gemv && gemv_deep(rec.device()) {
                &MATMUL_CONST_GEMV_DEEP
            } else if gemv {
                &MATMUL_CONST_GEMV
            } else if short {
                &MATMUL_CONST_SHORT
            } else if coop && tile_cols == COOP_WIDE_COLS {
                &MATMUL_CONST_COOP_PA_N96
            } else if coop {
                coop_kernel(
                    matches!(b, MatRhs::WeightRows { .. }),
                    tile_rows == 32,
                    packed_a.is_some(),
                    coop_step_k(&rec.device().features(), &b) == 128,
                )
            } else {
                &MATMUL_CONST
            };
            let args = [Arg::input(a_read), Arg::output(written)];
            launch_unfolded(rec, desc, out.precision(), &args, &pc, groups, flat)
        }
    }
}

/// Whether a MatMul without a run-time C runs on the tensor-core kernels: a constant B that is
/// not stored compensated, not a GEMV (output channel dim `out_c`, `m` rows), and
/// [`uses_cooperative_matrix`]. The tensor-core kernels read B's texels as they are (no
/// `weight_finish`: see `include/matmul_coop_body.glsl`); only tensors of at most the packer's
/// compensation limit (1024 values by default) are compensated, and those run on the portable
/// kernels.
fn runs_on_tensor_cores(
    rec: &Recorder,
    b: &MatRhs<'_>,
    (out_c, m): (usize, usize),
    out: &Tensor,
    opts: &MatMulOpts,
) -> bool {
    let b_offset = match b {
        MatRhs::Weights { texel_offset, .. } | MatRhs::WeightRows { texel_offset, .. } => {
            *texel_offset
        }
        MatRhs::Tensor(_) => return false,
    };
    !uses_gemv(b, out_c, m)
        && !rec.weight_texel_compensated(b_offset as u64)
        && uses_cooperative_matrix(rec.device(), out, opts)
}

/// Whether a MatMul runs on `matmul_const_gemv.comp`: a constant B (either layout), no run-time
/// bias (the caller checks), the scalar path (output channel dim `out_c` 1) and at most
/// [`GEMV_MAX_ROWS`] rows, where the tiled kernels would leave most invocations idle.
fn uses_gemv(b: &MatRhs<'_>, out_c: usize, m: usize) -> bool {
    matches!(b, MatRhs::Weights { .. } | MatRhs::WeightRows { .. })
        && out_c == 1
        && m <= GEMV_MAX_ROWS
}

/// Whether a MatMul runs on `matmul_const_short.comp`: on a device that runs few invocations at
/// once, a constant packed B `[K, N]`, no run-time bias (the caller checks, with the tensor-core
/// kernels and a split reduction, which take precedence), the lane-batched path (output channel
/// dim `out_c` above 1) and at most [`SHORT_MAX_ROWS`] rows, where the tiled kernel's 32-row
/// tiles are mostly padding. On llvmpipe it took PP-OCR's head pieces (10 rows)
/// from 23 to 4.5 ms; on an H100 from 18 to 237 us (one column an invocation, every A texel
/// a load in series: a GPU needs the tiled kernel's shared memory), so only where
/// `DeviceFeatures::runs_few_invocations`.
fn uses_short(device: &crate::device::Device, b: &MatRhs<'_>, out_c: usize, m: usize) -> bool {
    device.features().runs_few_invocations()
        && matches!(b, MatRhs::Weights { .. })
        && out_c > 1
        && m <= SHORT_MAX_ROWS
}

/// Whether a MatMul with a constant B (and no run-time bias) writing `out` runs on cooperative
/// matrices (tensor cores): where the device enabled them, for fp16 storage, an output whose
/// rank-rule channel dim is 1 (the usual [.., M, N] case), an A that is not transposed, and at
/// least [`coop_min_tiles`] 64x64 output tiles. Each tile's workgroup walks the whole reduction
/// (its four K groups side by side), so with very few tiles most of the GPU idles. Elsewhere
/// the portable kernel runs.
pub fn uses_cooperative_matrix(
    device: &crate::device::Device,
    out: &Tensor,
    opts: &MatMulOpts,
) -> bool {
    let features = device.features();
    let Ok(d) = dims6(out.shape()) else {
        return false;
    };
    features.cooperative_matrix_f16
        && out.precision() == crate::layout::Precision::F16
        && d[3] == 1
        && !opts.trans_a
        && coop_tiles(&d, out) >= coop_min_tiles(&features)
}

/// 64x64 output tiles of `out` (dims `d`) over all its layers.
fn coop_tiles(d: &[usize; 6], out: &Tensor) -> u64 {
    (d[4].div_ceil(COOP_TILE) * d[5].div_ceil(COOP_TILE)) as u64 * out.layout().layers()
}

/// The fewest 64x64 output tiles the tensor-core MatMul takes on a device: one per eight
/// streaming multiprocessors (16 k invocations), unless the device's options fix another
/// ([`crate::DeviceOptions::coop_min_tiles`]). On an H200 (132 of them; session 25, run 8) the
/// kernel with four K groups beat the portable one at every projection of a 128-token prefill,
/// 16 to 208 tiles: 127 -> 71, 151 -> 90 and 471 -> 231 us at 16, 64 and 64 tiles. With one
/// group (before) it lost below one tile a multiprocessor: BERT-base's MLP down projection
/// (24 tiles) took 705 us against the portable kernel's 193 (`h200-2026-12-02-s15/run7`).
pub fn coop_min_tiles(features: &crate::DeviceFeatures) -> u64 {
    features
        .coop_min_tiles
        .unwrap_or((features.concurrent_invocations / 16384).max(1))
}

/// Rows of the tensor-core MatMul's output tiles (64 columns each) for `out`: 32 where its 64-row
/// tiles would be fewer than the device's streaming multiprocessors (about one per 2048
/// concurrent invocations) and it has more than 32 rows, so that twice the workgroups share the
/// work; 64 elsewhere; or what the device's options fix ([`crate::DeviceOptions::coop_rows`]).
/// Each workgroup walks the whole reduction, so a MatMul with fewer workgroups than
/// multiprocessors leaves the rest idle; a 32-row tile's step also issues 3 k texel loads
/// against 5 k. On an H200 (session 26, run 2) the 1.34 B prefill's key/value (16 tiles),
/// query/output and down projections (64) went 72 -> 51, 91 -> 63 and 232 -> 180 us; its gate
/// and up projections (208 tiles) stay on 64 rows: on 32 they took 240 us against 170 (run 1,
/// both with an experimental two-deep prefetch).
pub fn coop_rows(features: &crate::DeviceFeatures, out: &Tensor) -> usize {
    if let Some(rows) = features.coop_rows {
        return rows as usize;
    }
    let Ok(d) = dims6(out.shape()) else {
        return COOP_TILE;
    };
    let multiprocessors = features.multiprocessors();
    if d[4] > 32 && coop_tiles(&d, out) < multiprocessors {
        32
    } else {
        COOP_TILE
    }
}

/// Columns of the tensor-core MatMul's 64-row output tiles over a packed A for `out`: 96 where
/// 64-column tiles would be more than the device's streaming multiprocessors (about one per
/// 2048 concurrent invocations) and 96-column ones no more, so that one wave of workgroups
/// takes the whole output instead of two, the second nearly empty; 64 elsewhere; or what the
/// device's options fix ([`crate::DeviceOptions::coop_cols`]). The Whisper-tiny encoder's 1500 x
/// 384 projections make 144 tiles of 64 columns and 96 of 96 for 132 multiprocessors.
pub fn coop_cols(features: &crate::DeviceFeatures, out: &Tensor) -> usize {
    if let Some(cols) = features.coop_cols {
        return cols as usize;
    }
    let Ok(d) = dims6(out.shape()) else {
        return COOP_TILE;
    };
    let multiprocessors = features.multiprocessors();
    let wide =
        (d[4].div_ceil(COOP_TILE) * d[5].div_ceil(COOP_WIDE_COLS)) as u64 * out.layout().layers();
    if coop_tiles(&d, out) > multiprocessors && wide <= multiprocessors {
        COOP_WIDE_COLS
    } else {
        COOP_TILE
    }
}

/// Allocates the output (precision of `a`) and records the MatMul.
pub fn matmul(
    rec: &mut Recorder,
    a: &Tensor,
    b: MatRhs<'_>,
    opts: &MatMulOpts,
    name: &str,
) -> Result<Tensor> {
    let shape = matmul_shape(a, b, opts)?;
    let out = alloc_like(rec, a, name, &shape)?;
    matmul_into(rec, a, b, opts, &out)?;
    Ok(out)
}
