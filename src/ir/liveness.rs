//! Activation liveness over a graph's execution order: which tensors hold storage at each step,
//! and the peak of their bytes (C4 texels at a given bytes per value). The packer records it per
//! step for the scheduler, and passes use it to rewrite only where the peak is.
use super::{c4_bytes, Graph};

/// Live activation bytes at each node index, and the peak. A tensor is live from its producer
/// (graph inputs: from step 0) to its last reader (graph outputs: to the end). Views extend
/// their root's lifetime and cost nothing themselves. Constants are not activations.
pub fn liveness(g: &Graph, bytes_per_value: usize) -> (Vec<u64>, u64) {
    let steps = g.nodes.len();
    let spans = live_spans(g);
    let mut live = vec![0u64; steps];
    for (t, span) in spans.iter().enumerate() {
        let Some((first, last)) = *span else { continue };
        let b = c4_bytes(&g.tensors[t].shape, bytes_per_value) as u64;
        for l in live.iter_mut().take(last + 1).skip(first) {
            *l += b;
        }
    }
    let peak = live.iter().copied().max().unwrap_or(0);
    (live, peak)
}

/// Per tensor that owns activation storage (a root), the first and last step it is live at.
pub fn live_spans(g: &Graph) -> Vec<Option<(usize, usize)>> {
    let steps = g.nodes.len();
    let root = |t: usize| g.storage_root(t);
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
    (0..g.tensors.len())
        .map(|t| (first[t] != usize::MAX && root(t) == t).then(|| (first[t], last[t])))
        .collect()
}
