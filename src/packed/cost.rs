//! Per-step cost estimates (FLOPs, bytes) and activation liveness peaks.
use crate::ir::{c4_bytes, Graph, Node, Op, TensorLayout};

/// Floating-point operations of one node (multiply-add = 2).
pub fn flops(g: &Graph, n: &Node) -> u64 {
    let shape = |t: Option<usize>| t.map(|t| g.tensors[t].shape.clone()).unwrap_or_default();
    let numel = |s: &[usize]| s.iter().product::<usize>() as u64;
    let out = shape(n.outputs.first().copied());
    let inp = shape(n.input(0));
    match &n.op {
        // Each output (Conv) / input (ConvTranspose) element does I/g (O/g) * KH * KW MACs.
        Op::Conv { window, .. } | Op::ConvTranspose { window, .. } => {
            let w = shape(n.input(1));
            let per = (w.get(1).copied().unwrap_or(1) * window.kernel[0] * window.kernel[1]) as u64;
            let base = if matches!(n.op, Op::Conv { .. }) {
                numel(&out)
            } else {
                numel(&inp)
            };
            2 * base * per
        }
        Op::MatMul { transpose_a, .. } => {
            let k = if *transpose_a {
                inp.iter().rev().nth(1)
            } else {
                inp.last()
            };
            2 * numel(&out) * k.copied().unwrap_or(1) as u64
        }
        Op::Gemm { trans_a, .. } => {
            let k = if *trans_a { inp.first() } else { inp.last() };
            2 * numel(&out) * k.copied().unwrap_or(1) as u64
        }
        Op::Lstm { hidden_size } => {
            let (s, b, i) = (inp[0] as u64, inp[1] as u64, inp[2] as u64);
            let h = *hidden_size as u64;
            s * b * (2 * (i + h) * 4 * h + 10 * h)
        }
        Op::Softmax { .. } | Op::LayerNorm { .. } => 5 * numel(&out),
        Op::Reduce { .. } | Op::GlobalAveragePool | Op::ArgMax { .. } => numel(&inp),
        Op::MaxPool { window, .. } | Op::AveragePool { window, .. } => {
            numel(&out) * (window.kernel[0] * window.kernel[1]) as u64
        }
        Op::Resize { .. } => 4 * numel(&out),
        _ => numel(&out),
    }
}

/// Whether a node's output is a view (no kernel runs).
pub fn is_view(g: &Graph, n: &Node) -> bool {
    n.op.is_layout_op()
        && n.outputs
            .iter()
            .all(|&t| matches!(g.tensors[t].layout, TensorLayout::ViewOf(_)))
}

/// Live activation bytes at each node index, and the peak. A tensor is live from its producer
/// (graph inputs: from step 0) to its last reader (graph outputs: to the end). Views extend
/// their root's lifetime and cost nothing themselves. Constants are not activations.
pub fn liveness(g: &Graph, bytes_per_value: usize) -> (Vec<u64>, u64) {
    let steps = g.nodes.len();
    let root = |t: usize| match g.tensors[t].layout {
        TensorLayout::ViewOf(r) => r,
        TensorLayout::C4 => t,
    };
    let mut first = vec![usize::MAX; g.tensors.len()];
    let mut last = vec![0usize; g.tensors.len()];
    let mut touch = |t: usize, i: usize| {
        first[t] = first[t].min(i);
        last[t] = last[t].max(i);
    };
    for p in &g.inputs {
        touch(root(p.tensor), 0);
    }
    for (i, n) in g.nodes.iter().enumerate() {
        for t in n.present_inputs().chain(n.outputs.iter().copied()) {
            if !g.is_const(t) {
                touch(root(t), i);
            }
        }
    }
    for p in &g.outputs {
        if !g.is_const(p.tensor) {
            touch(root(p.tensor), steps.saturating_sub(1));
        }
    }
    let mut live = vec![0u64; steps];
    for t in 0..g.tensors.len() {
        if first[t] == usize::MAX || root(t) != t {
            continue;
        }
        let b = c4_bytes(&g.tensors[t].shape, bytes_per_value) as u64;
        for l in live.iter_mut().take(last[t] + 1).skip(first[t]) {
            *l += b;
        }
    }
    let peak = live.iter().copied().max().unwrap_or(0);
    (live, peak)
}
