//! Residual norms: a transformer block ends with `s = x + r` and the next block starts with a
//! norm of `s`, which the block's own residual Add reads again later. The Add becomes part of
//! the norm (`Op::LayerNorm { residual: true }`: inputs X, scale, bias, R; outputs Y, S), one
//! dispatch instead of two and one pass over `s` fewer; the kernel writes `s` as it normalizes.
use super::{rewrite_each, Rewrite};
use crate::ir::{BinaryOp, Graph, Op};

/// Fuses each `LayerNorm(Add(x, r))` (LayerNorm or RMSNorm) whose Add adds two activations of
/// the norm's shape; returns how many. The sum keeps its tensor, now the norm's second output,
/// so every later reader of it must come after the norm (the block's residual Add does).
pub fn fuse_residual_norms(g: &mut Graph) -> usize {
    rewrite_each(g, residual_norm_at)
}

fn residual_norm_at(g: &mut Graph, rw: &mut Rewrite, ni: usize) -> Option<()> {
    let Op::LayerNorm {
        residual: false, ..
    } = g.nodes[ni].op
    else {
        return None;
    };
    let s = g.nodes[ni].input(0)?;
    let ai = rw.producers[s]?;
    if rw.is_removed(ai) || g.nodes[ai].op != Op::Binary(BinaryOp::Add) {
        return None;
    }
    let (x, r) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    let info = &g.tensors[s];
    let same = |t: usize| {
        !g.constants.contains_key(&t)
            && g.tensors[t].shape == info.shape
            && g.tensors[t].dtype == info.dtype
    };
    if !info.dtype.is_float() || !same(x) || !same(r) {
        return None;
    }
    // The sum is written by the norm from now on: no other reader may come before it.
    if rw.consumers[s].iter().any(|&c| c < ni) {
        return None;
    }
    rw.remove(ai);
    let n = &mut g.nodes[ni];
    if let Op::LayerNorm { residual, .. } = &mut n.op {
        *residual = true;
    }
    n.inputs.resize(3, None);
    n.inputs[0] = Some(x);
    n.inputs.push(Some(r));
    n.outputs.push(s);
    Some(())
}
