//! Lookups: rows of a constant table in the weight space by run-time ids (a vocabulary
//! embedding), read straight from the atlas pages that hold them. Shader: `gather_rows.comp`.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_per_texel, IMAGES_2};
use crate::kernels::push::PushConstants;
use crate::pipeline::KernelDesc;
use crate::recorder::{Arg, Recorder};
use crate::tensor::Tensor;

const GATHER_ROWS: KernelDesc = KernelDesc {
    name: "gather_rows",
    bindings: IMAGES_2,
    push_constant_bytes: 80,
    uses_weights: true,
};

/// A `[rows, width]` table packed by rows at `texel_offset`: `layout::pack_matrix_kn` of its
/// row-major values with `k = rows, n = width` (texel (r/4)*width + x, lane r%4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowTable {
    pub texel_offset: u32,
    pub rows: usize,
    pub width: usize,
}

impl RowTable {
    /// The first texel of row `r` and the texels it spans (the 4-row block holding it).
    pub fn row_texels(&self, r: usize) -> std::ops::Range<u64> {
        let start = self.texel_offset as u64 + (r / 4) as u64 * self.width as u64;
        start..start + self.width as u64
    }
}

/// Records `out[.., x] = table[ids[..], x]` (`out` is `ids.shape() + [width]`; ids wrap when
/// negative and clamp to the table). With `resident_only`, only the elements whose row lies on
/// a page mapped now are written and the others keep their value: a streamed lookup fills its
/// output over several passes, one page at a time. Needs `rec.use_weights(..)` first.
pub fn gather_rows_into(
    rec: &mut Recorder,
    table: RowTable,
    ids: &Tensor,
    out: &Tensor,
    resident_only: bool,
) -> Result<()> {
    let mut want = ids.shape().to_vec();
    want.push(table.width);
    if out.shape() != want.as_slice() {
        return Err(kerr(
            "gather_rows",
            format!(
                "output `{}` has shape {:?}, ids {:?} of a table {}x{} give {want:?}",
                out.name(),
                out.shape(),
                ids.shape(),
                table.rows,
                table.width
            ),
        ));
    }
    if table.rows == 0 || table.width == 0 || table.rows > i32::MAX as usize {
        return Err(kerr(
            "gather_rows",
            format!("table {}x{} is empty or too tall", table.rows, table.width),
        ));
    }
    let pc = PushConstants::new()
        .tensor(ids.desc())
        .tensor(out.desc())
        .u32(table.texel_offset)
        .u32(table.rows as u32)
        .u32(table.width as u32)
        .u32(resident_only as u32);
    let out_arg = if resident_only {
        Arg::inout(out)
    } else {
        Arg::output(out)
    };
    launch_per_texel(rec, &GATHER_ROWS, out, &[Arg::input(ids), out_arg], &pc)
}
