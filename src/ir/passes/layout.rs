//! Layout assignment after SmartMem's rule: Reshape-like and Transpose nodes become views (index
//! arithmetic, no copy) when they can, and the rest are counted as real layout transforms.
//!
//! Rules, in order:
//! 1. **Transpose into MatMul.** A Transpose that swaps only the last two axes and whose only
//!    reader is a MatMul is removed; the MatMul reads that operand transposed
//!    (`transpose_a` / `transpose_b`). MatMul is layout-dependent with a variable input layout,
//!    so it can absorb the transposed read.
//! 2. **C4-order-preserving reshape / transpose = view.** Every activation is stored C4-packed
//!    (NC4HW4) after mapping its shape to (N, C, H, W) with [`crate::ir::nchw`]. The physical slot
//!    of element e is `((n*ceil(C/4) + c/4)*H + h)*W + w)*4 + c%4`. A Reshape / Flatten / Squeeze /
//!    Unsqueeze / Transpose whose output puts every element in the same physical slot as its input,
//!    with the same padded size, is a view (`TensorLayout::ViewOf(root)`). This covers
//!    adding/removing leading 1s, N<->H/W merges when C is 1, channel merges that keep C%4 == 0,
//!    transposes of size-1 axes, and so on. It is decided exactly by (a) equal (N,C,H,W) maps, or
//!    (b) an element-by-element check of tensors up to [`MAX_CHECK`] elements.
//!
//!    2b. A graph output made by a Reshape of a computed tensor is that tensor in the Reshape's
//!    shape ([`outputs_without_reshapes`]): outputs keep their own images, so the Reshape would
//!    be a copy.
//! 3. Everything else is a copy, counted in [`assign`]'s result and printed by `compile`.
//!    A Reshape copy read only by a Transpose copy folds into it: one copy instead of two
//!    ([`fold_reshapes_into_transposes`]).
//! 4. **In-place Softmax.** A Softmax whose input nothing else reads (and that is not a graph
//!    input, output or constant) writes over its input: the output is a view of it, so the two
//!    never hold memory at the same time ([`softmax_in_place`]). The kernel reads a whole row
//!    before writing it, and each invocation writes only texels it read itself.
//! 5. **In-place elementwise.** A Unary, or an arithmetic Binary, whose output has the shape and
//!    type of an input that nothing else reads writes over that input ([`elementwise_in_place`]);
//!    so does a Conv over its addend (input 3, read only at the texel being written).
//!    Their kernels run one invocation per output texel that reads that input's same texel before
//!    writing it, so the two tensors never need memory at the same time. At 384x768 this is what
//!    keeps the detector's FPN additions from holding three full-size maps at once.
use super::{rewrite_each, Rewrite};
use crate::ir::tensor::{c4_value_index, row_major_strides};
use crate::ir::{nchw, BinaryOp, Graph, Op, TensorId, TensorLayout, UnaryOp};

/// Largest tensor checked element by element; larger non-trivial reshapes stay copies.
pub const MAX_CHECK: usize = 1 << 22;

/// Rule 1. Returns the number of Transpose nodes absorbed.
pub fn absorb_transposes(g: &mut Graph) -> usize {
    rewrite_each(g, absorb_transpose_at)
}

/// Removes the Transpose at `ti` when its only reader is a MatMul that can read it transposed.
fn absorb_transpose_at(g: &mut Graph, rw: &mut Rewrite, ti: usize) -> Option<()> {
    let Op::Transpose {
        perm,
        read_as: None,
    } = &g.nodes[ti].op
    else {
        return None;
    };
    let r = perm.len();
    let swaps_last_two =
        r >= 2 && perm[r - 1] == r - 2 && perm[r - 2] == r - 1 && (0..r - 2).all(|i| perm[i] == i);
    if !swaps_last_two {
        return None;
    }
    let (x, y) = (g.nodes[ti].input(0)?, g.nodes[ti].outputs[0]);
    let mi = rw.sole_consumer(g, y)?;
    let (in_a, in_b) = (
        g.nodes[mi].inputs.first() == Some(&Some(y)),
        g.nodes[mi].inputs.get(1) == Some(&Some(y)),
    );
    if in_a == in_b {
        return None;
    }
    let Op::MatMul {
        transpose_a,
        transpose_b,
        ..
    } = &mut g.nodes[mi].op
    else {
        return None;
    };
    if in_a {
        *transpose_a = !*transpose_a;
    } else {
        *transpose_b = !*transpose_b;
    }
    let slot = if in_a { 0 } else { 1 };
    g.nodes[mi].inputs[slot] = Some(x);
    rw.remove(ti);
    Some(())
}

/// True when `op` maps input to output without moving any element's C4 physical slot.
pub fn is_view(op: &Op, in_shape: &[usize], out_shape: &[usize]) -> bool {
    let (a, b) = (nchw(in_shape), nchw(out_shape));
    let padded = |s: [usize; 4]| s[0] * s[1].div_ceil(4) * s[2] * s[3] * 4;
    if padded(a) != padded(b) {
        return false;
    }
    let n: usize = in_shape.iter().product();
    match op {
        Op::Reshape { .. } => {
            a == b
                || (n <= MAX_CHECK && (0..n).all(|i| c4_value_index(a, i) == c4_value_index(b, i)))
        }
        Op::Transpose {
            perm,
            read_as: None,
        } => {
            if n > MAX_CHECK {
                return false;
            }
            let ist = row_major_strides(in_shape);
            let ost = row_major_strides(out_shape);
            (0..n).all(|lo| {
                let li: usize = perm
                    .iter()
                    .enumerate()
                    .map(|(k, &p)| ((lo / ost[k]) % out_shape[k]) * ist[p])
                    .sum();
                c4_value_index(b, lo) == c4_value_index(a, li)
            })
        }
        _ => false,
    }
}

/// Rule 2 and 3: marks views; returns (views, copies).
pub fn assign(g: &mut Graph) -> (usize, usize) {
    let (mut views, mut copies) = (0, 0);
    for t in &mut g.tensors {
        t.layout = TensorLayout::C4;
    }
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        // A cache write's output is its cache: it writes in place (not a layout view).
        if let (Op::KvWrite { .. }, Some(cache), Some(&y)) = (&n.op, n.input(0), n.outputs.first())
        {
            g.make_view(y, cache);
            continue;
        }
        if !n.op.is_layout_op() {
            continue;
        }
        let (Some(x), y) = (n.input(0), n.outputs[0]) else {
            continue;
        };
        // Graph inputs and outputs keep their own images; constants are packed separately.
        let pinned = g.is_const(x) || g.is_output(y);
        if !pinned && is_view(&n.op, &g.tensors[x].shape, &g.tensors[y].shape) {
            g.make_view(y, x);
            views += 1;
        } else {
            copies += 1;
        }
    }
    (views, copies)
}

/// Rule 3b. A Reshape copy whose only reader is a Transpose copy folds into it: the Transpose
/// reads the Reshape's input as the Reshape's shape (`read_as`; the row-major order is the same
/// under both shapes), so one copy moves the elements instead of two and the intermediate never
/// takes memory. The exporters split attention heads this way (`Reshape` to `[1, S, H, D]`,
/// `Transpose` to `[1, H, S, D]` or `[1, H, D, S]`) for every query, key and value an encoder
/// layer has. Runs after [`assign`] (which decides what is a copy); returns how many folded.
pub fn fold_reshapes_into_transposes(g: &mut Graph) -> usize {
    rewrite_each(g, fold_reshape_at)
}

fn fold_reshape_at(g: &mut Graph, rw: &mut Rewrite, ti: usize) -> Option<()> {
    let Op::Transpose { read_as: None, .. } = g.nodes[ti].op else {
        return None;
    };
    let (r, y) = (g.nodes[ti].input(0)?, *g.nodes[ti].outputs.first()?);
    let ri = rw.producers[r]?;
    let copy = |t: TensorId| matches!(g.tensors[t].layout, TensorLayout::C4);
    let Op::Reshape { shape, .. } = &g.nodes[ri].op else {
        return None;
    };
    let x = g.nodes[ri].input(0)?;
    if rw.is_removed(ri)
        || rw.sole_consumer(g, r) != Some(ti)
        || !copy(r)
        || !copy(y)
        || g.is_const(x)
        || g.is_state(r)
    {
        return None;
    }
    let shape = shape.clone();
    if let Op::Transpose { read_as, .. } = &mut g.nodes[ti].op {
        *read_as = Some(shape);
    }
    g.nodes[ti].inputs[0] = Some(x);
    rw.remove(ri);
    Some(())
}

/// Rule 2b. A graph output that a Reshape (or Flatten, Squeeze, Unsqueeze) makes of a computed
/// tensor is that tensor, shown in the Reshape's shape (`Port::shape`: the same elements in the
/// same row-major order, which a download yields from any layout). Graph outputs keep their own
/// images (rule 2 never makes them views), so the Reshape was a copy of the whole output: a
/// language model's logits, `[T, V]` from its head pieces' Concat to `[1, T, V]`, took 194 us of
/// a 128-token prefill on an H200 (session 31). Applies where the Reshape's output is read by
/// graph outputs alone and its input is no constant, graph input, state or other output; returns
/// how many outputs now show their Reshape's input. Run before [`assign`].
pub fn outputs_without_reshapes(g: &mut Graph) -> usize {
    let consumers = g.consumers();
    let producers = g.producers();
    let mut count = 0;
    for pi in 0..g.outputs.len() {
        let y = g.outputs[pi].tensor;
        let Some(ri) = producers[y] else {
            continue;
        };
        let node = &g.nodes[ri];
        let (Op::Reshape { .. }, Some(x)) = (&node.op, node.input(0)) else {
            continue;
        };
        let shown = g.outputs[pi]
            .shape
            .clone()
            .unwrap_or_else(|| g.tensors[y].shape.clone());
        if !consumers[y].is_empty()
            || g.tensors[x].dtype != g.tensors[y].dtype
            || g.is_const(x)
            || g.is_state(x)
            || g.is_output(x)
            || g.inputs.iter().any(|p| p.tensor == x)
            || g.outputs.iter().filter(|p| p.tensor == y).count() > 1
        {
            continue;
        }
        let port = &mut g.outputs[pi];
        port.tensor = x;
        port.shape = Some(shown);
        count += 1;
    }
    count
}

/// Rule 4. Returns the number of Softmax nodes that now write over their input.
pub fn softmax_in_place(g: &mut Graph) -> usize {
    let cons = g.consumers();
    let mut count = 0;
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        if !matches!(n.op, Op::Softmax { .. }) {
            continue;
        }
        let (Some(x), Some(&y)) = (n.input(0), n.outputs.first()) else {
            continue;
        };
        if can_overwrite(g, &cons, i, x, y) {
            g.tensors[y].layout = TensorLayout::ViewOf(x);
            count += 1;
        }
    }
    count
}

/// Whether node `at`'s output `y` may take over the storage of its input `x`: `x`'s storage
/// (its root, and every view of it) is an activation that no node reads after `at` and that is
/// not a graph input or output, and `y`, with storage of its own, has the shape and type of that
/// root. Nodes are in execution order, so readers before `at` are done with it.
fn can_overwrite(g: &Graph, cons: &[Vec<usize>], at: usize, x: TensorId, y: TensorId) -> bool {
    let root = g.storage_root(x);
    let shares = |t: usize| t == root || g.tensors[t].layout == TensorLayout::ViewOf(root);
    let family: Vec<TensorId> = (0..g.tensors.len()).filter(|&t| shares(t)).collect();
    root != y
        && matches!(g.tensors[y].layout, TensorLayout::C4)
        && !g.is_const(root)
        // State outlives the run: a later run reads what this one leaves in it.
        && !g.is_state(root)
        && !g.inputs.iter().any(|p| shares(p.tensor))
        && !g.outputs.iter().any(|p| shares(p.tensor))
        && family.iter().all(|&t| cons[t].iter().all(|&c| c <= at))
        && g.tensors[root].shape == g.tensors[y].shape
        && g.tensors[root].dtype == g.tensors[y].dtype
}

/// Rule 5. Returns the number of elementwise nodes that now write over an input.
pub fn elementwise_in_place(g: &mut Graph) -> usize {
    let cons = g.consumers();
    let mut count = 0;
    for i in 0..g.nodes.len() {
        let n = &g.nodes[i];
        // A Conv's addend (input 3) is read only at the output texel each invocation writes.
        if let (Op::Conv { .. }, Some(a), Some(&y)) = (&n.op, n.input(3), n.outputs.first()) {
            let x_apart = n
                .input(0)
                .is_some_and(|x| g.storage_root(x) != g.storage_root(a));
            if x_apart && can_overwrite(g, &cons, i, a, y) {
                g.make_view(y, a);
                count += 1;
            }
            continue;
        }
        let elementwise = match n.op {
            // Not compares against a scalar through another kernel; keep it out.
            Op::Unary(u) => u != UnaryOp::Not,
            Op::Binary(b) => matches!(
                b,
                BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::Pow
                    | BinaryOp::PRelu
                    | BinaryOp::Mod
                    | BinaryOp::FMod
            ),
            _ => false,
        };
        let Some(&y) = n.outputs.first() else {
            continue;
        };
        if !elementwise || n.outputs.len() != 1 || !g.tensors[y].dtype.is_float() {
            continue;
        }
        let x = n
            .present_inputs()
            .find(|&x| can_overwrite(g, &cons, i, x, y));
        if let Some(x) = x {
            g.make_view(y, x);
            count += 1;
        }
    }
    count
}
