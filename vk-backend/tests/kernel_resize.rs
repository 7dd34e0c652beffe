//! Resize (nearest in all four nearest modes, bilinear; all four coordinate transforms; up, down
//! and non-integer scales) vs. a CPU reference of the ONNX formulas: coordinates in f32 as ONNX
//! Runtime computes them, interpolation in f64, from the same f32 scales the kernel gets; with
//! given scales, align_corners / pytorch_half_pixel use the unfloored resized length
//! scale * len_in, as the ONNX reference implementation (op_resize.py) does. Nearest
//! copies values, so it must match exactly (tol 0); bilinear uses tol = 1e-5 (fp32) / 2e-3 (fp16)
//! on |got - ref| / max(1, |ref|).

use vk_backend::kernels::{resize, CoordMode, NearestMode, ResizeMode, ResizeParams};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

/// Source coordinate, computed in f32 like ONNX Runtime (ties of nearest rounding depend on it).
/// `len_resized`: the output length, or `scale * len_in` when scales were given.
fn src_coord(xo: usize, scale: f32, len_in: usize, len_resized: f32, coord: CoordMode) -> f64 {
    let x = xo as f32;
    let v = match coord {
        CoordMode::HalfPixel => (x + 0.5) / scale - 0.5,
        CoordMode::PytorchHalfPixel => {
            if len_resized > 1.0 {
                (x + 0.5) / scale - 0.5
            } else {
                0.0
            }
        }
        CoordMode::AlignCorners => {
            if len_resized == 1.0 {
                0.0
            } else {
                x * (len_in - 1) as f32 / (len_resized - 1.0)
            }
        }
        CoordMode::Asymmetric => x / scale,
    };
    v as f64
}

fn nearest(x: f64, len: usize, m: NearestMode) -> usize {
    let r = match m {
        NearestMode::RoundPreferFloor if x.fract().abs() == 0.5 => x.floor(),
        NearestMode::RoundPreferCeil if x.fract().abs() == 0.5 => x.ceil(),
        NearestMode::RoundPreferFloor | NearestMode::RoundPreferCeil => x.round(),
        NearestMode::Floor => x.floor(),
        NearestMode::Ceil => x.ceil(),
    };
    r.clamp(0.0, (len - 1) as f64) as usize
}

fn resize_ref(x: &[f64], s: [usize; 4], p: &ResizeParams, oh: usize, ow: usize) -> Vec<f64> {
    let [n, c, h, w] = s;
    let [sh, sw] = p
        .scales
        .unwrap_or([oh as f32 / h as f32, ow as f32 / w as f32]);
    let (lh, lw) = match p.scales {
        Some(_) if p.length_from_scales => (sh * h as f32, sw * w as f32),
        _ => (oh as f32, ow as f32),
    };
    let mut out = Vec::new();
    for nc in 0..n * c {
        let at = |y: usize, xx: usize| x[(nc * h + y) * w + xx];
        for oy in 0..oh {
            let fy = src_coord(oy, sh, h, lh, p.coord);
            for ox in 0..ow {
                let fx = src_coord(ox, sw, w, lw, p.coord);
                out.push(match p.mode {
                    ResizeMode::Nearest(m) => at(nearest(fy, h, m), nearest(fx, w, m)),
                    ResizeMode::Linear => {
                        let cy = fy.clamp(0.0, (h - 1) as f64);
                        let cx = fx.clamp(0.0, (w - 1) as f64);
                        let (y0, x0) = (cy.floor() as usize, cx.floor() as usize);
                        let (y1, x1) = ((y0 + 1).min(h - 1), (x0 + 1).min(w - 1));
                        let (ty, tx) = (cy - y0 as f64, cx - x0 as f64);
                        (at(y0, x0) * (1.0 - tx) + at(y0, x1) * tx) * (1.0 - ty)
                            + (at(y1, x0) * (1.0 - tx) + at(y1, x1) * tx) * ty
                    }
                });
            }
        }
    }
    out
}

#[test]
fn resize_matches_reference() {
    let d = device();
    let s = [2usize, 5, 4, 6];
    let coords = [
        CoordMode::HalfPixel,
        CoordMode::PytorchHalfPixel,
        CoordMode::AlignCorners,
        CoordMode::Asymmetric,
    ];
    let mut modes: Vec<ResizeMode> = [
        NearestMode::RoundPreferFloor,
        NearestMode::RoundPreferCeil,
        NearestMode::Floor,
        NearestMode::Ceil,
    ]
    .into_iter()
    .map(ResizeMode::Nearest)
    .collect();
    modes.push(ResizeMode::Linear);
    // (out [H, W], scales): 2x up, 0.5x down, sizes-only non-integer, a size-1 output axis, and
    // non-integer given scales (4 x 0.6 = 2.4 -> 2, 6 x 0.6 = 3.6 -> 3; 4 x 0.3 = 1.2 -> 1).
    let sizes: [([usize; 2], Option<[f32; 2]>); 6] = [
        ([8, 12], Some([2.0, 2.0])),
        ([2, 3], Some([0.5, 0.5])),
        ([7, 5], None),
        ([1, 9], None),
        ([2, 3], Some([0.6, 0.6])),
        ([1, 4], Some([0.3, 0.7])),
    ];
    let mut rng = Rng::new(41);
    for p in [Precision::F32, Precision::F16] {
        let xv = rng.vec(s.iter().product(), -2.0, 2.0);
        let x = Tensor::from_data(&d, "x", &s, p, &xv).unwrap();
        let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for &mode in &modes {
            for &coord in &coords {
                for &(hw, scales) in &sizes {
                    let params = ResizeParams {
                        mode,
                        coord,
                        scales,
                        length_from_scales: scales.is_some(),
                    };
                    let y = resize(&mut rec, &x, &params, hw, "y").unwrap();
                    let want = resize_ref(&xr, s, &params, hw[0], hw[1]);
                    let tol = match (mode, p) {
                        (ResizeMode::Nearest(_), _) => 0.0,
                        (_, Precision::F32) => 1e-5,
                        (_, Precision::F16) => 2e-3,
                    };
                    checks.push((format!("{params:?} {hw:?} {p:?}"), y, want, tol));
                }
            }
        }
        rec.submit_and_wait().unwrap();
        for (what, y, want, tol) in &checks {
            assert_close(what, &y.download().unwrap(), want, *tol);
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn resize_errors() {
    let d = device();
    let x = Tensor::new(&d, "x", &[1, 3, 4, 4], Precision::F32).unwrap();
    let bad = Tensor::new(&d, "bad", &[1, 4, 8, 8], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let p = ResizeParams {
        mode: ResizeMode::Linear,
        coord: CoordMode::HalfPixel,
        scales: None,
        length_from_scales: false,
    };
    let e = vk_backend::kernels::resize_into(&mut rec, &x, &p, &bad).unwrap_err();
    assert!(e.to_string().contains("last two axes"), "{e}");
    let p0 = ResizeParams {
        scales: Some([0.0, 1.0]),
        ..p
    };
    assert!(resize(&mut rec, &x, &p0, [4, 4], "y").is_err());
}
