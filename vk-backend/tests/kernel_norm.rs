//! Softmax / LogSoftmax / LayerNormalization vs. an f64 CPU reference on random inputs.
//! Tolerance on |got - ref| / max(1, |ref|): fp32 1e-4, fp16 4e-3 (inputs are rounded to fp16 first,
//! so the remaining error is the fp16 output rounding plus fp16 scale/bias).

use vk_backend::kernels::{
    layernorm, norm_rows, residual_norm_into, rmsnorm_into, softmax, NormRows, NormSpec, Residual,
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
        let tpp = 512 * 4;
        let pages = (stream.len() / 4).div_ceil(tpp) as u32;
        stream.resize(pages as usize * tpp * 4, 0.0);
        let atlas = WeightAtlas::new(
            &d,
            AtlasConfig {
                slots: pages,
                precision: p,
                page_height: Some(4),
                logical_pages: pages,
            },
        )
        .unwrap();
        atlas.load_all_now(&stream).unwrap();
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
