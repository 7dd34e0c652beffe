//! 1-D convolutions as 2-D ones between layout copies that are graph tensors.
//!
//! The rank rule stores a `[N, C, L]` tensor with its leading axis in the texel lanes (C = N),
//! while the convolution kernels want channels in the lanes, as in `[N, C, 1, L]`. A 1-D Conv
//! otherwise copies its input and output into per-node scratch tensors when its kernel is first
//! recorded (`Executable::spatial_2d`): allocations of their own, outside the activation arena,
//! that every model of a workload keeps for the whole session (the Whisper encoder's two: 6.2 MB
//! at fp16, beside a 27.6 MB arena). Here the same two copies become `Reshape` nodes and their
//! results graph tensors, so the arena places them, over memory that later steps reuse. The
//! kernels and their order are unchanged, and with them every value.
use crate::ir::{Graph, Node, Op, ReshapeKind};

/// Rewrites every plain 1-D Conv; returns how many.
pub fn conv1d_as_2d(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        if eligible(g, i) {
            rewrite(g, i);
            i += 2; // past the inserted input copy; the output copy is visited and skipped
            count += 1;
        }
        i += 1;
    }
    count
}

/// A Conv on `[N, C, L]` with only data, filter and bias (the 1-D form takes no addend or
/// input scale), a constant filter of its own, and one output.
fn eligible(g: &Graph, i: usize) -> bool {
    let n = &g.nodes[i];
    let Op::Conv { window, .. } = &n.op else {
        return false;
    };
    let (Some(x), Some(w)) = (n.input(0), n.input(1)) else {
        return false;
    };
    window.spatial_rank == 1
        && n.inputs.len() <= 3
        && n.outputs.len() == 1
        && g.tensors[x].shape.len() == 3
        && g.tensors[w].shape.len() == 3
        && g.tensors[n.outputs[0]].shape.len() == 3
        && g.is_const(w)
        && g.consumers()[w].len() == 1
}

fn rewrite(g: &mut Graph, i: usize) {
    let (x, w, y) = {
        let n = &g.nodes[i];
        (
            n.inputs[0].unwrap_or_default(),
            n.inputs[1].unwrap_or_default(),
            n.outputs[0],
        )
    };
    let name = g.nodes[i].name.clone();
    let as_2d = |s: &[usize]| vec![s[0], s[1], 1, s[2]];
    let x4_shape = as_2d(&g.tensors[x].shape);
    let y4_shape = as_2d(&g.tensors[y].shape);
    let (xd, yd) = (g.tensors[x].dtype, g.tensors[y].dtype);
    let x4 = g.add_tensor(format!("{name}:input_2d"), x4_shape.clone(), xd);
    let y4 = g.add_tensor(format!("{name}:output_2d"), y4_shape, yd);
    // The filter's values are the same in `[O, I, 1, K]`.
    let w4_shape = as_2d(&g.tensors[w].shape);
    if let Some(c) = g.constants.get_mut(&w) {
        c.shape = w4_shape.clone();
    }
    g.tensors[w].shape = w4_shape;
    let y_shape = g.tensors[y].shape.clone();
    let conv = &mut g.nodes[i];
    if let Op::Conv { window, .. } = &mut conv.op {
        window.spatial_rank = 2;
    }
    conv.inputs[0] = Some(x4);
    conv.outputs[0] = y4;
    let reshape = |name: String, from, to, shape| Node {
        name,
        op: Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape,
        },
        inputs: vec![Some(from)],
        outputs: vec![to],
    };
    g.nodes
        .insert(i + 1, reshape(format!("{name}:to_1d"), y4, y, y_shape));
    g.nodes
        .insert(i, reshape(format!("{name}:to_2d"), x, x4, x4_shape));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, DType, TensorData, Window};

    #[test]
    fn a_1d_conv_runs_2d_between_two_copies() {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 80, 3000], DType::F32);
        let w = g.add_constant(
            "w",
            TensorData::from_f32(vec![384, 80, 3], vec![0.5; 384 * 80 * 3]),
        );
        let y = g.add_tensor("y", vec![1, 384, 3000], DType::F32);
        g.nodes.push(Node {
            name: "conv1".into(),
            op: Op::Conv {
                window: Window {
                    kernel: [1, 3],
                    strides: [1, 1],
                    dilations: [1, 1],
                    pads: [0, 1, 0, 1],
                    spatial_rank: 1,
                },
                group: 1,
                activation: Activation::Gelu,
            },
            inputs: vec![Some(x), Some(w)],
            outputs: vec![y],
        });
        assert_eq!(conv1d_as_2d(&mut g), 1);
        let ops: Vec<&str> = g.nodes.iter().map(|n| n.op.name()).collect();
        assert_eq!(ops, ["Reshape", "Conv", "Reshape"]);
        let conv = &g.nodes[1];
        let x4 = conv.inputs[0].unwrap();
        assert_eq!(g.tensors[x4].shape, [1, 80, 1, 3000]);
        assert_eq!(g.tensors[conv.outputs[0]].shape, [1, 384, 1, 3000]);
        assert_eq!(g.tensors[w].shape, [384, 80, 1, 3]);
        assert_eq!(g.constants[&w].shape, [384, 80, 1, 3]);
        assert!(matches!(&conv.op, Op::Conv { window, .. } if window.spatial_rank == 2));
        assert_eq!(g.nodes[2].outputs, [y]);
        assert_eq!(g.nodes[0].inputs, [Some(x)]);
        // Nothing left to rewrite.
        assert_eq!(conv1d_as_2d(&mut g), 0);
    }
}
