//! Where and comparison/logical ops vs. a CPU reference with numpy broadcasting. Outputs are
//! selections or 0/1, so they must match exactly (inputs rounded to the storage precision).

use vk_backend::kernels::{compare, where_select, CompareOp};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn pad6(s: &[usize]) -> [usize; 6] {
    let mut d = [1; 6];
    d[6 - s.len()..].copy_from_slice(s);
    d
}

fn bshape(shapes: &[&[usize]]) -> Vec<usize> {
    let r = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    (6 - r..6)
        .map(|k| shapes.iter().map(|s| pad6(s)[k]).max().unwrap_or(1))
        .collect()
}

fn at(x: &[f64], s: &[usize], out: &[usize], mut lin: usize) -> f64 {
    let (ds, d_out) = (pad6(s), pad6(out));
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
}

#[test]
fn where_and_compare() {
    let d = device();
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[2, 5, 3, 7], &[2, 5, 3, 7], &[2, 5, 3, 7]),
        (&[5, 1, 1], &[2, 5, 3, 4], &[4]),
        (&[1], &[3, 6], &[6, 1, 1]),
        (&[2, 1, 3], &[4, 1], &[2, 4, 3]),
    ];
    let mut rng = Rng::new(51);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for &(sc, sx, sy) in cases {
            // Small integer-valued data so Equal has hits.
            let mut gen = |s: &[usize]| -> (Tensor, Vec<f64>) {
                let v: Vec<f32> = rng
                    .vec(s.iter().product(), -2.0, 2.0)
                    .iter()
                    .map(|v| v.round())
                    .collect();
                let t = Tensor::from_data(&d, "t", s, p, &v).unwrap();
                (t, v.iter().map(|&x| x as f64).collect())
            };
            let (c, cv) = gen(sc);
            let (x, xv) = gen(sx);
            let (y, yv) = gen(sy);
            let shape = bshape(&[sc, sx, sy]);
            let out = where_select(&mut rec, &c, &x, &y, "w").unwrap();
            assert_eq!(out.shape(), &shape[..]);
            let n: usize = shape.iter().product();
            let want: Vec<f64> = (0..n)
                .map(|i| {
                    if at(&cv, sc, &shape, i) != 0.0 {
                        at(&xv, sx, &shape, i)
                    } else {
                        at(&yv, sy, &shape, i)
                    }
                })
                .collect();
            checks.push((format!("where {sc:?} {sx:?} {sy:?} {p:?}"), out, want));
            let shape = bshape(&[sx, sy]);
            let n: usize = shape.iter().product();
            for op in [
                CompareOp::Equal,
                CompareOp::Less,
                CompareOp::Greater,
                CompareOp::LessOrEqual,
                CompareOp::GreaterOrEqual,
                CompareOp::And,
                CompareOp::Or,
                CompareOp::Xor,
            ] {
                let out = compare(&mut rec, op, &x, &y, "cmp").unwrap();
                let want: Vec<f64> = (0..n)
                    .map(|i| {
                        let (a, b) = (at(&xv, sx, &shape, i), at(&yv, sy, &shape, i));
                        let r = match op {
                            CompareOp::Equal => a == b,
                            CompareOp::Less => a < b,
                            CompareOp::Greater => a > b,
                            CompareOp::LessOrEqual => a <= b,
                            CompareOp::GreaterOrEqual => a >= b,
                            CompareOp::And => a != 0.0 && b != 0.0,
                            CompareOp::Or => a != 0.0 || b != 0.0,
                            CompareOp::Xor => (a != 0.0) != (b != 0.0),
                        };
                        f64::from(u8::from(r))
                    })
                    .collect();
                checks.push((format!("{op:?} {sx:?} {sy:?} {p:?}"), out, want));
            }
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, 0.0);
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn broadcast_errors() {
    let d = device();
    let a = Tensor::new(&d, "a", &[2, 3], Precision::F32).unwrap();
    let b = Tensor::new(&d, "b", &[4, 3], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    assert!(compare(&mut rec, CompareOp::Less, &a, &b, "o").is_err());
    assert!(where_select(&mut rec, &a, &a, &b, "o").is_err());
}
