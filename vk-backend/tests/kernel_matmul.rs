//! MatMul/Gemm kernels vs. an f64 CPU reference (numpy matmul semantics) on random inputs.
//! Inputs are rounded to the storage precision before the reference runs. Tolerance on
//! |got - ref| / max(1, |ref|): fp32 1e-4, fp16 3e-3 (output rounding 5e-4 plus fp16 bias).

use vk_backend::kernels::{
    coop_min_tiles, coop_rows, matmul, matmul_into, matmul_pack_a_into, matmul_packed_a_shape,
    matmul_packed_into, matmul_packed_out_into, matmul_packed_out_shape, matmul_shape,
    matmul_split_into, matmul_split_k_shape, matmul_tensor_bias_into, uses_cooperative_matrix,
    MatBias, MatMulOpts, MatRhs, UnaryOp,
};
use vk_backend::layout::{pack_matrix_kn, pack_vector};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Tensor, WeightAtlas};

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 3e-3,
        Precision::F32 => 1e-4,
    }
}

/// Row-major strides-free index helper: value of `x` (shape `s`) at multi-index `idx`
/// (right-aligned, broadcasting size-1 dims).
fn at(x: &[f64], s: &[usize], idx: &[usize]) -> f64 {
    let off = idx.len() - s.len();
    let mut lin = 0;
    for (k, &d) in s.iter().enumerate() {
        lin = lin * d + if d == 1 { 0 } else { idx[off + k] };
    }
    x[lin]
}

/// numpy.matmul on stored shapes with optional transposes of the last two dims (rank >= 2 for B).
fn matmul_ref(
    a: &[f64],
    sa: &[usize],
    b: &[f64],
    sb: &[usize],
    ta: bool,
    tb: bool,
) -> (Vec<usize>, Vec<f64>) {
    let a1 = sa.len() == 1;
    let sa2: Vec<usize> = if a1 { vec![1, sa[0]] } else { sa.to_vec() };
    let (ra, rb) = (sa2.len(), sb.len());
    let (m, k) = if ta {
        (sa2[ra - 1], sa2[ra - 2])
    } else {
        (sa2[ra - 2], sa2[ra - 1])
    };
    let n = if tb { sb[rb - 2] } else { sb[rb - 1] };
    let (ba, bb) = (&sa2[..ra - 2], &sb[..rb - 2]);
    let r = ba.len().max(bb.len());
    let batch: Vec<usize> = (0..r)
        .map(|i| {
            let da = if i + ba.len() >= r {
                ba[i + ba.len() - r]
            } else {
                1
            };
            let db = if i + bb.len() >= r {
                bb[i + bb.len() - r]
            } else {
                1
            };
            da.max(db)
        })
        .collect();
    let nb: usize = batch.iter().product();
    let mut out = Vec::with_capacity(nb * m * n);
    for bi in 0..nb {
        let mut bidx = vec![0; r];
        let mut t = bi;
        for d in (0..r).rev() {
            bidx[d] = t % batch[d];
            t /= batch[d];
        }
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                let (mut ia, mut ib) = (bidx.clone(), bidx.clone());
                ia.extend([0, 0]);
                ib.extend([0, 0]);
                for kk in 0..k {
                    let (p, q) = (ia.len() - 2, ib.len() - 2);
                    (ia[p], ia[p + 1]) = if ta { (kk, i) } else { (i, kk) };
                    (ib[q], ib[q + 1]) = if tb { (j, kk) } else { (kk, j) };
                    s += at(a, &sa2, &ia) * at(b, sb, &ib);
                }
                out.push(s);
            }
        }
    }
    let mut shape = batch;
    if !a1 {
        shape.push(m);
    }
    shape.push(n);
    (shape, out)
}

fn rounded(v: &[f32], p: Precision) -> Vec<f64> {
    v.iter().map(|&x| p.round(x) as f64).collect()
}

fn act_ref(op: Option<UnaryOp>, x: f64) -> f64 {
    match op {
        None => x,
        Some(UnaryOp::Relu) => x.max(0.0),
        Some(UnaryOp::Sigmoid) => 1.0 / (1.0 + (-x).exp()),
        Some(UnaryOp::Clip { min, max }) => x.clamp(min as f64, max as f64),
        Some(o) => panic!("no reference for {o:?}"),
    }
}

#[test]
fn activation_times_activation() {
    let d = device();
    type Case = (&'static [usize], &'static [usize], bool, bool);
    let cases: &[Case] = &[
        (&[5, 7], &[7, 9], false, false),
        (&[2, 3, 33, 20], &[3, 20, 37], false, false),
        (&[3, 1, 6, 5], &[4, 5, 2], false, false),
        (&[5, 17, 9], &[5, 11, 17], true, true),
        (&[6, 40, 35], &[1, 6, 35], false, true),
        (&[7], &[7, 6], false, false),
        (&[2, 2, 3, 4, 5], &[5, 3], false, false),
        (&[1, 70], &[70, 1], false, false),
        (&[70, 33], &[45, 70], true, true),
        (&[2, 1, 20, 130], &[130, 20], false, false),
    ];
    let mut rng = Rng::new(11);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for &(sa, sb, ta, tb) in cases {
            let av = rng.vec(sa.iter().product(), -1.0, 1.0);
            let bv = rng.vec(sb.iter().product(), -1.0, 1.0);
            let a = Tensor::from_data(&d, "a", sa, p, &av).unwrap();
            let b = Tensor::from_data(&d, "b", sb, p, &bv).unwrap();
            let opts = MatMulOpts {
                trans_a: ta,
                trans_b: tb,
                ..Default::default()
            };
            let out = matmul(&mut rec, &a, MatRhs::Tensor(&b), &opts, "out").unwrap();
            let (shape, want) = matmul_ref(&rounded(&av, p), sa, &rounded(&bv, p), sb, ta, tb);
            assert_eq!(out.shape(), &shape[..], "{sa:?} x {sb:?}");
            checks.push((format!("{sa:?} x {sb:?} ta={ta} tb={tb} {p:?}"), out, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, tol(p));
        }
    }
    assert_no_validation_messages(&d);
}

/// Loads `stream` (texel values) into a fresh atlas with small pages so operands span pages.
fn atlas_with(p: Precision, stream: &[f32]) -> WeightAtlas {
    atlas_on(&device(), p, stream)
}

/// [`atlas_with`] on device `d`.
fn atlas_on(d: &vk_backend::Device, p: Precision, stream: &[f32]) -> WeightAtlas {
    let page_height = 4u32;
    let tpp = 512 * page_height as usize;
    let pages = (stream.len() / 4).div_ceil(tpp).max(1) as u32;
    let atlas = WeightAtlas::new(
        d,
        AtlasConfig {
            slots: pages,
            precision: p,
            page_height: Some(page_height),
            logical_pages: pages,
        },
    )
    .unwrap();
    let mut s = stream.to_vec();
    s.resize(pages as usize * tpp * 4, 0.0);
    atlas.load_all_now(&s).unwrap();
    atlas
}

/// Bias C of shape [rows, cols] (rows in {1, M}, cols in {1, N}) broadcast at (i, j).
fn bias_at(c: &[f64], rows: usize, cols: usize, i: usize, j: usize) -> f64 {
    c[(if rows == 1 { 0 } else { i }) * cols + if cols == 1 { 0 } else { j }]
}

#[test]
fn gemm_constant_b_bias_activation() {
    let d = device();
    // (A stored shape, trans_a, K, N, bias rows/cols (0 = no bias), alpha, beta, activation)
    type Case = (
        &'static [usize],
        bool,
        usize,
        usize,
        (usize, usize),
        f32,
        f32,
        Option<UnaryOp>,
    );
    let cases: &[Case] = &[
        (
            &[2, 3, 10, 13],
            false,
            13,
            40,
            (1, 40),
            1.0,
            1.0,
            Some(UnaryOp::Relu),
        ),
        (&[13, 34], true, 13, 21, (34, 21), 0.5, 2.0, None),
        (
            &[9, 64],
            false,
            64,
            70,
            (9, 1),
            1.5,
            -1.0,
            Some(UnaryOp::Sigmoid),
        ),
        (
            &[6, 5],
            false,
            5,
            3,
            (1, 1),
            1.0,
            0.5,
            Some(UnaryOp::Clip {
                min: -0.2,
                max: 0.3,
            }),
        ),
        (&[3, 7, 2, 300], false, 300, 8, (0, 0), 1.0, 1.0, None),
        // At most 4 rows run on matmul_const_gemv.comp: one row over several chunks of K
        // (K not a multiple of 4, N not of the 16 columns a workgroup takes), batched; a
        // decoder token's projection with a bias and an activation; 4 rows of a transposed A.
        (&[3, 1, 1100], false, 1100, 37, (0, 0), 1.0, 1.0, None),
        (
            &[1, 576],
            false,
            576,
            1536,
            (1, 1536),
            1.0,
            1.0,
            Some(UnaryOp::Sigmoid),
        ),
        (&[13, 4], true, 13, 21, (4, 21), 0.5, 2.0, None),
        // At most 16 lane-batched rows run on matmul_const_short.comp (so do the first case's
        // 10 and the fifth's 2): a recognizer head packed four rows a texel (one row block,
        // 33 workgroups of columns, the last partial); 16 rows in two blocks of 8 with a bias
        // per row; 13 rows of a transposed A in blocks of 7 and 6; a K that is not a multiple
        // of 4.
        (
            &[1, 4, 10, 120],
            false,
            120,
            2079,
            (1, 2079),
            1.0,
            1.0,
            None,
        ),
        (
            &[2, 4, 16, 70],
            false,
            70,
            100,
            (16, 1),
            1.0,
            1.0,
            Some(UnaryOp::Relu),
        ),
        (&[1, 2, 9, 13], true, 9, 65, (0, 0), 1.0, 1.0, None),
        (&[1, 4, 3, 262], false, 262, 64, (0, 0), 0.5, 1.0, None),
    ];
    let mut rng = Rng::new(12);
    // (activation precision, atlas precision): fp16 weights under fp32 activations is the mixed
    // variant, checked against a reference that rounds only the weights.
    for (p, wp) in [
        (Precision::F32, Precision::F32),
        (Precision::F16, Precision::F16),
        (Precision::F32, Precision::F16),
    ] {
        // One weight stream holding every case's B and bias.
        let mut stream: Vec<f32> = Vec::new();
        let mut prepared = Vec::new();
        for &(sa, ta, k, n, (br, bc), alpha, beta, act) in cases {
            let bv = rng.vec(k * n, -1.0, 1.0);
            let b_off = (stream.len() / 4) as u32;
            stream.extend(pack_matrix_kn(&bv, k, n).unwrap());
            let cv = rng.vec(br * bc, -1.0, 1.0);
            let bias = if br == 0 {
                None
            } else {
                let off = (stream.len() / 4) as u32;
                stream.extend(pack_vector(&cv));
                Some(MatBias {
                    texel_offset: off,
                    per_row: br > 1,
                    per_col: bc > 1,
                })
            };
            let opts = MatMulOpts {
                trans_a: ta,
                alpha,
                beta,
                bias,
                activation: act,
                ..Default::default()
            };
            prepared.push((sa, ta, k, n, (br, bc), bv, cv, b_off, opts));
        }
        let atlas = atlas_with(wp, &stream);
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        let mut checks = Vec::new();
        for (sa, ta, k, n, (br, bc), bv, cv, b_off, opts) in prepared {
            let av = rng.vec(sa.iter().product(), -1.0, 1.0);
            let a = Tensor::from_data(&d, "a", sa, p, &av).unwrap();
            let rhs = MatRhs::Weights {
                texel_offset: b_off,
                k,
                n,
            };
            let out = matmul(&mut rec, &a, rhs, &opts, "out").unwrap();
            let (shape, prod) =
                matmul_ref(&rounded(&av, p), sa, &rounded(&bv, wp), &[k, n], ta, false);
            assert_eq!(out.shape(), &shape[..]);
            let c = rounded(&cv, wp);
            let want: Vec<f64> = prod
                .iter()
                .enumerate()
                .map(|(e, &v)| {
                    let (i, j) = ((e / n) % shape[shape.len() - 2], e % n);
                    let bias = if br == 0 {
                        0.0
                    } else {
                        bias_at(&c, br, bc, i, j)
                    };
                    act_ref(
                        opts.activation,
                        opts.alpha as f64 * v + opts.beta as f64 * bias,
                    )
                })
                .collect();
            checks.push((
                format!("{sa:?} x W[{k},{n}] {p:?} weights {wp:?}"),
                out,
                want,
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
fn activation_b_with_constant_bias() {
    let d = device();
    let p = Precision::F32;
    let mut rng = Rng::new(13);
    let (sa, sb) = ([2usize, 5, 9, 6], [5usize, 6, 7]);
    let cv = rng.vec(7, -1.0, 1.0);
    let atlas = atlas_with(p, &pack_vector(&cv));
    let av = rng.vec(sa.iter().product(), -1.0, 1.0);
    let bv = rng.vec(sb.iter().product(), -1.0, 1.0);
    let a = Tensor::from_data(&d, "a", &sa, p, &av).unwrap();
    let b = Tensor::from_data(&d, "b", &sb, p, &bv).unwrap();
    let opts = MatMulOpts {
        alpha: 0.25,
        bias: Some(MatBias {
            texel_offset: 0,
            per_row: false,
            per_col: true,
        }),
        activation: Some(UnaryOp::Relu),
        ..Default::default()
    };
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let out = matmul(&mut rec, &a, MatRhs::Tensor(&b), &opts, "out").unwrap();
    rec.submit_and_wait().unwrap();
    let av: Vec<f64> = av.iter().map(|&x| x as f64).collect();
    let bv: Vec<f64> = bv.iter().map(|&x| x as f64).collect();
    let (_, prod) = matmul_ref(&av, &sa, &bv, &sb, false, false);
    let want: Vec<f64> = prod
        .iter()
        .enumerate()
        .map(|(e, &v)| (0.25 * v + cv[e % 7] as f64).max(0.0))
        .collect();
    assert_close("bias", &out.download().unwrap(), &want, tol(p));
    assert_no_validation_messages(&d);
}

/// Gemm with a run-time C tensor: every C broadcast shape, transposes, alpha/beta, activations,
/// activation and constant B, and a batched A (C shared by every batch).
#[test]
fn run_time_c_tensor() {
    let d = device();
    // (A stored shape, trans_a, B stored shape (None = constant [K, N]), trans_b, K, N,
    //  C shape, alpha, beta, activation)
    type Case = (
        &'static [usize],
        bool,
        Option<&'static [usize]>,
        bool,
        usize,
        usize,
        &'static [usize],
        f32,
        f32,
        Option<UnaryOp>,
    );
    let cases: &[Case] = &[
        (
            &[3, 5],
            false,
            Some(&[5, 4]),
            false,
            5,
            4,
            &[3, 4],
            1.0,
            1.0,
            None,
        ),
        (
            &[6, 3],
            true,
            Some(&[4, 6]),
            true,
            6,
            4,
            &[4],
            0.25,
            0.35,
            None,
        ),
        (
            &[2, 7],
            false,
            Some(&[7, 9]),
            false,
            7,
            9,
            &[],
            1.0,
            -2.0,
            None,
        ),
        (
            &[35, 40],
            false,
            Some(&[40, 33]),
            false,
            40,
            33,
            &[35, 1],
            0.5,
            1.5,
            Some(UnaryOp::Relu),
        ),
        (
            &[4, 6],
            false,
            Some(&[6, 5]),
            false,
            6,
            5,
            &[1, 5],
            1.0,
            1.0,
            Some(UnaryOp::Sigmoid),
        ),
        (
            &[3, 4],
            false,
            Some(&[4, 2]),
            false,
            4,
            2,
            &[1],
            1.0,
            0.0,
            None,
        ),
        (
            &[2, 3, 5, 6],
            false,
            Some(&[6, 7]),
            false,
            6,
            7,
            &[1, 5, 7],
            1.0,
            0.5,
            None,
        ),
        (
            &[9, 70],
            false,
            None,
            false,
            70,
            37,
            &[9, 37],
            0.75,
            1.25,
            None,
        ),
        (
            &[13, 8],
            true,
            None,
            false,
            13,
            6,
            &[8, 1],
            1.0,
            1.0,
            Some(UnaryOp::Relu),
        ),
    ];
    let mut rng = Rng::new(14);
    for p in [Precision::F32, Precision::F16] {
        let mut stream: Vec<f32> = Vec::new();
        let mut prepared = Vec::new();
        for &(sa, ta, sb, tb, k, n, sc, alpha, beta, act) in cases {
            let bv = rng.vec(k * n, -1.0, 1.0);
            let b_off = (stream.len() / 4) as u32;
            if sb.is_none() {
                stream.extend(pack_matrix_kn(&bv, k, n).unwrap());
            }
            prepared.push((sa, ta, sb, tb, k, n, sc, alpha, beta, act, bv, b_off));
        }
        let atlas = atlas_with(p, &stream);
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        let mut checks = Vec::new();
        for (sa, ta, sb, tb, k, n, sc, alpha, beta, act, bv, b_off) in prepared {
            let av = rng.vec(sa.iter().product(), -1.0, 1.0);
            let cv = rng.vec(sc.iter().product(), -1.0, 1.0);
            let a = Tensor::from_data(&d, "a", sa, p, &av).unwrap();
            let c = Tensor::from_data(&d, "c", sc, p, &cv).unwrap();
            let b_t = sb.map(|s| Tensor::from_data(&d, "b", s, p, &bv).unwrap());
            let rhs = match &b_t {
                Some(t) => MatRhs::Tensor(t),
                None => MatRhs::Weights {
                    texel_offset: b_off,
                    k,
                    n,
                },
            };
            let opts = MatMulOpts {
                trans_a: ta,
                trans_b: tb,
                alpha,
                beta,
                activation: act,
                ..Default::default()
            };
            let shape = matmul_shape(&a, rhs, &opts).unwrap();
            let out = Tensor::new(&d, "out", &shape, p).unwrap();
            matmul_tensor_bias_into(&mut rec, &a, rhs, &c, &opts, &out).unwrap();
            let sb_ref: Vec<usize> = sb.map_or(vec![k, n], |s| s.to_vec());
            let (rshape, prod) =
                matmul_ref(&rounded(&av, p), sa, &rounded(&bv, p), &sb_ref, ta, tb);
            assert_eq!(rshape, shape);
            let m = shape[shape.len() - 2];
            let cr = rounded(&cv, p);
            let want: Vec<f64> = prod
                .iter()
                .enumerate()
                .map(|(e, &v)| {
                    let (i, j) = ((e / n) % m, e % n);
                    act_ref(
                        act,
                        alpha as f64 * v + beta as f64 * at(&cr, sc, &[0, 0, 0, 0, i, j]),
                    )
                })
                .collect();
            checks.push((format!("{sa:?} x {sb_ref:?} + C{sc:?} {p:?}"), out, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in checks {
            assert_close(&what, &out.download().unwrap(), &want, tol(p));
        }
    }
    // C that does not broadcast to [M, N], and C together with a constant bias.
    let a = Tensor::new(&d, "a", &[3, 4], Precision::F32).unwrap();
    let b = Tensor::new(&d, "b", &[4, 5], Precision::F32).unwrap();
    let out = Tensor::new(&d, "o", &[3, 5], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let o = MatMulOpts::default();
    for bad in [&[2usize, 5][..], &[3, 4], &[2, 3, 5]] {
        let c = Tensor::new(&d, "c", bad, Precision::F32).unwrap();
        let e =
            matmul_tensor_bias_into(&mut rec, &a, MatRhs::Tensor(&b), &c, &o, &out).unwrap_err();
        assert!(e.to_string().contains("does not broadcast"), "{bad:?}: {e}");
    }
    let c = Tensor::new(&d, "c", &[5], Precision::F32).unwrap();
    let both = MatMulOpts {
        bias: Some(MatBias {
            texel_offset: 0,
            per_row: false,
            per_col: true,
        }),
        ..o
    };
    assert!(matmul_tensor_bias_into(&mut rec, &a, MatRhs::Tensor(&b), &c, &both, &out).is_err());
    assert_no_validation_messages(&d);
}

/// `matmul_pack_a.comp` (portable: it runs on any device) writes A's `[4, K/4, M]` copy: element
/// `(c, h, m)` is `A[m][4h + c]`, at both precisions, for one matrix given as 2-D and as 3-D; a
/// copy of the wrong shape is refused.
#[test]
fn packed_a_is_four_values_a_texel() {
    let d = &device();
    for p in [Precision::F32, Precision::F16] {
        for sa in [&[70usize, 24][..], &[1, 130, 200]] {
            let (m, k) = (sa[sa.len() - 2], sa[sa.len() - 1]);
            let av = Rng::new(5).vec(m * k, -2.0, 2.0);
            let a = Tensor::from_data(d, "a", sa, p, &av).unwrap();
            let packed = Tensor::new(d, "packed", &[4, k / 4, m], p).unwrap();
            let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
            matmul_pack_a_into(&mut rec, &a, &packed).unwrap();
            rec.submit_and_wait().unwrap();
            let got = packed.download().unwrap();
            let a_r = rounded(&av, p);
            let mut want = vec![0f64; m * k];
            for c in 0..4 {
                for h in 0..k / 4 {
                    for r in 0..m {
                        want[(c * (k / 4) + h) * m + r] = a_r[r * k + 4 * h + c];
                    }
                }
            }
            assert_close(&format!("pack {sa:?} {p:?}"), &got, &want, 0.0);
            let wrong = Tensor::new(d, "wrong", &[4, k / 4, m + 1], p).unwrap();
            let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
            let e = matmul_pack_a_into(&mut rec, &a, &wrong)
                .unwrap_err()
                .to_string();
            assert!(e.contains("does not hold A"), "{e}");
        }
    }
    assert_no_validation_messages(d);
}

#[test]
fn shape_errors_are_clear() {
    let d = device();
    let a = Tensor::new(&d, "a", &[3, 4], Precision::F32).unwrap();
    let b = Tensor::new(&d, "b", &[5, 6], Precision::F32).unwrap();
    let o = MatMulOpts::default();
    let e = matmul_shape(&a, MatRhs::Tensor(&b), &o).unwrap_err();
    assert!(e.to_string().contains("inner dimensions"), "{e}");
    let b1 = Tensor::new(&d, "b1", &[4], Precision::F32).unwrap();
    let e = matmul_shape(&a, MatRhs::Tensor(&b1), &o).unwrap_err();
    assert!(e.to_string().contains("1-D B"), "{e}");
    let bb = Tensor::new(&d, "bb", &[2, 4, 6], Precision::F32).unwrap();
    let b3 = Tensor::new(&d, "b3", &[3, 4, 6], Precision::F32).unwrap();
    let a3 = Tensor::new(&d, "a3", &[2, 3, 4], Precision::F32).unwrap();
    assert!(matmul_shape(&a3, MatRhs::Tensor(&b3), &o).is_err());
    assert_eq!(
        matmul_shape(&a, MatRhs::Tensor(&bb), &o).unwrap(),
        vec![2, 3, 6]
    );
    let w = MatRhs::Weights {
        texel_offset: 0,
        k: 4,
        n: 2,
    };
    let tb = MatMulOpts {
        trans_b: true,
        ..Default::default()
    };
    assert!(matmul_shape(&a, w, &tb).is_err());
    // Wrong output shape.
    let out = Tensor::new(&d, "o", &[3, 7], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let b46 = Tensor::new(&d, "b46", &[4, 6], Precision::F32).unwrap();
    let e =
        vk_backend::kernels::matmul_into(&mut rec, &a, MatRhs::Tensor(&b46), &o, &out).unwrap_err();
    assert!(e.to_string().contains("expected"), "{e}");
}

/// Constant-B MatMuls of the shapes the tensor-core kernel takes (fp16, output channel dim 1,
/// sizes not multiples of its 32x32x16 tiles, batch in the layer index, bias + activation). Where
/// the device has cooperative matrices, the ones with at least a 64x64 tile per SM run on them
/// and the smaller ones on the portable kernel (asserted; the last case has enough tiles on an
/// H200); elsewhere every case checks the portable kernel. With cooperative matrices the cases
/// run with every choice picked by shape (tile rows: 32 for the few-tile ones with more than 32
/// rows, asserted; A packed; 128 k a step; no split), then on 64 k a step with A as it is and
/// tile rows by shape, all on 64-row and all on 32-row tiles (`DeviceOptions::coop_rows`); with
/// A copied four values a texel first (`DeviceOptions::matmul_packed_a`, where the kernels take
/// it: one A matrix with K a multiple of 4, asserted) on 64- and 32-row tiles; the four of
/// those again on 128 k a step (`DeviceOptions::coop_step_k`); and with the reduction split
/// into three spans (`DeviceOptions::matmul_split_k`: at most one a step, every case here has
/// two or more, asserted) on 64- and 32-row tiles, on 64 and 128 k a step.
#[test]
fn constant_b_on_cooperative_matrices_where_available() {
    let coop = device().features().cooperative_matrix_f16;
    if !coop {
        eprintln!("no cooperative matrices on this device: the portable kernel runs these cases");
    }
    // (tile rows, packed A, k a step, reduction spans, tile columns over a packed A); `None`:
    // by shape.
    type Choice = (
        Option<u32>,
        Option<bool>,
        Option<u32>,
        Option<u32>,
        Option<u32>,
    );
    let choices: &[Choice] = if coop {
        &[
            (None, None, None, None, None),
            (None, Some(false), Some(64), Some(1), None),
            (Some(64), Some(false), Some(64), Some(1), None),
            (Some(32), Some(false), Some(64), Some(1), None),
            (Some(64), Some(true), Some(64), Some(1), None),
            (Some(32), Some(true), Some(64), Some(1), None),
            (Some(64), Some(false), Some(128), Some(1), None),
            (Some(32), Some(false), Some(128), Some(1), None),
            (Some(64), Some(true), Some(128), Some(1), None),
            (Some(32), Some(true), Some(128), Some(1), None),
            (Some(64), Some(false), Some(64), Some(3), None),
            (Some(32), Some(false), Some(64), Some(3), None),
            (Some(64), Some(false), Some(128), Some(3), None),
            (Some(32), Some(false), Some(128), Some(3), None),
        ]
    } else {
        &[(None, None, None, None, None)]
    };
    for &(rows, packed, step_k, spans, cols) in choices {
        let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
            coop_rows: rows,
            matmul_packed_a: packed,
            coop_step_k: step_k,
            matmul_split_k: spans,
            coop_cols: cols,
            ..vk_backend::DeviceOptions::from_env()
        })
        .unwrap();
        constant_b_cases(&d, rows);
    }
}

/// The same cases on 64x96 tensor-core tiles over a packed A (`matmul_const_coop_pa_n96.comp`),
/// forced on every MatMul that reads A packed in one span.
#[test]
fn constant_b_on_wide_cooperative_tiles_where_available() {
    let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
        coop_rows: Some(64),
        matmul_packed_a: Some(true),
        matmul_split_k: Some(1),
        coop_cols: Some(96),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap();
    constant_b_cases(&d, Some(64));
}

/// How a MatMul ran: through A's packed copy, or over reduction spans.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Straight,
    PackedA,
    Split,
}

/// A MatMul over reduction spans or through A's packed copy where the device takes them, else
/// straight.
fn matmul_routed(
    rec: &mut Recorder,
    a: &Tensor,
    rhs: MatRhs<'_>,
    opts: &MatMulOpts,
    name: &str,
) -> (Tensor, Route) {
    let d = rec.device().clone();
    let out = Tensor::new(
        &d,
        name,
        &matmul_shape(a, rhs, opts).unwrap(),
        a.precision(),
    )
    .unwrap();
    if let Some(shape) = matmul_split_k_shape(rec, a, rhs, opts, &out).unwrap() {
        let partials = Tensor::new(&d, "partials", &shape, Precision::F32).unwrap();
        matmul_split_into(rec, a, rhs, opts, &out, &partials).unwrap();
        return (out, Route::Split);
    }
    match matmul_packed_a_shape(rec, a, rhs, opts, &out).unwrap() {
        Some(shape) => {
            let packed = Tensor::new(&d, "packed", &shape, a.precision()).unwrap();
            matmul_pack_a_into(rec, a, &packed).unwrap();
            matmul_packed_into(rec, a, &packed, rhs, opts, &out).unwrap();
            (out, Route::PackedA)
        }
        None => {
            matmul_into(rec, a, rhs, opts, &out).unwrap();
            (out, Route::Straight)
        }
    }
}

fn constant_b_cases(d: &vk_backend::Device, forced_rows: Option<u32>) {
    let p = Precision::F16;
    let coop = d.features().cooperative_matrix_f16;
    // (A shape, K, N, bias per column)
    let cases: &[(&[usize], usize, usize, bool)] = &[
        (&[2, 1, 70, 150], 150, 90, true),
        (&[33, 200], 200, 17, false),
        (&[64, 1024], 1024, 96, true),
        (&[2, 1, 300, 256], 256, 2200, true),
        // Rows and K past whole 64-wide steps (K not a multiple of 4 either), one batch: 140
        // tiles, enough for an H200's tensor cores.
        (&[1, 250, 202], 202, 2200, false),
        // Fewer 64-row tiles (36) than an H200's 132 multiprocessors: 32-row tiles, rows past
        // whole tiles, an odd number of 64-wide K steps (the kernel stages two a loop).
        (&[1, 100, 150], 150, 1100, true),
        // 198 tiles: 64 rows, three K steps.
        (&[1, 130, 130], 130, 4200, false),
    ];
    let mut rng = Rng::new(77);
    let mut stream: Vec<f32> = Vec::new();
    let mut prepared = Vec::new();
    for &(sa, k, n, bias) in cases {
        let bv = rng.vec(k * n, -1.0, 1.0);
        let b_off = (stream.len() / 4) as u32;
        stream.extend(pack_matrix_kn(&bv, k, n).unwrap());
        // The same values as a table of N rows of K (B stored by rows, read as B^T).
        let mut bt = vec![0f32; n * k];
        for r in 0..k {
            for c in 0..n {
                bt[c * k + r] = bv[r * n + c];
            }
        }
        let rows_off = (stream.len() / 4) as u32;
        stream.extend(pack_matrix_kn(&bt, n, k).unwrap());
        let cv = rng.vec(n, -1.0, 1.0);
        let bias = bias.then(|| {
            let off = (stream.len() / 4) as u32;
            stream.extend(pack_vector(&cv));
            MatBias {
                texel_offset: off,
                per_row: false,
                per_col: true,
            }
        });
        prepared.push((sa, k, n, bv, cv, b_off, rows_off, bias));
    }
    let atlas = atlas_on(d, p, &stream);
    let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let mut checks = Vec::new();
    for (sa, k, n, bv, cv, b_off, rows_off, bias) in prepared {
        let av = rng.vec(sa.iter().product(), -1.0, 1.0);
        let a = Tensor::from_data(d, "a", sa, p, &av).unwrap();
        let opts = MatMulOpts {
            bias,
            activation: Some(UnaryOp::Relu),
            ..Default::default()
        };
        let rhs = MatRhs::Weights {
            texel_offset: b_off,
            k,
            n,
        };
        let (out, route) = matmul_routed(&mut rec, &a, rhs, &opts, "out");
        let by_rows = MatRhs::WeightRows {
            texel_offset: rows_off,
            k,
            n,
        };
        let (out_rows, rows_route) = matmul_routed(&mut rec, &a, by_rows, &opts, "out_rows");
        let rows = sa[sa.len() - 2];
        let tiles = (rows.div_ceil(64) * n.div_ceil(64)) as u64 * out.layout().layers();
        let takes = coop && tiles >= coop_min_tiles(&d.features());
        assert_eq!(uses_cooperative_matrix(d, &out, &opts), takes, "{sa:?}");
        let one_matrix = is_one_matrix(sa);
        // Spans fixed by the options, else picked by shape: none of these cases has the few
        // tiles (at most half the multiprocessors) and the long reduction for that.
        let splits = takes && d.features().matmul_split_k.is_some_and(|n| n > 1);
        let packed = d.features().matmul_packed_a != Some(false);
        let packs = packed && takes && one_matrix && k % 4 == 0 && !splits;
        let want_route = if splits {
            Route::Split
        } else if packs {
            Route::PackedA
        } else {
            Route::Straight
        };
        assert_eq!((route, rows_route), (want_route, want_route), "{sa:?}");
        let multiprocessors = d.features().concurrent_invocations / 2048;
        let by_shape = if rows > 32 && tiles < multiprocessors {
            32
        } else {
            64
        };
        let tile_rows = forced_rows.map_or(by_shape, |r| r as usize);
        assert_eq!(coop_rows(&d.features(), &out), tile_rows, "{sa:?}");
        let (shape, prod) = matmul_ref(
            &rounded(&av, p),
            sa,
            &rounded(&bv, p),
            &[k, n],
            false,
            false,
        );
        let c = rounded(&cv, p);
        let want: Vec<f64> = prod
            .iter()
            .enumerate()
            .map(|(e, &v)| {
                let b = if bias.is_some() { c[e % n] } else { 0.0 };
                act_ref(opts.activation, v + b)
            })
            .collect();
        assert_eq!(out.shape(), &shape[..]);
        checks.push((
            format!("{sa:?} x W[{k},{n}] by rows coop={takes} rows={tile_rows} {route:?}"),
            out_rows,
            want.clone(),
        ));
        checks.push((
            format!("{sa:?} x W[{k},{n}] coop={takes} rows={tile_rows} {route:?}"),
            out,
            want,
        ));
    }
    rec.submit_and_wait().unwrap();
    for (what, out, want) in checks {
        assert_close(&what, &out.download().unwrap(), &want, tol(p));
    }
    assert_no_validation_messages(d);
}

/// Two chained projections, `Y = relu(A W1 + c1)` then `Z = Y W2 + c2` (an MLP's two layers),
/// with Y written as the second one's packed A (`matmul_packed_out_into`: four columns a texel,
/// no copy, Y itself never written), against the CPU reference and bit for bit against the
/// same pair through Y and its copy (`DeviceOptions::matmul_packed_out` on, as by default).
/// Where the device has cooperative matrices both run on them (asserted); elsewhere no packed
/// output is offered and one is refused. A packed output of the wrong shape is refused, and none
/// is offered with the option off.
#[test]
fn chained_matmul_writes_the_next_packed_a() {
    let d = &vk_backend::Device::new(&vk_backend::DeviceOptions {
        matmul_packed_out: Some(true),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap();
    let p = Precision::F16;
    let coop = d.features().cooperative_matrix_f16;
    let (m, k, n, n2) = (250usize, 200usize, 2200usize, 1100usize);
    let mut rng = Rng::new(123);
    let (w1, c1) = (rng.vec(k * n, -0.2, 0.2), rng.vec(n, -1.0, 1.0));
    let (w2, c2) = (rng.vec(n * n2, -0.1, 0.1), rng.vec(n2, -1.0, 1.0));
    let mut stream = pack_matrix_kn(&w1, k, n).unwrap();
    let w2_off = (stream.len() / 4) as u32;
    stream.extend(pack_matrix_kn(&w2, n, n2).unwrap());
    let c1_off = (stream.len() / 4) as u32;
    stream.extend(pack_vector(&c1));
    let c2_off = (stream.len() / 4) as u32;
    stream.extend(pack_vector(&c2));
    let atlas = atlas_on(d, p, &stream);
    let av = rng.vec(m * k, -1.0, 1.0);
    let a = Tensor::from_data(d, "a", &[1, m, k], p, &av).unwrap();
    let first = MatRhs::Weights {
        texel_offset: 0,
        k,
        n,
    };
    let second = MatRhs::Weights {
        texel_offset: w2_off,
        k: n,
        n: n2,
    };
    let bias = |texel_offset| MatBias {
        texel_offset,
        per_row: false,
        per_col: true,
    };
    let opts1 = MatMulOpts {
        bias: Some(bias(c1_off)),
        activation: Some(UnaryOp::Relu),
        ..Default::default()
    };
    let opts2 = MatMulOpts {
        bias: Some(bias(c2_off)),
        ..Default::default()
    };
    let y = Tensor::new(d, "y", &[1, m, n], p).unwrap();
    let z = Tensor::new(d, "z", &[1, m, n2], p).unwrap();
    let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let packed_y = matmul_packed_out_shape(&rec, &a, first, &opts1, &y).unwrap();
    let wrong = Tensor::new(d, "wrong", &[4, n / 4, m + 1], p).unwrap();
    let refused = matmul_packed_out_into(&mut rec, &a, None, first, &opts1, (&y, &wrong))
        .unwrap_err()
        .to_string();
    assert!(refused.contains("packed output `wrong`"), "{refused}");
    if !coop {
        assert_eq!(packed_y, None);
        assert_no_validation_messages(d);
        return;
    }
    let shape = packed_y.expect("a tensor-core MatMul writes a packed output");
    {
        let off = vk_backend::Device::new(&vk_backend::DeviceOptions {
            matmul_packed_out: Some(false),
            ..vk_backend::DeviceOptions::from_env()
        })
        .unwrap();
        let mut rec = Recorder::new(&off, QueueKind::Compute).unwrap();
        let atlas = atlas_on(&off, p, &stream);
        rec.use_weights(&atlas);
        let a = Tensor::from_data(&off, "a", &[1, m, k], p, &av).unwrap();
        let y = Tensor::new(&off, "y", &[1, m, n], p).unwrap();
        let offered = matmul_packed_out_shape(&rec, &a, first, &opts1, &y).unwrap();
        assert_eq!(offered, None, "the option off");
    }
    assert_eq!(shape, vec![4, n / 4, m]);
    assert_eq!(
        matmul_packed_a_shape(&rec, &y, second, &opts2, &z).unwrap(),
        Some(shape.clone())
    );
    // The first MatMul reads its own A packed too, as the runtime runs it.
    let a_shape = matmul_packed_a_shape(&rec, &a, first, &opts1, &y)
        .unwrap()
        .expect("A packed");
    let packed_a = Tensor::new(d, "packed a", &a_shape, p).unwrap();
    matmul_pack_a_into(&mut rec, &a, &packed_a).unwrap();
    let packed = Tensor::new(d, "packed y", &shape, p).unwrap();
    matmul_packed_out_into(&mut rec, &a, Some(&packed_a), first, &opts1, (&y, &packed)).unwrap();
    matmul_packed_into(&mut rec, &y, &packed, second, &opts2, &z).unwrap();
    // The same pair through Y and its copy.
    let (y_copy, route) = matmul_routed(&mut rec, &a, first, &opts1, "y copy");
    let (z_copy, route2) = matmul_routed(&mut rec, &y_copy, second, &opts2, "z copy");
    assert_eq!((route, route2), (Route::PackedA, Route::PackedA));
    rec.submit_and_wait().unwrap();
    let (_, y_ref) = matmul_ref(
        &rounded(&av, p),
        &[1, m, k],
        &rounded(&w1, p),
        &[k, n],
        false,
        false,
    );
    let c1r = rounded(&c1, p);
    let y_ref: Vec<f64> = y_ref
        .iter()
        .enumerate()
        .map(|(e, &v)| p.round((v + c1r[e % n]).max(0.0) as f32) as f64)
        .collect();
    let (_, z_ref) = matmul_ref(&y_ref, &[1, m, n], &rounded(&w2, p), &[n, n2], false, false);
    let c2r = rounded(&c2, p);
    let z_ref: Vec<f64> = z_ref
        .iter()
        .enumerate()
        .map(|(e, &v)| v + c2r[e % n2])
        .collect();
    let got = z.download().unwrap();
    assert_close("Z through Y written packed", &got, &z_ref, tol(p));
    assert_eq!(got, z_copy.download().unwrap(), "Z through Y's copy");
    assert_no_validation_messages(d);
}

/// A B stored compensated (hi + lo fp16 pairs, only ever a small tensor: 1024 values by default)
/// needs `fetch_weight`'s lo part, which the tensor-core kernels skip: it runs on the portable
/// kernel even where its 32 output tiles would take the tensor cores. Here B's hi texels are
/// zero and its values sit in the lo part, so a kernel that read only the hi texels would return
/// zeros.
#[test]
fn compensated_b_reads_its_lo_part() {
    let d = &device();
    let p = Precision::F16;
    let (m, k, n) = (2048usize, 8usize, 64usize);
    let mut rng = Rng::new(91);
    let bv = rng.vec(k * n, -1.0, 1.0);
    let page_height = 4u32;
    let tpp = 512 * page_height as usize;
    let region = tpp / 16;
    let lo: Vec<f32> = bv.iter().map(|v| v * 2048.0).collect();
    let packed_lo = pack_matrix_kn(&lo, k, n).unwrap();
    assert!(packed_lo.len() <= region * 4);
    let mut stream = vec![0f32; tpp * 4];
    stream[region * 4..region * 4 + packed_lo.len()].copy_from_slice(&packed_lo);
    let atlas = WeightAtlas::new(
        d,
        AtlasConfig {
            slots: 1,
            precision: p,
            page_height: Some(page_height),
            logical_pages: 1,
        },
    )
    .unwrap();
    atlas.mark_compensated(&[0]).unwrap();
    atlas.load_all_now(&stream).unwrap();
    let av = rng.vec(m * k, -1.0, 1.0);
    let a = Tensor::from_data(d, "a", &[m, k], p, &av).unwrap();
    let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let rhs = MatRhs::Weights {
        texel_offset: 0,
        k,
        n,
    };
    let (out, route) = matmul_routed(&mut rec, &a, rhs, &MatMulOpts::default(), "out");
    rec.submit_and_wait().unwrap();
    assert_eq!(route, Route::Straight);
    let b_stored: Vec<f64> = lo.iter().map(|&v| p.round(v) as f64 / 2048.0).collect();
    let (shape, want) = matmul_ref(&rounded(&av, p), &[m, k], &b_stored, &[k, n], false, false);
    assert_eq!(out.shape(), &shape[..]);
    assert_close("compensated B", &out.download().unwrap(), &want, tol(p));
    assert_no_validation_messages(d);
}

/// Whether A of shape `sa` is one matrix (every dim before its last two is 1).
fn is_one_matrix(sa: &[usize]) -> bool {
    sa[..sa.len() - 2].iter().all(|&d| d == 1)
}

/// `matmul_const_gemv.comp` at each staging divisor (`DeviceOptions::gemv_spread`: 4, 8 or 16
/// columns a workgroup; 16 unless the options fix another), and `matmul_const_gemv_deep.comp`
/// (`DeviceOptions::gemv_deep`) at the widest and narrowest spread, both B layouts, 1 to 4
/// rows, K over more than one chunk at every divisor and not a multiple of 4, N not a multiple
/// of any workgroup's columns, B spread over several small pages.
#[test]
fn gemv_at_every_spread() {
    let (k, n) = (2150usize, 45usize);
    let mut rng = Rng::new(21);
    let variants = [(1u32, false), (2, false), (4, false), (1, true), (4, true)];
    for (spread, deep) in variants {
        let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
            gemv_spread: Some(spread),
            gemv_deep: Some(deep),
            ..vk_backend::DeviceOptions::from_env()
        })
        .unwrap();
        for p in [Precision::F32, Precision::F16] {
            let bv = rounded(&rng.vec(k * n, -1.0, 1.0), p);
            let bv32: Vec<f32> = bv.iter().map(|&x| x as f32).collect();
            // Packed [K, N], then the same values as a table of N rows of K (read as B^T).
            let mut bt = vec![0f32; n * k];
            for r in 0..k {
                for c in 0..n {
                    bt[c * k + r] = bv32[r * n + c];
                }
            }
            let mut stream = pack_matrix_kn(&bv32, k, n).unwrap();
            let rows_off = (stream.len() / 4) as u32;
            stream.extend(pack_matrix_kn(&bt, n, k).unwrap());
            let atlas = atlas_on(&d, p, &stream);
            for m in 1..=4usize {
                let av = rounded(&rng.vec(m * k, -1.0, 1.0), p);
                let av32: Vec<f32> = av.iter().map(|&x| x as f32).collect();
                let a = Tensor::from_data(&d, "a", &[m, k], p, &av32).unwrap();
                let (_, want) = matmul_ref(&av, &[m, k], &bv, &[k, n], false, false);
                let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
                rec.use_weights(&atlas);
                let opts = MatMulOpts::default();
                let packed = MatRhs::Weights {
                    texel_offset: 0,
                    k,
                    n,
                };
                let rows = MatRhs::WeightRows {
                    texel_offset: rows_off,
                    k,
                    n,
                };
                let outs = [
                    matmul(&mut rec, &a, packed, &opts, "packed").unwrap(),
                    matmul(&mut rec, &a, rows, &opts, "rows").unwrap(),
                ];
                rec.submit_and_wait().unwrap();
                for out in outs {
                    assert_close(
                        &format!("{} spread {spread} deep {deep} {p:?} M={m}", out.name()),
                        &out.download().unwrap(),
                        &want,
                        tol(p),
                    );
                }
            }
        }
        assert_no_validation_messages(&d);
    }
}
