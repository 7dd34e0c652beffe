//! Residual norms: a transformer block ends with `s = x + r` and the next block starts with a
//! norm of `s`, which the block's own residual Add reads again later. The Add becomes part of
//! the norm (`Op::LayerNorm { residual: true }`: inputs X, scale, bias, R; outputs Y, S), one
//! dispatch instead of two and one pass over `s` fewer; the kernel writes `s` as it normalizes.
use super::{rewrite_each, Rewrite};
use crate::ir::{BinaryOp, Graph, Op};

/// Fuses each `LayerNorm(Add(x, r))` (LayerNorm or RMSNorm) whose Add adds two activations of
/// the norm's shape, or an activation and a constant of its shape (leading 1s aside); returns
/// how many. The sum keeps its tensor, now the norm's second output,
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
    let (mut x, mut r) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    // A constant addend (an encoder's positional embedding before its first norm) is read as
    // the residual, packed as an activation like any constant a kernel reads as a tensor, at the
    // sum's shape where it lacks only leading 1s (Whisper's [1500, 384] for [1, 1500, 384]);
    // the other operand must be a run-time one (the sum is the same either way).
    if g.constants.contains_key(&x) {
        std::mem::swap(&mut x, &mut r);
    }
    let info = &g.tensors[s];
    let same = |t: usize| g.tensors[t].shape == info.shape && g.tensors[t].dtype == info.dtype;
    let constant = g.constants.get(&r);
    let widen = constant.is_some_and(|c| {
        let lead = info.shape.len().saturating_sub(c.shape.len());
        c.shape.len() < info.shape.len()
            && info.shape[lead..] == c.shape[..]
            && info.shape[..lead].iter().all(|&d| d == 1)
            && c.dtype == info.dtype
    });
    if !info.dtype.is_float() || g.constants.contains_key(&x) || !same(x) || !(same(r) || widen) {
        return None;
    }
    // The sum is written by the norm from now on: no other reader may come before it.
    if rw.consumers[s].iter().any(|&c| c < ni) {
        return None;
    }
    rw.remove(ai);
    if widen {
        let mut data = g.constants[&r].clone();
        data.shape = g.tensors[s].shape.clone();
        let name = format!("{} (as {:?})", g.tensors[r].name, data.shape);
        r = g.add_constant(name, data);
    }
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
