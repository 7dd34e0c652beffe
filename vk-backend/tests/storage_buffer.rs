//! Storage-buffer kernel variants (`StorageKind::Buffer`): the same shaders reading/writing
//! activation tensors from storage buffers, checked against an f64 CPU reference; buffer tensors
//! round-trip and are counted (but not as fallbacks); mixed image/buffer dispatches are refused.
//! Tolerance: |got - ref| <= tol * max(1, |ref|), tol = 1e-5 (fp32) / 2e-3 (fp16).

use vk_backend::kernels::{binary_into, unary_into, weight_copy_into, BinaryOp, UnaryOp};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{
    AtlasConfig, MemoryCategory, Precision, QueueKind, Recorder, StorageKind, Tensor, VkError,
    WeightAtlas,
};

const PRECISIONS: [Precision; 2] = [Precision::F16, Precision::F32];

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 2e-3,
        Precision::F32 => 1e-5,
    }
}

fn buffer_tensor(shape: &[usize], p: Precision, data: &[f32]) -> Tensor {
    let d = device();
    let t = Tensor::new_buffer(&d, "buf", shape, p).unwrap();
    t.upload(data).unwrap();
    t
}

#[test]
fn buffer_tensors_round_trip_and_are_counted() {
    let d = device();
    let before = d.memory_stats();
    for p in PRECISIONS {
        let shape = [2, 7, 3, 5];
        let x = Rng::new(1).vec(2 * 7 * 3 * 5, -4.0, 4.0);
        let t = buffer_tensor(&shape, p, &x);
        assert_eq!(t.storage_kind(), StorageKind::Buffer);
        assert!(!t.is_fallback());
        // 2 batches x 2 C4 blocks x 3 x 5 texels.
        assert_eq!(t.physical_bytes(), 60 * p.bytes_per_texel() as u64);
        let s = d.memory_stats();
        assert!(
            s.category(MemoryCategory::Activations)
                >= before.category(MemoryCategory::Activations) + t.physical_bytes()
        );
        assert_eq!(s.fallback_tensors, before.fallback_tensors);
        let want: Vec<f64> = x.iter().map(|&v| p.round(v) as f64).collect();
        assert_close("buffer round trip", &t.download().unwrap(), &want, 0.0);
    }
    assert_no_validation_messages(&d);
}

#[test]
fn binary_broadcast_in_storage_buffers() {
    let d = device();
    let cases: &[(&[usize], &[usize], &[usize])] = &[
        (&[2, 5, 3, 4], &[2, 5, 3, 4], &[2, 5, 3, 4]),
        (&[2, 5, 3, 4], &[5, 1, 1], &[2, 5, 3, 4]),
        (&[4, 1, 6], &[3, 1], &[4, 3, 6]),
    ];
    let mut rng = Rng::new(7);
    for p in PRECISIONS {
        for &(sa, sb, so) in cases {
            let a: Vec<f32> = rng.vec(sa.iter().product(), -2.0, 2.0);
            let b: Vec<f32> = rng.vec(sb.iter().product(), 0.5, 2.0);
            let ta = buffer_tensor(sa, p, &a);
            let tb = buffer_tensor(sb, p, &b);
            let out = Tensor::new_buffer(&d, "out", so, p).unwrap();
            let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
            binary_into(&mut rec, BinaryOp::Div, &ta, &tb, &out).unwrap();
            rec.submit_and_wait().unwrap();
            // Independent reference: explicit 4D index arithmetic with broadcasting.
            let pad = |s: &[usize]| {
                let mut v = vec![1usize; 4 - s.len()];
                v.extend_from_slice(s);
                v
            };
            let (pa, pb, po) = (pad(sa), pad(sb), pad(so));
            let at = |s: &[usize], idx: [usize; 4]| {
                (0..4).fold(0, |off, k| off * s[k] + if s[k] == 1 { 0 } else { idx[k] })
            };
            let mut want = Vec::new();
            for n in 0..po[0] {
                for c in 0..po[1] {
                    for h in 0..po[2] {
                        for w in 0..po[3] {
                            let i = [n, c, h, w];
                            let va = p.round(a[at(&pa, i)]) as f64;
                            let vb = p.round(b[at(&pb, i)]) as f64;
                            want.push(va / vb);
                        }
                    }
                }
            }
            let got = out.download().unwrap();
            assert_close(&format!("div {sa:?}/{sb:?} {p:?}"), &got, &want, tol(p));
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn unary_in_storage_buffers_matches_image_variant() {
    let d = device();
    let shape = [3, 6, 4, 5];
    let x = Rng::new(11).vec(3 * 6 * 4 * 5, -3.0, 3.0);
    for p in PRECISIONS {
        let tb = buffer_tensor(&shape, p, &x);
        let ob = Tensor::new_buffer(&d, "ob", &shape, p).unwrap();
        let ti = Tensor::from_data(&d, "ti", &shape, p, &x).unwrap();
        let oi = Tensor::new(&d, "oi", &shape, p).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        unary_into(&mut rec, UnaryOp::Sigmoid, &tb, &ob).unwrap();
        unary_into(&mut rec, UnaryOp::Sigmoid, &ti, &oi).unwrap();
        rec.submit_and_wait().unwrap();
        let want: Vec<f64> = x
            .iter()
            .map(|&v| 1.0 / (1.0 + (-(p.round(v) as f64)).exp()))
            .collect();
        let gb = ob.download().unwrap();
        assert_close(&format!("sigmoid buffer {p:?}"), &gb, &want, tol(p));
        assert_close(
            &format!("sigmoid image {p:?}"),
            &oi.download().unwrap(),
            &want,
            tol(p),
        );
    }
    assert_no_validation_messages(&d);
}

#[test]
fn weights_from_atlas_into_buffer_tensor() {
    let d = device();
    for p in PRECISIONS {
        let atlas = WeightAtlas::new(
            &d,
            AtlasConfig {
                slots: 2,
                precision: p,
                page_height: Some(2),
                logical_pages: 2,
            },
        )
        .unwrap();
        let texels = 1500usize; // spans both 1024-texel pages
        let w = Rng::new(5).vec(texels * 4, -1.0, 1.0);
        atlas.load_all_now(&w).unwrap();
        let out = Tensor::new_buffer(&d, "w", &[1, 4, 1, texels], p).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        weight_copy_into(&mut rec, 0, &out).unwrap();
        rec.submit_and_wait().unwrap();
        let nchw = out.download().unwrap();
        // NCHW [1,4,1,T]: channel c of texel x is weight texel x, lane c.
        let want: Vec<f64> = (0..4)
            .flat_map(|c| (0..texels).map(move |x| (x, c)))
            .map(|(x, c)| p.round(w[x * 4 + c]) as f64)
            .collect();
        assert_close(&format!("atlas -> buffer {p:?}"), &nchw, &want, 0.0);
    }
    assert_no_validation_messages(&d);
}

#[test]
fn mixed_image_and_buffer_tensors_are_refused() {
    let d = device();
    let x = Tensor::new(&d, "img", &[4, 4], Precision::F32).unwrap();
    let y = Tensor::new_buffer(&d, "buf", &[4, 4], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let err = unary_into(&mut rec, UnaryOp::Relu, &x, &y).unwrap_err();
    assert!(matches!(err, VkError::Kernel { .. }), "{err}");
    let msg = err.to_string();
    assert!(msg.contains("`img`") && msg.contains("`buf`"), "{msg}");
    drop(rec);
    assert_no_validation_messages(&d);
}
