//! Convolution over a channel concatenation, without the concatenation.
//!
//! `Conv(Concat([a1, .., ak], axis 1), W, B)` equals `Conv(a1, W1, B) + .. + Conv(ak, Wk)`
//! where `Wi` are the input-channel slices of `W` (a group-1 convolution sums over its input
//! channels). The concatenated tensor is the largest activation of the detectors we run (PP-OCR's
//! HGNet stem holds two 24-channel maps and their 48-channel concatenation at half the input
//! resolution: 14.2 MB live at 384x768), and each partial convolution can run as soon as its own
//! input exists, so that input dies early. The rewrite places every partial convolution right
//! after the node that makes its input; each after the first takes the running sum as its addend
//! (Conv input 3, added in the kernel before the activation, written over the addend in place),
//! and the last applies the fused activation. Each partial sum is rounded to the activation
//! precision once more than the fused Conv's, so the rewrite applies only at the Concat where the
//! graph's activation peak is.
use crate::ir::{Activation, Graph, Node, Op, TensorData, TensorId, Values};

use super::sole_consumer;

/// Smallest concatenation (elements) worth the extra dispatches.
const MIN_ELEMENTS: usize = 1 << 16;

/// Rewrites every eligible Concat + Conv pair; returns how many.
pub fn split_conv_over_concat(g: &mut Graph) -> usize {
    split_larger_than(g, MIN_ELEMENTS)
}

/// Rewrites the pairs whose concatenation has at least `min_elements` elements.
fn split_larger_than(g: &mut Graph, min_elements: usize) -> usize {
    let mut count = 0;
    while let Some((ci, vi)) = find(g, min_elements) {
        if !rewrite(g, ci, vi) {
            break; // malformed pair (channel counts disagree): leave the graph as it is
        }
        count += 1;
    }
    count
}

/// A Concat (node index) over channels whose only reader is a plain group-1 Conv (node index).
fn find(g: &Graph, min_elements: usize) -> Option<(usize, usize)> {
    let cons = g.consumers();
    // Only where the model's activation peak is: elsewhere the split would add dispatches and
    // fp16 roundings of partial sums for no saving.
    let (live, peak) = crate::ir::liveness::liveness(g, 2);
    for (ci, n) in g.nodes.iter().enumerate() {
        let Op::Concat { axis: 1 } = n.op else {
            continue;
        };
        if live[ci] < peak {
            continue;
        }
        let y = *n.outputs.first()?;
        if g.tensors[y].shape.len() != 4
            || g.tensors[y].shape.iter().product::<usize>() < min_elements
            || n.inputs.len() < 2
            || n.inputs.iter().any(|t| t.is_none_or(|t| g.is_const(t)))
        {
            continue;
        }
        let Some(vi) = sole_consumer(g, &cons, y) else {
            continue;
        };
        let conv = &g.nodes[vi];
        let Op::Conv {
            group: 1, window, ..
        } = conv.op
        else {
            continue;
        };
        let w = conv.input(1);
        let plain = window.spatial_rank == 2
            && conv.input(0) == Some(y)
            && w.is_some_and(|w| {
                g.constants
                    .get(&w)
                    .is_some_and(|d| matches!(d.values, Values::F(_)) && d.shape.len() == 4)
            })
            && conv.input(2).is_none_or(|b| g.is_const(b))
            && conv.input(3).is_none();
        if plain {
            return Some((ci, vi));
        }
    }
    None
}

/// Input-channel slice `[c0, c1)` of an `[O, I, KH, KW]` filter.
fn filter_slice(w: &TensorData, c0: usize, c1: usize) -> TensorData {
    let [o, i, kh, kw] = [w.shape[0], w.shape[1], w.shape[2], w.shape[3]];
    let v = w.as_f32();
    let per = kh * kw;
    let mut out = Vec::with_capacity(o * (c1 - c0) * per);
    for oc in 0..o {
        let base = (oc * i + c0) * per;
        out.extend_from_slice(&v[base..base + (c1 - c0) * per]);
    }
    TensorData {
        dtype: w.dtype,
        shape: vec![o, c1 - c0, kh, kw],
        values: Values::F(out),
    }
}

/// Returns false (changing nothing) when the pair turns out not to fit.
fn rewrite(g: &mut Graph, ci: usize, vi: usize) -> bool {
    let concat = g.nodes[ci].clone();
    let conv = g.nodes[vi].clone();
    let Op::Conv {
        window, activation, ..
    } = conv.op
    else {
        return false;
    };
    let (Some(w), Some(&y)) = (conv.input(1), conv.outputs.first()) else {
        return false;
    };
    let Some(filter) = g.constants.get(&w).cloned() else {
        return false;
    };
    let bias = conv.input(2);
    let y_shape = g.tensors[y].shape.clone();
    let dtype = g.tensors[y].dtype;
    let prod = g.producers();
    // Inputs with their channel ranges, in the order they become available.
    let mut parts: Vec<(TensorId, usize, usize)> = Vec::new();
    let mut c0 = 0;
    for t in concat.present_inputs() {
        let Some(&c) = g.tensors[t].shape.get(1) else {
            return false;
        };
        parts.push((t, c0, c0 + c));
        c0 += c;
    }
    if c0 != filter.shape[1] {
        return false;
    }
    let ready = |t: TensorId| prod[t].map_or(0, |p| p + 1);
    parts.sort_by_key(|&(t, ..)| ready(t));
    // New nodes, each tagged with the old node index it follows (0: before every node).
    let mut new: Vec<(usize, Node)> = Vec::new();
    let mut acc: Option<TensorId> = None;
    let last = parts.len() - 1;
    for (k, &(t, c0, c1)) in parts.iter().enumerate() {
        let wk = g.add_constant(format!("{}.w{k}", conv.name), filter_slice(&filter, c0, c1));
        let out = if k == last {
            y
        } else {
            g.add_tensor(format!("{}.part{k}", conv.name), y_shape.clone(), dtype)
        };
        new.push((
            ready(t),
            Node {
                name: format!("{}:part{k}", conv.name),
                op: Op::Conv {
                    window,
                    group: 1,
                    activation: if k == last {
                        activation
                    } else {
                        Activation::None
                    },
                },
                inputs: {
                    let mut inputs = vec![Some(t), Some(wk), if k == 0 { bias } else { None }, acc];
                    while inputs.last() == Some(&None) {
                        inputs.pop();
                    }
                    inputs
                },
                outputs: vec![out],
            },
        ));
        acc = Some(out);
    }
    let old = std::mem::take(&mut g.nodes);
    let mut nodes = Vec::with_capacity(old.len() + new.len());
    let mut pending = new.into_iter().peekable();
    let mut flush = |upto: usize, nodes: &mut Vec<Node>| {
        while let Some((_, n)) = pending.next_if(|(at, _)| *at <= upto) {
            nodes.push(n);
        }
    };
    flush(0, &mut nodes);
    for (i, n) in old.into_iter().enumerate() {
        if i != ci && i != vi {
            nodes.push(n);
        }
        flush(i + 1, &mut nodes);
    }
    g.nodes = nodes;
    g.prune_constants();
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{DType, Port, UnaryOp, Window};

    fn window3() -> Window {
        Window {
            kernel: [3, 3],
            strides: [1, 1],
            dilations: [1, 1],
            pads: [1, 1, 1, 1],
            spatial_rank: 2,
        }
    }

    /// x -> relu -> a (8 ch), x2 -> sigmoid -> b (4 ch); Conv(Concat(b, a)) with ReLU.
    fn graph(activation: Activation) -> Graph {
        let mut g = Graph::default();
        let x = g.add_tensor("x", vec![1, 8, 16, 16], DType::F32);
        let x2 = g.add_tensor("x2", vec![1, 4, 16, 16], DType::F32);
        let a = g.add_tensor("a", vec![1, 8, 16, 16], DType::F32);
        let b = g.add_tensor("b", vec![1, 4, 16, 16], DType::F32);
        let c = g.add_tensor("c", vec![1, 12, 16, 16], DType::F32);
        let y = g.add_tensor("y", vec![1, 6, 16, 16], DType::F32);
        let wv: Vec<f32> = (0..6 * 12 * 9)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 97.0)
            .collect();
        let w = g.add_constant("w", TensorData::from_f32(vec![6, 12, 3, 3], wv));
        let bias = g.add_constant("bias", TensorData::from_f32(vec![6], vec![0.1; 6]));
        let node = |name: &str, op, inputs: Vec<Option<TensorId>>, out| Node {
            name: name.into(),
            op,
            inputs,
            outputs: vec![out],
        };
        g.nodes = vec![
            node("relu", Op::Unary(UnaryOp::Relu), vec![Some(x)], a),
            node("sig", Op::Unary(UnaryOp::Sigmoid), vec![Some(x2)], b),
            node("cat", Op::Concat { axis: 1 }, vec![Some(b), Some(a)], c),
            node(
                "conv",
                Op::Conv {
                    window: window3(),
                    group: 1,
                    activation,
                },
                vec![Some(c), Some(w), Some(bias)],
                y,
            ),
        ];
        g.inputs = vec![Port::new("x", x), Port::new("x2", x2)];
        g.outputs = vec![Port::new("y", y)];
        g
    }

    /// A direct interpreter for the handful of ops these graphs use (3x3, pad 1, stride 1
    /// convolutions), in f64.
    fn run(g: &Graph, x: &[f32]) -> Vec<f64> {
        let mut env: std::collections::HashMap<TensorId, Vec<f64>> = Default::default();
        for p in &g.inputs {
            let n: usize = g.tensors[p.tensor].shape.iter().product();
            env.insert(p.tensor, x[..n].iter().map(|&v| v as f64).collect());
        }
        let get = |env: &std::collections::HashMap<TensorId, Vec<f64>>, t: TensorId| {
            env.get(&t)
                .cloned()
                .unwrap_or_else(|| g.constants[&t].as_f32().iter().map(|&v| v as f64).collect())
        };
        for n in &g.nodes {
            let ins: Vec<Vec<f64>> = n.present_inputs().map(|t| get(&env, t)).collect();
            let out = match &n.op {
                Op::Unary(UnaryOp::Relu) => ins[0].iter().map(|v| v.max(0.0)).collect(),
                Op::Unary(UnaryOp::Sigmoid) => {
                    ins[0].iter().map(|v| 1.0 / (1.0 + (-v).exp())).collect()
                }
                Op::Concat { axis: 1 } => ins.concat(), // batch 1: channel blocks follow each other
                Op::Conv { activation, .. } => {
                    let xs = &g.tensors[n.inputs[0].unwrap()].shape;
                    let ws = &g.tensors[n.inputs[1].unwrap()].shape;
                    let (ci, h, w, co) = (xs[1], xs[2], xs[3], ws[0]);
                    let mut y = vec![0.0; co * h * w];
                    for o in 0..co {
                        for r in 0..h {
                            for c in 0..w {
                                let mut s = match n.input(2) {
                                    Some(b) => get(&env, b)[o],
                                    None => 0.0,
                                };
                                if let Some(a) = n.input(3) {
                                    s += get(&env, a)[(o * h + r) * w + c];
                                }
                                for i in 0..ci {
                                    for (ky, kx) in (0..9).map(|k| (k / 3, k % 3)) {
                                        let (yy, xx) = (r + ky, c + kx);
                                        if yy >= 1 && xx >= 1 && yy <= h && xx <= w {
                                            s += ins[1][((o * ci + i) * 3 + ky) * 3 + kx]
                                                * ins[0][(i * h + yy - 1) * w + xx - 1];
                                        }
                                    }
                                }
                                y[(o * h + r) * w + c] = match activation {
                                    Activation::Relu => s.max(0.0),
                                    _ => s,
                                };
                            }
                        }
                    }
                    y
                }
                op => panic!("test interpreter lacks {op:?}"),
            };
            env.insert(n.outputs[0], out);
        }
        env[&g.outputs[0].tensor].clone()
    }

    #[test]
    fn partial_convolutions_sum_to_the_concatenated_one() {
        let x: Vec<f32> = (0..8 * 16 * 16)
            .map(|i| ((i * 7919 % 211) as f32 - 105.0) / 53.0)
            .collect();
        for act in [Activation::None, Activation::Relu] {
            let before = graph(act);
            let mut after = before.clone();
            assert_eq!(split_larger_than(&mut after, 0), 1);
            let ops: Vec<&str> = after.nodes.iter().map(|n| n.op.name()).collect();
            // Each partial runs right after its input's producer; no Concat is left, and the
            // second adds the first as its addend.
            assert_eq!(ops, ["Unary", "Conv", "Unary", "Conv"]);
            assert_eq!(
                after.nodes[3].input(3),
                after.nodes[1].outputs.first().copied()
            );
            let (r, s) = (run(&before, &x), run(&after, &x));
            let worst = r
                .iter()
                .zip(&s)
                .map(|(a, b)| (a - b).abs())
                .fold(0f64, f64::max);
            assert!(
                r.iter().any(|&v| v > 0.5) && worst < 1e-9,
                "max difference {worst}"
            );
        }
    }

    #[test]
    fn leaves_grouped_convs_and_shared_concats_alone() {
        let mut g = graph(Activation::None);
        if let Op::Conv { group, .. } = &mut g.nodes[3].op {
            *group = 2;
        }
        assert_eq!(split_larger_than(&mut g, 0), 0);
        let mut g = graph(Activation::None);
        let c = g.nodes[2].outputs[0];
        g.outputs.push(Port::new("c", c));
        assert_eq!(split_larger_than(&mut g, 0), 0);
    }
}
