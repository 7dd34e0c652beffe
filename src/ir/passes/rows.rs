//! Row packing of batch-1 heads: `[1, T, N]` outputs stored four rows to a texel.
//!
//! The rank rule maps `[1, T, N]` to (N=1, C=1, H=T, W=N): one value per RGBA texel, four times
//! the memory the values need. A recognizer's or language model's head is exactly that shape
//! and by far its largest tensor (PP-OCR's recognizer: `[1, 96, 18710]` logits, 14.4 MB of
//! texels for 3.6 MB of fp16 values). Rows of a MatMul with a constant B are independent, so the
//! head can run as `[1, 4, T/4, K] x [K, N] -> [1, 4, T/4, N]` instead: the same rows in the same
//! row-major order, with the four quarters of the sequence in the four texel lanes (the MatMul's
//! lane-batched path, M = T/4 rows per lane). The rewrite applies when T is a multiple of 4 and
//! the MatMul's output only flows through Softmax over its last axis (in place or not) into
//! graph outputs: those become `[1, 4, T/4, N]` tensors and the graph output keeps its declared
//! `[1, T, N]` shape (`Port::shape`), so a download needs no reordering. The operand A is copied
//! once into `[1, 4, T/4, K]` (a small tensor: K is the model width).
use crate::ir::{Graph, Op, ReshapeKind, TensorId};

/// Smallest output (elements) worth the extra copy of A.
const MIN_ELEMENTS: usize = 1 << 14;

/// Rewrites every eligible head; returns how many.
pub fn pack_head_rows(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut mi = 0;
    while mi < g.nodes.len() {
        if let Some(plan) = eligible(g, mi) {
            mi += rewrite(g, mi, plan); // skip the inserted nodes
            count += 1;
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
        [1, t, nn] if *nn == n && t % 4 == 0 && t * n >= MIN_ELEMENTS => *t,
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

/// Returns how many nodes it inserted before the MatMul.
fn rewrite(g: &mut Graph, mi: usize, p: HeadPlan) -> usize {
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
    let quarters = vec![1, 4, p.t / 4, p.k];
    let mut copies = Vec::new();
    let mut src = a;
    if transpose_a {
        // [1, K, T] -> [1, T, K] first.
        let rows = g.add_tensor(format!("{name}.t"), vec![1, p.t, p.k], dtype);
        copies.push(crate::ir::Node {
            name: format!("{name}.transpose"),
            op: Op::Transpose {
                perm: vec![0, 2, 1],
                read_as: None,
            },
            inputs: vec![Some(src)],
            outputs: vec![rows],
        });
        src = rows;
    }
    let packed = g.add_tensor(format!("{name}.a"), quarters.clone(), dtype);
    copies.push(crate::ir::Node {
        name,
        op: Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape: quarters,
        },
        inputs: vec![Some(src)],
        outputs: vec![packed],
    });
    let inserted = copies.len();
    g.nodes.splice(mi..mi, copies);
    let m = &mut g.nodes[mi + inserted];
    m.inputs[0] = Some(packed);
    if let Op::MatMul { transpose_a, .. } = &mut m.op {
        *transpose_a = false;
    }
    for &t in &p.chain {
        g.tensors[t].shape = vec![1, 4, p.t / 4, p.n];
    }
    // The Softmax nodes of the chain now normalize axis 3 of a rank-4 tensor.
    for node in &mut g.nodes {
        if let Op::Softmax { axis } = &mut node.op {
            if node.outputs.first().is_some_and(|o| p.chain.contains(o)) {
                *axis = 3;
            }
        }
    }
    let declared = vec![1, p.t, p.n];
    for port in &mut g.outputs {
        if p.chain.contains(&port.tensor) {
            port.shape = Some(declared.clone());
        }
    }
    inserted
}
