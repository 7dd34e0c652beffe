//! Head splits read in place. Exporters split a projection's output `[N, S, C * D]` into heads
//! with `Reshape` to `[N, S, C, D]` and `Transpose(0, 2, 1, 3)` to `[N, C, S, D]`: two copies for
//! each of a layer's queries, keys and values (in a decoder's step, six of its dispatches a
//! layer). Where every reader of the heads is a RoPE (input 0) or a cache write (the new rows),
//! those kernels read the projection's rows directly (`split_heads`) and the two copies go. The
//! same holds for attention's queries, keys and values (`attention_split_heads`): an encoder
//! layer's three head splits (the keys' as `Transpose(0, 2, 3, 1)` to `[N, C, D, S]` where the
//! exporter transposes them for the product, or the dynamo exporter's `Reshape`, `Transpose(0, 2,
//! 1)`, `Reshape` after the split) go, and the kernel reads the rows. The store-side
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
) -> Option<(TensorId, usize, Vec<usize>)> {
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
    fits.then_some((rows, d, vec![ti, ri]))
}

/// The same for keys the dynamo exporter transposes for the product in three more steps:
/// heads `[1, C, S, D]` (the split above), a Reshape to `[C, S, D]`, `Transpose(0, 2, 1)` and
/// a Reshape to `[1, C, D, S]` (`keys`), each read only by the next and `keys` by `reader`.
fn dynamo_key_source(
    g: &Graph,
    rw: &Rewrite,
    keys: TensorId,
    reader: usize,
) -> Option<(TensorId, usize, Vec<usize>)> {
    let only = |t: TensorId, ni: usize| rw.sole_consumer(g, t) == Some(ni) && !rw.is_removed(ni);
    let r2 = rw.producers[keys]?;
    let flat_t = g.nodes[r2].input(0)?;
    let t2 = rw.producers[flat_t]?;
    let flat = g.nodes[t2].input(0)?;
    let r1 = rw.producers[flat]?;
    let heads = g.nodes[r1].input(0)?;
    let is_reshape = |ni: usize| matches!(g.nodes[ni].op, Op::Reshape { .. });
    let swaps_last_two = g.nodes[t2].op
        == Op::Transpose {
            perm: vec![0, 2, 1],
            read_as: None,
        };
    if !is_reshape(r2)
        || !is_reshape(r1)
        || !swaps_last_two
        || !only(keys, reader)
        || !only(flat_t, r2)
        || !only(flat, t2)
        || !only(heads, r1)
    {
        return None;
    }
    let &[1, c, s, d] = g.tensors[heads].shape.as_slice() else {
        return None;
    };
    let shapes_fit = g.tensors[flat].shape == [c, s, d]
        && g.tensors[flat_t].shape == [c, d, s]
        && g.tensors[keys].shape == [1, c, d, s];
    if !shapes_fit {
        return None;
    }
    let (rows, d, mut nodes) = head_split_source(g, rw, heads, r1, &[0, 2, 1, 3])?;
    nodes.extend([r1, t2, r2]);
    Some((rows, d, nodes))
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
        let found = head_split_source(g, rw, heads, ai, perm).or_else(|| {
            (slot == 1 && !key_rows)
                .then(|| dynamo_key_source(g, rw, heads, ai))
                .flatten()
        });
        let Some((rows, d, nodes)) = found else {
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
        for ni in nodes {
            rw.remove(ni);
        }
        moved += 1;
    }
    moved
}
