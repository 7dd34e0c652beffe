//! Per-step cost estimates (FLOPs, bytes); activation liveness is `ir::liveness`.
use crate::ir::{Graph, Node, Op, TensorLayout};

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
        // Q K^T and P V (2 FLOPs a multiply-add each), plus the softmax over the scores.
        Op::Attention {
            key_rows,
            split_heads,
            ..
        } => {
            // Split operands as the heads they are read as.
            let given = [inp.clone(), shape(n.input(1)), shape(n.input(2))];
            let [q, k, v] = crate::ir::infer::attention_operands(
                split_heads,
                [&given[0], &given[1], &given[2]],
            )
            .unwrap_or(given);
            let sk = if *key_rows {
                k.iter().rev().nth(1)
            } else {
                k.last()
            };
            let sk = sk.copied().unwrap_or(1) as u64;
            let d = q.last().copied().unwrap_or(1) as u64;
            // V's head dim: a merged output's last dim holds every head's.
            let dv = v.last().copied().unwrap_or(1) as u64;
            let rows = numel(&out) / dv.max(1);
            rows * sk * (2 * d + 2 * dv + 5)
        }
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
