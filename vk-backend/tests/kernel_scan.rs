//! CumSum on every axis of a rank-4 tensor (C not a multiple of 4, N > 1), all four variants,
//! vs. an f64 CPU reference. Integer-valued inputs keep the sums exact in both precisions.

use vk_backend::kernels::{cumsum, CumSumParams};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn reference(x: &[f64], shape: &[usize], axis: usize, p: CumSumParams) -> Vec<f64> {
    let step: usize = shape[axis + 1..].iter().product();
    let len = shape[axis];
    (0..x.len())
        .map(|lin| {
            let at = (lin / step) % len;
            let base = lin - at * step;
            (0..len)
                .filter(|&j| match (p.reverse, p.exclusive) {
                    (false, false) => j <= at,
                    (false, true) => j < at,
                    (true, false) => j >= at,
                    (true, true) => j > at,
                })
                .map(|j| x[base + j * step])
                .sum()
        })
        .collect()
}

#[test]
fn cumsum_every_axis_and_variant() {
    let d = device();
    let shape = [2usize, 5, 3, 4];
    let mut rng = Rng::new(77);
    for prec in [Precision::F32, Precision::F16] {
        let v: Vec<f32> = rng
            .vec(shape.iter().product(), -4.0, 4.0)
            .iter()
            .map(|v| v.round())
            .collect();
        let xv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
        let x = Tensor::from_data(&d, "x", &shape, prec, &v).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for axis in 0..4 {
            for (exclusive, reverse) in [(false, false), (true, false), (false, true), (true, true)]
            {
                let p = CumSumParams { exclusive, reverse };
                let out = cumsum(&mut rec, &x, axis as i64 - 4, p, "y").unwrap();
                let want = reference(&xv, &shape, axis, p);
                checks.push((format!("axis {axis} {p:?} {prec:?}"), out, want));
            }
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, 0.0);
        }
    }
    assert_no_validation_messages(&d);
}
