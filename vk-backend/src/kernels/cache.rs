//! Cache writes: a decoder's new key/value rows written in place into its cache tensor at a
//! position read on the GPU. Shader: `kv_write.comp`.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch, IMAGES_3};
use crate::kernels::push::{dispatch_1d, PushConstants};
use crate::layout::nchw;
use crate::layout::Precision;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const KV_WRITE: KernelDesc = KernelDesc {
    name: "kv_write",
    bindings: IMAGES_3,
    push_constant_bytes: 104,
    uses_weights: false,
};

/// An fp16 cache written from fp32 rows (`kv_write_kv16`, the fp16-cache build of the shader).
const KV_WRITE_KV16: KernelDesc = KernelDesc {
    name: "kv_write_kv16",
    bindings: &[
        BindingKind::StorageImage,
        BindingKind::StorageImage,
        BindingKind::StorageImageF16,
    ],
    ..KV_WRITE
};

/// Records `cache[.., at + i, ..] = new[.., i, ..]` along `axis` of `cache`, where `at` is the
/// first element of `pos` (read when the kernel runs, so a recorded run serves every position).
/// `new` matches `cache` on every other axis. Rows that would fall past the cache's end are
/// dropped. Only axes that move whole texels are supported: the `[N, C, H, W]` mapping's N, H
/// and W, not its packed C. With `split_heads`, `new` is a projection's rows `[N, S, C * D]`
/// (the heads side by side) written as `[N, C, S, D]` into a cache `[N, C, H, D]` along axis 2:
/// the exporters' head split runs as the write's load. An fp16 `cache` takes fp32 rows too
/// (`kv_write_kv16`: rounded to the nearest fp16 as they are stored).
pub fn kv_write_into(
    rec: &mut Recorder,
    cache: &Tensor,
    new: &Tensor,
    pos: &Tensor,
    axis: usize,
    split_heads: bool,
) -> Result<()> {
    let (cs, given) = (cache.shape(), new.shape());
    let r = cs.len();
    // The new rows as the cache sees them.
    let ns: Vec<usize> = match (split_heads, cs, given) {
        (false, _, _) => given.to_vec(),
        (true, &[_, c, _, d], &[n, s, cd]) if axis == 2 && cd == c * d => vec![n, c, s, d],
        (true, _, _) => {
            return Err(kerr(
                "kv_write",
                format!(
                    "new rows {given:?} are not [N, S, C * D] rows of the heads of cache {cs:?}                      along axis 2 (axis {axis})"
                ),
            ))
        }
    };
    let fits = ns.len() == r
        && axis < r
        && cs
            .iter()
            .zip(&ns)
            .enumerate()
            .all(|(a, (c, n))| if a == axis { n <= c } else { n == c });
    if !fits {
        return Err(kerr(
            "kv_write",
            format!("new rows {given:?} do not fit cache {cs:?} along axis {axis}"),
        ));
    }
    // The axis in the right-aligned [N, C, H, W] view: leading axes fold into N, which works
    // when the cache's axis is the only one of them longer than 1.
    let (cn, nn) = (nchw(cs)?, nchw(&ns)?);
    let mapped = if r <= 4 || axis >= r - 3 {
        axis + 4 - r
    } else {
        0
    };
    if mapped == 1 || (mapped == 0 && cn[0] != cs[axis]) {
        return Err(kerr(
            "kv_write",
            format!(
                "cache {cs:?} grows along axis {axis}, which is not a whole-texel axis (the \
                 last two, or a leading one with all other leading axes 1)"
            ),
        ));
    }
    if cn[1] != nn[1] {
        return Err(kerr(
            "kv_write",
            format!("cache {cs:?} and new rows {given:?} differ"),
        ));
    }
    // One invocation a texel of the new rows in the cache's layout.
    let texels = nn[0] * cn[1].div_ceil(4) * nn[2] * nn[3];
    let pc = PushConstants::new()
        .tensor(new.desc())
        .tensor(pos.desc())
        .tensor(cache.desc())
        .u32(mapped as u32)
        .u32(split_heads as u32);
    let groups = dispatch_1d(rec.device(), texels as u64, 64);
    // An fp16 cache under fp32 activations runs the fp32 kernel that stores half texels.
    let (desc, precision) = match (new.precision(), cache.precision()) {
        (Precision::F32, Precision::F16) => (&KV_WRITE_KV16, Precision::F32),
        (_, p) => (&KV_WRITE, p),
    };
    launch(
        rec,
        desc,
        precision,
        &[Arg::input(new), Arg::input(pos), Arg::output(cache)],
        &pc,
        groups,
    )
}
