//! Graph passes run after import: BatchNorm folding, pattern fusion (GELU, HardSwish), activation
//! fusion, dead-code elimination and layout assignment.
pub mod attention;
pub mod channel_scale;
pub mod concat_conv;
pub mod conv1d;
pub mod fold_bn;
pub mod fuse;
pub mod heads;
pub mod layout;
pub mod residual_conv;
pub mod residual_norm;
pub mod rope;
pub mod rows;
pub mod split_head;

use super::{Graph, TensorId};

/// What the passes changed, for `compile` output.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PassReport {
    pub bn_folded: usize,
    pub bn_to_affine: usize,
    pub gelu_fused: usize,
    pub layer_norms_fused: usize,
    pub hardswish_fused: usize,
    pub bias_adds_fused: usize,
    pub noop_casts_removed: usize,
    pub activations_fused: usize,
    pub dead_nodes_removed: usize,
    pub transposes_absorbed: usize,
    pub layout_views: usize,
    /// Reshape/Transpose nodes that remain real copies.
    pub layout_copies: usize,
    /// Reshape copies folded into the Transpose copy that reads them (`read_as`).
    #[serde(default)]
    pub reshapes_folded: usize,
    /// Attention operands read from a projection's rows (a head split's two copies gone each).
    #[serde(default)]
    pub attention_heads_split: usize,
    /// Softmax nodes that write over their input.
    #[serde(default)]
    pub softmax_in_place: usize,
    /// `[1, T, N]` heads run as `[1, 4, T/4, N]` (four rows packed into texel lanes).
    #[serde(default)]
    pub head_rows_packed: usize,
    /// Wide heads run as column pieces (no step reads the whole matrix).
    #[serde(default)]
    pub heads_split: usize,
    /// Convolutions over a channel Concat run as a sum of per-input convolutions.
    #[serde(default)]
    pub concat_convs_split: usize,
    /// 1-D convolutions run 2-D between two layout copies that the arena places.
    #[serde(default)]
    pub conv1d_as_2d: usize,
    /// Unary / Binary nodes that write over an input.
    #[serde(default)]
    pub elementwise_in_place: usize,
    /// MatMul, scale, mask, Softmax, MatMul chains run as one attention kernel.
    #[serde(default)]
    pub attention_fused: usize,
    /// Pow, ReduceMean, Add, Sqrt, Reciprocal, Mul (and a scale Mul) chains run as one RMSNorm.
    #[serde(default)]
    pub rms_norms_fused: usize,
    /// Rotate-half RoPE chains (Slice, Slice, Neg, Concat, Mul, Mul, Add) run as one kernel.
    #[serde(default)]
    pub ropes_fused: usize,
    /// `Mul(x, Sigmoid(x))` pairs run as one SiLU (then usually in a MatMul's epilogue).
    #[serde(default)]
    pub silu_fused: usize,
    /// Fused attentions that store their heads side by side, `[1, Sq, H * Dv]` (the Transpose
    /// and Reshape after them gone).
    #[serde(default)]
    pub attention_heads_merged: usize,
    /// Head splits (`Reshape`, `Transpose(0, 2, 1, 3)`) read by RoPE and cache writes from the
    /// projection's rows (the two copies gone).
    #[serde(default)]
    pub head_splits_read: usize,
    /// Residual Adds run inside the norm that reads their sum.
    #[serde(default)]
    pub residual_norms_fused: usize,
    /// Residual Adds run as the addend of the convolution that makes one of their operands.
    #[serde(default)]
    pub residual_convs_fused: usize,
    /// Channel-scale Muls (a squeeze-and-excitation's) run inside the convolution that reads
    /// their product.
    #[serde(default)]
    pub channel_scales_fused: usize,
    /// Graph outputs shown in their Reshape's shape instead of copied by it.
    #[serde(default)]
    pub output_reshapes_removed: usize,
}

/// What the passes need to know of the packing that follows.
#[derive(Clone, Copy, Debug)]
pub struct PassOptions {
    /// Weight values one page holds (1 MiB of fp16 by default): a head tied to a row table over
    /// a page is split into pieces of at most half a page each, or of the largest other step's
    /// weights where that is more.
    pub page_values: usize,
}

impl Default for PassOptions {
    fn default() -> Self {
        PassOptions {
            page_values: split_head::MAX_WEIGHT_VALUES,
        }
    }
}

/// Runs every pass in order, for the default packing.
pub fn optimize(g: &mut Graph) -> PassReport {
    optimize_with(g, &PassOptions::default())
}

/// Runs every pass in order.
pub fn optimize_with(g: &mut Graph, opts: &PassOptions) -> PassReport {
    let mut r = PassReport::default();
    r.dead_nodes_removed += dce(g);
    r.bn_folded = fold_bn::fold_into_conv(g);
    r.bn_to_affine = fold_bn::lower_remaining(g);
    r.gelu_fused = fuse::gelu(g);
    r.layer_norms_fused = fuse::layer_norm(g);
    r.rms_norms_fused = fuse::rms_norm(g);
    r.hardswish_fused = fuse::hardswish(g);
    r.silu_fused = fuse::silu(g);
    r.noop_casts_removed = fuse::noop_casts(g);
    r.bias_adds_fused = fuse::bias_add(g);
    r.dead_nodes_removed += dce(g);
    r.residual_convs_fused = residual_conv::fuse_residual_adds(g);
    r.activations_fused = fuse::activations(g);
    r.concat_convs_split = concat_conv::split_conv_over_concat(g);
    // After the convolutions over concatenations split (a scaled one would not).
    r.channel_scales_fused = channel_scale::fuse_channel_scales(g);
    // After every fusion that reads a Conv's neighbours (its activation, a residual Add).
    r.conv1d_as_2d = conv1d::conv1d_as_2d(g);
    r.transposes_absorbed = layout::absorb_transposes(g);
    r.dead_nodes_removed += dce(g);
    r.attention_fused = attention::fuse_attention(g);
    r.ropes_fused = rope::fuse_rope(g);
    r.head_splits_read = heads::split_heads(g);
    r.attention_heads_split = heads::attention_split_heads(g);
    r.attention_heads_merged = attention::merge_heads(g);
    // The repeat_kv copies that attention now reads through.
    r.dead_nodes_removed += dce(g);
    r.head_rows_packed = rows::pack_head_rows(g);
    r.heads_split = split_head::split_wide_heads(g, opts.page_values);
    r.residual_norms_fused = residual_norm::fuse_residual_norms(g);
    r.output_reshapes_removed = layout::outputs_without_reshapes(g);
    r.dead_nodes_removed += dce(g);
    let (views, copies) = layout::assign(g);
    r.layout_views = views;
    r.reshapes_folded = layout::fold_reshapes_into_transposes(g);
    r.layout_copies = copies - r.reshapes_folded;
    r.softmax_in_place = layout::softmax_in_place(g);
    r.elementwise_in_place = layout::elementwise_in_place(g);
    g.prune_constants();
    r
}

/// Replaces every read of `old` (node inputs and graph outputs) by `new`.
pub fn replace_uses(g: &mut Graph, old: TensorId, new: TensorId) {
    for n in &mut g.nodes {
        for t in n.inputs.iter_mut().flatten() {
            if *t == old {
                *t = new;
            }
        }
    }
    for p in &mut g.outputs {
        if p.tensor == old {
            p.tensor = new;
        }
    }
}

/// Removes nodes none of whose outputs are read or exported; returns how many.
pub fn dce(g: &mut Graph) -> usize {
    let before = g.nodes.len();
    loop {
        let cons = g.consumers();
        let keep: Vec<bool> = g
            .nodes
            .iter()
            .map(|n| {
                n.outputs
                    .iter()
                    .any(|&t| !cons[t].is_empty() || g.is_output(t))
            })
            .collect();
        if keep.iter().all(|&k| k) {
            break;
        }
        let mut it = keep.into_iter();
        g.nodes.retain(|_| it.next().unwrap_or(true));
    }
    g.prune_constants();
    before - g.nodes.len()
}

/// The state of one pattern-rewrite pass: who produced and who read each tensor when the pass
/// began, and the nodes marked for removal when it ends. Nodes are only removed at the end, so
/// node indices stay valid while the pass runs.
pub struct Rewrite {
    pub producers: Vec<Option<usize>>,
    pub consumers: Vec<Vec<usize>>,
    removed: Vec<bool>,
}

impl Rewrite {
    /// Marks node `ni` for removal at the end of the pass.
    pub fn remove(&mut self, ni: usize) {
        self.removed[ni] = true;
    }

    pub fn is_removed(&self, ni: usize) -> bool {
        self.removed[ni]
    }

    /// [`sole_consumer`] by the links at the start of the pass.
    pub fn sole_consumer(&self, g: &Graph, t: TensorId) -> Option<usize> {
        sole_consumer(g, &self.consumers, t)
    }
}

/// Runs `rewrite_at` on every node index in order (`Some` when it rewrote the pattern rooted
/// there), then removes the nodes it marked; returns how many rewrites it made.
pub fn rewrite_each(
    g: &mut Graph,
    mut rewrite_at: impl FnMut(&mut Graph, &mut Rewrite, usize) -> Option<()>,
) -> usize {
    let mut rw = Rewrite {
        producers: g.producers(),
        consumers: g.consumers(),
        removed: vec![false; g.nodes.len()],
    };
    let mut count = 0;
    for ni in 0..g.nodes.len() {
        if rewrite_at(g, &mut rw, ni).is_some() {
            count += 1;
        }
    }
    let mut removed = rw.removed.into_iter();
    g.nodes.retain(|_| !removed.next().unwrap_or(false));
    count
}

/// The single consumer of `t`, if it has exactly one and is not a graph output.
pub fn sole_consumer(g: &Graph, cons: &[Vec<usize>], t: TensorId) -> Option<usize> {
    match cons[t].as_slice() {
        [c] if !g.is_output(t) => Some(*c),
        _ => None,
    }
}

/// Scalar value of a constant tensor with one element.
pub fn scalar(g: &Graph, t: Option<TensorId>) -> Option<f64> {
    let d = g.constants.get(&t?)?;
    (d.numel() == 1).then(|| d.values.get_f(0))
}

/// Node builders for the passes' unit tests.
#[cfg(test)]
pub(crate) mod test_nodes {
    use crate::ir::{Activation, Node, Op, TensorId, Window};

    /// A 1x1 Conv of `group` groups, `x` through filter `w` into `y`, no bias.
    pub fn conv1x1(name: &str, x: TensorId, w: TensorId, y: TensorId, group: usize) -> Node {
        Node {
            name: name.into(),
            op: Op::Conv {
                window: Window {
                    kernel: [1, 1],
                    strides: [1, 1],
                    dilations: [1, 1],
                    pads: [0, 0, 0, 0],
                    spatial_rank: 2,
                },
                group,
                activation: Activation::None,
            },
            inputs: vec![Some(x), Some(w), None],
            outputs: vec![y],
        }
    }

    /// A node of `op` over `inputs` into `y`.
    pub fn node(name: &str, op: Op, inputs: &[TensorId], y: TensorId) -> Node {
        Node {
            name: name.into(),
            op,
            inputs: inputs.iter().map(|&t| Some(t)).collect(),
            outputs: vec![y],
        }
    }
}
