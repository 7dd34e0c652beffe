//! Cache writes in place: rows written at positions read from a tensor on the GPU, one run
//! after another into the same cache (as a decoder's steps do), vs. a CPU model of the cache.
//! Rows never written keep their earlier values; a position past the end writes nothing.

use vk_backend::kernels::kv_write_into;
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

/// (rows, cache) precisions: each model's own, and an fp16 cache under fp32 activations
/// (`kv_write_kv16`).
const PRECISIONS: [(Precision, Precision); 3] = [
    (Precision::F32, Precision::F32),
    (Precision::F16, Precision::F16),
    (Precision::F32, Precision::F16),
];

/// Writes `new` (shape `ns`) into `cache` (shape `cs`) at `at` along `axis`, row-major.
fn reference(cache: &mut [f64], cs: &[usize], new: &[f64], ns: &[usize], axis: usize, at: usize) {
    let inner: usize = cs[axis + 1..].iter().product();
    for (lin, &v) in new.iter().enumerate() {
        let i = (lin / inner) % ns[axis];
        let outer = lin / (inner * ns[axis]);
        if at + i >= cs[axis] {
            continue;
        }
        cache[(outer * cs[axis] + at + i) * inner + lin % inner] = v;
    }
}

#[test]
fn rows_land_at_the_gpu_read_position_and_the_rest_stays() {
    let d = device();
    let mut rng = Rng::new(5);
    // [batch, kv heads (3: not a multiple of 4), positions, head dim] along the positions axis,
    // a 3-D cache along its last axis, and a 5-D one along its leading axis.
    let cases: [(&[usize], usize, usize); 3] = [
        (&[1, 3, 10, 8], 2, 1),
        (&[2, 6, 7], 2, 3),
        (&[4, 1, 3, 2, 5], 0, 2),
    ];
    for (prec, cache_prec) in PRECISIONS {
        for &(cs, axis, rows) in &cases {
            let total: usize = cs.iter().product();
            let start: Vec<f32> = rng
                .vec(total, -2.0, 2.0)
                .iter()
                .map(|v| v.round())
                .collect();
            let mut want: Vec<f64> = start.iter().map(|&v| v as f64).collect();
            let cache = Tensor::from_data(&d, "cache", cs, cache_prec, &start).unwrap();
            let mut ns = cs.to_vec();
            ns[axis] = rows;
            let n: usize = ns.iter().product();
            // Successive writes, the last one partly past the end.
            for at in [0usize, rows, cs[axis] - 1] {
                let v: Vec<f32> = rng.vec(n, -8.0, 8.0).iter().map(|v| v.round()).collect();
                let new = Tensor::from_data(&d, "new", &ns, prec, &v).unwrap();
                let pos =
                    Tensor::from_data(&d, "pos", &[1, rows], prec, &vec![at as f32; rows]).unwrap();
                let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
                kv_write_into(&mut rec, &cache, &new, &pos, axis, false).unwrap();
                rec.submit_and_wait().unwrap();
                let nv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
                reference(&mut want, cs, &nv, &ns, axis, at);
                assert_close(
                    &format!("{cs:?} axis {axis} at {at} {prec:?} into {cache_prec:?}"),
                    &cache.download().unwrap(),
                    &want,
                    0.0,
                );
            }
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn heads_split_from_projection_rows_land_like_heads() {
    let d = device();
    let mut rng = Rng::new(9);
    // [batch, kv heads, positions, head dim]: 3 heads (a padding lane), and a batch of two with
    // 5 heads (two texel layers a batch) written two rows at a time.
    let cases: [(&[usize], usize); 2] = [(&[1, 3, 10, 8], 1), (&[2, 5, 6, 4], 2)];
    for (prec, cache_prec) in PRECISIONS {
        for &(cs, rows) in &cases {
            let (nb, heads, dd) = (cs[0], cs[1], cs[3]);
            let total: usize = cs.iter().product();
            let start: Vec<f32> = rng
                .vec(total, -2.0, 2.0)
                .iter()
                .map(|v| v.round())
                .collect();
            let mut want: Vec<f64> = start.iter().map(|&v| v as f64).collect();
            let cache = Tensor::from_data(&d, "cache", cs, cache_prec, &start).unwrap();
            let ns = [nb, heads, rows, dd];
            let n: usize = ns.iter().product();
            for at in [0usize, rows, cs[2] - 1] {
                let v: Vec<f32> = rng.vec(n, -8.0, 8.0).iter().map(|v| v.round()).collect();
                // v as heads [N, C, S, D] laid out as projection rows [N, S, C * D].
                let mut split = vec![0.0f32; n];
                for (e, &x) in v.iter().enumerate() {
                    let (w, s, c, b) = (
                        e % dd,
                        (e / dd) % rows,
                        (e / (dd * rows)) % heads,
                        e / (dd * rows * heads),
                    );
                    split[((b * rows + s) * heads + c) * dd + w] = x;
                }
                let new =
                    Tensor::from_data(&d, "new", &[nb, rows, heads * dd], prec, &split).unwrap();
                let pos =
                    Tensor::from_data(&d, "pos", &[1, rows], prec, &vec![at as f32; rows]).unwrap();
                let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
                kv_write_into(&mut rec, &cache, &new, &pos, 2, true).unwrap();
                rec.submit_and_wait().unwrap();
                let nv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
                reference(&mut want, cs, &nv, &ns, 2, at);
                assert_close(
                    &format!("{cs:?} split heads at {at} {prec:?} into {cache_prec:?}"),
                    &cache.download().unwrap(),
                    &want,
                    0.0,
                );
            }
        }
    }
    // Rows that are not whole heads of the cache, and a split along another axis.
    let cache = Tensor::new(&d, "cache", &[1, 3, 10, 8], Precision::F32).unwrap();
    let pos = Tensor::new(&d, "pos", &[1, 1], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let odd = Tensor::new(&d, "new", &[1, 1, 20], Precision::F32).unwrap();
    let e = kv_write_into(&mut rec, &cache, &odd, &pos, 2, true).unwrap_err();
    assert!(e.to_string().contains("[N, S, C * D] rows"), "{e}");
    let rows = Tensor::new(&d, "new", &[1, 1, 24], Precision::F32).unwrap();
    let e = kv_write_into(&mut rec, &cache, &rows, &pos, 3, true).unwrap_err();
    assert!(e.to_string().contains("along axis 2"), "{e}");
    assert_no_validation_messages(&d);
}

#[test]
fn a_packed_axis_is_refused() {
    let d = device();
    let cache = Tensor::new(&d, "cache", &[1, 8, 4, 4], Precision::F32).unwrap();
    let new = Tensor::new(&d, "new", &[1, 1, 4, 4], Precision::F32).unwrap();
    let pos = Tensor::new(&d, "pos", &[1, 1], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let e = kv_write_into(&mut rec, &cache, &new, &pos, 1, false).unwrap_err();
    assert!(e.to_string().contains("whole-texel"), "{e}");
}

/// fp32 rows into an fp16 cache round to the nearest fp16 value, as fp16 activation stores do
/// (not toward zero, as lavapipe's own conversion would): 1 + 0.75 ulp lands on 1 + 1 ulp.
#[test]
fn fp32_rows_round_to_nearest_into_an_fp16_cache() {
    let d = device();
    let ulp = 1.0f32 / 1024.0;
    let cache = Tensor::new(&d, "cache", &[1, 1, 4, 4], Precision::F16).unwrap();
    cache.upload(&[0.0; 16]).unwrap();
    let new = Tensor::from_data(
        &d,
        "new",
        &[1, 1, 1, 4],
        Precision::F32,
        &[1.0 + 0.75 * ulp, -(1.0 + 0.75 * ulp), 2.0, 0.25 * ulp],
    )
    .unwrap();
    let pos = Tensor::from_data(&d, "pos", &[1, 1], Precision::F32, &[2.0]).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    kv_write_into(&mut rec, &cache, &new, &pos, 2, false).unwrap();
    rec.submit_and_wait().unwrap();
    let got = cache.download().unwrap();
    let mut want = vec![0.0f64; 16];
    want[8..12].copy_from_slice(&[
        (1.0 + ulp) as f64,
        -(1.0 + ulp) as f64,
        2.0,
        half::f16::from_f32(0.25 * ulp).to_f32() as f64,
    ]);
    assert_close("fp16 cache rounding", &got, &want, 0.0);
    assert_no_validation_messages(&d);
}
