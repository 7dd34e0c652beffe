//! Rotary position embedding as one kernel. Llama-family exporters write RoPE's "rotate half"
//! form as `x * cos + Concat(-x[.., D/2:], x[.., :D/2]) * sin`: two Slices, a Neg, a Concat, two
//! Muls and an Add, seven dispatches per query and per key in every layer. The pass turns the
//! chain into one `Op::Rope { x, cos, sin }` where the shapes fit the kernel
//! ([`crate::ir::infer::rope_shapes_fit`]) and every intermediate has that one reader.
use super::{rewrite_each, Rewrite};
use crate::ir::infer::rope_shapes_fit;
use crate::ir::{BinaryOp, Graph, Op, TensorId, UnaryOp};

/// Fuses every rotate-half RoPE chain; returns how many.
pub fn fuse_rope(g: &mut Graph) -> usize {
    rewrite_each(g, rope_at)
}

/// Whether Slice node `si` takes `[lo, hi)` of the last axis of `x` and all of every other.
fn half_slice(g: &Graph, si: usize, x: TensorId, lo: usize, hi: usize) -> bool {
    let n = &g.nodes[si];
    let Op::Slice {
        starts,
        ends,
        steps,
    } = &n.op
    else {
        return false;
    };
    let shape = &g.tensors[x].shape;
    let r = shape.len();
    n.input(0) == Some(x)
        && starts.len() == r
        && ends.len() == r
        && steps.iter().all(|&s| s == 1)
        && (0..r).all(|k| {
            let (want_lo, want_hi) = if k + 1 == r { (lo, hi) } else { (0, shape[k]) };
            starts[k] == want_lo as i64 && ends[k] == want_hi as i64
        })
}

/// `Some((x, [the Slice, Neg and Concat nodes]))` when `r` is `Concat(Neg(x[.., D/2:]), x[.., :D/2])`.
fn rotate_half(g: &Graph, rw: &Rewrite, r: TensorId) -> Option<(TensorId, [usize; 4])> {
    let ci = rw.producers[r]?;
    let cn = &g.nodes[ci];
    let rank = g.tensors[r].shape.len();
    if cn.op
        != (Op::Concat {
            axis: rank.checked_sub(1)?,
        })
        || cn.inputs.len() != 2
    {
        return None;
    }
    let (neg, low) = (cn.input(0)?, cn.input(1)?);
    let ni = rw.producers[neg]?;
    if g.nodes[ni].op != Op::Unary(UnaryOp::Neg) {
        return None;
    }
    let hi_i = g.nodes[ni].input(0).and_then(|t| rw.producers[t])?;
    let lo_i = rw.producers[low]?;
    let x = g.nodes[lo_i].input(0)?;
    let d = *g.tensors[x].shape.last()?;
    if !d.is_multiple_of(2)
        || !half_slice(g, lo_i, x, 0, d / 2)
        || !half_slice(g, hi_i, x, d / 2, d)
    {
        return None;
    }
    let singles = [(low, ci), (g.nodes[hi_i].outputs[0], ni), (neg, ci)];
    singles
        .iter()
        .all(|&(t, c)| rw.sole_consumer(g, t) == Some(c))
        .then_some((x, [lo_i, hi_i, ni, ci]))
}

fn rope_at(g: &mut Graph, rw: &mut Rewrite, ai: usize) -> Option<()> {
    if rw.is_removed(ai) || g.nodes[ai].op != Op::Binary(BinaryOp::Add) {
        return None;
    }
    let (p, q) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    let mul = |t: TensorId| {
        rw.producers[t].filter(|&m| {
            g.nodes[m].op == Op::Binary(BinaryOp::Mul) && rw.sole_consumer(g, t) == Some(ai)
        })
    };
    let (pa, pb) = (mul(p)?, mul(q)?);
    // One Mul reads the rotated half (times sin), the other x itself (times cos).
    for (mx, mr) in [(pa, pb), (pb, pa)] {
        let (r0, r1) = (g.nodes[mr].input(0)?, g.nodes[mr].input(1)?);
        let found = rotate_half(g, rw, r0)
            .map(|f| (f, r1))
            .or_else(|| rotate_half(g, rw, r1).map(|f| (f, r0)));
        let Some(((x, chain), sin)) = found else {
            continue;
        };
        let (c0, c1) = (g.nodes[mx].input(0)?, g.nodes[mx].input(1)?);
        let cos = match (c0 == x, c1 == x) {
            (true, false) => c1,
            (false, true) => c0,
            _ => continue,
        };
        let xs = &g.tensors[x].shape;
        if !rope_shapes_fit(xs, &g.tensors[cos].shape)
            || !rope_shapes_fit(xs, &g.tensors[sin].shape)
            || g.tensors[x].dtype != g.tensors[g.nodes[ai].outputs[0]].dtype
        {
            return None;
        }
        for k in chain.into_iter().chain([mx, mr]) {
            rw.remove(k);
        }
        let n = &mut g.nodes[ai];
        n.op = Op::Rope { split_heads: false };
        n.inputs = vec![Some(x), Some(cos), Some(sin)];
        return Some(());
    }
    None
}
