//! ScatterND (indices and updates from tensors). Shader: `scatter_nd.comp`.

use crate::error::Result;
use crate::kernels::launch::{kerr, launch_per_texel, params_buffer};
use crate::kernels::push::PushConstants;
use crate::layout::dims6;
use crate::pipeline::{BindingKind, KernelDesc};
use crate::recorder::{Access, Arg, Recorder};
use crate::tensor::Tensor;

const SCATTER_ND: KernelDesc = KernelDesc {
    name: "scatter_nd",
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

/// How ScatterND combines an update with the value already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScatterReduction {
    /// The update replaces it (repeated indices: the last one wins).
    None,
    Add,
    Mul,
}

/// Records ONNX ScatterND: `out` = `data` with `updates` written at the index tuples of
/// `indices` (last axis = tuple length). Negative indices wrap; out-of-range ones hit nothing.
pub fn scatter_nd_into(
    rec: &mut Recorder,
    data: &Tensor,
    indices: &Tensor,
    updates: &Tensor,
    reduction: ScatterReduction,
    out: &Tensor,
) -> Result<()> {
    let (ds, is, us) = (data.shape(), indices.shape(), updates.shape());
    let k = is.last().copied().unwrap_or(0);
    let mut want = is[..is.len().saturating_sub(1)].to_vec();
    if k <= ds.len() {
        want.extend_from_slice(&ds[k..]);
    }
    if is.is_empty() || k == 0 || k > ds.len() || us != want.as_slice() || out.shape() != ds {
        return Err(kerr(
            "scatter_nd",
            format!(
                "data {ds:?}, indices {is:?}, updates {us:?} and output {:?} do not fit",
                out.shape()
            ),
        ));
    }
    let rows: usize = is[..is.len() - 1].iter().product();
    let inner: usize = ds[k..].iter().product();
    let mut words: Vec<u32> = Vec::with_capacity(23);
    for s in [ds, is, us] {
        words.extend(dims6(s)?.iter().map(|&v| v as u32));
    }
    let code = match reduction {
        ScatterReduction::None => 0,
        ScatterReduction::Add => 1,
        ScatterReduction::Mul => 2,
    };
    words.extend([ds.len(), k, rows, inner].map(|v| v as u32));
    words.push(code);
    let params = params_buffer(rec, "scatter_nd params", &words)?;
    let pc = PushConstants::new()
        .tensor(out.desc())
        .tensor(data.desc())
        .tensor(indices.desc())
        .tensor(updates.desc());
    let args = [
        Arg::input(data),
        Arg::input(indices),
        Arg::input(updates),
        Arg::output(out),
        Arg::buffer(&params, Access::Read),
    ];
    launch_per_texel(rec, &SCATTER_ND, out, &args, &pc)
}
