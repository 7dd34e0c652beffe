//! RoPE (rotate half) against a CPU reference: heads that do not fill a texel, a batch, several
//! positions, cos/sin with and without their leading 1s, both precisions, x as heads and as the
//! projection rows the heads are split from; bad shapes refused.

use vk_backend::kernels::rope_into;
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn rounded(v: Vec<f32>, p: Precision) -> Vec<f32> {
    v.into_iter().map(|x| p.round(x)).collect()
}

#[test]
fn rope_matches_rotate_half() {
    let d = device();
    let mut rng = Rng::new(5);
    for p in [Precision::F32, Precision::F16] {
        for (xs, table) in [
            ([2usize, 6, 5, 8], vec![1usize, 1, 5, 8]),
            ([1, 9, 1, 64], vec![1, 64]),
            ([1, 3, 7, 16], vec![7, 16]),
        ] {
            let (s, dd) = (xs[2], xs[3]);
            let x = rounded(rng.vec(xs.iter().product(), -2.0, 2.0), p);
            let cos = rounded(rng.vec(s * dd, -1.0, 1.0), p);
            let sin = rounded(rng.vec(s * dd, -1.0, 1.0), p);
            let xt = Tensor::from_data(&d, "x", &xs, p, &x).unwrap();
            let ct = Tensor::from_data(&d, "cos", &table, p, &cos).unwrap();
            let st = Tensor::from_data(&d, "sin", &table, p, &sin).unwrap();
            // The same values as a projection's rows [N, S, C * D]: x[n, c, s, w] at
            // rows[n, s, c * D + w].
            let (nb, heads) = (xs[0], xs[1]);
            let mut rows = vec![0.0f32; x.len()];
            for (e, &v) in x.iter().enumerate() {
                let (w, pos, c, n) = (
                    e % dd,
                    (e / dd) % s,
                    (e / (dd * s)) % heads,
                    e / (dd * s * heads),
                );
                rows[((n * s + pos) * heads + c) * dd + w] = v;
            }
            let rt = Tensor::from_data(&d, "rows", &[nb, s, heads * dd], p, &rows).unwrap();
            let out = Tensor::new(&d, "out", &xs, p).unwrap();
            let split_out = Tensor::new(&d, "split_out", &xs, p).unwrap();
            let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
            rope_into(&mut rec, &xt, &ct, &st, &out, false).unwrap();
            rope_into(&mut rec, &rt, &ct, &st, &split_out, true).unwrap();
            rec.submit_and_wait().unwrap();
            let half = dd / 2;
            let want: Vec<f64> = (0..x.len())
                .map(|e| {
                    let (w, pos) = (e % dd, (e / dd) % s);
                    let rot = if w < half { -x[e + half] } else { x[e - half] };
                    let t = pos * dd + w;
                    x[e] as f64 * cos[t] as f64 + rot as f64 * sin[t] as f64
                })
                .collect();
            let tol = match p {
                Precision::F32 => 1e-5,
                Precision::F16 => 2e-3,
            };
            assert_close(
                &format!("rope {xs:?} table {table:?} {p:?}"),
                &out.download().unwrap(),
                &want,
                tol,
            );
            assert_close(
                &format!("rope split from rows {xs:?} table {table:?} {p:?}"),
                &split_out.download().unwrap(),
                &want,
                tol,
            );
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn rope_refuses_shapes_it_cannot_run() {
    let d = device();
    let p = Precision::F32;
    let x = Tensor::new(&d, "x", &[1, 2, 3, 8], p).unwrap();
    let odd = Tensor::new(&d, "odd", &[1, 2, 3, 7], p).unwrap();
    let good = Tensor::new(&d, "cos", &[1, 1, 3, 8], p).unwrap();
    let wrong = Tensor::new(&d, "cos", &[1, 1, 4, 8], p).unwrap();
    let per_head = Tensor::new(&d, "cos", &[1, 2, 3, 8], p).unwrap();
    let out = Tensor::new(&d, "out", &[1, 2, 3, 8], p).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let e = rope_into(&mut rec, &odd, &good, &good, &odd, false).unwrap_err();
    assert!(e.to_string().contains("D even"), "{e}");
    let e = rope_into(&mut rec, &x, &wrong, &good, &out, false).unwrap_err();
    assert!(e.to_string().contains("is not [1, 1, S, D]"), "{e}");
    let e = rope_into(&mut rec, &x, &good, &per_head, &out, false).unwrap_err();
    assert!(e.to_string().contains("is not [1, 1, S, D]"), "{e}");
    // Rows that do not hold the output's heads, and heads where rows are wanted.
    let rows = Tensor::new(&d, "rows", &[1, 3, 12], p).unwrap();
    let e = rope_into(&mut rec, &rows, &good, &good, &out, true).unwrap_err();
    assert!(e.to_string().contains("[N, S, C * D] rows"), "{e}");
    let e = rope_into(&mut rec, &x, &good, &good, &out, true).unwrap_err();
    assert!(e.to_string().contains("[N, S, C * D] rows"), "{e}");
}
