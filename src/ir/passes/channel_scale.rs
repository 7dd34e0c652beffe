//! Channel scales read by a convolution: a squeeze-and-excitation block ends with
//! `Mul(x, s)`, `s` of shape `[N, C, 1, 1]` made at run time from `x` itself (MobileNetV3,
//! PP-LCNet), and the product goes straight into the block's projection, a dense convolution.
//! The Mul joins that convolution as its input scale (`Op::Conv` input 4: the kernels multiply
//! each input texel by its channels' factors as they load it), so the product is never written
//! or read back: one dispatch and a full activation's traffic gone a block.
use super::{rewrite_each, Rewrite};
use crate::ir::{BinaryOp, Graph, Op, TensorId};

/// Fuses each `Mul(x, s)` (either operand order) whose `s` is a run-time float tensor
/// `[N, C, 1, 1]` beside an `x` of `[N, C, H, W]` and of the same type, and whose product only
/// a dense 2-D convolution (one group) reads, as its input and nothing else, with no input
/// scale yet. Returns how many.
pub fn fuse_channel_scales(g: &mut Graph) -> usize {
    rewrite_each(g, channel_scale_at)
}

fn channel_scale_at(g: &mut Graph, rw: &mut Rewrite, mi: usize) -> Option<()> {
    if g.nodes[mi].op != Op::Binary(BinaryOp::Mul) || g.nodes[mi].outputs.len() != 1 {
        return None;
    }
    let (a, b) = (g.nodes[mi].input(0)?, g.nodes[mi].input(1)?);
    let y = g.nodes[mi].outputs[0];
    let (x, s) = [(a, b), (b, a)]
        .into_iter()
        .find(|&(x, s)| scales_channels(g, x, s, y))?;
    let ci = rw.sole_consumer(g, y)?;
    if rw.is_removed(ci) || !takes_input_scale(g, ci, y) {
        return None;
    }
    let conv = &mut g.nodes[ci];
    conv.inputs[0] = Some(x);
    conv.inputs.resize(4, None);
    conv.inputs.push(Some(s));
    rw.remove(mi);
    Some(())
}

/// Whether `y = x * s` scales `x`'s channels by `s`: `x` `[N, C, H, W]` and `y` alike, `s`
/// `[N, C, 1, 1]`, all of one float type, `s` made at run time (a constant factor belongs in
/// the weights, not here).
fn scales_channels(g: &Graph, x: TensorId, s: TensorId, y: TensorId) -> bool {
    let (tx, ts, ty) = (&g.tensors[x], &g.tensors[s], &g.tensors[y]);
    tx.shape.len() == 4
        && ty.shape == tx.shape
        && ts.shape == [tx.shape[0], tx.shape[1], 1, 1]
        && tx.dtype.is_float()
        && ts.dtype == tx.dtype
        && ty.dtype == tx.dtype
        && !g.is_const(s)
        && !g.is_const(x)
}

/// Whether node `ci` is a dense 2-D convolution that reads `y` as its input only and has no
/// input scale. One of a single input and output channel counts as depthwise in the kernels,
/// which scale only dense ones: not that.
fn takes_input_scale(g: &Graph, ci: usize, y: TensorId) -> bool {
    let n = &g.nodes[ci];
    let Op::Conv { window, group, .. } = &n.op else {
        return false;
    };
    let out_channels = n
        .outputs
        .first()
        .map(|&o| g.tensors[o].shape.get(1).copied());
    let single_channel = g.tensors[y].shape.get(1) == Some(&1) && out_channels == Some(Some(1));
    *group == 1
        && !single_channel
        && window.spatial_rank == 2
        && n.input(0) == Some(y)
        && n.inputs.len() <= 4
        && n.inputs.iter().skip(1).all(|&t| t != Some(y))
        && n.outputs.len() == 1
}

#[cfg(test)]
mod tests {
    use super::super::test_nodes::{conv1x1 as conv, node};
    use super::*;
    use crate::ir::{DType, Port, TensorData, UnaryOp};

    /// A squeeze-and-excitation block: `proj(x * sigmoid(fc(gap(x))))`, the Mul's
    /// operands scale first where `scale_first`; `proj` has `group` groups over 8 channels.
    fn block(scale_first: bool, group: usize) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 8, 4, 4], DType::F32);
        let pooled = g.add_tensor("pooled", vec![1, 8, 1, 1], DType::F32);
        let fc = g.add_tensor("fc", vec![1, 8, 1, 1], DType::F32);
        let s = g.add_tensor("s", vec![1, 8, 1, 1], DType::F32);
        let scaled = g.add_tensor("scaled", vec![1, 8, 4, 4], DType::F32);
        let y = g.add_tensor("y", vec![1, 8, 4, 4], DType::F32);
        let w_fc = g.add_constant(
            "w_fc",
            TensorData::from_f32(vec![8, 8, 1, 1], vec![0.1; 64]),
        );
        let w_proj = g.add_constant(
            "w_proj",
            TensorData::from_f32(vec![8, 8 / group, 1, 1], vec![0.1; 64 / group]),
        );
        let mul_inputs = if scale_first { [s, x] } else { [x, s] };
        g.nodes = vec![
            node("gap", Op::GlobalAveragePool, &[x], pooled),
            conv("fc", pooled, w_fc, fc, 1),
            node("gate", Op::Unary(UnaryOp::Sigmoid), &[fc], s),
            node("mul", Op::Binary(BinaryOp::Mul), &mul_inputs, scaled),
            conv("proj", scaled, w_proj, y, group),
        ];
        g.inputs = vec![Port::new("x", x)];
        g.outputs = vec![Port::new("y", y)];
        g
    }

    #[test]
    fn a_squeeze_and_excitation_scale_joins_the_projection() {
        for scale_first in [false, true] {
            let mut g = block(scale_first, 1);
            assert_eq!(fuse_channel_scales(&mut g), 1);
            let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
            assert_eq!(names, ["gap", "fc", "gate", "proj"]);
            let proj = &g.nodes[3];
            assert_eq!(proj.input(0), Some(0), "the projection reads x itself");
            assert_eq!(proj.input(3), None, "no addend");
            assert_eq!(proj.input(4), g.nodes[2].outputs.first().copied());
        }
    }

    #[test]
    fn other_products_stay() {
        // A grouped projection: the kernels scale only dense convolutions' inputs.
        let mut g = block(false, 2);
        assert_eq!(fuse_channel_scales(&mut g), 0);
        // The product also read elsewhere (a graph output).
        let mut g = block(false, 1);
        let scaled = g.nodes[3].outputs[0];
        g.outputs.push(Port::new("scaled", scaled));
        assert_eq!(fuse_channel_scales(&mut g), 0);
        // A factor per element rather than per channel.
        let mut g = block(false, 1);
        let s = g.nodes[2].outputs[0];
        g.tensors[s].shape = vec![1, 8, 4, 4];
        assert_eq!(fuse_channel_scales(&mut g), 0);
        // A constant factor.
        let mut g = block(false, 1);
        let c = g.add_constant("c", TensorData::from_f32(vec![1, 8, 1, 1], vec![0.5; 8]));
        g.nodes[3].inputs[1] = Some(c);
        assert_eq!(fuse_channel_scales(&mut g), 0);
    }
}
