//! Cache writes in place: rows written at positions read from a tensor on the GPU, one run
//! after another into the same cache (as a decoder's steps do), vs. a CPU model of the cache.
//! Rows never written keep their earlier values; a position past the end writes nothing.

use vk_backend::kernels::kv_write_into;
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

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
    for prec in [Precision::F32, Precision::F16] {
        for &(cs, axis, rows) in &cases {
            let total: usize = cs.iter().product();
            let start: Vec<f32> = rng
                .vec(total, -2.0, 2.0)
                .iter()
                .map(|v| v.round())
                .collect();
            let mut want: Vec<f64> = start.iter().map(|&v| v as f64).collect();
            let cache = Tensor::from_data(&d, "cache", cs, prec, &start).unwrap();
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
                kv_write_into(&mut rec, &cache, &new, &pos, axis).unwrap();
                rec.submit_and_wait().unwrap();
                let nv: Vec<f64> = v.iter().map(|&x| x as f64).collect();
                reference(&mut want, cs, &nv, &ns, axis, at);
                assert_close(
                    &format!("{cs:?} axis {axis} at {at} {prec:?}"),
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
fn a_packed_axis_is_refused() {
    let d = device();
    let cache = Tensor::new(&d, "cache", &[1, 8, 4, 4], Precision::F32).unwrap();
    let new = Tensor::new(&d, "new", &[1, 1, 4, 4], Precision::F32).unwrap();
    let pos = Tensor::new(&d, "pos", &[1, 1], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let e = kv_write_into(&mut rec, &cache, &new, &pos, 1).unwrap_err();
    assert!(e.to_string().contains("whole-texel"), "{e}");
}
