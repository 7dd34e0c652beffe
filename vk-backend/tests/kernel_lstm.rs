//! LSTM kernel vs an f64 CPU reference of the ONNX LSTM equations (forward, gates i,o,f,c,
//! sigmoid/tanh/tanh), with weights packed the way `src/packed` packs them: ONNX W `[4H, I]` and
//! R `[4H, H]` transposed to `[K, 4H]` and packed by `pack_matrix_kn`, bias = Wb + Rb packed by
//! `pack_vector`. Inputs are rounded to the storage precision before the reference runs.
//! Tolerance on |got - ref| / max(1, |ref|): fp32 1e-5 (measured <= 2e-7); fp16 3e-3 (measured
//! <= 7e-4: the kernel stores H and C in fp16 between steps, so rounding compounds over T).

use vk_backend::kernels::{lstm, lstm_into, LstmOutputs, LstmWeights};
use vk_backend::layout::{pack_matrix_kn, pack_vector};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Tensor, WeightAtlas};

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 3e-3,
        Precision::F32 => 1e-5,
    }
}

fn sigmoid(v: f64) -> f64 {
    1.0 / (1.0 + (-v).exp())
}

/// ONNX LSTM in f64. w: [4H, I], r: [4H, H], bias: [4H] (= Wb + Rb), x: [T, B, I],
/// h0/c0: [B, H]. Returns (Y [T, B, H], Y_h [B, H], Y_c [B, H]).
#[allow(clippy::too_many_arguments)]
fn lstm_ref(
    x: &[f64],
    w: &[f64],
    r: &[f64],
    bias: &[f64],
    h0: &[f64],
    c0: &[f64],
    t_len: usize,
    b_len: usize,
    i_len: usize,
    h_len: usize,
) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let mut h = h0.to_vec();
    let mut c = c0.to_vec();
    let mut y = Vec::with_capacity(t_len * b_len * h_len);
    for t in 0..t_len {
        let mut hn = vec![0.0; b_len * h_len];
        let mut cn = vec![0.0; b_len * h_len];
        for b in 0..b_len {
            let xt = &x[(t * b_len + b) * i_len..][..i_len];
            let hp = &h[b * h_len..][..h_len];
            let gate = |g: usize, u: usize| {
                let row = g * h_len + u;
                let mut s = bias[row];
                for (k, xv) in xt.iter().enumerate() {
                    s += xv * w[row * i_len + k];
                }
                for (k, hv) in hp.iter().enumerate() {
                    s += hv * r[row * h_len + k];
                }
                s
            };
            for u in 0..h_len {
                // ONNX gate order in W/R/B: i, o, f, c.
                let ig = sigmoid(gate(0, u));
                let og = sigmoid(gate(1, u));
                let fg = sigmoid(gate(2, u));
                let cg = gate(3, u).tanh();
                let cv = fg * c[b * h_len + u] + ig * cg;
                cn[b * h_len + u] = cv;
                hn[b * h_len + u] = og * cv.tanh();
            }
        }
        y.extend_from_slice(&hn);
        h = hn;
        c = cn;
    }
    (y, h, c)
}

fn transpose(v: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; v.len()];
    for i in 0..rows {
        for j in 0..cols {
            out[j * rows + i] = v[i * cols + j];
        }
    }
    out
}

/// Loads `stream` (texel values) into an atlas with small pages so the operands span pages.
fn atlas_with(p: Precision, stream: &[f32]) -> WeightAtlas {
    let d = device();
    let page_height = 4u32;
    let tpp = 512 * page_height as usize;
    let pages = (stream.len() / 4).div_ceil(tpp).max(1) as u32;
    let atlas = WeightAtlas::new(
        &d,
        AtlasConfig {
            slots: pages,
            precision: p,
            page_height: Some(page_height),
            logical_pages: pages,
        },
    )
    .unwrap();
    atlas.load_all_now(stream).unwrap();
    atlas
}

struct Case {
    t: usize,
    b: usize,
    i: usize,
    h: usize,
    init_h: bool,
    init_c: bool,
    bias: bool,
    /// Pass only Y_h (Y and Y_c become internal scratch).
    only_y_h: bool,
    /// Every tensor is a view over a larger image with a different fold (as the executor's
    /// views and arena reuse produce).
    views: bool,
}

/// A tensor of `shape`. `view` (a reinterpretation of a larger image with another fold) waits for
/// `Tensor::reinterpret` to land in vk-backend; until then the view cases use plain tensors.
fn tensor(name: &str, shape: &[usize], p: Precision, _view: bool) -> Tensor {
    Tensor::new(&device(), name, shape, p).unwrap()
}

/// Largest scaled error (printed with --nocapture, to keep the tolerances honest).
fn max_err(got: &[f32], want: &[f64]) -> f64 {
    got.iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w).abs() / w.abs().max(1.0))
        .fold(0.0, f64::max)
}

fn run(p: Precision, c: &Case, seed: u64) {
    let d = device();
    let mut rng = Rng::new(seed);
    let (t_len, b_len, i_len, h_len) = (c.t, c.b, c.i, c.h);
    let rnd = |rng: &mut Rng, n: usize, a: f32| -> Vec<f32> {
        rng.vec(n, -a, a).into_iter().map(|v| p.round(v)).collect()
    };
    let x = rnd(&mut rng, t_len * b_len * i_len, 1.0);
    let w = rnd(&mut rng, 4 * h_len * i_len, 0.25);
    let r = rnd(&mut rng, 4 * h_len * h_len, 0.25);
    let wb = rng.vec(4 * h_len, -0.5, 0.5);
    let rb = rng.vec(4 * h_len, -0.5, 0.5);
    // The packer sums Wb + Rb in f32, then the atlas stores it at the precision.
    let bias: Vec<f32> = if c.bias {
        wb.iter().zip(&rb).map(|(a, b)| p.round(a + b)).collect()
    } else {
        vec![0.0; 4 * h_len]
    };
    let h0 = if c.init_h {
        rnd(&mut rng, b_len * h_len, 1.0)
    } else {
        vec![0.0; b_len * h_len]
    };
    let c0 = if c.init_c {
        rnd(&mut rng, b_len * h_len, 2.0)
    } else {
        vec![0.0; b_len * h_len]
    };

    // Weight space: some unrelated texels first, then W^T, R^T, bias (as src/packed lays them).
    let mut stream = vec![9.0f32; 4 * 1000];
    let w_offset = (stream.len() / 4) as u32;
    stream.extend(pack_matrix_kn(&transpose(&w, 4 * h_len, i_len), i_len, 4 * h_len).unwrap());
    let r_offset = (stream.len() / 4) as u32;
    stream.extend(pack_matrix_kn(&transpose(&r, 4 * h_len, h_len), h_len, 4 * h_len).unwrap());
    let bias_offset = (stream.len() / 4) as u32;
    stream.extend(pack_vector(&bias));
    let atlas = atlas_with(p, &stream);
    let weights = LstmWeights {
        w_offset,
        r_offset,
        bias_offset: c.bias.then_some(bias_offset),
    };

    let v = c.views;
    let xt = tensor("x", &[t_len, b_len, i_len], p, v);
    xt.upload(&x).unwrap();
    let h0t = tensor("h0", &[1, b_len, h_len], p, v);
    h0t.upload(&h0).unwrap();
    let c0t = tensor("c0", &[1, b_len, h_len], p, v);
    c0t.upload(&c0).unwrap();

    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let (hi, ci) = (c.init_h.then_some(&h0t), c.init_c.then_some(&c0t));
    let outs = if c.only_y_h {
        let y_h = tensor("y_h", &[b_len, h_len], p, v);
        let outs = LstmOutputs {
            y: None,
            y_h: Some(&y_h),
            y_c: None,
        };
        lstm_into(&mut rec, &xt, weights, h_len, hi, ci, outs).unwrap();
        (None, y_h, None)
    } else if v {
        let y = tensor("y", &[t_len, 1, b_len, h_len], p, v);
        let y_h = tensor("y_h", &[1, b_len, h_len], p, v);
        let y_c = tensor("y_c", &[1, b_len, h_len], p, v);
        let outs = LstmOutputs {
            y: Some(&y),
            y_h: Some(&y_h),
            y_c: Some(&y_c),
        };
        lstm_into(&mut rec, &xt, weights, h_len, hi, ci, outs).unwrap();
        (Some(y), y_h, Some(y_c))
    } else {
        let (y, y_h, y_c) = lstm(&mut rec, &xt, weights, h_len, hi, ci, "l").unwrap();
        assert_eq!(y.shape(), &[t_len, 1, b_len, h_len]);
        (Some(y), y_h, Some(y_c))
    };
    assert_eq!(rec.dispatch_count(), t_len as u32);
    rec.submit_and_wait().unwrap();

    let f = |v: &[f32]| v.iter().map(|&a| a as f64).collect::<Vec<f64>>();
    let (y_ref, yh_ref, yc_ref) = lstm_ref(
        &f(&x),
        &f(&w),
        &f(&r),
        &f(&bias),
        &f(&h0),
        &f(&c0),
        t_len,
        b_len,
        i_len,
        h_len,
    );
    let what = format!(
        "{p:?} T={t_len} B={b_len} I={i_len} H={h_len} h0={} c0={} bias={} views={v}",
        c.init_h, c.init_c, c.bias
    );
    let yh = outs.1.download().unwrap();
    eprintln!("{what}: max scaled error Y_h {:.2e}", max_err(&yh, &yh_ref));
    assert_close(&format!("{what} Y_h"), &yh, &yh_ref, tol(p));
    if let Some(y) = outs.0 {
        assert_close(&format!("{what} Y"), &y.download().unwrap(), &y_ref, tol(p));
    }
    if let Some(y_c) = outs.2 {
        assert_close(
            &format!("{what} Y_c"),
            &y_c.download().unwrap(),
            &yc_ref,
            tol(p),
        );
    }
    assert_no_validation_messages(&d);
}

fn cases() -> Vec<Case> {
    let c = |t, b, i, h, init_h, init_c, bias, only_y_h, views| Case {
        t,
        b,
        i,
        h,
        init_h,
        init_c,
        bias,
        only_y_h,
        views,
    };
    vec![
        // Silero VAD's decoder LSTM: T = 1, B = 1, I = H = 128, states from the model input.
        c(1, 1, 128, 128, true, true, true, false, false),
        c(8, 2, 64, 64, false, false, true, false, false),
        c(5, 1, 37, 64, true, false, true, false, false),
        c(3, 2, 20, 128, false, true, false, false, false),
        // H not a multiple of 4 or of the 32-unit workgroup; only Y_h requested.
        c(4, 2, 13, 21, true, true, true, true, false),
        // Every tensor a view with its own fold.
        c(6, 2, 30, 64, true, true, true, false, true),
        c(3, 1, 16, 24, true, true, false, true, true),
    ]
}

#[test]
fn lstm_fp32() {
    for (k, c) in cases().iter().enumerate() {
        run(Precision::F32, c, 100 + k as u64);
    }
}

#[test]
fn lstm_fp16() {
    for (k, c) in cases().iter().enumerate() {
        run(Precision::F16, c, 200 + k as u64);
    }
}

#[test]
fn lstm_rejects_bad_shapes() {
    let d = device();
    let p = Precision::F32;
    let atlas = atlas_with(p, &[0.0; 4]);
    let x = Tensor::new(&d, "x", &[2, 1, 8], p).unwrap();
    let bad_h0 = Tensor::new(&d, "h0", &[1, 1, 16], p).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let weights = LstmWeights {
        w_offset: 0,
        r_offset: 0,
        bias_offset: None,
    };
    let e = lstm(&mut rec, &x, weights, 8, Some(&bad_h0), None, "l").unwrap_err();
    assert!(e.to_string().contains("initial_h"), "{e}");
    let x4 = Tensor::new(&d, "x4", &[2, 2, 1, 8], p).unwrap();
    let e = lstm(&mut rec, &x4, weights, 8, None, None, "l").unwrap_err();
    assert!(e.to_string().contains("[T, B, I]"), "{e}");
    assert_eq!(rec.dispatch_count(), 0);
}
