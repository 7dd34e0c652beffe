//! Elementwise kernels: binary ops with numpy broadcasting, unary activations, weight copy.

use crate::error::{Result, VkError};
use crate::kernels::launch::{launch_per_texel, IMAGES_2, IMAGES_3};
use crate::kernels::push::PushConstants;
use crate::layout::dims6;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const BINARY: KernelDesc = KernelDesc {
    name: "binary",
    bindings: IMAGES_3,
    push_constant_bytes: 112,
    uses_weights: false,
};

const UNARY: KernelDesc = KernelDesc {
    name: "unary",
    bindings: IMAGES_2,
    push_constant_bytes: 48,
    uses_weights: false,
};

const WEIGHT_COPY: KernelDesc = KernelDesc {
    name: "weight_copy",
    bindings: &[BindingKind::StorageImage],
    push_constant_bytes: 48,
    uses_weights: true,
};

/// Binary elementwise ops (ONNX semantics, numpy broadcasting).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    /// ONNX Pow: negative bases with integer exponents keep their sign.
    Pow,
    /// PRelu(x = a, slope = b): `x < 0 ? slope * x : x`.
    PRelu,
    Max,
    Min,
    /// Integer Div (ONNX integer tensors held as floats): quotient truncated toward zero, exact
    /// for integer operands up to 2^24.
    IntDiv,
    /// Integer Pow: [`BinaryOp::Pow`] rounded to the nearest integer.
    IntPow,
    /// C `fmod`: `a - trunc(a / b) * b`, the dividend's sign (exact for integers up to 2^24).
    FMod,
    /// Integer modulo with the divisor's sign (ONNX Mod, `fmod = 0`).
    IntMod,
}

impl BinaryOp {
    fn code(self) -> u32 {
        match self {
            BinaryOp::Add => 0,
            BinaryOp::Sub => 1,
            BinaryOp::Mul => 2,
            BinaryOp::Div => 3,
            BinaryOp::Pow => 4,
            BinaryOp::PRelu => 5,
            BinaryOp::Max => 6,
            BinaryOp::Min => 7,
            BinaryOp::IntDiv => 8,
            BinaryOp::IntPow => 9,
            BinaryOp::FMod => 10,
            BinaryOp::IntMod => 11,
        }
    }
}

/// Unary elementwise ops; parameters are carried in the variant.
#[derive(Debug, Clone, Copy, PartialEq)]
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
    /// Exact GELU `0.5x(1 + erf(x/sqrt 2))`.
    Gelu,
    /// GELU with the tanh approximation (ONNX `approximate="tanh"`).
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
    Elu {
        alpha: f32,
    },
    Softplus,
    Floor,
    Ceil,
    Identity,
    /// x * sigmoid(x)
    Silu,
    Sin,
    Cos,
    /// 1.0 where the input is NaN, else 0.0.
    IsNaN,
}

impl UnaryOp {
    pub(crate) fn code(self) -> (u32, f32, f32) {
        match self {
            UnaryOp::Relu => (0, 0.0, 0.0),
            UnaryOp::LeakyRelu { alpha } => (1, alpha, 0.0),
            UnaryOp::Sigmoid => (2, 0.0, 0.0),
            UnaryOp::HardSigmoid { alpha, beta } => (3, alpha, beta),
            UnaryOp::HardSwish => (4, 0.0, 0.0),
            UnaryOp::Tanh => (5, 0.0, 0.0),
            UnaryOp::Erf => (6, 0.0, 0.0),
            UnaryOp::Gelu => (7, 0.0, 0.0),
            UnaryOp::GeluTanh => (8, 0.0, 0.0),
            UnaryOp::Exp => (9, 0.0, 0.0),
            UnaryOp::Sqrt => (10, 0.0, 0.0),
            UnaryOp::Reciprocal => (11, 0.0, 0.0),
            UnaryOp::Clip { min, max } => (12, min, max),
            UnaryOp::Neg => (13, 0.0, 0.0),
            UnaryOp::Abs => (14, 0.0, 0.0),
            UnaryOp::Log => (15, 0.0, 0.0),
            UnaryOp::Elu { alpha } => (16, alpha, 0.0),
            UnaryOp::Softplus => (17, 0.0, 0.0),
            UnaryOp::Floor => (18, 0.0, 0.0),
            UnaryOp::Ceil => (19, 0.0, 0.0),
            UnaryOp::Identity => (20, 0.0, 0.0),
            UnaryOp::Silu => (21, 0.0, 0.0),
            UnaryOp::Sin => (22, 0.0, 0.0),
            UnaryOp::Cos => (23, 0.0, 0.0),
            UnaryOp::IsNaN => (24, 0.0, 0.0),
        }
    }
}

/// Numpy broadcast of two shapes (the one rule in `tensor_shape`, shared with the IR's shape
/// inference); error names both shapes.
pub fn broadcast_shape(a: &[usize], b: &[usize]) -> Result<Vec<usize>> {
    tensor_shape::broadcast(a, b).map_err(|_| VkError::BadShape {
        shape: a.to_vec(),
        reason: format!("cannot broadcast with {b:?}"),
    })
}

fn broadcast_mask(operand: &[usize], out: &[usize]) -> Result<u32> {
    let (o, d) = (dims6(out)?, dims6(operand)?);
    let mut m = 0;
    for k in 0..6 {
        if d[k] != o[k] {
            if d[k] != 1 {
                return Err(VkError::BadShape {
                    shape: operand.to_vec(),
                    reason: format!("does not broadcast to output shape {out:?}"),
                });
            }
            m |= 1 << k;
        }
    }
    Ok(m)
}

/// Records `out = op(a, b)`; `out` must have the broadcast shape of `a` and `b`.
pub fn binary_into(
    rec: &mut Recorder,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
) -> Result<()> {
    let expect = broadcast_shape(a.shape(), b.shape())?;
    if dims6(&expect)? != dims6(out.shape())? {
        return Err(VkError::Kernel {
            kernel: "binary".into(),
            reason: format!(
                "output `{}` has shape {:?}, broadcast of {:?} and {:?} is {expect:?}",
                out.name(),
                out.shape(),
                a.shape(),
                b.shape()
            ),
        });
    }
    let o6 = dims6(out.shape())?;
    let ma = broadcast_mask(a.shape(), out.shape())?;
    let mb = broadcast_mask(b.shape(), out.shape())?;
    let same = ma == 0 && mb == 0 && a.layout() == out.layout() && b.layout() == out.layout();
    let masks = ma | (mb << 8) | if same { 1 << 16 } else { 0 };
    let pc = PushConstants::new()
        .tensor(out.desc())
        .tensor(a.desc())
        .tensor(b.desc())
        .u32(op.code())
        .u32(o6[1] as u32)
        .u32(o6[2] as u32)
        .u32(masks);
    launch_per_texel(
        rec,
        &BINARY,
        out,
        &[Arg::input(a), Arg::input(b), Arg::output(out)],
        &pc,
    )
}

/// Allocates the output (broadcast shape, precision of `a`) and records `op(a, b)`.
pub fn binary(
    rec: &mut Recorder,
    op: BinaryOp,
    a: &Tensor,
    b: &Tensor,
    name: &str,
) -> Result<Tensor> {
    let shape = broadcast_shape(a.shape(), b.shape())?;
    let out = Tensor::new(rec.device(), name, &shape, a.precision())?;
    binary_into(rec, op, a, b, &out)?;
    Ok(out)
}

/// Records `out = op(x)`; `out` must have the shape of `x` (may be `x` itself only for Identity-free use: pass a distinct tensor).
pub fn unary_into(rec: &mut Recorder, op: UnaryOp, x: &Tensor, out: &Tensor) -> Result<()> {
    if x.layout() != out.layout() {
        return Err(VkError::Kernel {
            kernel: "unary".into(),
            reason: format!(
                "output `{}` {:?} differs in shape from input `{}` {:?}",
                out.name(),
                out.shape(),
                x.name(),
                x.shape()
            ),
        });
    }
    let (code, alpha, beta) = op.code();
    let pc = PushConstants::new()
        .tensor(out.desc())
        .u32(code)
        .f32(alpha)
        .f32(beta)
        .pad_to(12);
    launch_per_texel(rec, &UNARY, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output and records `op(x)`.
pub fn unary(rec: &mut Recorder, op: UnaryOp, x: &Tensor, name: &str) -> Result<Tensor> {
    let out = Tensor::new(rec.device(), name, x.shape(), x.precision())?;
    unary_into(rec, op, x, &out)?;
    Ok(out)
}

/// Records `out texel i = fetch_weight(texel_offset + i)` (needs `rec.use_weights(..)`).
pub fn weight_copy_into(rec: &mut Recorder, texel_offset: u32, out: &Tensor) -> Result<()> {
    let pc = PushConstants::new()
        .tensor(out.desc())
        .u32(texel_offset)
        .pad_to(12);
    launch_per_texel(rec, &WEIGHT_COPY, out, &[Arg::output(out)], &pc)
}
