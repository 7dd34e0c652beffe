//! `texstream infer --profile N`: where a model's GPU time goes. Every node is timed with GPU
//! timestamps over N runs ([`Executable::run_profiled`]); the median per node is summed by op
//! and by op and shape, and the slowest nodes are listed with their output shapes.
use std::collections::BTreeMap;
use std::fmt::Write;

use texstream::ir::Graph;
use texstream::runtime::{Executable, HostTensor};

/// Median GPU nanoseconds per node over the profiled runs.
pub struct NodeProfile {
    pub runs: usize,
    pub node_ns: Vec<f64>,
}

impl NodeProfile {
    pub fn measure(
        exe: &mut Executable,
        feeds: &[(String, HostTensor)],
        runs: usize,
    ) -> anyhow::Result<NodeProfile> {
        let mut samples: Vec<Vec<f64>> = Vec::with_capacity(runs);
        for _ in 0..runs {
            samples.push(exe.run_profiled(feeds)?.1);
        }
        let nodes = samples.first().map_or(0, Vec::len);
        let node_ns = (0..nodes)
            .map(|i| {
                let mut v: Vec<f64> = samples.iter().map(|s| s[i]).collect();
                v.sort_by(f64::total_cmp);
                v[v.len() / 2]
            })
            .collect();
        Ok(NodeProfile { runs, node_ns })
    }

    /// (key, (nodes, summed ns)) over the nodes grouped by `key`, the most time first.
    fn grouped<'g, K: Ord>(
        &self,
        g: &'g Graph,
        key: impl Fn(&'g texstream::ir::Node) -> K,
    ) -> Vec<(K, (usize, f64))> {
        let mut by: BTreeMap<K, (usize, f64)> = BTreeMap::new();
        for (n, ns) in g.nodes.iter().zip(&self.node_ns) {
            let e = by.entry(key(n)).or_default();
            e.0 += 1;
            e.1 += ns;
        }
        let mut v: Vec<_> = by.into_iter().collect();
        v.sort_by(|a, b| b.1 .1.total_cmp(&a.1 .1));
        v
    }

    /// The by-op and by-shape tables and the `top` slowest nodes.
    pub fn report(&self, g: &Graph, top: usize) -> String {
        let total: f64 = self.node_ns.iter().sum();
        let ops = self.grouped(g, |n| n.op.name());
        let mut o = String::new();
        let _ = writeln!(
            o,
            "profile: GPU timestamps after every node, median of {} runs: {:.3} ms over {} nodes",
            self.runs,
            total / 1e6,
            g.nodes.len()
        );
        let _ = writeln!(
            o,
            "{:<18} {:>6} {:>11} {:>7} {:>10}",
            "op", "nodes", "total ms", "share", "mean us"
        );
        for (op, (count, ns)) in &ops {
            let _ = writeln!(
                o,
                "{:<18} {:>6} {:>11.3} {:>6.1}% {:>10.1}",
                op,
                count,
                ns / 1e6,
                100.0 * ns / total.max(1.0),
                ns / 1e3 / *count as f64
            );
        }
        // The same by op and shape: a decoder's projections of one width are one row,
        // so the time a kernel takes can be set against the bytes it reads.
        let shape_of = |t: Option<&usize>| {
            t.map_or_else(String::new, |&t| format!("{:?}", g.tensors[t].shape))
        };
        let shapes = self.grouped(g, |n| {
            let input = n.inputs.first().and_then(|t| t.as_ref());
            let shape = format!("{} -> {}", shape_of(input), shape_of(n.outputs.first()));
            (n.op.name(), shape)
        });
        let _ = writeln!(o, "by op and shape (the {top} largest):");
        for ((op, shape), (count, ns)) in shapes.iter().take(top) {
            let _ = writeln!(
                o,
                "  {:<18} {:<36} {:>5} nodes {:>9.3} ms {:>9.1} us each",
                op,
                shape,
                count,
                ns / 1e6,
                ns / 1e3 / *count as f64
            );
        }
        let mut order: Vec<usize> = (0..self.node_ns.len()).collect();
        order.sort_by(|&a, &b| self.node_ns[b].total_cmp(&self.node_ns[a]));
        let _ = writeln!(o, "slowest nodes:");
        for &i in order.iter().take(top) {
            let n = &g.nodes[i];
            let shapes: Vec<String> = n
                .outputs
                .iter()
                .map(|&t| format!("{:?}", g.tensors[t].shape))
                .collect();
            let _ = writeln!(
                o,
                "  {:>9.1} us  {:<12} {} -> {}",
                self.node_ns[i] / 1e3,
                n.op.name(),
                n.name,
                shapes.join(", ")
            );
        }
        o
    }
}
