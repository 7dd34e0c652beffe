//! The exporters' head split of a projection's rows, `[1, S, H * D]` into `[1, H, S, D]` (a
//! Reshape to `[1, S, H, D]` and a `Transpose(0, 2, 1, 3)`), as one copy
//! (`heads_from_rows.comp`): each texel written gathers its four heads from four texels of a
//! row. Attention's operands copied into heads before the kernel take it.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_unfolded, unfolded, IMAGES_2};
use crate::kernels::push::PushConstants;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const HEADS_FROM_ROWS: KernelDesc = KernelDesc {
    name: "heads_from_rows",
    bindings: IMAGES_2,
    push_constant_bytes: 64,
    uses_weights: false,
};

/// Records the head split of `rows` (`[1, S, H * D]`) into `heads` (`[1, H, S, D]`, same
/// precision).
pub fn heads_from_rows_into(rec: &mut Recorder, rows: &Tensor, heads: &Tensor) -> Result<()> {
    let fail = |reason: String| Err(kerr("heads_from_rows", reason));
    let (&[1, s, width], &[1, h, s2, d]) = (rows.shape(), heads.shape()) else {
        return fail(format!(
            "rows `{}` {:?} and heads `{}` {:?} are not [1, S, H * D] and [1, H, S, D]",
            rows.name(),
            rows.shape(),
            heads.name(),
            heads.shape()
        ));
    };
    if s != s2 || h * d != width || rows.precision() != heads.precision() {
        return fail(format!(
            "heads `{}` {:?} {:?} do not split rows `{}` {:?} {:?}",
            heads.name(),
            heads.shape(),
            heads.precision(),
            rows.name(),
            rows.shape(),
            rows.precision()
        ));
    }
    let pc = PushConstants::new()
        .tensor(heads.desc())
        .tensor(rows.desc());
    let groups = [
        d.div_ceil(64) as u32,
        s.div_ceil(4) as u32,
        h.div_ceil(4) as u32,
    ];
    let args = [Arg::input(rows), Arg::output(heads)];
    let flat = unfolded(&[rows]);
    launch_unfolded(
        rec,
        &HEADS_FROM_ROWS,
        heads.precision(),
        &args,
        &pc,
        groups,
        flat,
    )
}
