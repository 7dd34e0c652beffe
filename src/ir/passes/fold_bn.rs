//! Folds BatchNormalization into the preceding Conv; lowers any other BatchNorm to Mul + Add.
use super::{rewrite_each, Rewrite};
use crate::ir::{BinaryOp, Graph, Node, Op, TensorData};

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

/// Any BatchNorm left becomes x * s + b with per-channel constants shaped [C, 1, ..] (axis 1).
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
