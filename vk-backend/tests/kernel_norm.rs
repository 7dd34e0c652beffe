//! Softmax / LogSoftmax / LayerNormalization vs. an f64 CPU reference on random inputs.
//! Tolerance on |got - ref| / max(1, |ref|): fp32 1e-4, fp16 4e-3 (inputs are rounded to fp16 first,
//! so the remaining error is the fp16 output rounding plus fp16 scale/bias).

use vk_backend::kernels::{
    layernorm, norm_packed_into, norm_packed_out_shape, norm_rows, residual_norm_into,
    rmsnorm_into, softmax, NormRows, NormSpec, Residual,
};
use vk_backend::layout::pack_vector;
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{
    AtlasConfig, Device, DeviceOptions, Precision, QueueKind, Recorder, Tensor, WeightAtlas,
};

/// The default device (reductions on subgroup operations where it has subgroup arithmetic), and
/// one that reduces through the shared-memory tree, runs every norm it can in row groups and the
/// rest of the last-axis norms wide.
fn devices() -> [Device; 2] {
    let tree = Device::new(&DeviceOptions {
        no_subgroup_arithmetic: true,
        norm_row_groups: Some(true),
        norm_wide_rows: Some(true),
        ..DeviceOptions::from_env()
    })
    .expect("a device");
    assert!(!tree.features().subgroup_arithmetic);
    [device(), tree]
}

/// An atlas at precision `p` of four-row pages holding the packed vectors of `stream` (texels
/// of four values, padded to whole pages), every page loaded.
fn loaded_atlas(d: &Device, p: Precision, mut stream: Vec<f32>) -> WeightAtlas {
    let tpp = 512 * 4;
    let pages = (stream.len() / 4).div_ceil(tpp) as u32;
    stream.resize(pages as usize * tpp * 4, 0.0);
    let atlas = WeightAtlas::new(
        d,
        AtlasConfig {
            slots: pages,
            precision: p,
            page_height: Some(4),
            logical_pages: pages,
        },
    )
    .unwrap();
    atlas.load_all_now(&stream).unwrap();
    atlas
}

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 4e-3,
        Precision::F32 => 1e-4,
    }
}

/// Groups of flat indices sharing every coordinate outside `axes` (each group = one row).
fn rows(shape: &[usize], axes: &[usize]) -> Vec<Vec<usize>> {
    let total: usize = shape.iter().product();
    let mut map: std::collections::BTreeMap<Vec<usize>, Vec<usize>> = Default::default();
    for f in 0..total {
        let mut idx = vec![0; shape.len()];
        let mut t = f;
        for d in (0..shape.len()).rev() {
            idx[d] = t % shape[d];
            t /= shape[d];
        }
        let key: Vec<usize> = (0..shape.len())
            .map(|d| if axes.contains(&d) { 0 } else { idx[d] })
            .collect();
        map.entry(key).or_default().push(f);
    }
    map.into_values().collect()
}

fn softmax_ref(x: &[f64], shape: &[usize], axes: &[usize], log: bool) -> Vec<f64> {
    let mut out = vec![0.0; x.len()];
    for row in rows(shape, axes) {
        let m = row.iter().map(|&i| x[i]).fold(f64::NEG_INFINITY, f64::max);
        let s: f64 = row.iter().map(|&i| (x[i] - m).exp()).sum();
        for &i in &row {
            out[i] = if log {
                x[i] - m - s.ln()
            } else {
                (x[i] - m).exp() / s
            };
        }
    }
    out
}

#[test]
fn softmax_any_axes() {
    for d in devices() {
        softmax_cases(&d);
    }
}

fn softmax_cases(d: &Device) {
    let d = d.clone();
    let cases: &[(&[usize], &[i64], bool)] = &[
        (&[2, 5, 3, 7], &[1], false),
        (&[2, 5, 3, 7], &[-1], false),
        (&[2, 5, 3, 7], &[2], true),
        (&[2, 5, 3, 7], &[1, 2, 3], false),
        (&[3, 70], &[-1], false),
        (&[4, 6], &[0], true),
        (&[2, 3, 9, 4, 5], &[0], false),
        (&[130], &[0], false),
    ];
    let mut rng = Rng::new(21);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for &(shape, axes, log) in cases {
            let xv = rng.vec(shape.iter().product(), -4.0, 4.0);
            let x = Tensor::from_data(&d, "x", shape, p, &xv).unwrap();
            let out = softmax(&mut rec, &x, axes, log, "y").unwrap();
            let r = shape.len() as i64;
            let ax: Vec<usize> = axes.iter().map(|&a| ((a + r) % r) as usize).collect();
            let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
            checks.push((
                format!("{shape:?} axes {axes:?} log {log} {p:?}"),
                out,
                softmax_ref(&xr, shape, &ax, log),
            ));
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, tol(p));
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn layernorm_and_rmsnorm_axes_scale_bias() {
    for d in devices() {
        norm_cases(&d);
    }
}

fn norm_cases(d: &Device) {
    let d = d.clone();
    let cases: &[(&[usize], i64, bool)] = &[
        (&[2, 5, 3, 7], -1, true),
        (&[2, 5, 3, 7], 1, true),
        (&[3, 10, 77], -1, false),
        (&[6, 9], 0, true),
        (&[2, 6, 5], 1, true),
        // Rows of 1025 to 2048 texels over the last axis take the register path: a decoder's
        // hidden rows, and rows four to a texel (six channels, the second texel half padding).
        (&[2, 1, 2048], -1, false),
        (&[1, 6, 2, 1100], -1, true),
        // 256 rows or more of at most 512 texels take the row groups by shape
        // (kernels::norm_rows), eight rows a workgroup: 257 rows (the last workgroup holds
        // one), and 256 rows four to a texel (five channels). On the second device every case
        // over the last axis of up to 512 texels takes them: the widest rows they take, three.
        (&[1, 257, 96], -1, true),
        (&[2, 5, 64, 9], -1, true),
        (&[1, 3, 512], -1, false),
        // One row of 1536 texels: wide (1024 invocations a row) on the second device.
        (&[1, 1536], -1, true),
    ];
    let eps = 1e-5f32;
    let mut rng = Rng::new(22);
    for p in [Precision::F32, Precision::F16] {
        let mut stream = Vec::new();
        let mut prepared = Vec::new();
        for &(shape, axis, has_bias) in cases {
            let r = shape.len() as i64;
            let a = ((axis + r) % r) as usize;
            let len: usize = shape[a..].iter().product();
            let sv = rng.vec(len, 0.5, 1.5);
            let bv = rng.vec(len, -0.5, 0.5);
            let s_off = (stream.len() / 4) as u32;
            stream.extend(pack_vector(&sv));
            let b_off = (stream.len() / 4) as u32;
            stream.extend(pack_vector(&bv));
            prepared.push((shape, axis, a, has_bias, sv, bv, s_off, b_off));
        }
        let atlas = loaded_atlas(&d, p, stream);
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        let mut checks = Vec::new();
        for (shape, axis, a, has_bias, sv, bv, s_off, b_off) in prepared {
            let xv = rng.vec(shape.iter().product(), -3.0, 3.0);
            let x = Tensor::from_data(&d, "x", shape, p, &xv).unwrap();
            // Row groups: rows over the last axis alone of up to 512 texels; by shape, 256 of
            // them or more (texel rows: channels, the third dim from the end, four a texel).
            let r = shape.len();
            let last_axis_only = a + 1 == r && shape[r - 1] <= 512;
            let texel_rows: usize = (0..r - 1)
                .map(|k| match k + 3 == r {
                    true => shape[k].div_ceil(4),
                    false => shape[k],
                })
                .product();
            // Wide (1024 invocations a row) only where the options ask: rows of up to 8192 texels.
            let f = d.features();
            let width = shape[r - 1];
            let want = if last_axis_only && (f.norm_row_groups == Some(true) || texel_rows >= 256) {
                NormRows::Groups
            } else if a + 1 == r && width <= 8192 && f.norm_wide_rows == Some(true) {
                NormRows::Wide
            } else {
                NormRows::One
            };
            assert_eq!(norm_rows(&rec, &x, axis).unwrap(), want, "{shape:?}");
            let out = layernorm(
                &mut rec,
                &x,
                axis,
                eps,
                s_off,
                has_bias.then_some(b_off),
                "y",
            )
            .unwrap();
            let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
            let len = sv.len();
            let mut want = vec![0.0; xr.len()];
            let axes: Vec<usize> = (a..shape.len()).collect();
            for row in rows(shape, &axes) {
                let n = row.len() as f64;
                let mean = row.iter().map(|&i| xr[i]).sum::<f64>() / n;
                let var = row.iter().map(|&i| (xr[i] - mean).powi(2)).sum::<f64>() / n;
                for &i in &row {
                    // Normalized dims are a suffix: the scale index is the flat index mod len.
                    let j = i % len;
                    let b = if has_bias { p.round(bv[j]) as f64 } else { 0.0 };
                    want[i] =
                        (xr[i] - mean) / (var + eps as f64).sqrt() * p.round(sv[j]) as f64 + b;
                }
            }
            checks.push((format!("{shape:?} axis {axis} {p:?}"), out, want));
            // RMSNorm over the same rows and scale: no mean, no bias.
            let rms_out = Tensor::new(&d, "y_rms", shape, p).unwrap();
            rmsnorm_into(&mut rec, &x, axis, eps, s_off, &rms_out).unwrap();
            let mut want = vec![0.0; xr.len()];
            for row in rows(shape, &axes) {
                let ms = row.iter().map(|&i| xr[i] * xr[i]).sum::<f64>() / row.len() as f64;
                for &i in &row {
                    want[i] = xr[i] / (ms + eps as f64).sqrt() * p.round(sv[i % len]) as f64;
                }
            }
            checks.push((format!("rms {shape:?} axis {axis} {p:?}"), rms_out, want));
            // Both norms of a residual sum x + r in one kernel, which writes the sum too (rounded
            // to the storage precision before it is normalized, as an Add would store it).
            let rv = rng.vec(xv.len(), -3.0, 3.0);
            let r = Tensor::from_data(&d, "r", shape, p, &rv).unwrap();
            let sum_r: Vec<f64> = xr
                .iter()
                .zip(&rv)
                .map(|(&a, &b)| p.round((a + p.round(b) as f64) as f32) as f64)
                .collect();
            for rms in [false, true] {
                let sum = Tensor::new(&d, "sum", shape, p).unwrap();
                let y = Tensor::new(&d, "y_res", shape, p).unwrap();
                let spec = NormSpec {
                    axis,
                    epsilon: eps,
                    scale_offset: s_off,
                    bias_offset: (has_bias && !rms).then_some(b_off),
                    rms,
                };
                let residual = Residual {
                    residual: &r,
                    sum: &sum,
                };
                residual_norm_into(&mut rec, &x, residual, &spec, &y).unwrap();
                let mut want = vec![0.0; xr.len()];
                for row in rows(shape, &axes) {
                    let n = row.len() as f64;
                    let mean = if rms {
                        0.0
                    } else {
                        row.iter().map(|&i| sum_r[i]).sum::<f64>() / n
                    };
                    let var = row.iter().map(|&i| (sum_r[i] - mean).powi(2)).sum::<f64>() / n;
                    for &i in &row {
                        let j = i % len;
                        let b = match spec.bias_offset {
                            Some(_) => p.round(bv[j]) as f64,
                            None => 0.0,
                        };
                        want[i] = (sum_r[i] - mean) / (var + eps as f64).sqrt()
                            * p.round(sv[j]) as f64
                            + b;
                    }
                }
                let what = format!("residual rms={rms} {shape:?} axis {axis} {p:?}");
                checks.push((format!("{what}: sum"), sum, sum_r.clone()));
                checks.push((what, y, want));
            }
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, tol(p));
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn bad_axes_are_rejected() {
    let d = device();
    let x = Tensor::new(&d, "x", &[2, 3], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let e = softmax(&mut rec, &x, &[2], false, "y").unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
    let e = layernorm(&mut rec, &x, -3, 1e-5, 0, None, "y").unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}

/// A norm over one `[M, K]` matrix written straight as the tensor-core MatMul's packed A
/// (`[4, K/4, M]`, texel `(m, k/4)` holding `k..k+3` of row `m`), plain and of a residual sum
/// (whose sum keeps the input's layout), LayerNorm and RMSNorm, against the f64 reference.
#[test]
fn norms_write_the_packed_a() {
    // (shape, residual, rms): a workgroup's eight rows cut short (257 rows), a rank-2 matrix,
    // the widest rows the row groups take (512), and a rank-4 one with leading ones.
    let cases: &[(&[usize], bool, bool)] = &[
        (&[1, 257, 96], false, false),
        (&[300, 64], true, true),
        (&[1, 20, 512], true, false),
        (&[1, 1, 9, 128], false, true),
    ];
    for d in devices() {
        for p in [Precision::F32, Precision::F16] {
            packed_cases(&d, p, cases);
        }
    }
}

fn packed_cases(d: &Device, p: Precision, cases: &[(&[usize], bool, bool)]) {
    let mut rng = Rng::new(31);
    let widest = 512;
    let sv = rng.vec(widest, 0.5, 1.5);
    let bv = rng.vec(widest, -0.5, 0.5);
    let mut stream = pack_vector(&sv);
    stream.extend(pack_vector(&bv));
    let atlas = loaded_atlas(d, p, stream);
    let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let mut checks = Vec::new();
    for &(shape, residual, rms) in cases {
        let k = shape[shape.len() - 1];
        let m: usize = shape.iter().product::<usize>() / k;
        let xv = rng.vec(m * k, -3.0, 3.0);
        let x = Tensor::from_data(d, "x", shape, p, &xv).unwrap();
        let packed_shape = norm_packed_out_shape(&rec, &x, -1).unwrap();
        assert_eq!(packed_shape, Some(vec![4, k / 4, m]), "{shape:?}");
        let packed = Tensor::new(d, "packed", &[4, k / 4, m], p).unwrap();
        let spec = NormSpec {
            axis: -1,
            epsilon: 1e-5,
            scale_offset: 0,
            // The bias starts on the page's texel after the scale's (512 values, 128 texels).
            bias_offset: (!rms).then_some(128),
            rms,
        };
        let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
        let (sum, rounded) = if residual {
            let rv = rng.vec(m * k, -3.0, 3.0);
            let r = Tensor::from_data(d, "r", shape, p, &rv).unwrap();
            let sum = Tensor::new(d, "sum", shape, p).unwrap();
            let res = Residual {
                residual: &r,
                sum: &sum,
            };
            norm_packed_into(&mut rec, &x, Some(res), &spec, &packed).unwrap();
            let s: Vec<f64> = xr
                .iter()
                .zip(&rv)
                .map(|(&a, &b)| p.round((a + p.round(b) as f64) as f32) as f64)
                .collect();
            (Some(sum), s)
        } else {
            norm_packed_into(&mut rec, &x, None, &spec, &packed).unwrap();
            (None, xr)
        };
        let mut want = vec![0.0; m * k];
        for row in 0..m {
            let v = &rounded[row * k..(row + 1) * k];
            let mean = if rms {
                0.0
            } else {
                v.iter().sum::<f64>() / k as f64
            };
            let var = v.iter().map(|&a| (a - mean).powi(2)).sum::<f64>() / k as f64;
            for (c, &a) in v.iter().enumerate() {
                let b = if rms { 0.0 } else { p.round(bv[c]) as f64 };
                let y = (a - mean) / (var + 1e-5).sqrt() * p.round(sv[c]) as f64 + b;
                // [4, K/4, M]: value k of row m at (k % 4, k / 4, m).
                want[(c % 4) * (k / 4) * m + (c / 4) * m + row] = y;
            }
        }
        let what = format!("packed {shape:?} residual {residual} rms {rms} {p:?}");
        if let Some(sum) = sum {
            checks.push((format!("{what}: sum"), sum, rounded));
        }
        checks.push((what, packed, want));
    }
    rec.submit_and_wait().unwrap();
    for (what, out, want) in checks {
        assert_close(&what, &out.download().unwrap(), &want, tol(p));
    }
    assert_no_validation_messages(d);
}

/// The packed output is only for one matrix of one value a texel, normalized over its last
/// axis of a multiple of 4 values that the row groups take; a wrong target is an error.
#[test]
fn packed_norm_output_needs_one_matrix() {
    let d = device();
    let rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let none = |shape: &[usize], axis: i64| {
        let x = Tensor::new(&d, "x", shape, Precision::F16).unwrap();
        norm_packed_out_shape(&rec, &x, axis).unwrap()
    };
    assert_eq!(none(&[2, 64, 96], -1), None, "a batch of matrices");
    assert_eq!(none(&[1, 4, 64, 96], -1), None, "channels");
    assert_eq!(none(&[1, 64, 77], -1), None, "K not a multiple of 4");
    assert_eq!(
        none(&[1, 64, 1024], -1),
        None,
        "rows wider than the row groups"
    );
    assert_eq!(none(&[1, 64, 96], 1), None, "not over the last axis alone");
    assert_eq!(none(&[64, 96], -1), Some(vec![4, 24, 64]));
    let x = Tensor::new(&d, "x", &[1, 64, 96], Precision::F16).unwrap();
    let wrong = Tensor::new(&d, "wrong", &[4, 96, 16], Precision::F16).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let spec = NormSpec {
        axis: -1,
        epsilon: 1e-5,
        scale_offset: 0,
        bias_offset: None,
        rms: false,
    };
    let e = norm_packed_into(&mut rec, &x, None, &spec, &wrong).unwrap_err();
    assert!(e.to_string().contains("not the packed output"), "{e}");
}
