//! Synthetic load profiles: weights laid out in first-use order and cut into pages, for workloads of
//! any size (uniform layer stacks, transformers) and for models whose packed files do not exist yet.
use crate::{Profile, Step};
use serde::{Deserialize, Serialize};

/// One layer of a synthetic model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LayerSpec {
    pub name: String,
    /// Bytes of this layer's own weights, appended to the weight space in order.
    pub weight_bytes: u64,
    pub compute_s: f64,
    pub activation_bytes: u64,
    /// Reads the weights of an earlier layer (by index) instead of its own, e.g. a tied LM head.
    #[serde(default)]
    pub reuses: Option<usize>,
}

/// Lays the layers' weights out back to back (small tensors share pages, as the packer does) and
/// makes one step per layer reading the pages its bytes touch.
pub fn layered(model: &str, page_bytes: u64, layers: &[LayerSpec]) -> Profile {
    let page_bytes = page_bytes.max(1);
    let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(layers.len());
    let mut off = 0u64;
    let mut steps = Vec::with_capacity(layers.len());
    for l in layers {
        let (start, len) = match l.reuses.and_then(|i| ranges.get(i).copied()) {
            Some(r) => r,
            None => {
                let r = (off, l.weight_bytes);
                off += l.weight_bytes;
                r
            }
        };
        ranges.push((start, len));
        let pages = if len == 0 {
            Vec::new()
        } else {
            ((start / page_bytes) as u32..=((start + len - 1) / page_bytes) as u32).collect()
        };
        steps.push(Step {
            name: l.name.clone(),
            pages,
            compute_s: l.compute_s,
            activation_bytes: l.activation_bytes,
            lookup: false,
        });
    }
    Profile {
        model: model.to_string(),
        page_bytes,
        total_pages: off.div_ceil(page_bytes) as u32,
        steps,
    }
}

/// A stack of identical layers.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct UniformSpec {
    pub layers: u32,
    pub bytes_per_layer: u64,
    pub compute_per_layer_s: f64,
    pub activation_bytes: u64,
}

/// `spec.layers` identical layers.
pub fn uniform(model: &str, page_bytes: u64, spec: &UniformSpec) -> Profile {
    let layers: Vec<LayerSpec> = (0..spec.layers)
        .map(|i| LayerSpec {
            name: format!("layer{i}"),
            weight_bytes: spec.bytes_per_layer,
            compute_s: spec.compute_per_layer_s,
            activation_bytes: spec.activation_bytes,
            reuses: None,
        })
        .collect();
    layered(model, page_bytes, &layers)
}

/// A decoder-only transformer run over `seq_len` tokens (one forward pass, prefill-like).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TransformerSpec {
    pub d_model: u64,
    pub layers: u32,
    pub vocab: u64,
    pub seq_len: u64,
    /// Bytes per weight value (2 for fp16).
    pub bytes_per_param: u64,
    /// Assumed sustained FLOP/s of the device, to turn FLOPs into compute time.
    pub flops_per_s: f64,
}

/// Steps: the embedding gather, then per layer QKV, attention output, MLP up, MLP down; then the LM
/// head, which reads the embedding's pages again (tied weights) and, as in a prefill that starts
/// generation, computes the last position's logits only.
///
/// The embedding table is by far the largest single tensor, so the gather and the head are sharded
/// along the vocabulary into steps no larger than one MLP matrix: a step that read the whole table
/// would set the minimum feasible cap on its own (an engine under a cap tiles it the same way).
pub fn transformer(model: &str, page_bytes: u64, t: &TransformerSpec) -> Profile {
    let d = t.d_model;
    let s = t.seq_len;
    let bpp = t.bytes_per_param;
    let act = |rows: u64, width: u64| 2 * rows * width * bpp;
    let mm = |rows: u64, k: u64, n: u64| 2.0 * (rows * k * n) as f64 / t.flops_per_s;
    let shard_rows = (4 * d).clamp(1, t.vocab.max(1));
    let shards: Vec<(u64, u64)> = (0..t.vocab.div_ceil(shard_rows))
        .map(|i| {
            let r0 = i * shard_rows;
            (r0, (t.vocab - r0).min(shard_rows))
        })
        .collect();
    let mut layers = Vec::new();
    for (i, &(_, rows)) in shards.iter().enumerate() {
        layers.push(LayerSpec {
            name: format!("embed.{i}"),
            weight_bytes: rows * d * bpp,
            compute_s: (s * d) as f64 / t.flops_per_s / shards.len() as f64,
            activation_bytes: act(s, d),
            reuses: None,
        });
    }
    for i in 0..t.layers {
        let attn_s = 2.0 * 2.0 * (s * s * d) as f64 / t.flops_per_s;
        for (name, k, n, extra) in [
            ("qkv", d, 3 * d, 0.0),
            ("attn_out", d, d, attn_s),
            ("mlp_up", d, 4 * d, 0.0),
            ("mlp_down", 4 * d, d, 0.0),
        ] {
            layers.push(LayerSpec {
                name: format!("l{i}.{name}"),
                weight_bytes: k * n * bpp,
                compute_s: mm(s, k, n) + extra,
                activation_bytes: act(s, k.max(n) + d),
                reuses: None,
            });
        }
    }
    for (i, &(_, rows)) in shards.iter().enumerate() {
        layers.push(LayerSpec {
            name: format!("lm_head.{i}"),
            weight_bytes: 0,
            compute_s: mm(1, d, rows),
            activation_bytes: act(s, d) + t.vocab * bpp,
            reuses: Some(i),
        });
    }
    layered(model, page_bytes, &layers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_share_pages_in_order() {
        let l = |b: u64| LayerSpec {
            name: "x".into(),
            weight_bytes: b,
            compute_s: 0.0,
            activation_bytes: 0,
            reuses: None,
        };
        let mut tied = l(0);
        tied.reuses = Some(0);
        let p = layered("m", 100, &[l(150), l(30), l(0), l(120), tied]);
        assert_eq!(p.total_pages, 3);
        let pages: Vec<Vec<u32>> = p.steps.iter().map(|s| s.pages.clone()).collect();
        assert_eq!(
            pages,
            vec![vec![0, 1], vec![1], vec![], vec![1, 2], vec![0, 1]]
        );
    }

    #[test]
    fn transformer_shards_the_vocabulary_and_ties_the_head() {
        let t = TransformerSpec {
            d_model: 64,
            layers: 2,
            vocab: 1000,
            seq_len: 16,
            bytes_per_param: 2,
            flops_per_s: 1e12,
        };
        let page = 4096;
        let p = transformer("m", page, &t);
        let biggest_matrix = 4 * 64 * 64 * 2;
        for step in &p.steps {
            // A shard may straddle one extra page boundary, never more.
            assert!(
                step.pages.len() as u64 <= biggest_matrix / page + 2,
                "{}",
                step.name
            );
        }
        let embed: Vec<_> = p
            .steps
            .iter()
            .filter(|s| s.name.starts_with("embed."))
            .collect();
        let head: Vec<_> = p
            .steps
            .iter()
            .filter(|s| s.name.starts_with("lm_head."))
            .collect();
        assert_eq!(embed.len(), 1000usize.div_ceil(256));
        assert_eq!(embed.len(), head.len());
        for (e, h) in embed.iter().zip(&head) {
            assert_eq!(e.pages, h.pages);
        }
        let table_pages = (1000 * 64 * 2u64).div_ceil(page) as usize;
        let mut all: Vec<u32> = embed.iter().flat_map(|s| s.pages.clone()).collect();
        all.dedup();
        assert_eq!(all.len(), table_pages);
    }
}
