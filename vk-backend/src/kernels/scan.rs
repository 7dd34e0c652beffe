//! CumSum (ONNX prefix sums along one axis). Shader: `cumsum.comp`.

use crate::error::Result;
use crate::kernels::launch::{alloc_like, kerr, launch_per_texel, normalize_axes, IMAGES_2};
use crate::kernels::push::PushConstants;
use crate::layout::dims6;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const CUMSUM: KernelDesc = KernelDesc {
    name: "cumsum",
    bindings: IMAGES_2,
    push_constant_bytes: 96,
    uses_weights: false,
};

/// ONNX CumSum's `exclusive` and `reverse` attributes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CumSumParams {
    pub exclusive: bool,
    pub reverse: bool,
}

/// Records CumSum of `x` along `axis` (negative counts from the end) into `out` (x's shape).
pub fn cumsum_into(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    p: CumSumParams,
    out: &Tensor,
) -> Result<()> {
    let r = x.shape().len();
    let a = normalize_axes("cumsum", &[axis], r)?[0];
    if out.shape() != x.shape() {
        return Err(kerr(
            "cumsum",
            format!(
                "output `{}` has shape {:?}, expected {:?}",
                out.name(),
                out.shape(),
                x.shape()
            ),
        ));
    }
    let d6 = dims6(x.shape())?;
    let mut pc = PushConstants::new().tensor(out.desc()).tensor(x.desc());
    for d in d6 {
        pc = pc.u32(d as u32);
    }
    let flags = u32::from(p.exclusive) | (u32::from(p.reverse) << 1);
    let pc = pc.u32((6 - r + a) as u32).u32(flags);
    launch_per_texel(rec, &CUMSUM, out, &[Arg::input(x), Arg::output(out)], &pc)
}

/// Allocates the output and records CumSum.
pub fn cumsum(
    rec: &mut Recorder,
    x: &Tensor,
    axis: i64,
    p: CumSumParams,
    name: &str,
) -> Result<Tensor> {
    let out = alloc_like(rec, x, name, x.shape())?;
    cumsum_into(rec, x, axis, p, &out)?;
    Ok(out)
}
