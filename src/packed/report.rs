//! Human-readable reports of a packed model: where its activation peak is and which steps read
//! the most weight pages (`texstream compile --liveness N`).
use std::fmt::Write as _;

use super::PackedHeader;

/// The steps where the most activation bytes are live, and the largest tensors live there: where
/// a model's share of the cap goes.
pub fn liveness_report(h: &PackedHeader, top: usize) -> String {
    let mut o = String::new();
    let g = &h.graph;
    let bpv = h.precision.bytes_per_value();
    let mut order: Vec<usize> = (0..h.steps.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(h.steps[i].live_activation_bytes));
    let spans = crate::ir::liveness::live_spans(g);
    // The header's graph no longer holds the weights as constants; they live in pages.
    let weights: std::collections::HashSet<usize> = h.weights.iter().map(|w| w.tensor).collect();
    let mut by_pages: Vec<usize> = (0..h.steps.len()).collect();
    by_pages.sort_by_key(|&i| std::cmp::Reverse(h.steps[i].pages.len()));
    let _ = writeln!(o, "  weight pages (top {top} steps):");
    for &i in by_pages.iter().take(top) {
        let s = &h.steps[i];
        let names: Vec<&str> = s
            .weights
            .iter()
            .filter_map(|&(_, w)| h.weights.get(w).map(|w| w.name.as_str()))
            .collect();
        let _ = writeln!(
            o,
            "    step {i:>4} {:<16} {:<28} {} pages {:?} ({})",
            s.op,
            s.name,
            s.pages.len(),
            s.pages,
            names.join(", ")
        );
    }
    let _ = writeln!(o, "  liveness (top {top} steps):");
    for &i in order.iter().take(top) {
        let s = &h.steps[i];
        let mut live: Vec<(u64, usize)> = spans
            .iter()
            .enumerate()
            .filter(|(t, sp)| !weights.contains(t) && sp.is_some_and(|(a, b)| a <= i && i <= b))
            .map(|(t, _)| (crate::ir::c4_bytes(&g.tensors[t].shape, bpv) as u64, t))
            .collect();
        live.sort_unstable_by(|a, b| b.cmp(a));
        let _ = writeln!(
            o,
            "    step {i:>4} {:<16} {:<28} live {:>10} B",
            s.op, s.name, s.live_activation_bytes
        );
        for (b, t) in live.iter().take(6) {
            let _ = writeln!(
                o,
                "           {:>10} B  {} {:?}",
                b, g.tensors[*t].name, g.tensors[*t].shape
            );
        }
    }
    o
}
