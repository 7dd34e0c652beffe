//! Folds BatchNormalization into the preceding Conv; lowers any other BatchNorm to a depthwise
//! 1x1 Conv (over NCHW) or to Mul + Add.
use super::{rewrite_each, Rewrite};
use crate::ir::{Activation, BinaryOp, Graph, Node, Op, TensorData, Window};

fn bn_params(g: &Graph, n: &Node, eps: f32) -> Option<(Vec<f32>, Vec<f32>)> {
    let get = |i: usize| g.constants.get(&n.input(i)?).map(|t| t.as_f32());
    let (scale, bias, mean, var) = (get(1)?, get(2)?, get(3)?, get(4)?);
    let c = scale.len();
    if [bias.len(), mean.len(), var.len()].iter().any(|&l| l != c) {
        return None;
    }
    let s: Vec<f32> = (0..c).map(|i| scale[i] / (var[i] + eps).sqrt()).collect();
    let b: Vec<f32> = (0..c).map(|i| bias[i] - mean[i] * s[i]).collect();
    Some((s, b))
}

/// Conv -> BN (Conv output read only by the BN) becomes one Conv with scaled weights and bias.
pub fn fold_into_conv(g: &mut Graph) -> usize {
    rewrite_each(g, fold_at)
}

/// Folds the BatchNorm at `bi` into the Conv that produces its input.
fn fold_at(g: &mut Graph, rw: &mut Rewrite, bi: usize) -> Option<()> {
    let Op::BatchNorm { epsilon } = g.nodes[bi].op else {
        return None;
    };
    let x = g.nodes[bi].input(0)?;
    let ci = rw.producers[x]?;
    if !matches!(
        g.nodes[ci].op,
        Op::Conv {
            activation: crate::ir::Activation::None,
            ..
        }
    ) || rw.sole_consumer(g, x) != Some(bi)
    {
        return None;
    }
    let (s, b) = bn_params(g, &g.nodes[bi], epsilon)?;
    let w = g.nodes[ci].input(1)?;
    let wd = g.constants.get(&w).cloned()?;
    let o = wd.shape.first().copied().unwrap_or(0);
    if o != s.len() {
        return None;
    }
    let per = wd.numel() / o.max(1);
    let wv: Vec<f32> = wd
        .as_f32()
        .iter()
        .enumerate()
        .map(|(i, &v)| v * s[i / per])
        .collect();
    let old_b = g.nodes[ci]
        .input(2)
        .and_then(|t| g.constants.get(&t))
        .map(|t| t.as_f32())
        .unwrap_or_else(|| vec![0.0; o]);
    let nb: Vec<f32> = (0..o).map(|i| old_b[i] * s[i] + b[i]).collect();
    // New constants rather than in-place edits: the originals may be shared by other nodes.
    let wname = format!("{}/bn_folded_weight", g.nodes[ci].name);
    let bname = format!("{}/bn_folded_bias", g.nodes[ci].name);
    let nw = g.add_constant(wname, TensorData::from_f32(wd.shape.clone(), wv));
    let nbt = g.add_constant(bname, TensorData::from_f32(vec![o], nb));
    let y = g.nodes[bi].outputs[0];
    let conv = &mut g.nodes[ci];
    conv.inputs.resize(3, None);
    conv.inputs[1] = Some(nw);
    conv.inputs[2] = Some(nbt);
    conv.outputs[0] = y;
    rw.remove(bi);
    Some(())
}

/// Any BatchNorm left becomes x * s + b per channel (axis 1): over an NCHW tensor a depthwise
/// 1x1 Conv with weights s and bias b, one dispatch into whose epilogue an activation after it
/// fuses (`fuse::activations`: DenseNet's pre-activation BN and ReLU before each of its
/// convolutions, three dispatches where the Conv is one); over other ranks a Mul and an Add with
/// constants shaped [C, 1, ..].
pub fn lower_remaining(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut out = Vec::with_capacity(g.nodes.len());
    let nodes = std::mem::take(&mut g.nodes);
    for n in nodes {
        let Op::BatchNorm { epsilon } = n.op else {
            out.push(n);
            continue;
        };
        let (Some(x), Some((s, b))) = (n.input(0), bn_params(g, &n, epsilon)) else {
            out.push(n);
            continue;
        };
        let c = s.len();
        if g.tensors[x].shape.len() == 4 && g.tensors[x].shape[1] == c {
            let w = g.add_constant(
                format!("{}/scale", n.name),
                TensorData::from_f32(vec![c, 1, 1, 1], s),
            );
            let bt = g.add_constant(
                format!("{}/shift", n.name),
                TensorData::from_f32(vec![c], b),
            );
            out.push(Node {
                name: n.name.clone(),
                op: Op::Conv {
                    window: Window {
                        kernel: [1, 1],
                        strides: [1, 1],
                        dilations: [1, 1],
                        pads: [0, 0, 0, 0],
                        spatial_rank: 2,
                    },
                    group: c,
                    activation: Activation::None,
                },
                inputs: vec![Some(x), Some(w), Some(bt)],
                outputs: vec![n.outputs[0]],
            });
            count += 1;
            continue;
        }
        let rank = g.tensors[x].shape.len().max(2);
        let mut cshape = vec![s.len()];
        cshape.extend(std::iter::repeat_n(1, rank - 2));
        let st = g.add_constant(
            format!("{}/scale", n.name),
            TensorData::from_f32(cshape.clone(), s),
        );
        let bt = g.add_constant(format!("{}/shift", n.name), TensorData::from_f32(cshape, b));
        let y = n.outputs[0];
        let mid = g.add_tensor(
            format!("{}/scaled", n.name),
            g.tensors[y].shape.clone(),
            g.tensors[y].dtype,
        );
        out.push(Node {
            name: format!("{}/mul", n.name),
            op: Op::Binary(BinaryOp::Mul),
            inputs: vec![Some(x), Some(st)],
            outputs: vec![mid],
        });
        out.push(Node {
            name: format!("{}/add", n.name),
            op: Op::Binary(BinaryOp::Add),
            inputs: vec![Some(mid), Some(bt)],
            outputs: vec![y],
        });
        count += 1;
    }
    g.nodes = out;
    count
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Port};

    /// A BatchNorm over an activation of `shape` (channels at axis 1) that no Conv makes.
    fn lone_bn(shape: &[usize]) -> Graph {
        let mut g = Graph::default();
        let c = shape[1];
        let x = g.add_tensor("x", shape.to_vec(), DType::F32);
        let y = g.add_tensor("y", shape.to_vec(), DType::F32);
        let vector = |v: Vec<f32>| TensorData::from_f32(vec![c], v);
        let scale = g.add_constant("scale", vector(vec![2.0; c]));
        let bias = g.add_constant("bias", vector(vec![1.0; c]));
        let mean = g.add_constant("mean", vector((0..c).map(|i| i as f32).collect()));
        let var = g.add_constant("var", vector(vec![4.0; c]));
        g.nodes = vec![Node {
            name: "bn".into(),
            op: Op::BatchNorm { epsilon: 0.0 },
            inputs: [x, scale, bias, mean, var].map(Some).to_vec(),
            outputs: vec![y],
        }];
        g.inputs = vec![Port::new("x", x)];
        g.outputs = vec![Port::new("y", y)];
        g
    }

    #[test]
    fn a_lone_batchnorm_over_nchw_becomes_a_depthwise_conv() {
        let mut g = lone_bn(&[1, 3, 4, 4]);
        assert_eq!(lower_remaining(&mut g), 1);
        let [n] = g.nodes.as_slice() else {
            panic!("one node: {:?}", g.nodes)
        };
        assert!(matches!(
            &n.op,
            Op::Conv {
                group: 3,
                activation: Activation::None,
                window: Window {
                    kernel: [1, 1],
                    strides: [1, 1],
                    pads: [0, 0, 0, 0],
                    ..
                },
            }
        ));
        // s = 2 / sqrt(4) = 1; b = 1 - mean * s.
        let w = &g.constants[&n.input(1).unwrap()];
        assert_eq!(
            (w.shape.clone(), w.as_f32()),
            (vec![3, 1, 1, 1], vec![1.0; 3])
        );
        assert_eq!(g.constants[&n.input(2).unwrap()].as_f32(), [1.0, 0.0, -1.0]);
        // Over [N, C, L] it stays a Mul and an Add.
        let mut g = lone_bn(&[1, 3, 8]);
        assert_eq!(lower_remaining(&mut g), 1);
        let ops: Vec<&Op> = g.nodes.iter().map(|n| &n.op).collect();
        assert_eq!(
            ops,
            [&Op::Binary(BinaryOp::Mul), &Op::Binary(BinaryOp::Add)]
        );
    }
}
