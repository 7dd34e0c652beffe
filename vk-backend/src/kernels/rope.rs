//! Rotary position embedding in the "rotate half" form: `x * cos + rotate_half(x) * sin` over
//! the last axis of `x` `[N, C, S, D]` (C the heads, four to a texel), with `cos` and `sin`
//! `[1, 1, S, D]` shared by every head and batch (leading 1s may be left out); or `x` the
//! projection's rows `[N, S, C * D]` the heads are split from. Shader:
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
    push_constant_bytes: 104,
    uses_weights: false,
};

fn err(reason: String) -> crate::error::VkError {
    kerr("rope", reason)
}

/// Records `out = x * cos + rotate_half(x) * sin`. `out` has `x`'s shape, or with `split_heads`
/// `x` is `[N, S, C * D]` (a projection's rows, the heads side by side) and `out` `[N, C, S, D]`:
/// the head split runs as the kernel's load.
pub fn rope_into(
    rec: &mut Recorder,
    x: &Tensor,
    cos: &Tensor,
    sin: &Tensor,
    out: &Tensor,
    split_heads: bool,
) -> Result<()> {
    let (xs, os) = (x.shape(), out.shape());
    if os.len() != 4 || !os[3].is_multiple_of(2) {
        return Err(err(format!(
            "`{}` {os:?}: needs [N, C, S, D] with D even",
            out.name()
        )));
    }
    let x_fits = if split_heads {
        xs.len() == 3 && xs[0] == os[0] && xs[1] == os[2] && xs[2] == os[1] * os[3]
    } else {
        out.layout() == x.layout()
    };
    if !x_fits {
        let want = if split_heads {
            "[N, S, C * D] rows of"
        } else {
            "the shape of"
        };
        return Err(err(format!(
            "x `{}` {xs:?} is not {want} the output `{}` {os:?}",
            x.name(),
            out.name()
        )));
    }
    for t in [cos, sin] {
        let s = t.shape();
        let tail_ok = s.len() >= 2 && s[s.len() - 2..] == os[2..];
        if !tail_ok || s.len() > 4 || s[..s.len() - 2].iter().any(|&d| d != 1) {
            return Err(err(format!(
                "`{}` {s:?} is not [1, 1, S, D] for x {os:?}",
                t.name()
            )));
        }
    }
    // One descriptor for both tables (the push constants hold four at most): as [1, 1, S, D]
    // both have the same one.
    if cos.desc() != sin.desc() {
        return Err(err(format!(
            "`{}` {:?} and `{}` {:?} are laid out differently",
            cos.name(),
            cos.shape(),
            sin.name(),
            sin.shape()
        )));
    }
    let pc = PushConstants::new()
        .tensor(x.desc())
        .tensor(out.desc())
        .tensor(cos.desc())
        .u32((os[3] / 2) as u32)
        .u32(split_heads as u32);
    let args = [
        Arg::input(x),
        Arg::input(cos),
        Arg::input(sin),
        Arg::output(out),
    ];
    launch_per_texel(rec, &ROPE, out, &args, &pc)
}
