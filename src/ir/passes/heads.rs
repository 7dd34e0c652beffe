//! Head splits read in place. Exporters split a projection's output `[N, S, C * D]` into heads
//! with `Reshape` to `[N, S, C, D]` and `Transpose(0, 2, 1, 3)` to `[N, C, S, D]`: two copies for
//! each of a layer's queries, keys and values (in a decoder's step, six of its dispatches a
//! layer). Where every reader of the heads is a RoPE (input 0) or a cache write (the new rows),
//! those kernels read the projection's rows directly (`split_heads`) and the two copies go. The
//! store-side counterpart is `attention::merge_heads`.
use super::{rewrite_each, Rewrite};
use crate::ir::infer::split_heads_shape;
use crate::ir::{Graph, Op};

/// Moves every head split whose readers can take the rows into those readers; returns how many.
pub fn split_heads(g: &mut Graph) -> usize {
    rewrite_each(g, split_heads_at)
}

fn split_heads_at(g: &mut Graph, rw: &mut Rewrite, ti: usize) -> Option<()> {
    if rw.is_removed(ti)
        || g.nodes[ti].op
            != (Op::Transpose {
                perm: vec![0, 2, 1, 3],
                read_as: None,
            })
    {
        return None;
    }
    let split = g.nodes[ti].input(0)?;
    let heads = g.nodes[ti].outputs[0];
    let ri = rw.producers[split]?;
    if !matches!(g.nodes[ri].op, Op::Reshape { .. })
        || rw.is_removed(ri)
        || rw.sole_consumer(g, split) != Some(ti)
        || g.is_output(heads)
    {
        return None;
    }
    let rows = g.nodes[ri].input(0)?;
    let (rs, hs) = (&g.tensors[rows].shape, &g.tensors[heads].shape);
    let d = *hs.last()?;
    if split_heads_shape(rs, d).as_ref() != Some(hs)
        || g.tensors[rows].dtype != g.tensors[heads].dtype
        || g.is_const(rows)
    {
        return None;
    }
    let readers = &rw.consumers[heads];
    if readers.is_empty() {
        return None;
    }
    // Every reader takes the heads where the kernel can read rows instead, and nowhere else.
    let takes_rows = |ci: usize| {
        let n = &g.nodes[ci];
        let slot = match n.op {
            Op::Rope { split_heads: false } => 0,
            Op::KvWrite {
                axis: 2,
                split_heads: false,
            } => 1,
            _ => return false,
        };
        !rw.is_removed(ci)
            && n.inputs
                .iter()
                .enumerate()
                .all(|(k, t)| (*t == Some(heads)) == (k == slot))
    };
    if !readers.iter().all(|&ci| takes_rows(ci)) {
        return None;
    }
    for ci in readers.clone() {
        let n = &mut g.nodes[ci];
        if let Op::Rope { split_heads } | Op::KvWrite { split_heads, .. } = &mut n.op {
            *split_heads = true;
        }
        for t in n.inputs.iter_mut().flatten() {
            if *t == heads {
                *t = rows;
            }
        }
    }
    rw.remove(ti);
    rw.remove(ri);
    Some(())
}
