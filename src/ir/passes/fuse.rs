//! Pattern fusion: GELU (erf and tanh) and HardSigmoid*x chains become single unary ops;
//! activations that follow Conv / ConvTranspose / MatMul / Gemm move into the producer's epilogue.
use super::{rewrite_each, scalar, Rewrite};
use crate::ir::{Activation, BinaryOp, Graph, Op, TensorId, UnaryOp};

fn close(v: Option<f64>, want: f64) -> bool {
    v.is_some_and(|v| (v - want).abs() < 1e-3 * want.abs().max(1.0))
}

/// The other operand of a binary node whose inputs are {t, other}.
fn other_operand(g: &Graph, ni: usize, t: TensorId) -> Option<TensorId> {
    let n = &g.nodes[ni];
    match (n.input(0), n.input(1)) {
        (Some(a), Some(b)) if a == t => Some(b),
        (Some(a), Some(b)) if b == t => Some(a),
        _ => None,
    }
}

/// x * 0.5 * (1 + erf(x / sqrt(2))) -> Gelu(x), and the tanh approximation
/// x * 0.5 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 * x^3))) (GPT-2's `gelu_new`) -> GeluTanh(x),
/// in each of the exporters' multiplication orders: (x * (1 + core)) * 0.5, (x * 0.5) * (1 +
/// core) (TorchScript) and x * (0.5 * (1 + core)) (dynamo).
pub fn gelu(g: &mut Graph) -> usize {
    rewrite_each(g, gelu_at)
}

/// The input x of `x / sqrt(2)` or `x * (1 / sqrt(2))` produced by node `di`.
fn erf_argument(g: &Graph, di: usize) -> Option<TensorId> {
    let n = &g.nodes[di];
    match n.op {
        Op::Binary(BinaryOp::Div) if close(scalar(g, n.input(1)), std::f64::consts::SQRT_2) => {
            n.input(0)
        }
        Op::Binary(BinaryOp::Mul) => {
            let x = n.input(0)?;
            close(
                scalar(g, other_operand(g, di, x)),
                std::f64::consts::FRAC_1_SQRT_2,
            )
            .then_some(x)
        }
        _ => None,
    }
}

/// The input x of `sqrt(2 / pi) * (x + 0.044715 * x^3)` produced by node `mi`, and the nodes
/// that compute it (the cube as `Pow(x, 3)` or `x * x * x`).
fn tanh_argument(g: &Graph, rw: &Rewrite, mi: usize) -> Option<(TensorId, Vec<usize>)> {
    const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
    let is = |ni: usize, op: BinaryOp| g.nodes[ni].op == Op::Binary(op);
    let scaled = |ni: usize, c: f64| -> Option<TensorId> {
        let n = &g.nodes[ni];
        let (a, b) = (n.input(0)?, n.input(1)?);
        if close(scalar(g, Some(b)), c) {
            Some(a)
        } else {
            close(scalar(g, Some(a)), c).then_some(b)
        }
    };
    if !is(mi, BinaryOp::Mul) {
        return None;
    }
    let inner = scaled(mi, SQRT_2_OVER_PI)?;
    let ai = rw.producers[inner]?;
    if !is(ai, BinaryOp::Add) {
        return None;
    }
    // x + 0.044715 * cube(x), either order.
    let (a, b) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    for (x, term) in [(a, b), (b, a)] {
        let Some(ci) = rw.producers[term] else {
            continue;
        };
        if !is(ci, BinaryOp::Mul) {
            continue;
        }
        let Some(cube) = scaled(ci, 0.044715) else {
            continue;
        };
        let Some(pi) = rw.producers[cube] else {
            continue;
        };
        let p = &g.nodes[pi];
        let mut nodes = vec![mi, ai, ci, pi];
        let cubes = match p.op {
            Op::Binary(BinaryOp::Pow) => p.input(0) == Some(x) && close(scalar(g, p.input(1)), 3.0),
            // (x * x) * x
            Op::Binary(BinaryOp::Mul) => {
                let square = other_operand(g, pi, x).filter(|_| p.input(0) != p.input(1));
                square.and_then(|sq| rw.producers[sq]).is_some_and(|si| {
                    nodes.push(si);
                    is(si, BinaryOp::Mul)
                        && g.nodes[si].input(0) == Some(x)
                        && g.nodes[si].input(1) == Some(x)
                })
            }
            _ => false,
        };
        let single = |t: TensorId, reader: usize| rw.sole_consumer(g, t) == Some(reader);
        let chain_private = single(inner, mi)
            && single(term, ai)
            && single(cube, ci)
            && (nodes.len() == 4 || single(g.nodes[nodes[4]].outputs[0], pi));
        if cubes && chain_private {
            return Some((x, nodes));
        }
    }
    None
}

fn gelu_at(g: &mut Graph, rw: &mut Rewrite, ei: usize) -> Option<()> {
    let (unary, argument_node) = match g.nodes[ei].op {
        Op::Unary(UnaryOp::Erf) => (UnaryOp::Gelu, rw.producers[g.nodes[ei].input(0)?]?),
        Op::Unary(UnaryOp::Tanh) => (UnaryOp::GeluTanh, rw.producers[g.nodes[ei].input(0)?]?),
        _ => return None,
    };
    let (x, mut core) = if unary == UnaryOp::Gelu {
        (erf_argument(g, argument_node)?, vec![argument_node])
    } else {
        tanh_argument(g, rw, argument_node)?
    };
    let e_out = g.nodes[ei].outputs[0];
    let ai = rw.sole_consumer(g, e_out)?;
    if g.nodes[ai].op != Op::Binary(BinaryOp::Add)
        || !close(scalar(g, other_operand(g, ai, e_out)), 1.0)
    {
        return None;
    }
    let a_out = g.nodes[ai].outputs[0];
    let m1 = rw.sole_consumer(g, a_out)?;
    if g.nodes[m1].op != Op::Binary(BinaryOp::Mul) {
        return None;
    }
    let other = other_operand(g, m1, a_out)?;
    let m1_out = g.nodes[m1].outputs[0];
    let is_mul = |ni: usize| g.nodes[ni].op == Op::Binary(BinaryOp::Mul);
    // (x * (1 + core)) * 0.5, x * (0.5 * (1 + core)), or (x * 0.5) * (1 + core).
    let (last, half_node) = if other == x {
        let m2 = rw.sole_consumer(g, m1_out)?;
        if !is_mul(m2) || !close(scalar(g, other_operand(g, m2, m1_out)), 0.5) {
            return None;
        }
        (m2, None)
    } else if close(scalar(g, Some(other)), 0.5) {
        let m2 = rw.sole_consumer(g, m1_out)?;
        if !is_mul(m2) || other_operand(g, m2, m1_out) != Some(x) {
            return None;
        }
        (m2, None)
    } else {
        let hi = rw.producers[other]?;
        if !is_mul(hi)
            || other_operand(g, hi, x).is_none()
            || !close(scalar(g, other_operand(g, hi, x)), 0.5)
        {
            return None;
        }
        if rw.sole_consumer(g, other) != Some(m1) {
            return None;
        }
        (m1, Some(hi))
    };
    let argument = g.nodes[argument_node].outputs[0];
    if rw.sole_consumer(g, argument) != Some(ei)
        || core.iter().any(|&k| rw.is_removed(k))
        || rw.is_removed(last)
    {
        return None;
    }
    let y = g.nodes[last].outputs[0];
    core.extend([ai, m1, last]);
    // The core's last node's slot is reused so topological order is kept (x is available
    // before it).
    for k in core.into_iter().chain(half_node) {
        if k != ei {
            rw.remove(k);
        }
    }
    let n = &mut g.nodes[ei];
    n.op = Op::Unary(unary);
    n.inputs = vec![Some(x)];
    n.outputs = vec![y];
    Some(())
}

/// x * Sigmoid(x) -> Silu(x): the Llama-family MLP's gate (and YOLO-style convolutions) writes
/// SiLU as a Sigmoid and a Mul that both read x, so x has two readers and no activation fusion
/// can take the Sigmoid; as one Silu it moves into its producer's epilogue.
pub fn silu(g: &mut Graph) -> usize {
    rewrite_each(g, silu_at)
}

/// x * Sigmoid(x), rooted at the Sigmoid: the Sigmoid node becomes the Silu (it runs where x is
/// ready), the Mul goes.
fn silu_at(g: &mut Graph, rw: &mut Rewrite, si: usize) -> Option<()> {
    if g.nodes[si].op != Op::Unary(UnaryOp::Sigmoid) || rw.is_removed(si) {
        return None;
    }
    let x = g.nodes[si].input(0)?;
    let s = g.nodes[si].outputs[0];
    let mi = rw.sole_consumer(g, s)?;
    if g.nodes[mi].op != Op::Binary(BinaryOp::Mul)
        || rw.is_removed(mi)
        || other_operand(g, mi, s) != Some(x)
        || g.tensors[x].shape != g.tensors[g.nodes[mi].outputs[0]].shape
    {
        return None;
    }
    let y = g.nodes[mi].outputs[0];
    rw.remove(mi);
    let n = &mut g.nodes[si];
    n.op = Op::Unary(UnaryOp::Silu);
    n.outputs = vec![y];
    Some(())
}

/// x * HardSigmoid(x; alpha = 1/6, beta = 0.5) -> HardSwish(x), and
/// x * Clip(x + 3, 0, 6) / 6 -> HardSwish(x).
pub fn hardswish(g: &mut Graph) -> usize {
    rewrite_each(g, hardswish_clip_at) + rewrite_each(g, hardswish_hard_sigmoid_at)
}

/// x * Clip(x + 3, 0, 6) / 6, rooted at the Div.
fn hardswish_clip_at(g: &mut Graph, rw: &mut Rewrite, di: usize) -> Option<()> {
    if g.nodes[di].op != Op::Binary(BinaryOp::Div) || !close(scalar(g, g.nodes[di].input(1)), 6.0) {
        return None;
    }
    let m = g.nodes[di].input(0)?;
    let mi = rw.producers[m]?;
    if g.nodes[mi].op != Op::Binary(BinaryOp::Mul) || rw.sole_consumer(g, m) != Some(di) {
        return None;
    }
    let (a, b) = (g.nodes[mi].input(0)?, g.nodes[mi].input(1)?);
    let is_clip06 = |t: TensorId| {
        rw.producers[t].filter(|&ci| {
            matches!(g.nodes[ci].op, Op::Unary(UnaryOp::Clip { min, max }) if min == 0.0 && max == 6.0)
                && rw.sole_consumer(g, t) == Some(mi)
        })
    };
    let (x, ci) = match (is_clip06(a), is_clip06(b)) {
        (_, Some(ci)) => (a, ci),
        (Some(ci), None) => (b, ci),
        _ => return None,
    };
    let c_in = g.nodes[ci].input(0)?;
    let ai = rw.producers[c_in]?;
    if g.nodes[ai].op != Op::Binary(BinaryOp::Add)
        || rw.sole_consumer(g, c_in) != Some(ci)
        || other_operand(g, ai, x).is_none_or(|c| !close(scalar(g, Some(c)), 3.0))
    {
        return None;
    }
    if [ai, ci, mi].iter().any(|&k| rw.is_removed(k)) {
        return None;
    }
    for k in [ai, ci, mi] {
        rw.remove(k);
    }
    let n = &mut g.nodes[di];
    n.op = Op::Unary(UnaryOp::HardSwish);
    n.inputs = vec![Some(x)];
    Some(())
}

/// x * HardSigmoid(x; alpha = 1/6, beta = 0.5), rooted at the HardSigmoid.
fn hardswish_hard_sigmoid_at(g: &mut Graph, rw: &mut Rewrite, hi: usize) -> Option<()> {
    let Op::Unary(UnaryOp::HardSigmoid { alpha, beta }) = g.nodes[hi].op else {
        return None;
    };
    if (alpha - 1.0 / 6.0).abs() > 1e-4 || (beta - 0.5).abs() > 1e-6 {
        return None;
    }
    let x = g.nodes[hi].input(0)?;
    let h_out = g.nodes[hi].outputs[0];
    let mi = rw.sole_consumer(g, h_out)?;
    if g.nodes[mi].op != Op::Binary(BinaryOp::Mul) || other_operand(g, mi, h_out) != Some(x) {
        return None;
    }
    let y = g.nodes[mi].outputs[0];
    rw.remove(mi);
    let n = &mut g.nodes[hi];
    n.op = Op::Unary(UnaryOp::HardSwish);
    n.outputs = vec![y];
    Some(())
}

fn as_activation(op: &Op) -> Option<Activation> {
    Some(match op {
        Op::Unary(UnaryOp::Relu) => Activation::Relu,
        Op::Unary(UnaryOp::Clip { min, max }) => Activation::Clip {
            min: *min,
            max: *max,
        },
        Op::Unary(UnaryOp::Sigmoid) => Activation::Sigmoid,
        Op::Unary(UnaryOp::HardSwish) => Activation::HardSwish,
        Op::Unary(UnaryOp::HardSigmoid { alpha, beta }) => Activation::HardSigmoid {
            alpha: *alpha,
            beta: *beta,
        },
        Op::Unary(UnaryOp::LeakyRelu { alpha }) => Activation::LeakyRelu { alpha: *alpha },
        Op::Unary(UnaryOp::Tanh) => Activation::Tanh,
        Op::Unary(UnaryOp::Gelu) => Activation::Gelu,
        Op::Unary(UnaryOp::GeluTanh) => Activation::GeluTanh,
        Op::Unary(UnaryOp::Silu) => Activation::Silu,
        _ => return None,
    })
}

/// Moves an activation into its producer's epilogue when the producer's output has no other reader.
pub fn activations(g: &mut Graph) -> usize {
    rewrite_each(g, activations_at)
}

fn activations_at(g: &mut Graph, rw: &mut Rewrite, ui: usize) -> Option<()> {
    let act = as_activation(&g.nodes[ui].op)?;
    let x = g.nodes[ui].input(0)?;
    let pi = rw.producers[x]?;
    if rw.sole_consumer(g, x) != Some(ui) || rw.is_removed(pi) {
        return None;
    }
    let slot = match &mut g.nodes[pi].op {
        Op::Conv { activation, .. }
        | Op::ConvTranspose { activation, .. }
        | Op::MatMul { activation, .. }
        | Op::Gemm { activation, .. } => activation,
        _ => return None,
    };
    if *slot != Activation::None {
        return None;
    }
    *slot = act;
    let y = g.nodes[ui].outputs[0];
    g.nodes[pi].outputs[0] = y;
    rw.remove(ui);
    Some(())
}

/// Conv / ConvTranspose / Gemm-free MatMul followed by `Add(const)` whose constant is a
/// per-output-channel vector (shape [C], [C,1,..] or [1,C,1,..] for Conv; [N] for MatMul) becomes
/// the producer's bias. Paddle exports emit Conv without bias plus such an Add.
pub fn bias_add(g: &mut Graph) -> usize {
    rewrite_each(g, bias_add_at)
}

fn bias_add_at(g: &mut Graph, rw: &mut Rewrite, ai: usize) -> Option<()> {
    if g.nodes[ai].op != Op::Binary(BinaryOp::Add) {
        return None;
    }
    let (a, b) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    let (x, c) = if g.is_const(b) {
        (a, b)
    } else if g.is_const(a) {
        (b, a)
    } else {
        return None;
    };
    let pi = rw.producers[x]?;
    if rw.is_removed(pi) || rw.sole_consumer(g, x) != Some(ai) {
        return None;
    }
    let cd = g.constants.get(&c)?;
    let xs = &g.tensors[x].shape;
    let ys = &g.tensors[g.nodes[ai].outputs[0]].shape;
    if xs != ys || !cd.dtype.is_float() {
        return None;
    }
    let non1: Vec<usize> = cd
        .shape
        .iter()
        .enumerate()
        .filter(|(_, &d)| d != 1)
        .map(|(i, _)| i)
        .collect();
    let channels = match &g.nodes[pi].op {
        Op::Conv {
            activation: Activation::None,
            ..
        }
        | Op::ConvTranspose {
            activation: Activation::None,
            ..
        } => {
            // Channel axis is 1 of the output; the constant, right-aligned, must vary only there.
            let r = xs.len();
            let ok = cd.shape.len() <= r
                && non1.iter().all(|&i| i + r - cd.shape.len() == 1)
                && (cd.shape.len() + 1 > r || cd.numel() == 1 || !non1.is_empty());
            if !ok {
                return None;
            }
            xs[1]
        }
        Op::MatMul {
            activation: Activation::None,
            transpose_a: false,
            ..
        } if g.nodes[pi].inputs.len() == 2 => {
            let ok = non1.iter().all(|&i| i == cd.shape.len() - 1);
            if !ok || g.nodes[pi].input(1).is_some_and(|w| !g.is_const(w)) {
                return None;
            }
            xs[xs.len() - 1]
        }
        _ => return None,
    };
    let vals = cd.as_f32();
    let vec: Vec<f32> = if vals.len() == 1 {
        vec![vals[0]; channels]
    } else if vals.len() == channels {
        vals
    } else {
        return None;
    };
    let old = g.nodes[pi]
        .input(2)
        .and_then(|t| g.constants.get(&t))
        .map(|t| t.as_f32());
    let summed: Vec<f32> = match old {
        Some(o) if o.len() == channels => o.iter().zip(&vec).map(|(a, b)| a + b).collect(),
        Some(_) => return None,
        None => vec,
    };
    let bname = format!("{}/bias", g.nodes[pi].name);
    let bt = g.add_constant(
        bname,
        crate::ir::TensorData::from_f32(vec![channels], summed),
    );
    let y = g.nodes[ai].outputs[0];
    let p = &mut g.nodes[pi];
    p.inputs.resize(3, None);
    p.inputs[2] = Some(bt);
    p.outputs[0] = y;
    rw.remove(ai);
    Some(())
}

/// Removes Cast nodes that do not change the dtype.
pub fn noop_casts(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut i = 0;
    while i < g.nodes.len() {
        if let (Op::Cast { to }, Some(x)) = (&g.nodes[i].op, g.nodes[i].input(0)) {
            if *to == g.tensors[x].dtype {
                let y = g.nodes[i].outputs[0];
                g.nodes.remove(i);
                super::replace_uses(g, y, x);
                count += 1;
                continue;
            }
        }
        i += 1;
    }
    count
}

/// The decomposed layer norm exported by older opsets,
/// `d = x - mean(x); y = d / sqrt(mean(d^2) + eps) [* gamma] [+ beta]` over the last axis,
/// becomes one LayerNorm (gamma = 1 and beta = 0 when absent).
pub fn layer_norm(g: &mut Graph) -> usize {
    rewrite_each(g, layer_norm_at)
}

/// `Some((eps, [Pow, ReduceMean, Add, Sqrt]))` when `s` is `Sqrt(Add(ReduceMean(Pow(d, 2), last
/// axis, keepdims), eps))` with a scalar constant `eps` on either side of the Add: the root mean
/// square that LayerNorm (of the centered `d`) and RMSNorm (of `x` itself) divide by.
fn root_mean_square(
    g: &Graph,
    rw: &Rewrite,
    s: TensorId,
    d: TensorId,
) -> Option<(f64, [usize; 4])> {
    let rank = g.tensors[d].shape.len();
    let qi = rw.producers[s]?;
    if rank == 0 || g.nodes[qi].op != Op::Unary(UnaryOp::Sqrt) {
        return None;
    }
    let ai = g.nodes[qi].input(0).and_then(|t| rw.producers[t])?;
    if !is_bin(g, ai, BinaryOp::Add) {
        return None;
    }
    let (a0, a1) = (g.nodes[ai].input(0)?, g.nodes[ai].input(1)?);
    let (v, eps) = match (scalar(g, Some(a1)), scalar(g, Some(a0))) {
        (Some(e), _) => (a0, e),
        (None, Some(e)) => (a1, e),
        (None, None) => return None,
    };
    let vi = rw.producers[v]?;
    let last_mean = matches!(&g.nodes[vi].op, Op::Reduce { op: crate::ir::ReduceOp::Mean, axes, keepdims: true } if axes == &[rank - 1]);
    let pi = g.nodes[vi].input(0).and_then(|t| rw.producers[t])?;
    if !last_mean
        || !is_bin(g, pi, BinaryOp::Pow)
        || g.nodes[pi].input(0) != Some(d)
        || !close(scalar(g, g.nodes[pi].input(1)), 2.0)
    {
        return None;
    }
    Some((eps, [pi, vi, ai, qi]))
}

/// RMSNorm as Llama-family exporters write it, `x * Reciprocal(Sqrt(ReduceMean(Pow(x, 2)) +
/// eps))` or `x / Sqrt(...)` over the last axis, times an optional constant `[C]` scale, becomes
/// one `LayerNorm { rms: true }` (scale 1 when absent). Seven dispatches, four of them on one
/// value per row, become one.
pub fn rms_norm(g: &mut Graph) -> usize {
    rewrite_each(g, rms_norm_at)
}

fn rms_norm_at(g: &mut Graph, rw: &mut Rewrite, ni: usize) -> Option<()> {
    if rw.is_removed(ni) {
        return None;
    }
    // The normalizing node: Mul(x, 1/q) in either order, with 1/q a Reciprocal(q) (dynamo) or
    // a Div(1, q) (TorchScript), or Div(x, q).
    let (x, q, ri) = if is_bin(g, ni, BinaryOp::Div) {
        (g.nodes[ni].input(0)?, g.nodes[ni].input(1)?, None)
    } else if is_bin(g, ni, BinaryOp::Mul) {
        let (a, b) = (g.nodes[ni].input(0)?, g.nodes[ni].input(1)?);
        let recip = |t: TensorId| {
            let p = rw.producers[t]?;
            let n = &g.nodes[p];
            let is_recip = n.op == Op::Unary(UnaryOp::Reciprocal)
                || (n.op == Op::Binary(BinaryOp::Div) && close(scalar(g, n.input(0)), 1.0));
            is_recip.then_some(p)
        };
        let (x, ri) = match (recip(a), recip(b)) {
            (_, Some(r)) => (a, r),
            (Some(r), None) => (b, r),
            (None, None) => return None,
        };
        let q = match g.nodes[ri].op {
            Op::Unary(_) => g.nodes[ri].input(0)?,
            _ => g.nodes[ri].input(1)?,
        };
        (x, q, Some(ri))
    } else {
        return None;
    };
    let rank = g.tensors[x].shape.len();
    let (eps, [pi, vi, ai, qi]) = root_mean_square(g, rw, q, x)?;
    if !eps.is_finite() || eps < 0.0 {
        return None;
    }
    let mut singles = vec![
        (g.nodes[pi].outputs[0], vi),
        (g.nodes[vi].outputs[0], ai),
        (g.nodes[ai].outputs[0], qi),
    ];
    match ri {
        Some(ri) => singles.extend([(q, ri), (g.nodes[ri].outputs[0], ni)]),
        None => singles.push((q, ni)),
    }
    if singles
        .iter()
        .any(|&(t, c)| rw.sole_consumer(g, t) != Some(c))
    {
        return None;
    }
    let c = g.tensors[x].shape[rank - 1];
    // Optional scale: a float constant of C values (any leading 1s) multiplied in.
    let mut last = ni;
    let mut gamma = None;
    if let Some(mi) = rw.sole_consumer(g, g.nodes[ni].outputs[0]) {
        let w = other_operand(g, mi, g.nodes[ni].outputs[0]);
        let w = w.and_then(|t| g.constants.get(&t)).filter(|d| {
            d.dtype.is_float() && d.numel() == c && d.shape.iter().rev().skip(1).all(|&k| k == 1)
        });
        if is_bin(g, mi, BinaryOp::Mul) {
            if let Some(d) = w {
                gamma = Some(d.as_f32());
                last = mi;
            }
        }
    }
    let name = g.nodes[ni].name.clone();
    let gt = g.add_constant(
        format!("{name}/rms_scale"),
        crate::ir::TensorData::from_f32(vec![c], gamma.unwrap_or_else(|| vec![1.0; c])),
    );
    let y = g.nodes[last].outputs[0];
    for k in [Some(pi), Some(vi), Some(ai), Some(qi), ri, Some(ni)]
        .into_iter()
        .flatten()
        .filter(|&k| k != last)
    {
        rw.remove(k);
    }
    let n = &mut g.nodes[last];
    n.op = Op::LayerNorm {
        axis: rank - 1,
        epsilon: eps as f32,
        rms: true,
        residual: false,
    };
    n.inputs = vec![Some(x), Some(gt)];
    n.outputs = vec![y];
    Some(())
}

fn is_bin(g: &Graph, ni: usize, op: BinaryOp) -> bool {
    g.nodes[ni].op == Op::Binary(op)
}

fn layer_norm_at(g: &mut Graph, rw: &mut Rewrite, di: usize) -> Option<()> {
    if !is_bin(g, di, BinaryOp::Div) || rw.is_removed(di) {
        return None;
    }
    let (d, s) = (g.nodes[di].input(0)?, g.nodes[di].input(1)?);
    // d = Sub(x, ReduceMean(x, last axis, keepdims))
    let si = rw.producers[d]?;
    if !is_bin(g, si, BinaryOp::Sub) {
        return None;
    }
    let (x, m) = (g.nodes[si].input(0)?, g.nodes[si].input(1)?);
    let rank = g.tensors[x].shape.len();
    let last_mean = |g: &Graph, i: usize| matches!(&g.nodes[i].op, Op::Reduce { op: crate::ir::ReduceOp::Mean, axes, keepdims: true } if axes == &[rank - 1]);
    let mi = rw.producers[m]?;
    if rank == 0 || !last_mean(g, mi) || g.nodes[mi].input(0) != Some(x) {
        return None;
    }
    // s = Sqrt(Add(ReduceMean(Pow(d, 2)), eps))
    let (eps, [pi, vi, ai, qi]) = root_mean_square(g, rw, s, d)?;
    let singles = [
        (m, si),
        (g.nodes[pi].outputs[0], vi),
        (g.nodes[vi].outputs[0], ai),
        (g.nodes[ai].outputs[0], qi),
        (s, di),
    ];
    if singles
        .iter()
        .any(|&(t, c)| rw.sole_consumer(g, t) != Some(c))
        || rw.consumers[d].len() != 2
        || g.is_output(d)
    {
        return None;
    }
    let c = g.tensors[x].shape[rank - 1];
    let vec_const = |g: &Graph, t: Option<TensorId>| {
        g.constants
            .get(&t?)
            .filter(|d| {
                d.dtype.is_float()
                    && d.numel() == c
                    && d.shape.iter().rev().skip(1).all(|&k| k == 1)
            })
            .map(|d| d.as_f32())
    };
    // Optional affine tail.
    let mut last = di;
    let mut gamma = None;
    let mut beta = None;
    if let Some(mi2) = rw.sole_consumer(g, g.nodes[di].outputs[0]) {
        if is_bin(g, mi2, BinaryOp::Mul) {
            if let Some(v) = vec_const(g, other_operand(g, mi2, g.nodes[di].outputs[0])) {
                gamma = Some(v);
                last = mi2;
            }
        }
    }
    if let Some(bi) = rw.sole_consumer(g, g.nodes[last].outputs[0]) {
        if is_bin(g, bi, BinaryOp::Add) {
            if let Some(v) = vec_const(g, other_operand(g, bi, g.nodes[last].outputs[0])) {
                beta = Some(v);
                last = bi;
            }
        }
    }
    let name = g.nodes[di].name.clone();
    let gt = g.add_constant(
        format!("{name}/ln_scale"),
        crate::ir::TensorData::from_f32(vec![c], gamma.unwrap_or_else(|| vec![1.0; c])),
    );
    let bt = g.add_constant(
        format!("{name}/ln_bias"),
        crate::ir::TensorData::from_f32(vec![c], beta.unwrap_or_else(|| vec![0.0; c])),
    );
    let y = g.nodes[last].outputs[0];
    // The last node of the chain becomes the LayerNorm.
    for k in [mi, si, pi, vi, ai, qi, di]
        .into_iter()
        .filter(|&k| k != last)
    {
        rw.remove(k);
    }
    let n = &mut g.nodes[last];
    n.op = Op::LayerNorm {
        axis: rank - 1,
        epsilon: eps as f32,
        rms: false,
        residual: false,
    };
    n.inputs = vec![Some(x), Some(gt), Some(bt)];
    n.outputs = vec![y];
    Some(())
}
