//! Tensor upload/download round trips: ranks 0..6, odd channel counts, fp16/fp32, folding past
//! image limits (fake small limits and one real > 16384 width), and the counted buffer fallback.

use vk_backend::testing::{assert_no_validation_messages, device, Rng};
use vk_backend::{
    Buffer, Device, DeviceOptions, Image, ImageLimits, Precision, StagingDirection, Tensor,
};

fn roundtrip(d: &Device, shape: &[usize], p: Precision, seed: u64) -> Tensor {
    let n: usize = shape.iter().product();
    let data = Rng::new(seed).vec(n, -4.0, 4.0);
    let t = Tensor::from_data(d, "rt", shape, p, &data).unwrap();
    let back = t.download().unwrap();
    // Independent reference: the host values rounded to the storage precision.
    let want: Vec<f32> = data.iter().map(|&v| p.round(v)).collect();
    assert_eq!(back, want, "shape {shape:?} {p:?}");
    t
}

#[test]
fn ranks_0_to_6_and_odd_channels() {
    let d = device();
    let shapes: &[&[usize]] = &[
        &[],
        &[7],
        &[3, 5],
        &[5, 3, 7],
        &[2, 6, 3, 5],
        &[2, 3, 5, 2, 3],
        &[2, 1, 2, 3, 4, 5],
        &[1, 1, 1, 1],
        &[1, 13, 1, 1],
    ];
    for (i, s) in shapes.iter().enumerate() {
        for p in [Precision::F16, Precision::F32] {
            let t = roundtrip(&d, s, p, i as u64);
            // A tensor refolds only where the driver asks less memory for the fold than for
            // its plain image (short rows pad to a tile's height), unless forced to.
            let l = t.layout();
            if !l.is_identity() && std::env::var_os("TEXSTREAM_PAD_SHORT_LAYERS").is_none() {
                let f = t.image().map(|i| i.format()).unwrap();
                let need = |e| Image::memory_requirements(&d, f, e).unwrap().size;
                let plain = [l.w, l.h, l.n * l.c.div_ceil(4)];
                assert!(need([l.pw, l.ph, l.pl]) < need(plain), "{s:?}: {l:?}");
            }
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn real_width_past_16384() {
    let d = device();
    let w = d.image_limits().max_image_dimension_2d as usize + 1234;
    let t = roundtrip(&d, &[w], Precision::F16, 99);
    assert!(!t.layout().is_identity());
    assert!(t.layout().pw <= d.image_limits().max_image_dimension_2d);
    assert_no_validation_messages(&d);
}

#[test]
fn folding_with_fake_limits_and_buffer_fallback() {
    let d = Device::new(&DeviceOptions {
        limits_override: Some(ImageLimits {
            max_image_dimension_2d: 16,
            max_image_array_layers: 4,
        }),
        ..DeviceOptions::from_env()
    })
    .unwrap();
    // W past the limit, H past the limit, layers past the limit.
    for (i, s) in [
        &[1usize, 3, 2, 40][..],
        &[1, 1, 40, 5],
        &[2, 9, 3, 4],
        &[5, 3, 7, 2, 3],
    ]
    .iter()
    .enumerate()
    {
        for p in [Precision::F16, Precision::F32] {
            let t = roundtrip(&d, s, p, 10 + i as u64);
            assert!(!t.is_fallback(), "{s:?}");
            assert!(!t.layout().is_identity(), "{s:?} should fold");
        }
    }
    assert_eq!(d.memory_stats().fallback_tensors, 0);
    // 16*16*4 = 1024 texels max: 2000 texels cannot be an image.
    let t = roundtrip(&d, &[1, 4, 1, 2000], Precision::F32, 7);
    assert!(t.is_fallback());
    let s = d.memory_stats();
    assert_eq!(s.fallback_tensors, 1);
    assert_eq!(s.fallback_bytes, 2000 * 16);
    drop(t);
    assert_eq!(d.memory_stats().fallback_tensors, 0);
    assert_no_validation_messages(&d);
}

/// Uploads and readbacks through a staging buffer smaller than the tensor go row block by row
/// block (several layers, folded images and a buffer fallback), and a buffer smaller than one
/// row is refused.
#[test]
fn staging_smaller_than_the_tensor_moves_it_in_pieces() {
    let d = Device::new(&DeviceOptions {
        limits_override: Some(ImageLimits {
            max_image_dimension_2d: 64,
            max_image_array_layers: 8,
        }),
        ..DeviceOptions::from_env()
    })
    .unwrap();
    for (i, shape) in [
        &[1usize, 9, 37, 41][..],
        &[2, 5, 70, 11],
        &[1, 4, 1, 3000],
        &[1, 1, 64, 64],
    ]
    .iter()
    .enumerate()
    {
        for p in [Precision::F16, Precision::F32] {
            let n: usize = shape.iter().product();
            let data = Rng::new(40 + i as u64).vec(n, -4.0, 4.0);
            let t = Tensor::new(&d, "t", shape, p).unwrap();
            let row = t.layout().pw as u64 * p.bytes_per_texel() as u64;
            // Three rows and a bit: chunks of three rows, never a whole layer at once.
            let staging =
                Buffer::staging(&d, "small", 3 * row + 5, StagingDirection::Both).unwrap();
            assert!(staging.size() < t.physical_bytes(), "{shape:?}");
            t.upload_through(&data, &staging).unwrap();
            let want: Vec<f32> = data.iter().map(|&v| p.round(v)).collect();
            assert_eq!(t.download().unwrap(), want, "upload {shape:?} {p:?}");
            assert_eq!(
                t.download_through(&staging).unwrap(),
                want,
                "download {shape:?} {p:?}"
            );
            if !t.is_fallback() {
                let tiny = Buffer::staging(&d, "tiny", row - 1, StagingDirection::Both).unwrap();
                assert!(t.upload_through(&data, &tiny).is_err());
                assert!(t.download_through(&tiny).is_err());
            }
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn wrong_length_is_an_error() {
    let d = device();
    let t = Tensor::new(&d, "len", &[2, 3], Precision::F16).unwrap();
    let e = t.upload(&[1.0; 5]).unwrap_err();
    assert!(e.to_string().contains("len"), "{e}");
}

/// Outputs read back densely (`kernels::readback_into`, `pack_dense.comp`) give the values the
/// host uploaded, rounded to the storage precision, for every rank, odd channel counts and
/// element counts, folded images and the buffer fallback, at an offset into a shared staging
/// buffer; a device told to copy texels gives the same through its texel path.
#[test]
fn dense_readback_gives_the_uploaded_values() {
    use vk_backend::kernels::{read_back, readback_bytes, readback_into};
    use vk_backend::{QueueKind, Recorder};
    let small_limits = Some(ImageLimits {
        max_image_dimension_2d: 16,
        max_image_array_layers: 4,
    });
    let devices = [
        (device(), true),
        (
            Device::new(&DeviceOptions {
                limits_override: small_limits,
                ..DeviceOptions::from_env()
            })
            .unwrap(),
            true,
        ),
        (
            Device::new(&DeviceOptions {
                dense_readback: Some(false),
                ..DeviceOptions::from_env()
            })
            .unwrap(),
            false,
        ),
    ];
    let shapes: &[&[usize]] = &[
        &[],
        &[7],
        &[1, 37, 24],
        &[5, 3, 7],
        &[2, 6, 3, 5],
        &[2, 3, 5, 2, 3],
        &[1, 9, 37, 41],
        &[1, 4, 1, 2000],
    ];
    for (d, dense) in &devices {
        for (i, shape) in shapes.iter().enumerate() {
            for p in [Precision::F16, Precision::F32] {
                let n: usize = shape.iter().product();
                let data = Rng::new(70 + i as u64).vec(n, -4.0, 4.0);
                let t = Tensor::from_data(d, "dense", shape, p, &data).unwrap();
                let bytes = readback_bytes(&t);
                let texel_bytes = t.physical_bytes();
                if *dense {
                    let per_value = if p == Precision::F16 { 2 } else { 4 };
                    assert_eq!(bytes, (n as u64 * per_value).div_ceil(4) * 4, "{shape:?}");
                } else {
                    assert_eq!(bytes, texel_bytes, "{shape:?}");
                }
                // After 256 bytes of something else, as outputs share the staging.
                let at = 256;
                let staging =
                    Buffer::staging(d, "out", at + bytes, StagingDirection::Download).unwrap();
                let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
                readback_into(&mut rec, &t, &staging, at).unwrap();
                rec.submit_and_wait().unwrap();
                let back = staging
                    .read_with(at, bytes as usize, |b| read_back(&t, b))
                    .unwrap();
                let want: Vec<f32> = data.iter().map(|&v| p.round(v)).collect();
                assert_eq!(back, want, "{shape:?} {p:?} dense {dense}");
                // A buffer that ends early is refused, not overrun.
                if *dense {
                    let short =
                        Buffer::staging(d, "short", at + bytes - 4, StagingDirection::Download)
                            .unwrap();
                    let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
                    if short.size() < at + bytes {
                        let e = readback_into(&mut rec, &t, &short, at).unwrap_err();
                        assert!(e.to_string().contains("dense"), "{e}");
                    }
                }
            }
        }
        assert_no_validation_messages(d);
    }
}

#[test]
fn one_row_tensors_fold_into_eight_rows_where_the_driver_pads_a_row() {
    let d = device();
    let forced = std::env::var("TEXSTREAM_PAD_SHORT_LAYERS")
        .ok()
        .map(|v| v == "1");
    // A token's activations and an output head's row piece (the decoders' one-row tensors).
    for (i, shape) in [[1usize, 576], [1, 1536], [1, 1540]].iter().enumerate() {
        for p in [Precision::F16, Precision::F32] {
            let t = roundtrip(&d, shape, p, 40 + i as u64);
            let l = t.layout();
            let f = t.image().map(|i| i.format()).unwrap();
            let need = |e| Image::memory_requirements(&d, f, e).unwrap().size;
            let w = shape[1] as u32;
            let eight = [w.div_ceil(8), 8, 1];
            // The rule `Device::fold_layout` applies, from the driver's own requirements (asked
            // for fp16 images there; the ratio is what counts).
            let h = vk_backend::vk::Format::R16G16B16A16_SFLOAT;
            let need16 = |e| Image::memory_requirements(&d, h, e).unwrap().size;
            let fold = forced.unwrap_or(2 * need16([w, 1, 1]) >= 3 * need16(eight));
            let got = [l.pw, l.ph, l.pl];
            if fold {
                assert_eq!(got, eight, "{shape:?} {p:?}");
                assert!(need(eight) <= need([w, 1, 1]) || forced.is_some());
            } else {
                assert!(l.is_identity(), "{shape:?} {p:?}: {l:?}");
            }
        }
    }
    assert_no_validation_messages(&d);
}
