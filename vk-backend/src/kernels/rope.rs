//! Rotary position embedding in the "rotate half" form: `x * cos + rotate_half(x) * sin` over
//! the last axis of `x` `[N, C, S, D]` (C the heads, four to a texel), with `cos` and `sin`
//! `[1, 1, S, D]` shared by every head and batch (leading 1s may be left out). Shader:
//! `rope.comp`, one invocation per output texel.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_per_texel};
use crate::kernels::push::PushConstants;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const ROPE: KernelDesc = KernelDesc {
    name: "rope",
    bindings: &[BindingKind::StorageImage; 4],
    push_constant_bytes: 100,
    uses_weights: false,
};

fn err(reason: String) -> crate::error::VkError {
    kerr("rope", reason)
}

/// Records `out = x * cos + rotate_half(x) * sin`; `out` has `x`'s shape.
pub fn rope_into(
    rec: &mut Recorder,
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    out: &Tensor,
) -> Result<()> {
    let xs = x.shape();
    if xs.len() != 4 || !xs[3].is_multiple_of(2) {
        return Err(err(format!(
            "x `{}` {xs:?}: needs [N, C, S, D] with D even",
            x.name()
        )));
    }
    if out.layout() != x.layout() {
        return Err(err(format!(
            "output `{}` {:?} differs in shape from x {xs:?}",
            out.name(),
            out.shape()
        )));
    }
    for t in [cos, sin] {
        let s = t.shape();
        let tail_ok = s.len() >= 2 && s[s.len() - 2..] == xs[2..];
        if !tail_ok || s.len() > 4 || s[..s.len() - 2].iter().any(|&d| d != 1) {
            return Err(err(format!(
                "`{}` {s:?} is not [1, 1, S, D] for x {xs:?}",
                t.name()
            )));
        }
    }
    let pc = PushConstants::new()
        .tensor(x.desc())
        .tensor(cos.desc())
        .tensor(sin.desc())
        .u32((xs[3] / 2) as u32);
    let args = [
        Arg::input(x),
        Arg::input(cos),
        Arg::input(sin),
        Arg::output(out),
    ];
    launch_per_texel(rec, &ROPE, out, &args, &pc)
}
