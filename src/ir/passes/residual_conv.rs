//! Residual convolutions: a residual block ends with `y = act(Conv(x) + r)` (ResNet's
//! bottlenecks, MobileNet's inverted residuals), where `r` is the block's shortcut. The Add joins
//! the convolution as its addend (`Op::Conv` input 3, added in the kernel after the bias and
//! before the activation, and allowed to be overwritten in place), so the activation after it
//! moves into the same epilogue (`fuse::activations`): one dispatch where there were three.
use super::{rewrite_each, Rewrite};
use crate::ir::{Activation, BinaryOp, Graph, Op, TensorId};

/// Fuses each `Add(Conv(x), r)` whose Conv is a dense 2-D one (one group) without an activation
/// or an addend yet, whose output nothing else reads, and whose other operand `r` is a run-time
/// tensor of the same shape and type made before the Conv runs (a graph input, or an earlier
/// node's output: the kernels read it as they write, so it must exist then). Where both operands
/// are such Convs, the later one takes the other as its addend. Returns how many.
pub fn fuse_residual_adds(g: &mut Graph) -> usize {
    rewrite_each(g, residual_add_at)
}

fn residual_add_at(g: &mut Graph, rw: &mut Rewrite, ai: usize) -> Option<()> {
    if g.nodes[ai].op != Op::Binary(BinaryOp::Add) {
        return None;
    }
    let (a, b) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    let y = *g.nodes[ai].outputs.first()?;
    // The later convolution first, so that the other operand is ready when it runs.
    let mut order = [(a, b), (b, a)];
    let at = |t: TensorId| rw.producers[t].map_or(0, |p| p + 1);
    if at(b) > at(a) {
        order.swap(0, 1);
    }
    let (pi, r) = order
        .into_iter()
        .find_map(|(x, r)| conv_taking(g, rw, (ai, y), x, r).map(|pi| (pi, r)))?;
    let conv = &mut g.nodes[pi];
    conv.inputs.resize(3, None);
    conv.inputs.push(Some(r));
    conv.outputs[0] = y;
    rw.remove(ai);
    Some(())
}

/// The Conv node making `x` where Add `ai` (output `y`) can become its addend `r`.
fn conv_taking(
    g: &Graph,
    rw: &Rewrite,
    (ai, y): (usize, TensorId),
    x: TensorId,
    r: TensorId,
) -> Option<usize> {
    let pi = rw.producers[x]?;
    if rw.is_removed(pi) || rw.sole_consumer(g, x) != Some(ai) {
        return None;
    }
    let n = &g.nodes[pi];
    let Op::Conv {
        window,
        group: 1,
        activation: Activation::None,
    } = &n.op
    else {
        return None;
    };
    if window.spatial_rank != 2 || n.inputs.len() > 3 || n.outputs.len() != 1 {
        return None;
    }
    let same = |t: TensorId| {
        g.tensors[t].shape == g.tensors[y].shape && g.tensors[t].dtype == g.tensors[y].dtype
    };
    if !same(x) || !same(r) || g.is_const(r) {
        return None;
    }
    // Made before the Conv runs (a graph input has no producer).
    match rw.producers[r] {
        Some(ri) if ri >= pi || rw.is_removed(ri) => None,
        _ => Some(pi),
    }
}

#[cfg(test)]
mod tests {
    use super::super::test_nodes::{conv1x1, node};
    use super::*;
    use crate::ir::{DType, Node, Port, TensorData, UnaryOp};

    fn conv(name: &str, x: TensorId, w: TensorId, y: TensorId) -> Node {
        conv1x1(name, x, w, y, 1)
    }

    /// A bottleneck's end: `relu(conv_b(conv_a(x)) + shortcut)`, the shortcut either x itself
    /// or a projection of x (`conv_s`) made after the main path, as torchvision orders it.
    fn block(projected: bool) -> (Graph, TensorId) {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 8, 4, 4], DType::F32);
        let a = g.add_tensor("a", vec![1, 8, 4, 4], DType::F32);
        let b = g.add_tensor("b", vec![1, 8, 4, 4], DType::F32);
        let s = g.add_tensor("s", vec![1, 8, 4, 4], DType::F32);
        let sum = g.add_tensor("sum", vec![1, 8, 4, 4], DType::F32);
        let y = g.add_tensor("y", vec![1, 8, 4, 4], DType::F32);
        let w = g.add_constant("w", TensorData::from_f32(vec![8, 8, 1, 1], vec![0.1; 64]));
        g.nodes = vec![conv("conv_a", x, w, a), conv("conv_b", a, w, b)];
        let shortcut = if projected {
            g.nodes.push(conv("conv_s", x, w, s));
            s
        } else {
            x
        };
        g.nodes
            .push(node("add", Op::Binary(BinaryOp::Add), &[b, shortcut], sum));
        g.nodes
            .push(node("relu", Op::Unary(UnaryOp::Relu), &[sum], y));
        g.inputs = vec![Port::new("x", x)];
        g.outputs = vec![Port::new("y", y)];
        (g, y)
    }

    #[test]
    fn a_shortcut_add_joins_the_last_convolution() {
        // The identity shortcut: conv_b takes x as its addend, and the ReLU then fuses too.
        let (mut g, y) = block(false);
        assert_eq!(fuse_residual_adds(&mut g), 1);
        assert_eq!(super::super::fuse::activations(&mut g), 1);
        let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["conv_a", "conv_b"]);
        let conv_b = &g.nodes[1];
        assert_eq!(conv_b.input(3), Some(0), "x is the addend");
        assert_eq!(conv_b.outputs, [y]);
        assert!(matches!(
            conv_b.op,
            Op::Conv {
                activation: Activation::Relu,
                ..
            }
        ));
        // A projected shortcut made after the main path: the projection, which runs last,
        // takes the main path's output as its addend.
        let (mut g, _) = block(true);
        assert_eq!(fuse_residual_adds(&mut g), 1);
        let conv_s = g.nodes.iter().find(|n| n.name == "conv_s").unwrap();
        let b = g.nodes.iter().find(|n| n.name == "conv_b").unwrap().outputs[0];
        assert_eq!(conv_s.input(3), Some(b));
    }

    #[test]
    fn adds_the_kernels_cannot_take_stay() {
        // Something else reads the convolution's output.
        let (mut g, _) = block(false);
        let b = g.nodes[1].outputs[0];
        g.outputs.push(Port::new("b", b));
        assert_eq!(fuse_residual_adds(&mut g), 0);
        // A broadcast operand, a constant one, a convolution with an activation.
        for case in 0..3 {
            let (mut g, _) = block(false);
            match case {
                0 => {
                    let r = g.add_tensor("r", vec![1, 8, 1, 1], DType::F32);
                    g.inputs.push(Port::new("r", r));
                    g.nodes[2].inputs[1] = Some(r);
                }
                1 => {
                    let c =
                        g.add_constant("c", TensorData::from_f32(vec![1, 8, 4, 4], vec![1.0; 128]));
                    g.nodes[2].inputs[1] = Some(c);
                }
                _ => {
                    if let Op::Conv { activation, .. } = &mut g.nodes[1].op {
                        *activation = Activation::Relu;
                    }
                }
            }
            assert_eq!(fuse_residual_adds(&mut g), 0, "case {case}");
        }
    }
}
