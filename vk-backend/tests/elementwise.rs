//! Elementwise kernels vs. an f64 CPU reference on random inputs.
//! Tolerance: |got - ref| <= tol * max(1, |ref|), tol = 1e-5 (fp32) / 2e-3 (fp16); the reference
//! is computed from the inputs rounded to the storage precision.

use vk_backend::kernels::{binary, unary, BinaryOp, UnaryOp};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Buffer, Precision, QueueKind, Recorder, Tensor};

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 2e-3,
        Precision::F32 => 1e-5,
    }
}

fn pad6(s: &[usize]) -> [usize; 6] {
    let mut d = [1; 6];
    d[6 - s.len()..].copy_from_slice(s);
    d
}

/// Independent numpy-style broadcast: values of `x` (shape `s`) at every index of `out`.
fn broadcast_to(x: &[f64], s: &[usize], out: &[usize]) -> Vec<f64> {
    let (ds, d_out) = (pad6(s), pad6(out));
    let total: usize = out.iter().product();
    (0..total)
        .map(|mut lin| {
            let mut idx = [0usize; 6];
            for k in (0..6).rev() {
                idx[k] = lin % d_out[k];
                lin /= d_out[k];
            }
            let mut off = 0;
            for k in 0..6 {
                off = off * ds[k] + if ds[k] == 1 { 0 } else { idx[k] };
            }
            x[off]
        })
        .collect()
}

fn bshape(a: &[usize], b: &[usize]) -> Vec<usize> {
    let r = a.len().max(b.len());
    let (pa, pb) = (pad6(a), pad6(b));
    (6 - r..6).map(|k| pa[k].max(pb[k])).collect()
}

fn pow_ref(x: f64, y: f64) -> f64 {
    x.powf(y)
}

fn binary_ref(op: BinaryOp, a: f64, b: f64) -> f64 {
    match op {
        BinaryOp::Add => a + b,
        BinaryOp::Sub => a - b,
        BinaryOp::Mul => a * b,
        BinaryOp::Div => a / b,
        BinaryOp::Pow => pow_ref(a, b),
        BinaryOp::PRelu => {
            if a < 0.0 {
                a * b
            } else {
                a
            }
        }
        BinaryOp::Max => a.max(b),
        BinaryOp::Min => a.min(b),
        BinaryOp::IntDiv => (a / b).trunc(),
        BinaryOp::IntPow => pow_ref(a, b).round(),
        BinaryOp::FMod => a % b,
        BinaryOp::IntMod => floor_mod(a, b),
    }
}

/// The remainder with the divisor's sign.
fn floor_mod(a: f64, b: f64) -> f64 {
    let r = a % b;
    if r != 0.0 && (r < 0.0) != (b < 0.0) {
        r + b
    } else {
        r
    }
}

#[test]
fn binary_ops_with_broadcasting() {
    let d = device();
    let cases: &[(&[usize], &[usize])] = &[
        (&[2, 5, 3, 4], &[2, 5, 3, 4]),
        (&[2, 5, 3, 4], &[5, 1, 1]),
        (&[2, 3, 5, 2, 3], &[3, 1, 2, 1]),
        (&[4, 1, 6], &[3, 1]),
        (&[7], &[]),
        (&[1], &[2, 3, 9]),
        (&[2, 1, 2, 3, 4, 5], &[1, 2, 1, 1, 5]),
        (&[1, 6, 1, 1], &[2, 1, 3, 5]),
    ];
    let ops = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
        BinaryOp::PRelu,
        BinaryOp::Max,
        BinaryOp::Min,
    ];
    let mut rng = Rng::new(1);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for (sa, sb) in cases {
            for op in ops {
                let (na, nb): (usize, usize) = (sa.iter().product(), sb.iter().product());
                let (av, bv) = match op {
                    BinaryOp::Pow => (rng.vec(na, 0.5, 2.0), rng.vec(nb, -2.0, 2.0)),
                    BinaryOp::Div => (
                        rng.vec(na, -3.0, 3.0),
                        rng.vec(nb, 0.5, 2.0)
                            .into_iter()
                            .enumerate()
                            .map(|(i, v)| if i % 2 == 0 { v } else { -v })
                            .collect(),
                    ),
                    _ => (rng.vec(na, -3.0, 3.0), rng.vec(nb, -3.0, 3.0)),
                };
                let a = Tensor::from_data(&d, "a", sa, p, &av).unwrap();
                let b = Tensor::from_data(&d, "b", sb, p, &bv).unwrap();
                let out = binary(&mut rec, op, &a, &b, "out").unwrap();
                let shape = bshape(sa, sb);
                assert_eq!(out.shape(), &shape[..]);
                let ar: Vec<f64> = av.iter().map(|&v| p.round(v) as f64).collect();
                let br: Vec<f64> = bv.iter().map(|&v| p.round(v) as f64).collect();
                let (ab, bb) = (broadcast_to(&ar, sa, &shape), broadcast_to(&br, sb, &shape));
                let want: Vec<f64> = ab
                    .iter()
                    .zip(&bb)
                    .map(|(&x, &y)| binary_ref(op, x, y))
                    .collect();
                checks.push((format!("{op:?} {sa:?} {sb:?} {p:?}"), out, want));
            }
        }
        // All dispatches of a precision in one submission (barriers only where needed).
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, tol(p));
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn pow_negative_base_integer_exponent() {
    let d = device();
    let a = Tensor::from_data(
        &d,
        "a",
        &[6],
        Precision::F32,
        &[-2.0, -2.0, -1.5, 0.0, 0.0, 3.0],
    )
    .unwrap();
    let b = Tensor::from_data(
        &d,
        "b",
        &[6],
        Precision::F32,
        &[3.0, 2.0, -1.0, 2.0, 0.0, 0.5],
    )
    .unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let out = binary(&mut rec, BinaryOp::Pow, &a, &b, "out").unwrap();
    rec.submit_and_wait().unwrap();
    let want = [-8.0, 4.0, -1.0 / 1.5, 0.0, 1.0, 3f64.sqrt()];
    assert_close("pow", &out.download().unwrap(), &want, 1e-5);
    assert_no_validation_messages(&d);
}

/// Integer Div/Pow on integer-valued operands, every pair checked exactly against f64: quotients
/// truncate toward zero (also for exact multiples, where a float quotient can land an ulp low).
#[test]
fn integer_div_and_pow_are_exact() {
    let d = device();
    let mut av = Vec::new();
    let mut bv = Vec::new();
    for a in -260i32..=260 {
        for b in [-37i32, -9, -3, -1, 1, 2, 3, 7, 23, 255] {
            av.push(a as f32);
            bv.push(b as f32);
        }
    }
    // Exact multiples up to 2^24.
    for (q, b) in [
        (16777215i32, 1i32),
        (4194303, 4),
        (1398101, 12),
        (-559240, 30),
        (99991, 167),
    ] {
        av.push((q * b) as f32);
        bv.push(b as f32);
    }
    let n = av.len();
    let a = Tensor::from_data(&d, "a", &[n], Precision::F32, &av).unwrap();
    let b = Tensor::from_data(&d, "b", &[n], Precision::F32, &bv).unwrap();
    let (pa, pb): (Vec<f32>, Vec<f32>) = (0..n).map(|i| ((i % 23) as f32, (i % 5) as f32)).unzip();
    let base = Tensor::from_data(&d, "base", &[n], Precision::F32, &pa).unwrap();
    let exp = Tensor::from_data(&d, "exp", &[n], Precision::F32, &pb).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let q = binary(&mut rec, BinaryOp::IntDiv, &a, &b, "q").unwrap();
    let p = binary(&mut rec, BinaryOp::IntPow, &base, &exp, "p").unwrap();
    let fm = binary(&mut rec, BinaryOp::FMod, &a, &b, "fmod").unwrap();
    let im = binary(&mut rec, BinaryOp::IntMod, &a, &b, "mod").unwrap();
    rec.submit_and_wait().unwrap();
    let (q, p) = (q.download().unwrap(), p.download().unwrap());
    let (fm, im) = (fm.download().unwrap(), im.download().unwrap());
    for i in 0..n {
        let (x, y) = (av[i] as f64, bv[i] as f64);
        assert_eq!(fm[i] as f64, x % y, "fmod({x}, {y})");
        assert_eq!(im[i] as f64, floor_mod(x, y), "mod({x}, {y})");
        let want = (av[i] as f64 / bv[i] as f64).trunc();
        assert_eq!(q[i] as f64, want, "{} / {}", av[i], bv[i]);
        let want = (pa[i] as f64).powf(pb[i] as f64);
        assert_eq!(p[i] as f64, want, "{} ^ {}", pa[i], pb[i]);
    }
    assert_no_validation_messages(&d);
}

/// erf in f64 by its Taylor series (|x| <= 4.5; exact to ~1e-9 there), +-1 beyond.
fn erf_ref(x: f64) -> f64 {
    if x.abs() > 4.5 {
        return x.signum();
    }
    let mut sum = 0.0;
    let mut term = x; // x^(2n+1) (-1)^n / n!
    for n in 0..200 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
        if term.abs() < 1e-18 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn unary_ref(op: UnaryOp, x: f64) -> f64 {
    let sig = |x: f64| 1.0 / (1.0 + (-x).exp());
    match op {
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        UnaryOp::Sigmoid => sig(x),
        UnaryOp::HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
        UnaryOp::HardSwish => x * (x / 6.0 + 0.5).clamp(0.0, 1.0),
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Erf => erf_ref(x),
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
        UnaryOp::GeluTanh => {
            0.5 * x
                * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
        }
        UnaryOp::Exp => x.exp(),
        UnaryOp::Sqrt => x.sqrt(),
        UnaryOp::Reciprocal => 1.0 / x,
        UnaryOp::Clip { min, max } => x.clamp(min as f64, max as f64),
        UnaryOp::Neg => -x,
        UnaryOp::Abs => x.abs(),
        UnaryOp::Log => x.ln(),
        UnaryOp::Elu { alpha } => {
            if x < 0.0 {
                alpha as f64 * (x.exp() - 1.0)
            } else {
                x
            }
        }
        UnaryOp::Softplus => (1.0 + x.exp()).ln(),
        UnaryOp::Floor => x.floor(),
        UnaryOp::Ceil => x.ceil(),
        UnaryOp::Identity => x,
        UnaryOp::Silu => x * sig(x),
        UnaryOp::Sin => x.sin(),
        UnaryOp::Cos => x.cos(),
        UnaryOp::IsNaN => x.is_nan() as i32 as f64,
    }
}

#[test]
fn unary_ops() {
    let d = device();
    let ops = [
        UnaryOp::Relu,
        UnaryOp::LeakyRelu { alpha: 0.1 },
        UnaryOp::Sigmoid,
        UnaryOp::HardSigmoid {
            alpha: 0.2,
            beta: 0.5,
        },
        UnaryOp::HardSwish,
        UnaryOp::Tanh,
        UnaryOp::Erf,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Exp,
        UnaryOp::Sqrt,
        UnaryOp::Reciprocal,
        UnaryOp::Clip {
            min: -1.0,
            max: 2.0,
        },
        UnaryOp::Neg,
        UnaryOp::Abs,
        UnaryOp::Log,
        UnaryOp::Elu { alpha: 1.0 },
        UnaryOp::Softplus,
        UnaryOp::Floor,
        UnaryOp::Ceil,
        UnaryOp::Identity,
        UnaryOp::Silu,
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::IsNaN,
    ];
    let shape = [2usize, 5, 3, 7];
    let n: usize = shape.iter().product();
    let mut rng = Rng::new(2);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for op in ops {
            let xv = match op {
                UnaryOp::Sqrt | UnaryOp::Log => rng.vec(n, 0.05, 4.0),
                UnaryOp::Reciprocal => rng
                    .vec(n, 0.2, 4.0)
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| if i % 3 == 0 { -v } else { v })
                    .collect(),
                // A third NaN (an exporter's guard after a fully masked softmax row).
                UnaryOp::IsNaN => rng
                    .vec(n, -4.0, 4.0)
                    .into_iter()
                    .enumerate()
                    .map(|(i, v)| if i % 3 == 1 { f32::NAN } else { v })
                    .collect(),
                _ => rng.vec(n, -4.0, 4.0),
            };
            let x = Tensor::from_data(&d, "x", &shape, p, &xv).unwrap();
            let out = unary(&mut rec, op, &x, "y").unwrap();
            let want: Vec<f64> = xv
                .iter()
                .map(|&v| unary_ref(op, p.round(v) as f64))
                .collect();
            checks.push((format!("{op:?} {p:?}"), out, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in &checks {
            assert_close(what, &out.download().unwrap(), want, tol(p));
        }
        // Padding lanes stay zero even where f(0) != 0 (C = 5: block 1 has lanes 1..3 padding).
        let (_, exp_out, _) = checks.iter().find(|c| c.0.starts_with("Exp")).unwrap();
        let bytes = exp_out.physical_bytes();
        let staging = Buffer::staging_download(&d, "raw", bytes).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.copy_tensor_to_buffer(exp_out, &staging, 0).unwrap();
        rec.submit_and_wait().unwrap();
        let texels =
            vk_backend::layout::bytes_to_texels(&staging.read(0, bytes as usize).unwrap(), p);
        let l = exp_out.layout();
        let hw = (l.h * l.w) as usize;
        for nn in 0..l.n as usize {
            let layer = nn * 2 + 1;
            for k in 0..hw {
                let t = &texels[(layer * hw + k) * 4..(layer * hw + k) * 4 + 4];
                assert_eq!(&t[1..], &[0.0, 0.0, 0.0], "padding lanes must be zero");
            }
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn shape_errors_are_clear() {
    let d = device();
    let a = Tensor::new(&d, "a", &[2, 3], Precision::F32).unwrap();
    let b = Tensor::new(&d, "b", &[4, 3], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let e = binary(&mut rec, BinaryOp::Add, &a, &b, "o").unwrap_err();
    assert!(e.to_string().contains("broadcast"), "{e}");
    let h = Tensor::new(&d, "h", &[2, 3], Precision::F16).unwrap();
    let o = Tensor::new(&d, "o", &[2, 3], Precision::F32).unwrap();
    let e = vk_backend::kernels::binary_into(&mut rec, BinaryOp::Add, &a, &h, &o).unwrap_err();
    assert!(e.to_string().contains("F16"), "{e}");
}
