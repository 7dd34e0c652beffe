//! Pattern fusion: erf-GELU and HardSigmoid*x chains become single unary ops; activations that
//! follow Conv / ConvTranspose / MatMul / Gemm move into the producer's epilogue.
use super::{scalar, sole_consumer};
use crate::ir::{Activation, BinaryOp, Graph, Op, TensorId, UnaryOp};

fn close(v: Option<f64>, want: f64) -> bool {
    v.is_some_and(|v| (v - want).abs() < 1e-3 * want.abs().max(1.0))
}

/// Removes the nodes marked dead.
fn sweep(g: &mut Graph, dead: Vec<bool>) {
    let mut it = dead.into_iter();
    g.nodes.retain(|_| !it.next().unwrap_or(false));
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

/// x * 0.5 * (1 + erf(x / sqrt(2))) (either multiplication order) -> Gelu(x).
#[allow(clippy::needless_range_loop)] // indices are needed: nodes are edited in place
pub fn gelu(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut dead = vec![false; g.nodes.len()];
    let prod = g.producers();
    let cons = g.consumers();
    for ei in 0..g.nodes.len() {
        if g.nodes[ei].op != Op::Unary(UnaryOp::Erf) {
            continue;
        }
        let Some(e_in) = g.nodes[ei].input(0) else {
            continue;
        };
        let Some(di) = prod[e_in] else { continue };
        // x / sqrt2 or x * (1/sqrt2)
        let x = match g.nodes[di].op {
            Op::Binary(BinaryOp::Div)
                if close(scalar(g, g.nodes[di].input(1)), std::f64::consts::SQRT_2) =>
            {
                g.nodes[di].input(0)
            }
            Op::Binary(BinaryOp::Mul)
                if close(
                    scalar(g, g.nodes[di].input(1)),
                    std::f64::consts::FRAC_1_SQRT_2,
                ) =>
            {
                g.nodes[di].input(0)
            }
            _ => None,
        };
        let Some(x) = x else { continue };
        let e_out = g.nodes[ei].outputs[0];
        let Some(ai) = sole_consumer(g, &cons, e_out) else {
            continue;
        };
        if g.nodes[ai].op != Op::Binary(BinaryOp::Add)
            || !close(scalar(g, other_operand(g, ai, e_out)), 1.0)
        {
            continue;
        }
        let a_out = g.nodes[ai].outputs[0];
        let Some(m1) = sole_consumer(g, &cons, a_out) else {
            continue;
        };
        if g.nodes[m1].op != Op::Binary(BinaryOp::Mul) {
            continue;
        }
        let Some(other) = other_operand(g, m1, a_out) else {
            continue;
        };
        let m1_out = g.nodes[m1].outputs[0];
        // Either (x * (1+erf)) * 0.5, or (x*0.5) * (1+erf).
        let (last, half_node) = if other == x {
            let Some(m2) = sole_consumer(g, &cons, m1_out) else {
                continue;
            };
            if g.nodes[m2].op != Op::Binary(BinaryOp::Mul)
                || !close(scalar(g, other_operand(g, m2, m1_out)), 0.5)
            {
                continue;
            }
            (m2, None)
        } else {
            let Some(hi) = prod[other] else { continue };
            if g.nodes[hi].op != Op::Binary(BinaryOp::Mul)
                || other_operand(g, hi, x).is_none()
                || !close(scalar(g, other_operand(g, hi, x)), 0.5)
            {
                continue;
            }
            if sole_consumer(g, &cons, other) != Some(m1) {
                continue;
            }
            (m1, Some(hi))
        };
        if sole_consumer(g, &cons, g.nodes[di].outputs[0]) != Some(ei) || dead[di] || dead[last] {
            continue;
        }
        let y = g.nodes[last].outputs[0];
        for k in [di, ei, ai, m1, last].into_iter().chain(half_node) {
            dead[k] = true;
        }
        // Reuse the Erf node slot so topological order is kept (x is available before it).
        dead[ei] = false;
        let n = &mut g.nodes[ei];
        n.op = Op::Unary(UnaryOp::Gelu);
        n.inputs = vec![Some(x)];
        n.outputs = vec![y];
        count += 1;
    }
    sweep(g, dead);
    count
}

/// x * HardSigmoid(x; alpha = 1/6, beta = 0.5) -> HardSwish(x), and
/// x * Clip(x + 3, 0, 6) / 6 -> HardSwish(x).
#[allow(clippy::needless_range_loop)] // indices are needed: nodes are edited in place
pub fn hardswish(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut dead = vec![false; g.nodes.len()];
    let prod = g.producers();
    let cons = g.consumers();
    for di in 0..g.nodes.len() {
        if g.nodes[di].op != Op::Binary(BinaryOp::Div)
            || !close(scalar(g, g.nodes[di].input(1)), 6.0)
        {
            continue;
        }
        let Some(m) = g.nodes[di].input(0) else {
            continue;
        };
        let Some(mi) = prod[m] else { continue };
        if g.nodes[mi].op != Op::Binary(BinaryOp::Mul) || sole_consumer(g, &cons, m) != Some(di) {
            continue;
        }
        let (Some(a), Some(b)) = (g.nodes[mi].input(0), g.nodes[mi].input(1)) else {
            continue;
        };
        let is_clip06 = |t: TensorId| {
            prod[t].filter(|&ci| {
                matches!(g.nodes[ci].op, Op::Unary(UnaryOp::Clip { min, max }) if min == 0.0 && max == 6.0)
                    && sole_consumer(g, &cons, t) == Some(mi)
            })
        };
        let (x, ci) = match (is_clip06(a), is_clip06(b)) {
            (_, Some(ci)) => (a, ci),
            (Some(ci), None) => (b, ci),
            _ => continue,
        };
        let Some(c_in) = g.nodes[ci].input(0) else {
            continue;
        };
        let Some(ai) = prod[c_in] else { continue };
        if g.nodes[ai].op != Op::Binary(BinaryOp::Add)
            || sole_consumer(g, &cons, c_in) != Some(ci)
            || other_operand(g, ai, x).is_none_or(|c| !close(scalar(g, Some(c)), 3.0))
        {
            continue;
        }
        if [ai, ci, mi].iter().any(|&k| dead[k]) {
            continue;
        }
        for k in [ai, ci, mi] {
            dead[k] = true;
        }
        let n = &mut g.nodes[di];
        n.op = Op::Unary(UnaryOp::HardSwish);
        n.inputs = vec![Some(x)];
        count += 1;
    }
    for hi in 0..g.nodes.len() {
        let Op::Unary(UnaryOp::HardSigmoid { alpha, beta }) = g.nodes[hi].op else {
            continue;
        };
        if (alpha - 1.0 / 6.0).abs() > 1e-4 || (beta - 0.5).abs() > 1e-6 {
            continue;
        }
        let Some(x) = g.nodes[hi].input(0) else {
            continue;
        };
        let h_out = g.nodes[hi].outputs[0];
        let Some(mi) = sole_consumer(g, &cons, h_out) else {
            continue;
        };
        if g.nodes[mi].op != Op::Binary(BinaryOp::Mul) || other_operand(g, mi, h_out) != Some(x) {
            continue;
        }
        let y = g.nodes[mi].outputs[0];
        dead[mi] = true;
        let n = &mut g.nodes[hi];
        n.op = Op::Unary(UnaryOp::HardSwish);
        n.outputs = vec![y];
        count += 1;
    }
    sweep(g, dead);
    count
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
        _ => return None,
    })
}

/// Moves an activation into its producer's epilogue when the producer's output has no other reader.
#[allow(clippy::needless_range_loop)] // indices are needed: nodes are edited in place
pub fn activations(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut dead = vec![false; g.nodes.len()];
    let prod = g.producers();
    let cons = g.consumers();
    for ui in 0..g.nodes.len() {
        let Some(act) = as_activation(&g.nodes[ui].op) else {
            continue;
        };
        let Some(x) = g.nodes[ui].input(0) else {
            continue;
        };
        let Some(pi) = prod[x] else { continue };
        if sole_consumer(g, &cons, x) != Some(ui) || dead[pi] {
            continue;
        }
        let slot = match &mut g.nodes[pi].op {
            Op::Conv { activation, .. }
            | Op::ConvTranspose { activation, .. }
            | Op::MatMul { activation, .. }
            | Op::Gemm { activation, .. } => activation,
            _ => continue,
        };
        if *slot != Activation::None {
            continue;
        }
        *slot = act;
        let y = g.nodes[ui].outputs[0];
        g.nodes[pi].outputs[0] = y;
        dead[ui] = true;
        count += 1;
    }
    sweep(g, dead);
    count
}

/// Conv / ConvTranspose / Gemm-free MatMul followed by `Add(const)` whose constant is a
/// per-output-channel vector (shape [C], [C,1,..] or [1,C,1,..] for Conv; [N] for MatMul) becomes
/// the producer's bias. Paddle exports emit Conv without bias plus such an Add.
#[allow(clippy::needless_range_loop)] // indices are needed: nodes are edited in place
pub fn bias_add(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut dead = vec![false; g.nodes.len()];
    let prod = g.producers();
    let cons = g.consumers();
    for ai in 0..g.nodes.len() {
        if g.nodes[ai].op != Op::Binary(BinaryOp::Add) {
            continue;
        }
        let (Some(a), Some(b)) = (g.nodes[ai].input(0), g.nodes[ai].input(1)) else {
            continue;
        };
        let (x, c) = if g.is_const(b) {
            (a, b)
        } else if g.is_const(a) {
            (b, a)
        } else {
            continue;
        };
        let Some(pi) = prod[x] else { continue };
        if dead[pi] || sole_consumer(g, &cons, x) != Some(ai) {
            continue;
        }
        let Some(cd) = g.constants.get(&c) else {
            continue;
        };
        let xs = &g.tensors[x].shape;
        let ys = &g.tensors[g.nodes[ai].outputs[0]].shape;
        if xs != ys || !cd.dtype.is_float() {
            continue;
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
                    continue;
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
                    continue;
                }
                xs[xs.len() - 1]
            }
            _ => continue,
        };
        let vals = cd.as_f32();
        let vec: Vec<f32> = if vals.len() == 1 {
            vec![vals[0]; channels]
        } else if vals.len() == channels {
            vals
        } else {
            continue;
        };
        let old = g.nodes[pi]
            .input(2)
            .and_then(|t| g.constants.get(&t))
            .map(|t| t.as_f32());
        let summed: Vec<f32> = match old {
            Some(o) if o.len() == channels => o.iter().zip(&vec).map(|(a, b)| a + b).collect(),
            Some(_) => continue,
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
        dead[ai] = true;
        count += 1;
    }
    sweep(g, dead);
    count
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
#[allow(clippy::needless_range_loop)] // indices are needed: nodes are edited in place
pub fn layer_norm(g: &mut Graph) -> usize {
    let mut count = 0;
    let mut dead = vec![false; g.nodes.len()];
    let prod = g.producers();
    let cons = g.consumers();
    let is_bin = |g: &Graph, i: usize, b: BinaryOp| g.nodes[i].op == Op::Binary(b);
    for di in 0..g.nodes.len() {
        if !is_bin(g, di, BinaryOp::Div) || dead[di] {
            continue;
        }
        let (Some(d), Some(s)) = (g.nodes[di].input(0), g.nodes[di].input(1)) else {
            continue;
        };
        // d = Sub(x, ReduceMean(x, last axis, keepdims))
        let Some(si) = prod[d] else { continue };
        if !is_bin(g, si, BinaryOp::Sub) {
            continue;
        }
        let (Some(x), Some(m)) = (g.nodes[si].input(0), g.nodes[si].input(1)) else {
            continue;
        };
        let rank = g.tensors[x].shape.len();
        let last_mean = |g: &Graph, i: usize| matches!(&g.nodes[i].op, Op::Reduce { op: crate::ir::ReduceOp::Mean, axes, keepdims: true } if axes == &[rank - 1]);
        let Some(mi) = prod[m] else { continue };
        if rank == 0 || !last_mean(g, mi) || g.nodes[mi].input(0) != Some(x) {
            continue;
        }
        // s = Sqrt(Add(ReduceMean(Pow(d, 2)), eps))
        let Some(qi) = prod[s] else { continue };
        if g.nodes[qi].op != Op::Unary(UnaryOp::Sqrt) {
            continue;
        }
        let Some(ai) = g.nodes[qi].input(0).and_then(|t| prod[t]) else {
            continue;
        };
        if !is_bin(g, ai, BinaryOp::Add) {
            continue;
        }
        let Some(eps) = scalar(g, g.nodes[ai].input(1)) else {
            continue;
        };
        let Some(vi) = g.nodes[ai].input(0).and_then(|t| prod[t]) else {
            continue;
        };
        if !last_mean(g, vi) {
            continue;
        }
        let Some(pi) = g.nodes[vi].input(0).and_then(|t| prod[t]) else {
            continue;
        };
        if !is_bin(g, pi, BinaryOp::Pow)
            || g.nodes[pi].input(0) != Some(d)
            || !close(scalar(g, g.nodes[pi].input(1)), 2.0)
        {
            continue;
        }
        let singles = [
            (m, si),
            (g.nodes[pi].outputs[0], vi),
            (g.nodes[vi].outputs[0], ai),
            (g.nodes[ai].outputs[0], qi),
            (s, di),
        ];
        if singles
            .iter()
            .any(|&(t, c)| sole_consumer(g, &cons, t) != Some(c))
            || cons[d].len() != 2
            || g.is_output(d)
        {
            continue;
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
        if let Some(mi2) = sole_consumer(g, &cons, g.nodes[di].outputs[0]) {
            if is_bin(g, mi2, BinaryOp::Mul) {
                if let Some(v) = vec_const(g, other_operand(g, mi2, g.nodes[di].outputs[0])) {
                    gamma = Some(v);
                    last = mi2;
                }
            }
        }
        if let Some(bi) = sole_consumer(g, &cons, g.nodes[last].outputs[0]) {
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
        for k in [mi, si, pi, vi, ai, qi, di, last] {
            dead[k] = true;
        }
        dead[last] = false;
        let n = &mut g.nodes[last];
        n.op = Op::LayerNorm {
            axis: rank - 1,
            epsilon: eps as f32,
        };
        n.inputs = vec![Some(x), Some(gt), Some(bt)];
        n.outputs = vec![y];
        count += 1;
    }
    sweep(g, dead);
    count
}
