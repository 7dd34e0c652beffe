//! MaxPool / AveragePool / GlobalAveragePool vs. an f64 CPU reference on random inputs.
//! The reference reads inputs rounded to the storage precision; tolerance
//! |got - ref| <= tol * max(1, |ref|) with tol = 1e-5 (fp32) / 2e-3 (fp16: one output rounding;
//! sums accumulate in fp32).

use vk_backend::kernels::{
    global_avg_pool, pool2d, pool2d_output_shape, Pool2dParams, PoolKind, Window2d,
};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 2e-3,
        Precision::F32 => 1e-5,
    }
}

/// Output size by the ONNX formula, written independently of the kernel code.
fn out_dim(i: usize, k: usize, s: usize, d: usize, p0: usize, p1: usize, ceil: bool) -> usize {
    let ext = (k - 1) * d + 1;
    let num = (i + p0 + p1 - ext) as f64 / s as f64;
    let mut o = if ceil { num.ceil() } else { num.floor() } as usize + 1;
    // PyTorch/ORT: the last window must start inside the input or the leading pad.
    if ceil && (o - 1) * s >= i + p0 {
        o -= 1;
    }
    o
}

fn pool_ref(x: &[f64], s: [usize; 4], p: &Pool2dParams, oh: usize, ow: usize) -> Vec<f64> {
    let [n, c, h, w] = s;
    let wd = p.window;
    let mut out = Vec::with_capacity(n * c * oh * ow);
    for nc in 0..n * c {
        for oy in 0..oh {
            for ox in 0..ow {
                let mut vals = Vec::new();
                let mut padded_taps = 0usize;
                for ky in 0..wd.kernel[0] {
                    for kx in 0..wd.kernel[1] {
                        let iy = (oy * wd.strides[0] + ky * wd.dilations[0]) as isize
                            - wd.pads[0] as isize;
                        let ix = (ox * wd.strides[1] + kx * wd.dilations[1]) as isize
                            - wd.pads[1] as isize;
                        if iy < (h + wd.pads[2]) as isize && ix < (w + wd.pads[3]) as isize {
                            padded_taps += 1;
                        }
                        if iy >= 0 && ix >= 0 && iy < h as isize && ix < w as isize {
                            vals.push(x[(nc * h + iy as usize) * w + ix as usize]);
                        }
                    }
                }
                let sum: f64 = vals.iter().sum();
                out.push(match p.kind {
                    PoolKind::Max => vals.iter().copied().fold(f64::NEG_INFINITY, f64::max),
                    PoolKind::Average {
                        count_include_pad: false,
                    } => sum / vals.len() as f64,
                    PoolKind::Average {
                        count_include_pad: true,
                    } => sum / padded_taps as f64,
                });
            }
        }
    }
    out
}

fn win(k: [usize; 2], s: [usize; 2], d: [usize; 2], pads: [usize; 4]) -> Window2d {
    Window2d {
        kernel: k,
        strides: s,
        dilations: d,
        pads,
    }
}

#[test]
fn pool2d_matches_reference() {
    let d = device();
    let avg = |count_include_pad| PoolKind::Average { count_include_pad };
    let cases: Vec<([usize; 4], Pool2dParams)> = vec![
        // MaxPool 3x3 s2 p1 (ResNet stem), odd sizes, C=5, batch 2.
        (
            [2, 5, 9, 11],
            Pool2dParams {
                kind: PoolKind::Max,
                window: win([3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
                ceil_mode: false,
            },
        ),
        // MaxPool with dilation and ceil_mode, asymmetric pads.
        (
            [1, 6, 10, 9],
            Pool2dParams {
                kind: PoolKind::Max,
                window: win([2, 3], [2, 2], [2, 1], [0, 1, 1, 0]),
                ceil_mode: true,
            },
        ),
        // MaxPool 2x2 s2 ceil over odd sizes (windows hanging over the edge).
        (
            [1, 3, 7, 5],
            Pool2dParams {
                kind: PoolKind::Max,
                window: win([2, 2], [2, 2], [1, 1], [0; 4]),
                ceil_mode: true,
            },
        ),
        // AveragePool with pads, both count_include_pad settings, ceil mode.
        (
            [2, 7, 8, 9],
            Pool2dParams {
                kind: avg(false),
                window: win([3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
                ceil_mode: true,
            },
        ),
        (
            [2, 7, 8, 9],
            Pool2dParams {
                kind: avg(true),
                window: win([3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
                ceil_mode: true,
            },
        ),
        (
            [1, 4, 7, 6],
            Pool2dParams {
                kind: avg(true),
                window: win([3, 2], [1, 2], [1, 1], [2, 0, 1, 1]),
                ceil_mode: false,
            },
        ),
        (
            [1, 4, 7, 6],
            Pool2dParams {
                kind: avg(false),
                window: win([3, 2], [1, 2], [1, 1], [2, 0, 1, 1]),
                ceil_mode: false,
            },
        ),
    ];
    let mut rng = Rng::new(21);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for (s, params) in &cases {
            let xv = rng.vec(s.iter().product(), -2.0, 2.0);
            let x = Tensor::from_data(&d, "x", s, p, &xv).unwrap();
            let y = pool2d(&mut rec, &x, params, "y").unwrap();
            let wd = params.window;
            let oh = out_dim(
                s[2],
                wd.kernel[0],
                wd.strides[0],
                wd.dilations[0],
                wd.pads[0],
                wd.pads[2],
                params.ceil_mode,
            );
            let ow = out_dim(
                s[3],
                wd.kernel[1],
                wd.strides[1],
                wd.dilations[1],
                wd.pads[1],
                wd.pads[3],
                params.ceil_mode,
            );
            assert_eq!(y.shape(), &[s[0], s[1], oh, ow], "{s:?} {params:?}");
            let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
            checks.push((
                format!("{s:?} {params:?} {p:?}"),
                y,
                pool_ref(&xr, *s, params, oh, ow),
            ));
        }
        // GlobalAveragePool, including H*W > 256 (strided partial sums, rows wrapping), H*W
        // > 4 * 256 (several rounds of four loads), W > 256, H*W < 64, and an input whose
        // short layers are stacked into taller ones where the device pads them (read by linear
        // index; scripts/test.sh runs this again with TEXSTREAM_PAD_SHORT_LAYERS=1).
        for s in [
            [2usize, 5, 13, 11],
            [1, 6, 40, 37],
            [1, 3, 3, 300],
            [1, 9, 3, 2],
            [1, 4, 1, 1],
            [1, 8, 2, 4096],
        ] {
            let xv = rng.vec(s.iter().product(), -2.0, 2.0);
            let x = Tensor::from_data(&d, "x", &s, p, &xv).unwrap();
            let y = global_avg_pool(&mut rec, &x, "gap").unwrap();
            let hw = s[2] * s[3];
            let want: Vec<f64> = xv
                .chunks(hw)
                .map(|ch| ch.iter().map(|&v| p.round(v) as f64).sum::<f64>() / hw as f64)
                .collect();
            checks.push((format!("GlobalAveragePool {s:?} {p:?}"), y, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in &checks {
            assert_close(what, &out.download().unwrap(), want, tol(p));
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn pool_errors_are_clear() {
    let p = Pool2dParams {
        kind: PoolKind::Max,
        window: win([5, 5], [1, 1], [1, 1], [0; 4]),
        ceil_mode: false,
    };
    let e = pool2d_output_shape(&[1, 3, 4, 8], &p).unwrap_err();
    assert!(e.to_string().contains("exceeds the padded input"), "{e}");
    assert!(pool2d_output_shape(&[3, 4, 8], &p).is_err());
    let mut z = p;
    z.window.strides = [0, 1];
    assert!(pool2d_output_shape(&[1, 3, 8, 8], &z).is_err());
}
