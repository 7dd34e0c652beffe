//! Where and comparison / logical ops with numpy broadcasting; booleans are 0.0 / 1.0 floats.
//! Shader: `select.comp`. Trilu (a selection by position) is `trilu.comp`.

use crate::error::{Result, VkError};
use crate::kernels::elementwise::broadcast_shape;
use crate::kernels::launch::{alloc_like, launch_per_texel, params_buffer};
use crate::kernels::push::PushConstants;
use crate::layout::dims6;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Access, Arg, Recorder};
use crate::tensor::Tensor;

const SELECT: KernelDesc = KernelDesc {
    name: "select",
    bindings: &[
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageBuffer,
    ],
    push_constant_bytes: 128,
    uses_weights: false,
};

/// Comparison and logical ops (inputs nonzero = true for the logical ones).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    Equal,
    Less,
    Greater,
    LessOrEqual,
    GreaterOrEqual,
    And,
    Or,
    Xor,
}

impl CompareOp {
    fn code(self) -> u32 {
        match self {
            CompareOp::Equal => 1,
            CompareOp::Less => 2,
            CompareOp::Greater => 3,
            CompareOp::LessOrEqual => 4,
            CompareOp::GreaterOrEqual => 5,
            CompareOp::And => 6,
            CompareOp::Or => 7,
            CompareOp::Xor => 8,
        }
    }
}

fn mask(kernel: &str, operand: &Tensor, out6: &[usize; 6]) -> Result<u32> {
    let d = dims6(operand.shape())?;
    let mut m = 0;
    for k in 0..6 {
        if d[k] != out6[k] {
            if d[k] != 1 {
                return Err(VkError::Kernel {
                    kernel: kernel.into(),
                    reason: format!(
                        "`{}` {:?} does not broadcast to the output",
                        operand.name(),
                        operand.shape()
                    ),
                });
            }
            m |= 1 << k;
        }
    }
    Ok(m)
}

fn record(
    rec: &mut Recorder,
    kernel: &str,
    op: u32,
    ops: [&Tensor; 3],
    out: &Tensor,
) -> Result<()> {
    let mut shape = broadcast_shape(ops[0].shape(), ops[1].shape())?;
    if op == 0 {
        shape = broadcast_shape(&shape, ops[2].shape())?;
    }
    if dims6(out.shape())? != dims6(&shape)? {
        return Err(VkError::Kernel {
            kernel: kernel.into(),
            reason: format!(
                "output `{}` has shape {:?}, the broadcast shape is {shape:?}",
                out.name(),
                out.shape()
            ),
        });
    }
    let o6 = dims6(&shape)?;
    let masks = mask(kernel, ops[0], &o6)?
        | (mask(kernel, ops[1], &o6)? << 8)
        | (mask(kernel, ops[2], &o6)? << 16);
    let params = params_buffer(
        rec,
        "select params",
        &[op, o6[1] as u32, o6[2] as u32, masks],
    )?;
    let pc = PushConstants::new()
        .tensor(out.desc())
        .tensor(ops[0].desc())
        .tensor(ops[1].desc())
        .tensor(ops[2].desc());
    let args = [
        Arg::input(ops[0]),
        Arg::input(ops[1]),
        Arg::input(ops[2]),
        Arg::output(out),
        Arg::buffer(&params, Access::Read),
    ];
    launch_per_texel(rec, &SELECT, out, &args, &pc)
}

/// Records `out = cond != 0 ? x : y` (numpy broadcasting of all three).
pub fn where_into(
    rec: &mut Recorder,
    cond: &Tensor,
    x: &Tensor,
    y: &Tensor,
    out: &Tensor,
) -> Result<()> {
    record(rec, "where", 0, [cond, x, y], out)
}

/// Allocates the output (broadcast shape, precision of `x`) and records Where.
pub fn where_select(
    rec: &mut Recorder,
    cond: &Tensor,
    x: &Tensor,
    y: &Tensor,
    name: &str,
) -> Result<Tensor> {
    let shape = broadcast_shape(&broadcast_shape(cond.shape(), x.shape())?, y.shape())?;
    let out = alloc_like(rec, x, name, &shape)?;
    where_into(rec, cond, x, y, &out)?;
    Ok(out)
}

/// Records `out = op(a, b)` as 0.0 / 1.0 (numpy broadcasting).
pub fn compare_into(
    rec: &mut Recorder,
    op: CompareOp,
    a: &Tensor,
    b: &Tensor,
    out: &Tensor,
) -> Result<()> {
    record(rec, "compare", op.code(), [a, b, b], out)
}

/// Allocates the output and records a comparison.
pub fn compare(
    rec: &mut Recorder,
    op: CompareOp,
    a: &Tensor,
    b: &Tensor,
    name: &str,
) -> Result<Tensor> {
    let shape = broadcast_shape(a.shape(), b.shape())?;
    let out = alloc_like(rec, a, name, &shape)?;
    compare_into(rec, op, a, b, &out)?;
    Ok(out)
}

const TRILU: KernelDesc = KernelDesc {
    name: "trilu",
    bindings: crate::kernels::launch::IMAGES_2,
    push_constant_bytes: 72,
    uses_weights: false,
};

/// Records ONNX Trilu: `x` on the kept side of diagonal `k` of its last two axes, zero elsewhere
/// (`upper`: Triu keeps `col - row >= k`, else Tril keeps `col - row <= k`).
pub fn trilu_into(rec: &mut Recorder, x: &Tensor, k: i64, upper: bool, out: &Tensor) -> Result<()> {
    let bad = |reason: String| VkError::Kernel {
        kernel: "trilu".into(),
        reason,
    };
    if x.shape().len() < 2 || out.shape() != x.shape() {
        return Err(bad(format!(
            "input {:?} (rank >= 2) and output {:?} must share a shape",
            x.shape(),
            out.shape()
        )));
    }
    // Diagonals beyond the matrix act like the nearest one past its edge.
    let limit = x.shape().iter().rev().take(2).sum::<usize>() as i64;
    let k = k.clamp(-limit, limit) as i32;
    let pc = PushConstants::new()
        .tensor(out.desc())
        .tensor(x.desc())
        .i32(k)
        .u32(u32::from(upper));
    launch_per_texel(rec, &TRILU, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output and records Trilu.
pub fn trilu(rec: &mut Recorder, x: &Tensor, k: i64, upper: bool, name: &str) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, x.shape())?;
    trilu_into(rec, x, k, upper, &out)?;
    Ok(out)
}
