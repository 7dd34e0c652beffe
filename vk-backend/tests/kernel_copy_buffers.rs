//! The kmat kernels (MatMul, Softmax, Reduce, Transpose/Gather copy, Where) through their
//! storage-buffer variants (`Tensor::new_buffer`), against small f64 CPU references.
//! Tolerance on |got - ref| / max(1, |ref|): 1e-4 (fp32); data movement exact.

use vk_backend::kernels::{
    gather, matmul, reduce, softmax, transpose, where_select, MatMulOpts, MatRhs, ReduceOp,
};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn buf(shape: &[usize], data: &[f32]) -> Tensor {
    let t = Tensor::new_buffer(&device(), "buf", shape, Precision::F32).unwrap();
    t.upload(data).unwrap();
    t
}

#[test]
fn kernels_on_storage_buffers() {
    let d = device();
    let mut rng = Rng::new(61);
    let (b, m, k, n) = (3usize, 5usize, 7usize, 4usize);
    let av = rng.vec(b * m * k, -1.0, 1.0);
    let bv = rng.vec(b * k * n, -1.0, 1.0);
    let (a, bt) = (buf(&[b, m, k], &av), buf(&[b, k, n], &bv));
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let mm = matmul(
        &mut rec,
        &a,
        MatRhs::Tensor(&bt),
        &MatMulOpts::default(),
        "mm",
    )
    .unwrap();
    let sm = softmax(&mut rec, &a, &[-1], false, "sm").unwrap();
    let rs = reduce(&mut rec, ReduceOp::Sum, &a, &[0], false, "rs").unwrap();
    let tr = transpose(&mut rec, &a, &[2, 0, 1], "tr").unwrap();
    let idx = buf(&[2], &[4.0, -1.0]);
    let ga = gather(&mut rec, &a, &idx, 1, "ga").unwrap();
    let wh = where_select(&mut rec, &a, &a, &a, "wh").unwrap();
    rec.submit_and_wait().unwrap();
    let a64: Vec<f64> = av.iter().map(|&v| v as f64).collect();
    let at = |i: usize, j: usize, l: usize| a64[(i * m + j) * k + l];
    let mut want = Vec::new();
    for i in 0..b {
        for j in 0..m {
            for c in 0..n {
                want.push(
                    (0..k)
                        .map(|l| at(i, j, l) * bv[(i * k + l) * n + c] as f64)
                        .sum(),
                );
            }
        }
    }
    assert_close("matmul", &mm.download().unwrap(), &want, 1e-4);
    let mut want = Vec::new();
    for i in 0..b {
        for j in 0..m {
            let mx = (0..k).map(|l| at(i, j, l)).fold(f64::MIN, f64::max);
            let s: f64 = (0..k).map(|l| (at(i, j, l) - mx).exp()).sum();
            want.extend((0..k).map(|l| (at(i, j, l) - mx).exp() / s));
        }
    }
    assert_close("softmax", &sm.download().unwrap(), &want, 1e-4);
    let want: Vec<f64> = (0..m * k)
        .map(|f| (0..b).map(|i| a64[i * m * k + f]).sum())
        .collect();
    assert_close("reduce", &rs.download().unwrap(), &want, 1e-4);
    let mut want = Vec::new();
    for l in 0..k {
        for i in 0..b {
            want.extend((0..m).map(|j| at(i, j, l)));
        }
    }
    assert_close("transpose", &tr.download().unwrap(), &want, 0.0);
    let mut want = Vec::new();
    for i in 0..b {
        for j in [4, m - 1] {
            want.extend((0..k).map(|l| at(i, j, l)));
        }
    }
    assert_close("gather", &ga.download().unwrap(), &want, 0.0);
    let want = a64.clone(); // no input is exactly 0, so Where(a, a, a) selects x = a
    assert_close("where", &wh.download().unwrap(), &want, 0.0);
    assert_no_validation_messages(&d);
}
