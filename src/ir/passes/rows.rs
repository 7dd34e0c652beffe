//! Row packing of batch-1 heads: `[1, T, N]` outputs stored four rows to a texel.
//!
//! The rank rule maps `[1, T, N]` to (N=1, C=1, H=T, W=N): one value per RGBA texel, four times
//! the memory the values need. A recognizer's or language model's head is exactly that shape
//! and by far its largest tensor (PP-OCR's recognizer: `[1, 96, 18710]` logits, 14.4 MB of
//! texels for 3.6 MB of fp16 values). Rows of a MatMul with a constant B are independent, so the
//! head can run as `[T, 1, K] x [K, N] -> [T, 1, N]` instead, where the rank rule packs T into
//! the channel lanes. The rewrite applies when the MatMul's output only flows through Softmax
//! over its last axis (in place or not) into graph outputs: those become `[T, 1, N]` tensors and
//! the graph output keeps its declared `[1, T, N]` shape (`Port::shape`): the elements are the
//! same in the same row-major order, so a download needs no reordering. The operand A is copied
//! once into `[T, 1, K]` (a small tensor: K is the model width).
use crate::ir::{Graph, Op, ReshapeKind, TensorId};

/// Smallest output (elements) worth the extra copy of A.
const MIN_ELEMENTS: usize = 1 << 14;

/// Rewrites every eligible head; returns how many.
pub fn pack_head_rows(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut mi = 0;
    while mi < g.nodes.len() {
        if let Some(plan) = eligible(g, mi) {
            rewrite(g, mi, plan);
            count += 1;
            mi += 1; // skip the inserted node
        }
        mi += 1;
    }
    count
}

struct HeadPlan {
    t: usize,
    k: usize,
    n: usize,
    /// The MatMul output and the Softmax outputs after it.
    chain: Vec<TensorId>,
}

fn eligible(g: &Graph, mi: usize) -> Option<HeadPlan> {
    let node = &g.nodes[mi];
    let Op::MatMul {
        transpose_a,
        activation,
        ..
    } = &node.op
    else {
        return None;
    };
    let (a, b) = (node.input(0)?, node.input(1)?);
    if !g.is_const(b) || g.tensors[b].shape.len() != 2 || g.is_const(a) {
        return None;
    }
    let out = *node.outputs.first()?;
    let (k, n) = (g.tensors[b].shape[0], g.tensors[b].shape[1]);
    let t = match g.tensors[out].shape.as_slice() {
        [1, t, nn] if *nn == n && *t >= 4 && t * n >= MIN_ELEMENTS => *t,
        _ => return None,
    };
    let a_shape = &g.tensors[a].shape;
    let a_ok = if *transpose_a {
        a_shape == &[1, k, t]
    } else {
        a_shape == &[1, t, k]
    };
    // A bias, when present, must broadcast along the rows ([N] or [1, N]).
    let bias_ok = node
        .input(2)
        .is_none_or(|c| matches!(g.tensors[c].shape.as_slice(), [nn] | [1, nn] if *nn == n));
    if !a_ok || !bias_ok || !matches!(activation, crate::ir::Activation::None) {
        return None;
    }
    let cons = g.consumers();
    let mut chain = vec![out];
    let mut cur = out;
    loop {
        match cons[cur].as_slice() {
            [] if g.is_output(cur) => break,
            [c] if !g.is_output(cur) => match &g.nodes[*c].op {
                Op::Softmax { axis } if *axis == 2 => {
                    cur = g.nodes[*c].outputs[0];
                    chain.push(cur);
                }
                _ => return None,
            },
            _ => return None,
        }
    }
    Some(HeadPlan { t, k, n, chain })
}

fn rewrite(g: &mut Graph, mi: usize, p: HeadPlan) {
    let a = g.nodes[mi].inputs[0].unwrap_or_default();
    let transpose_a = matches!(
        g.nodes[mi].op,
        Op::MatMul {
            transpose_a: true,
            ..
        }
    );
    let name = format!("{}:rows", g.nodes[mi].name);
    let dtype = g.tensors[a].dtype;
    let packed = g.add_tensor(format!("{name}.a"), vec![p.t, 1, p.k], dtype);
    let op = if transpose_a {
        // [1, K, T] -> [T, 1, K]
        Op::Transpose {
            perm: vec![2, 0, 1],
        }
    } else {
        Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape: vec![p.t, 1, p.k],
        }
    };
    g.nodes.insert(
        mi,
        crate::ir::Node {
            name,
            op,
            inputs: vec![Some(a)],
            outputs: vec![packed],
        },
    );
    let m = &mut g.nodes[mi + 1];
    m.inputs[0] = Some(packed);
    if let Op::MatMul { transpose_a, .. } = &mut m.op {
        *transpose_a = false;
    }
    let declared = vec![1, p.t, p.n];
    for &t in &p.chain {
        g.tensors[t].shape = vec![p.t, 1, p.n];
    }
    for port in &mut g.outputs {
        if p.chain.contains(&port.tensor) {
            port.shape = Some(declared.clone());
        }
    }
}
