//! Head splits read in place. Exporters split a projection's output `[N, S, C * D]` into heads
//! with `Reshape` to `[N, S, C, D]` and `Transpose(0, 2, 1, 3)` to `[N, C, S, D]`: two copies for
//! each of a layer's queries, keys and values (in a decoder's step, six of its dispatches a
//! layer). Where every reader of the heads is a RoPE (input 0) or a cache write (the new rows),
//! those kernels read the projection's rows directly (`split_heads`) and the two copies go. The
//! same holds for attention's queries, keys and values (`attention_split_heads`): an encoder
//! layer's three head splits (the keys' as `Transpose(0, 2, 3, 1)` to `[N, C, D, S]` where the
//! exporter transposes them for the product) go, and the kernel reads the rows. The store-side
//! counterpart is `attention::merge_heads`.
use super::{rewrite_each, Rewrite};
use crate::ir::infer::split_heads_shape;
use crate::ir::{Graph, Op, TensorId};

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

/// Moves every head split whose only reader is attention (as Q, K or V) into the attention's
/// load; returns how many operands it moved.
pub fn attention_split_heads(g: &mut Graph) -> usize {
    let mut count = 0;
    rewrite_each(g, |g, rw, ai| {
        let moved = attention_split_at(g, rw, ai);
        count += moved;
        (moved > 0).then_some(())
    });
    count
}

/// The projection's rows `[1, S, C * D]` under `heads`, when `heads` is their head split
/// (Reshape to `[1, S, C, D]`, then Transpose by `perm`) made for node `reader` alone: the rows,
/// `D`, and the Transpose and Reshape nodes.
fn head_split_source(
    g: &Graph,
    rw: &Rewrite,
    heads: TensorId,
    reader: usize,
    perm: &[usize],
) -> Option<(TensorId, usize, usize, usize)> {
    let ti = rw.producers[heads]?;
    let Op::Transpose {
        perm: p,
        read_as: None,
    } = &g.nodes[ti].op
    else {
        return None;
    };
    let split = g.nodes[ti].input(0)?;
    let ri = rw.producers[split]?;
    if p != perm
        || rw.is_removed(ti)
        || rw.is_removed(ri)
        || !matches!(g.nodes[ri].op, Op::Reshape { .. })
        || rw.sole_consumer(g, split) != Some(ti)
        || rw.sole_consumer(g, heads) != Some(reader)
    {
        return None;
    }
    let rows = g.nodes[ri].input(0)?;
    let ss = &g.tensors[split].shape;
    let d = *ss.last()?;
    let as_heads = split_heads_shape(&g.tensors[rows].shape, d)?;
    let transposed: Option<Vec<usize>> = perm.iter().map(|&a| ss.get(a).copied()).collect();
    let fits = g.tensors[rows].shape.first() == Some(&1)
        && ss.len() == 4
        && as_heads == [ss[0], ss[2], ss[1], ss[3]]
        && transposed.as_ref() == Some(&g.tensors[heads].shape)
        && g.tensors[rows].dtype == g.tensors[heads].dtype
        && !g.is_const(rows);
    fits.then_some((rows, d, ti, ri))
}

fn attention_split_at(g: &mut Graph, rw: &mut Rewrite, ai: usize) -> usize {
    let Op::Attention { key_rows, .. } = g.nodes[ai].op else {
        return 0;
    };
    if rw.is_removed(ai) {
        return 0;
    }
    let mut moved = 0;
    for slot in 0..3 {
        let Some(heads) = g.nodes[ai].input(slot) else {
            continue;
        };
        // The operand is read in this slot only.
        if g.nodes[ai]
            .inputs
            .iter()
            .filter(|t| **t == Some(heads))
            .count()
            != 1
        {
            continue;
        }
        // Keys transposed for the product ([1, C, D, S]) are read by rows once split.
        let perm: &[usize] = if slot == 1 && !key_rows {
            &[0, 2, 3, 1]
        } else {
            &[0, 2, 1, 3]
        };
        let Some((rows, d, ti, ri)) = head_split_source(g, rw, heads, ai, perm) else {
            continue;
        };
        if let Op::Attention {
            key_rows,
            split_heads,
            ..
        } = &mut g.nodes[ai].op
        {
            match slot {
                0 => split_heads.q = Some(d),
                1 => {
                    split_heads.k = Some(d);
                    *key_rows = true;
                }
                _ => split_heads.v = Some(d),
            }
        }
        g.nodes[ai].inputs[slot] = Some(rows);
        rw.remove(ti);
        rw.remove(ri);
        moved += 1;
    }
    moved
}
