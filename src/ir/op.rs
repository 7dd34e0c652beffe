//! The closed IR operator set with typed attributes. Shapes in attributes are concrete.
use serde::{Deserialize, Serialize};

/// Activation fused into the epilogue of Conv / ConvTranspose / MatMul / Gemm (applied after bias).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub enum Activation {
    #[default]
    None,
    Relu,
    /// Clip / Relu6.
    Clip {
        min: f32,
        max: f32,
    },
    Sigmoid,
    /// x * relu6(x + 3) / 6.
    HardSwish,
    /// max(0, min(1, alpha * x + beta)).
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    LeakyRelu {
        alpha: f32,
    },
    Tanh,
    /// Exact (erf) GELU.
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    /// x * sigmoid(x).
    Silu,
}

/// Attention operands that are a projection's rows `[1, S, H * D]`, read as `[1, H, S, D]`: each
/// the head dim `D` it splits by, `None` where the operand is given as heads. A split K is read by
/// rows (`[1, H, Sk, D]`, `key_rows` set).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeadSplits {
    pub q: Option<usize>,
    pub k: Option<usize>,
    pub v: Option<usize>,
}

impl HeadSplits {
    pub fn is_none(&self) -> bool {
        self.q.is_none() && self.k.is_none() && self.v.is_none()
    }

    /// The head dims of Q, K and V in input order.
    pub fn dims(&self) -> [Option<usize>; 3] {
        [self.q, self.k, self.v]
    }
}

/// Elementwise binary ops with numpy broadcasting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Pow,
    /// Comparison ops produce Bool.
    Equal,
    Less,
    Greater,
    And,
    Or,
    /// PRelu(x, slope).
    PRelu,
    /// ONNX Mod with `fmod = 0`: the remainder takes the divisor's sign (integer tensors only).
    Mod,
    /// ONNX Mod with `fmod = 1`: the remainder takes the dividend's sign, as C `fmod`.
    FMod,
}

/// Elementwise unary ops.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub enum UnaryOp {
    Relu,
    LeakyRelu {
        alpha: f32,
    },
    Sigmoid,
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    HardSwish,
    Tanh,
    Erf,
    Gelu,
    /// x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))).
    GeluTanh,
    Exp,
    Sqrt,
    Reciprocal,
    Clip {
        min: f32,
        max: f32,
    },
    Neg,
    Abs,
    Log,
    Sin,
    Cos,
    Not,
    // 1 where the input is NaN (a Bool output, like Not).
    IsNaN,
    /// x * sigmoid(x) (SiLU, Swish), from the exporters' `Mul(x, Sigmoid(x))`.
    Silu,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReduceOp {
    Mean,
    Sum,
    Max,
    Min,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ResizeMode {
    Nearest,
    Linear,
}

/// ONNX `coordinate_transformation_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CoordMode {
    HalfPixel,
    PytorchHalfPixel,
    AlignCorners,
    Asymmetric,
}

/// ONNX `nearest_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum NearestMode {
    RoundPreferFloor,
    RoundPreferCeil,
    Floor,
    Ceil,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PadMode {
    Constant,
    Reflect,
    Edge,
}

/// How ScatterND combines an update with the value it lands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ScatterReduction {
    None,
    Add,
    Mul,
}

/// Which ONNX op a [`Op::Reshape`] came from (kept for reporting; semantics are identical).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReshapeKind {
    Reshape,
    Flatten,
    Squeeze,
    Unsqueeze,
}

/// 2D window geometry shared by Conv, ConvTranspose and pooling. 1D ops (input [N, C, W]) use
/// kernel/stride/dilation/pad 1/1/1/0 on the H axis, i.e. they are 2D ops with H = 1.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Window {
    /// [kh, kw]
    pub kernel: [usize; 2],
    /// [sh, sw]
    pub strides: [usize; 2],
    /// [dh, dw]
    pub dilations: [usize; 2],
    /// [top, left, bottom, right]: resolved from explicit pads or auto_pad.
    pub pads: [usize; 4],
    /// 1 for Conv1d-style ops on [N, C, W] tensors, 2 otherwise.
    pub spatial_rank: u8,
}

/// One IR operation. Inputs are listed per variant; optional inputs that are absent are `None`
/// entries in [`super::Node::inputs`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Op {
    /// inputs: X, W (const [O, I/g, KH, KW]), B? (const [O]), addend? (Y's shape, added
    /// before the activation; made by `passes::concat_conv` and `passes::residual_conv`),
    /// input scale? ([N, C, 1, 1], X's channels times it; made by `passes::channel_scale`).
    Conv {
        window: Window,
        group: usize,
        activation: Activation,
    },
    /// inputs: X, W (const [I, O/g, KH, KW]), B?. `output_padding` is [h, w].
    ConvTranspose {
        window: Window,
        group: usize,
        output_padding: [usize; 2],
        activation: Activation,
    },
    /// inputs: A, B. Numpy matmul semantics; `transpose_a/b` mean the operand is read with its last
    /// two axes swapped (an absorbed Transpose).
    MatMul {
        transpose_a: bool,
        transpose_b: bool,
        activation: Activation,
    },
    /// inputs: A, B, C?. Y = alpha * op(A) * op(B) + beta * C.
    /// `b_rows`: only rows `[r0, r1)` of a transposed constant B (`trans_b`), so the output is
    /// `[M, r1 - r0]`: a column piece of a head tied to a row table (`passes::split_head`),
    /// whose step reads only the pages of those rows. `r0` is a multiple of 4.
    Gemm {
        alpha: f32,
        beta: f32,
        trans_a: bool,
        trans_b: bool,
        activation: Activation,
        #[serde(default)]
        b_rows: Option<[usize; 2]>,
    },
    Binary(BinaryOp),
    Unary(UnaryOp),
    /// inputs: cond, X, Y.
    Where,
    Softmax {
        axis: usize,
    },
    /// Fused `softmax(scale * Q K^T + mask) V` over the last axis of the scores, which are never
    /// stored (made by `passes::attention` from MatMul, scale, Add and Softmax). inputs: Q
    /// `[.., Sq, D]`, K `[.., Sk, D]` (`key_rows`) or `[.., D, Sk]`, V `[.., Sk, Dv]`, mask?
    /// (additive, broadcast to `[.., Sq, Sk]`). `nan_to_zero`: a row whose every key is masked
    /// to -inf gives 0 (the exporters' `Where(IsNaN(p), 0, p)` guard), else NaN like Softmax.
    Attention {
        scale: f32,
        key_rows: bool,
        #[serde(default)]
        nan_to_zero: bool,
        /// The output is `[1, Sq, H * Dv]`, the heads side by side in each row (the exporters'
        /// `Transpose(0, 2, 1, 3)` and `Reshape` after attention, run as the kernel's store).
        #[serde(default)]
        merge_heads: bool,
        /// Operands read from a projection's rows (the exporters' `Reshape` and `Transpose`
        /// before attention, run as the kernel's load; `passes::heads::attention_split_heads`).
        #[serde(default, skip_serializing_if = "HeadSplits::is_none")]
        split_heads: HeadSplits,
    },
    /// inputs: X `[N, C, S, D]`, cos, sin (`[1, 1, S, D]`). Rotary position embedding,
    /// `X * cos + rotate_half(X) * sin`, fused from the exporters' Slice/Neg/Concat/Mul/Add chain.
    Rope {
        /// X is `[N, S, C * D]`, the heads side by side in each row (a projection's output), read
        /// as `[N, C, S, D]`: the exporters' `Reshape` and `Transpose(0, 2, 1, 3)` before RoPE,
        /// run as the kernel's load (`passes::heads::split_heads`).
        #[serde(default)]
        split_heads: bool,
    },
    /// inputs: X, scale?, bias?. Normalizes over axes [axis, rank). `rms`: RMSNorm, x over the
    /// root mean square (no mean subtracted, no bias), fused from the Llama exporters' chain.
    /// `residual`: inputs X, scale, bias?, R and outputs Y, S: the norm of S = X + R, which it
    /// writes too (the residual Add before a transformer's norms, `passes::residual_norm`).
    LayerNorm {
        axis: usize,
        epsilon: f32,
        #[serde(default)]
        rms: bool,
        #[serde(default)]
        residual: bool,
    },
    /// inputs: X, scale, bias, mean, var (all const [C]) — left only when not folded into a Conv.
    BatchNorm {
        epsilon: f32,
    },
    /// `axes` sorted, non-negative.
    Reduce {
        op: ReduceOp,
        axes: Vec<usize>,
        keepdims: bool,
    },
    ArgMax {
        axis: usize,
        keepdims: bool,
        select_last_index: bool,
    },
    MaxPool {
        window: Window,
        ceil_mode: bool,
    },
    AveragePool {
        window: Window,
        ceil_mode: bool,
        count_include_pad: bool,
    },
    GlobalAveragePool,
    /// `sizes` is the concrete output shape; `scales` the per-axis ratios used for coordinate
    /// transforms (ONNX `scales`, or sizes/input when only `sizes` was given). `from_scales`:
    /// ONNX `scales` were given, so align_corners / pytorch_half_pixel take the resized length
    /// as `scale * length_in` (unfloored, as the ONNX reference does), not `sizes`.
    Resize {
        mode: ResizeMode,
        coord: CoordMode,
        nearest: NearestMode,
        scales: Vec<f32>,
        sizes: Vec<usize>,
        #[serde(default)]
        from_scales: bool,
    },
    Concat {
        axis: usize,
    },
    /// One output per entry of `splits`.
    Split {
        axis: usize,
        splits: Vec<usize>,
    },
    /// Per-axis (start, end, step), normalized and clamped; one entry per input axis.
    Slice {
        starts: Vec<i64>,
        ends: Vec<i64>,
        steps: Vec<i64>,
    },
    Transpose {
        perm: Vec<usize>,
        /// The input read as this row-major shape before the permutation (same element count):
        /// a Reshape copy folded into the Transpose's own copy
        /// (`passes::layout::fold_reshapes_into_transposes`). `None`: the input's own shape.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        read_as: Option<Vec<usize>>,
    },
    /// Reshape / Flatten / Squeeze / Unsqueeze to the concrete `shape`.
    Reshape {
        kind: ReshapeKind,
        shape: Vec<usize>,
    },
    /// `pads` = [begin_0, .., begin_r-1, end_0, .., end_r-1] (non-negative).
    Pad {
        mode: PadMode,
        pads: Vec<usize>,
        value: f32,
    },
    /// inputs: data, indices.
    Gather {
        axis: usize,
    },
    /// inputs: data, indices (data's rank); the output has the indices' shape.
    GatherElements {
        axis: usize,
    },
    Cast {
        to: super::DType,
    },
    /// ONNX Trilu on the last two axes: `upper` keeps `col - row >= k`, else `col - row <= k`.
    Trilu {
        upper: bool,
        k: i64,
    },
    /// inputs: data, indices (last axis = index tuple), updates. The output has data's shape.
    ScatterNd {
        reduction: ScatterReduction,
    },
    /// Prefix sums along `axis` (ONNX CumSum with a constant axis).
    CumSum {
        axis: usize,
        exclusive: bool,
        reverse: bool,
    },
    /// Broadcast X to `shape` (already broadcast against X's shape).
    Expand {
        shape: Vec<usize>,
    },
    Tile {
        repeats: Vec<usize>,
    },
    /// The in-place form of a with-past decoder's `present = Concat(past, new)`: writes `new`
    /// (input 1) into the cache (input 0, a [`super::StatePort`] tensor) starting at the offset
    /// along `axis` that the first element of input 2 (the position ids) holds. The output is a
    /// view of the cache; the rows past the written ones keep what earlier runs wrote.
    KvWrite {
        axis: usize,
        /// The new rows are `[N, S, C * D]`, the heads side by side, read as `[N, C, S, D]` (the
        /// cache's layout; `axis` is then 2): the exporters' head split, run as the write's load.
        #[serde(default)]
        split_heads: bool,
    },
    /// ONNX LSTM, forward direction only, layout 0. inputs: X, W, R, B?, seq_lens?, h0?, c0?.
    Lstm {
        hidden_size: usize,
    },
}

impl Op {
    /// Short op name for reports and errors.
    pub fn name(&self) -> &'static str {
        match self {
            Op::Conv { .. } => "Conv",
            Op::ConvTranspose { .. } => "ConvTranspose",
            Op::MatMul { .. } => "MatMul",
            Op::Gemm { .. } => "Gemm",
            Op::Binary(_) => "Binary",
            Op::Unary(_) => "Unary",
            Op::Where => "Where",
            Op::Softmax { .. } => "Softmax",
            Op::Attention { .. } => "Attention",
            Op::Rope { .. } => "Rope",
            Op::LayerNorm { .. } => "LayerNormalization",
            Op::BatchNorm { .. } => "BatchNormalization",
            Op::Reduce { .. } => "Reduce",
            Op::ArgMax { .. } => "ArgMax",
            Op::MaxPool { .. } => "MaxPool",
            Op::AveragePool { .. } => "AveragePool",
            Op::GlobalAveragePool => "GlobalAveragePool",
            Op::Resize { .. } => "Resize",
            Op::Concat { .. } => "Concat",
            Op::Split { .. } => "Split",
            Op::Slice { .. } => "Slice",
            Op::Transpose { .. } => "Transpose",
            Op::Reshape { .. } => "Reshape",
            Op::Pad { .. } => "Pad",
            Op::Gather { .. } => "Gather",
            Op::GatherElements { .. } => "GatherElements",
            Op::Cast { .. } => "Cast",
            Op::CumSum { .. } => "CumSum",
            Op::Trilu { .. } => "Trilu",
            Op::ScatterNd { .. } => "ScatterND",
            Op::Expand { .. } => "Expand",
            Op::Tile { .. } => "Tile",
            Op::Lstm { .. } => "LSTM",
            Op::KvWrite { .. } => "KvWrite",
        }
    }

    /// Ops whose output is a pure re-indexing of one input (candidates for views).
    pub fn is_layout_op(&self) -> bool {
        matches!(self, Op::Reshape { .. } | Op::Transpose { .. })
    }
}
