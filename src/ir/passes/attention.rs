//! Attention fusion: `MatMul(Q, K^T) -> [Mul|Div by a scalar] -> [Add mask] -> Softmax(last) ->
//! [Where(IsNaN(p), 0, p)] -> MatMul(·, V)` becomes one [`Op::Attention`], whose kernel keeps the softmax's running max and
//! sum instead of the `[Sq, Sk]` scores. For a Whisper encoder over 1500 frames that drops the
//! largest activations of the model (two 1500 x 1500 maps per head) from the arena.
//!
//! Only the exact chain fuses: every intermediate has one reader and is no graph output, the
//! operands are run-time float tensors (the mask may be a constant) with equal leading dims, and the head dims fit
//! the kernel. Anything else stays as it was. A query or key operand that is itself a product
//! with a scalar constant read only by the chain joins the scale, also where the product comes
//! before the operand's head split (Whisper's queries: `Mul(q_proj, D^-1/2)`, then `Reshape`
//! and `Transpose`): the split then reads the product's input.
use super::{rewrite_each, scalar, Rewrite};
use crate::ir::infer::{attention_shapes, mask_broadcasts};
use crate::ir::{nchw, Activation, BinaryOp, DType, Graph, Op, ReshapeKind, TensorId, UnaryOp};

/// The kernel's largest head dimension (`vk_backend::kernels::ATTENTION_MAX_HEAD_DIM`).
const MAX_HEAD_DIM: usize = 128;

/// Runs every fused attention whose output only goes through the exporters' head merge,
/// `Transpose(0, 2, 1, 3)` then `Reshape` to `[1, Sq, H * Dv]`, with that store
/// (`merge_heads`): the two copies go (in a decoder's step, two dispatches a layer; in an
/// encoder, two copies of every layer's attention output). Returns how many.
pub fn merge_heads(g: &mut Graph) -> usize {
    rewrite_each(g, merge_heads_at)
}

fn merge_heads_at(g: &mut Graph, rw: &mut Rewrite, ai: usize) -> Option<()> {
    let Op::Attention {
        merge_heads: false, ..
    } = g.nodes[ai].op
    else {
        return None;
    };
    let y = g.nodes[ai].outputs[0];
    let ti = rw.sole_consumer(g, y)?;
    if g.nodes[ti].op
        != (Op::Transpose {
            perm: vec![0, 2, 1, 3],
            read_as: None,
        })
        || rw.is_removed(ti)
    {
        return None;
    }
    let t = g.nodes[ti].outputs[0];
    let ri = rw.sole_consumer(g, t)?;
    if !matches!(g.nodes[ri].op, Op::Reshape { .. }) || rw.is_removed(ri) {
        return None;
    }
    let r = g.nodes[ri].outputs[0];
    let merged = crate::ir::infer::merged_heads(&g.tensors[y].shape)?;
    if g.tensors[r].shape != merged || g.tensors[r].dtype != g.tensors[y].dtype {
        return None;
    }
    rw.remove(ti);
    rw.remove(ri);
    let n = &mut g.nodes[ai];
    if let Op::Attention { merge_heads, .. } = &mut n.op {
        *merge_heads = true;
    }
    n.outputs = vec![r];
    Some(())
}

/// Fuses every attention chain; returns how many.
pub fn fuse_attention(g: &mut Graph) -> usize {
    rewrite_each(g, attention_at)
}

/// The other input of binary node `ni` when one of its inputs is `t`.
fn other(g: &Graph, ni: usize, t: TensorId) -> Option<TensorId> {
    let n = &g.nodes[ni];
    match (n.input(0), n.input(1)) {
        (Some(a), Some(b)) if a == t && b != t => Some(b),
        (Some(a), Some(b)) if b == t && a != t => Some(a),
        _ => None,
    }
}

fn plain_matmul(op: &Op) -> Option<(bool, bool)> {
    match op {
        Op::MatMul {
            transpose_a,
            transpose_b,
            activation: Activation::None,
        } => Some((*transpose_a, *transpose_b)),
        _ => None,
    }
}

fn attention_at(g: &mut Graph, rw: &mut Rewrite, mi: usize) -> Option<()> {
    let (false, transpose_b) = plain_matmul(&g.nodes[mi].op)? else {
        return None;
    };
    let (q, kt) = (g.nodes[mi].input(0)?, g.nodes[mi].input(1)?);
    let mut cur = g.nodes[mi].outputs[0];
    let mut chain = vec![mi];
    let mut next = rw.sole_consumer(g, cur)?;
    // The scale: a Mul by a scalar constant, or scores / a scalar constant.
    let scale = match g.nodes[next].op {
        Op::Binary(BinaryOp::Mul) => Some(scalar(g, other(g, next, cur))?),
        Op::Binary(BinaryOp::Div) if g.nodes[next].input(0) == Some(cur) => {
            Some(1.0 / scalar(g, g.nodes[next].input(1))?)
        }
        _ => None,
    };
    if scale.is_some() {
        chain.push(next);
        cur = g.nodes[next].outputs[0];
        next = rw.sole_consumer(g, cur)?;
    }
    let mut scale = scale.unwrap_or(1.0);
    // Scalar factors on the operands (Whisper's export scales queries and keys by D^-1/4 each)
    // join the scale: two elementwise passes over the queries and keys go.
    let (mut q, mut kt) = (q, kt);
    // Head splits to read from a scaled operand's unscaled input, once the chain has fused.
    let mut rewired = Vec::new();
    for operand in [&mut q, &mut kt] {
        let mut reader = mi;
        if let Some((src, factor, ni)) = scaled_operand(g, rw, *operand, mi) {
            *operand = src;
            scale *= factor;
            chain.push(ni);
            reader = ni;
        }
        if let Some((view, src, factor, ni)) = scaled_before_views(g, rw, *operand, reader) {
            rewired.push((view, src));
            scale *= factor;
            chain.push(ni);
        }
    }
    // The additive mask: a run-time tensor, or a constant (a relative position bias), which is
    // packed as an activation image like any constant a kernel reads as a tensor.
    let mut mask = None;
    if g.nodes[next].op == Op::Binary(BinaryOp::Add) {
        mask = Some(other(g, next, cur)?);
        chain.push(next);
        cur = g.nodes[next].outputs[0];
        next = rw.sole_consumer(g, cur)?;
    }
    let rank = g.tensors[q].shape.len();
    if g.nodes[next].op
        != (Op::Softmax {
            axis: rank.checked_sub(1)?,
        })
    {
        return None;
    }
    chain.push(next);
    cur = g.nodes[next].outputs[0];
    // PyTorch's exported scaled_dot_product_attention zeroes fully masked rows (whose softmax is
    // NaN) with Where(IsNaN(p), 0, p); the kernel does the same when it is asked to.
    let mut nan_to_zero = false;
    if let Some((guard, w)) = nan_guard(g, rw, cur) {
        chain.extend([guard, w]);
        cur = g.nodes[w].outputs[0];
        nan_to_zero = true;
    }
    let pv = rw.sole_consumer(g, cur)?;
    if plain_matmul(&g.nodes[pv].op)? != (false, false) || g.nodes[pv].input(0) != Some(cur) {
        return None;
    }
    let v = g.nodes[pv].input(1)?;
    if !fits(g, q, kt, v, mask, transpose_b) || !scale.is_finite() {
        return None;
    }
    // Grouped-query attention: the kernel maps each query head to its key/value head, so the
    // exporters' repeat_kv copies (of the whole cache, every step) are read through.
    let (kt, v) = match (repeat_kv_source(g, rw, kt), repeat_kv_source(g, rw, v)) {
        (Some(k0), Some(v0)) if fits(g, q, k0, v0, mask, transpose_b) => (k0, v0),
        _ => (kt, v),
    };
    let node = &mut g.nodes[pv];
    node.op = Op::Attention {
        scale: scale as f32,
        key_rows: transpose_b,
        nan_to_zero,
        merge_heads: false,
        split_heads: Default::default(),
    };
    node.inputs = vec![Some(q), Some(kt), Some(v), mask];
    for (view, src) in rewired {
        g.nodes[view].inputs[0] = Some(src);
    }
    for ni in chain {
        rw.remove(ni);
    }
    Some(())
}

/// The most Reshape and Transpose nodes [`scaled_before_views`] walks back through.
const MAX_SCALED_VIEWS: usize = 4;

/// `(view, src, factor, node)` when `t` is a chain of Reshape and Transpose nodes (at most
/// [`MAX_SCALED_VIEWS`], each output read only by the next, the last read only by node
/// `reader`) over `Mul(src, factor)` or `Div(src, 1 / factor)` by a scalar constant (read only
/// by the first of them, node `view`): a scalar factor commutes with the views, so `view` can
/// read `src` and the factor join the attention's scale.
fn scaled_before_views(
    g: &Graph,
    rw: &Rewrite,
    t: TensorId,
    reader: usize,
) -> Option<(usize, TensorId, f64, usize)> {
    let (mut cur, mut consumer) = (t, reader);
    for _ in 0..MAX_SCALED_VIEWS {
        let ni = rw.producers[cur]?;
        if rw.is_removed(ni) || rw.sole_consumer(g, cur) != Some(consumer) {
            return None;
        }
        match g.nodes[ni].op {
            Op::Reshape { .. } | Op::Transpose { .. } => {
                consumer = ni;
                cur = g.nodes[ni].input(0)?;
            }
            _ if consumer == reader => return None,
            _ => {
                let (src, factor, mul) = scaled_operand(g, rw, cur, consumer)?;
                return Some((consumer, src, factor, mul));
            }
        }
    }
    None
}

/// `(src, factor, node)` when `t` is `Mul(src, factor)` or `Div(src, 1 / factor)` by a scalar
/// constant, of `src`'s shape, read only by node `reader`.
fn scaled_operand(
    g: &Graph,
    rw: &Rewrite,
    t: TensorId,
    reader: usize,
) -> Option<(TensorId, f64, usize)> {
    let ni = rw.producers[t]?;
    if rw.is_removed(ni) || rw.sole_consumer(g, t) != Some(reader) {
        return None;
    }
    let n = &g.nodes[ni];
    let (src, factor) = match n.op {
        Op::Binary(BinaryOp::Mul) => match (scalar(g, n.input(0)), scalar(g, n.input(1))) {
            (None, Some(c)) => (n.input(0)?, c),
            (Some(c), None) => (n.input(1)?, c),
            _ => return None,
        },
        Op::Binary(BinaryOp::Div) => (n.input(0)?, 1.0 / scalar(g, n.input(1))?),
        _ => return None,
    };
    let same =
        g.tensors[src].shape == g.tensors[t].shape && g.tensors[src].dtype == g.tensors[t].dtype;
    (same && !g.is_const(src) && factor.is_finite()).then_some((src, factor, ni))
}

/// `src` when `t` is `Reshape(Expand(Unsqueeze(src)))` that repeats each head of `src`
/// `[.., Hkv, S, D]` `g` times into `[.., Hkv * g, S, D]` (Llama's repeat_kv). The copies
/// become dead once the attention reads `src` and are removed with the dead code.
fn repeat_kv_source(g: &Graph, rw: &Rewrite, t: TensorId) -> Option<TensorId> {
    let producer = |t: TensorId| rw.producers[t].map(|p| &g.nodes[p]);
    let reshape = producer(t)?;
    let e = reshape.input(0)?;
    let expand = producer(e)?;
    let u = expand.input(0)?;
    let unsqueeze = producer(u)?;
    let src = unsqueeze.input(0)?;
    let is = |n: &crate::ir::Node, kind: ReshapeKind| matches!(&n.op, Op::Reshape { kind: k, .. } if *k == kind);
    if !is(reshape, ReshapeKind::Reshape)
        || !matches!(expand.op, Op::Expand { .. })
        || !is(unsqueeze, ReshapeKind::Unsqueeze)
    {
        return None;
    }
    let (ss, us, es, ts) = (
        &g.tensors[src].shape,
        &g.tensors[u].shape,
        &g.tensors[e].shape,
        &g.tensors[t].shape,
    );
    let r = ss.len();
    if r < 3 || us.len() != r + 1 || es.len() != r + 1 || ts.len() != r {
        return None;
    }
    let h = r - 3; // the heads axis of src
    let groups = es[h + 1];
    let mut unsq = ss.clone();
    unsq.insert(h + 1, 1);
    let mut exp = ss.clone();
    exp.insert(h + 1, groups);
    let mut out = ss.clone();
    out[h] *= groups;
    (us == &unsq && es == &exp && ts == &out && groups > 1).then_some(src)
}

/// `(IsNaN, Where)` when `p`'s only readers are `IsNaN(p)` and `Where(IsNaN(p), 0, p)`.
fn nan_guard(g: &Graph, rw: &Rewrite, p: TensorId) -> Option<(usize, usize)> {
    if g.is_output(p) {
        return None;
    }
    let cons = &rw.consumers[p];
    let [a, b] = cons.as_slice() else {
        return None;
    };
    let (isnan, w) = if g.nodes[*a].op == Op::Unary(UnaryOp::IsNaN) {
        (*a, *b)
    } else {
        (*b, *a)
    };
    if g.nodes[isnan].op != Op::Unary(UnaryOp::IsNaN) || g.nodes[w].op != Op::Where {
        return None;
    }
    let flag = g.nodes[isnan].outputs[0];
    let zero = scalar(g, g.nodes[w].input(1)) == Some(0.0);
    let shape = g.tensors[g.nodes[w].outputs[0]].shape == g.tensors[p].shape;
    (rw.sole_consumer(g, flag) == Some(w)
        && g.nodes[w].input(0) == Some(flag)
        && g.nodes[w].input(2) == Some(p)
        && zero
        && shape)
        .then_some((isnan, w))
}

/// Shapes and types the kernel takes: one float type, rank >= 2, equal leading dims, D and
/// Dv within the kernel, a mask that broadcasts to the scores. The mask must also be stored
/// like the scores (its leading dims 1 or full), which `Attention`'s inference checks again.
fn fits(
    g: &Graph,
    q: TensorId,
    kt: TensorId,
    v: TensorId,
    m: Option<TensorId>,
    rows: bool,
) -> bool {
    let t = |id: TensorId| &g.tensors[id];
    let float = |id: TensorId| matches!(t(id).dtype, DType::F32 | DType::F16);
    if [q, kt, v].iter().any(|&id| g.is_const(id))
        || ![Some(q), Some(kt), Some(v), m]
            .iter()
            .flatten()
            .all(|&id| float(id))
    {
        return false;
    }
    let Some((scores, out)) = attention_shapes(&t(q).shape, &t(kt).shape, &t(v).shape, rows) else {
        return false;
    };
    let (r, sk) = (scores.len(), scores[scores.len() - 1]);
    if t(q).shape[r - 1] > MAX_HEAD_DIM || out[r - 1] > MAX_HEAD_DIM {
        return false;
    }
    let Some(m) = m else {
        return true;
    };
    // Numpy broadcasting, with the keys themselves not broadcast. The kernel broadcasts by the
    // rank rule's N, C and H, so a batch (N) is either all 1 or all full.
    let ms = &t(m).shape;
    let ([mn, mc, mh, _], [sn, sc, sh, _]) = (nchw(ms), nchw(&scores));
    let batch = mn == 1 || (mn == sn && ms.len() == r);
    mask_broadcasts(ms, &scores)
        && ms.last() == Some(&sk)
        && batch
        && (mc == 1 || mc == sc)
        && (mh == 1 || mh == sh)
}
