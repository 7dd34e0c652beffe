//! Data-movement kernels (Transpose, Reshape, Expand, Tile, Slice, Concat, Split, Gather, Cast) vs. a
//! CPU reference on multi-indices. Values are moved, not computed: results must be exact after
//! rounding the inputs to the storage precision.

use vk_backend::kernels::{
    cast, concat, concat_by_texels, expand_into, gather, heads_from_rows_into, reshape,
    reshape_needs_copy, slice, split, tile, transpose, transpose_as_into, CastTo,
};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn unravel(mut f: usize, shape: &[usize]) -> Vec<usize> {
    let mut idx = vec![0; shape.len()];
    for d in (0..shape.len()).rev() {
        idx[d] = f % shape[d];
        f /= shape[d];
    }
    idx
}

fn ravel(idx: &[usize], shape: &[usize]) -> usize {
    idx.iter().zip(shape).fold(0, |acc, (&i, &d)| acc * d + i)
}

fn numel(s: &[usize]) -> usize {
    s.iter().product()
}

struct Ctx {
    p: Precision,
    rng: Rng,
    checks: Vec<(String, Tensor, Vec<f64>)>,
}

impl Ctx {
    fn input(&mut self, shape: &[usize]) -> (Tensor, Vec<f64>) {
        let v = self.rng.vec(numel(shape), -8.0, 8.0);
        let t = Tensor::from_data(&device(), "x", shape, self.p, &v).unwrap();
        (t, v.iter().map(|&x| self.p.round(x) as f64).collect())
    }
    fn check(&mut self, what: String, t: Tensor, want: Vec<f64>) {
        self.checks.push((format!("{what} {:?}", self.p), t, want));
    }
}

#[test]
fn data_movement() {
    let d = device();
    for p in [Precision::F32, Precision::F16] {
        let mut c = Ctx {
            p,
            rng: Rng::new(41),
            checks: Vec::new(),
        };
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        // Transpose.
        let perms: &[(&[usize], &[usize])] = &[
            (&[2, 5, 3, 7], &[0, 2, 3, 1]),
            (&[2, 5, 3, 7], &[3, 1, 0, 2]),
            (&[6, 9], &[]),
            (&[2, 3, 4, 5, 6], &[4, 0, 3, 1, 2]),
            (&[3, 5, 6], &[0, 2, 1]),
        ];
        for &(s, perm) in perms {
            let (x, xv) = c.input(s);
            let out = transpose(&mut rec, &x, perm, "t").unwrap();
            let perm: Vec<usize> = if perm.is_empty() {
                (0..s.len()).rev().collect()
            } else {
                perm.to_vec()
            };
            let os: Vec<usize> = perm.iter().map(|&q| s[q]).collect();
            let want = (0..numel(&os))
                .map(|f| {
                    let o = unravel(f, &os);
                    let mut i = vec![0; s.len()];
                    for (k, &q) in perm.iter().enumerate() {
                        i[q] = o[k];
                    }
                    xv[ravel(&i, s)]
                })
                .collect();
            c.check(format!("transpose {s:?} {perm:?}"), out, want);
        }
        // Transpose of a tensor read as another row-major shape (a Reshape folded in): the
        // exporters' head splits, [1, S, H * D] read as [1, S, H, D], to [1, H, S, D] or
        // [1, H, D, S], and a read that regroups a rank-4 channel-packed tensor.
        let reads: &[(&[usize], &[usize], &[usize])] = &[
            (&[1, 10, 24], &[1, 10, 3, 8], &[0, 2, 1, 3]),
            (&[1, 10, 24], &[1, 10, 3, 8], &[0, 2, 3, 1]),
            (&[2, 6, 5, 4], &[12, 5, 2, 2], &[3, 0, 2, 1]),
        ];
        for &(s, read_as, perm) in reads {
            let (x, xv) = c.input(s);
            let os: Vec<usize> = perm.iter().map(|&q| read_as[q]).collect();
            let out = Tensor::new(&d, "ta", &os, p).unwrap();
            transpose_as_into(&mut rec, &x, read_as, perm, &out).unwrap();
            let want = (0..numel(&os))
                .map(|f| {
                    let o = unravel(f, &os);
                    let mut i = vec![0; read_as.len()];
                    for (k, &q) in perm.iter().enumerate() {
                        i[q] = o[k];
                    }
                    xv[ravel(&i, read_as)]
                })
                .collect();
            c.check(
                format!("transpose {s:?} as {read_as:?} {perm:?}"),
                out,
                want,
            );
        }
        // Reshape family: row-major order is kept.
        for (s, t) in [
            (&[2usize, 5, 3, 7][..], &[10usize, 21][..]),
            (&[6, 5], &[1, 6, 5, 1]),
            (&[3, 4, 5], &[60]),
        ] {
            assert!(reshape_needs_copy(s, t).unwrap());
            let (x, xv) = c.input(s);
            let out = reshape(&mut rec, &x, t, "r").unwrap();
            c.check(format!("reshape {s:?}->{t:?}"), out, xv);
        }
        assert!(!reshape_needs_copy(&[1, 3, 4], &[3, 4]).unwrap());
        // Expand.
        let (x, xv) = c.input(&[5, 1, 3]);
        let out = Tensor::new(&d, "e", &[2, 5, 4, 3], p).unwrap();
        expand_into(&mut rec, &x, &out).unwrap();
        let want = (0..numel(&[2, 5, 4, 3]))
            .map(|f| {
                let i = unravel(f, &[2, 5, 4, 3]);
                xv[ravel(&[i[1], 0, i[3]], &[5, 1, 3])]
            })
            .collect();
        c.check("expand".into(), out, want);
        // Tile (the channel axis too: repeats across C4 blocks and inside one).
        for (s, r) in [
            (&[2usize, 3][..], &[3usize, 2][..]),
            (&[2, 3, 2, 5], &[2, 3, 1, 2]),
            (&[3], &[4]),
            (&[1, 5, 2, 3, 2], &[2, 1, 3, 1, 2]),
        ] {
            let (x, xv) = c.input(s);
            let out = tile(&mut rec, &x, r, "tile").unwrap();
            let os: Vec<usize> = s.iter().zip(r).map(|(d, k)| d * k).collect();
            assert_eq!(out.shape(), &os[..]);
            let want = (0..numel(&os))
                .map(|f| {
                    let i: Vec<usize> = unravel(f, &os)
                        .iter()
                        .zip(s)
                        .map(|(&o, &d)| o % d)
                        .collect();
                    xv[ravel(&i, s)]
                })
                .collect();
            c.check(format!("tile {s:?} x {r:?}"), out, want);
        }
        // Slice.
        type SliceCase = (
            &'static [usize],
            &'static [i64],
            &'static [i64],
            &'static [i64],
            &'static [i64],
        );
        let slices: &[SliceCase] = &[
            (&[2, 9, 3, 7], &[1, 0], &[9, 7], &[1, 3], &[2, 1]),
            (&[2, 9, 3, 7], &[-1, 8], &[i64::MIN, 0], &[3, 1], &[-2, -3]),
            (&[10, 6], &[2], &[-2], &[], &[]),
            (
                &[4, 7, 5],
                &[3, 1, 4],
                &[-10, 6, 0],
                &[0, 1, 2],
                &[-1, 2, -2],
            ),
        ];
        for &(s, starts, ends, axes, steps) in slices {
            let (x, xv) = c.input(s);
            let out = slice(&mut rec, &x, starts, ends, axes, steps, "s").unwrap();
            // Reference: enumerate the selected indices per axis independently.
            let r = s.len();
            let mut sel: Vec<Vec<usize>> = s.iter().map(|&dd| (0..dd).collect()).collect();
            for j in 0..starts.len() {
                let a = if axes.is_empty() { j } else { axes[j] as usize };
                let dd = s[a] as i64;
                let step = if steps.is_empty() { 1 } else { steps[j] };
                let norm = |v: i64| if v < 0 { v.max(-dd - 1) + dd } else { v };
                let (st, en) = (norm(starts[j]), norm(ends[j]));
                let mut v = Vec::new();
                let mut k = st;
                if step > 0 {
                    k = k.clamp(0, dd);
                    while k < en.min(dd) {
                        v.push(k as usize);
                        k += step;
                    }
                } else {
                    k = k.min(dd - 1);
                    while k > en.max(-1) {
                        v.push(k as usize);
                        k += step;
                    }
                }
                sel[a] = v;
            }
            let os: Vec<usize> = sel.iter().map(|v| v.len()).collect();
            assert_eq!(out.shape(), &os[..], "slice {s:?} {starts:?}");
            let want = (0..numel(&os))
                .map(|f| {
                    let o = unravel(f, &os);
                    let i: Vec<usize> = (0..r).map(|k| sel[k][o[k]]).collect();
                    xv[ravel(&i, s)]
                })
                .collect();
            c.check(
                format!("slice {s:?} {starts:?} {ends:?} {axes:?} {steps:?}"),
                out,
                want,
            );
        }
        // Concat + Split along several axes (C not a multiple of 4 included). Along channels with
        // every input but the last a multiple of 4, whole texels move, 8 inputs a dispatch: 11
        // inputs take two dispatches, the last one with padding lanes. Along rows or columns
        // whole texels move too.
        let mut by_texels = Vec::new();
        let aligned: Vec<Vec<usize>> = [4, 8, 4, 4, 12, 4, 4, 4, 8, 4, 3]
            .iter()
            .map(|&ch| vec![2, ch, 3, 5])
            .collect();
        for (shapes, axis) in [
            (aligned, 1i64),
            (vec![vec![1, 4, 2, 3], vec![1, 6, 2, 3]], 1),
            (
                vec![vec![2, 3, 4, 5], vec![2, 6, 4, 5], vec![2, 1, 4, 5]],
                1i64,
            ),
            (vec![vec![2, 5, 3, 7], vec![2, 5, 3, 2]], -1),
            (vec![vec![3, 5], vec![4, 5]], 0),
            (vec![vec![3, 2, 6], vec![1, 2, 6]], 0),
            (
                vec![vec![2, 5, 3, 7], vec![2, 5, 4, 7], vec![2, 5, 1, 7]],
                2,
            ),
            (vec![vec![6], vec![3]], 0),
            // A split recognizer head: 9 pieces (two dispatches) into a row wider than an image
            // may be (folded).
            (vec![vec![1, 4, 2, 2000]; 9], 3),
        ] {
            let ins: Vec<(Tensor, Vec<f64>)> = shapes.iter().map(|s| c.input(s)).collect();
            let refs: Vec<&Tensor> = ins.iter().map(|i| &i.0).collect();
            let out = concat(&mut rec, &refs, axis, "c").unwrap();
            let r = shapes[0].len();
            let a = ((axis + r as i64) % r as i64) as usize;
            by_texels.push(concat_by_texels(&refs, a, &out));
            let os = out.shape().to_vec();
            let want: Vec<f64> = (0..numel(&os))
                .map(|f| {
                    let mut i = unravel(f, &os);
                    let mut k = 0;
                    while i[a] >= shapes[k][a] {
                        i[a] -= shapes[k][a];
                        k += 1;
                    }
                    ins[k].1[ravel(&i, &shapes[k])]
                })
                .collect();
            c.check(format!("concat {shapes:?} axis {axis}"), out, want.clone());
            // Split the concatenation back.
            let (cx, _) = c.input(&os);
            cx.upload(&want.iter().map(|&v| v as f32).collect::<Vec<_>>())
                .unwrap();
            let sizes: Vec<usize> = shapes.iter().map(|s| s[a]).collect();
            let parts = split(&mut rec, &cx, axis, &sizes, "sp").unwrap();
            for (part, (_, v)) in parts.into_iter().zip(&ins) {
                c.check(format!("split {shapes:?} axis {axis}"), part, v.clone());
            }
        }
        assert_eq!(
            by_texels,
            [true, true, false, true, true, false, true, true, true]
        );
        // Gather with tensor indices (negative ones wrap).
        for (s, is, axis) in [
            (&[5usize, 6][..], &[4usize][..], 0i64),
            (&[2, 5, 3, 7], &[2, 3], 1),
            (&[2, 5, 3, 7], &[3], -1),
            (&[7, 4], &[], 0),
            (&[3, 6, 5], &[2, 2], 2),
        ] {
            let (x, xv) = c.input(s);
            let a = ((axis + s.len() as i64) % s.len() as i64) as usize;
            let dim = s[a] as i64;
            let iv: Vec<i64> = (0..numel(is))
                .map(|k| (k as i64 * 5 + 3) % (2 * dim) - dim)
                .collect();
            let idx = Tensor::from_data(
                &d,
                "i",
                is,
                p,
                &iv.iter().map(|&v| v as f32).collect::<Vec<_>>(),
            )
            .unwrap();
            let out = gather(&mut rec, &x, &idx, axis, "g").unwrap();
            let os = out.shape().to_vec();
            let want = (0..numel(&os))
                .map(|f| {
                    let o = unravel(f, &os);
                    let q = ravel(&o[a..a + is.len()], is);
                    let mut i: Vec<usize> = o[..a].to_vec();
                    let v = iv[q];
                    i.push(if v < 0 {
                        (v + dim) as usize
                    } else {
                        v as usize
                    });
                    i.extend_from_slice(&o[a + is.len()..]);
                    xv[ravel(&i, s)]
                })
                .collect();
            c.check(format!("gather {s:?} idx {is:?} axis {axis}"), out, want);
        }
        // Cast.
        let (x, xv) = c.input(&[3, 5, 7]);
        for (to, f) in [
            (CastTo::Int, (|v: f64| v.trunc()) as fn(f64) -> f64),
            (CastTo::Bool, |v: f64| if v != 0.0 { 1.0 } else { 0.0 }),
            (CastTo::Float, |v: f64| v),
        ] {
            let out = cast(&mut rec, &x, to, "cast").unwrap();
            c.check(
                format!("cast {to:?}"),
                out,
                xv.iter().map(|&v| f(v)).collect(),
            );
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in &c.checks {
            assert_close(what, &out.download().unwrap(), want, 0.0);
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn bad_parameters_are_rejected() {
    let d = device();
    let x = Tensor::new(&d, "x", &[2, 3], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    assert!(transpose(&mut rec, &x, &[0, 0], "t")
        .unwrap_err()
        .to_string()
        .contains("permutation"));
    assert!(slice(&mut rec, &x, &[0], &[1], &[0], &[0], "s")
        .unwrap_err()
        .to_string()
        .contains("step 0"));
    assert!(slice(&mut rec, &x, &[2], &[1], &[0], &[1], "s")
        .unwrap_err()
        .to_string()
        .contains("empty"));
    let y = Tensor::new(&d, "y", &[3, 3], Precision::F32).unwrap();
    assert!(concat(&mut rec, &[&x, &y], 1, "c")
        .unwrap_err()
        .to_string()
        .contains("differ"));
    let t = Tensor::new(&d, "t", &[3, 2], Precision::F32).unwrap();
    assert!(transpose_as_into(&mut rec, &x, &[7], &[0], &t)
        .unwrap_err()
        .to_string()
        .contains("cannot be read as"));
    assert!(reshape(&mut rec, &x, &[7], "r")
        .unwrap_err()
        .to_string()
        .contains("element count"));
    assert!(tile(&mut rec, &x, &[2], "t")
        .unwrap_err()
        .to_string()
        .contains("repeats"));
}

/// On a device whose images are padded to power-of-two row blocks the inputs fold into 128-row
/// layers, each by its own channel count; the texel concatenation reads each through its fold.
#[test]
fn concat_by_texels_through_folds() {
    let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
        pads_image_rows: Some(true),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap();
    let p = Precision::F16;
    let mut rng = Rng::new(43);
    let shapes = [
        [1, 8, 40, 48],
        [1, 12, 40, 48],
        [1, 4, 40, 48],
        [1, 3, 40, 48],
    ];
    let values: Vec<Vec<f32>> = shapes
        .iter()
        .map(|s| rng.vec(numel(s), -8.0, 8.0))
        .collect();
    let ins: Vec<Tensor> = shapes
        .iter()
        .zip(&values)
        .map(|(s, v)| Tensor::from_data(&d, "x", s, p, v).unwrap())
        .collect();
    assert!(ins.iter().all(|t| t.layout().ph != 40), "inputs are folded");
    let refs: Vec<&Tensor> = ins.iter().collect();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let out = concat(&mut rec, &refs, 1, "c").unwrap();
    assert!(concat_by_texels(&refs, 1, &out));
    rec.submit_and_wait().unwrap();
    // NCHW with N = 1: the inputs' values one after another.
    let want: Vec<f64> = values.concat().iter().map(|&v| p.round(v) as f64).collect();
    assert_close("concat through folds", &out.download().unwrap(), &want, 0.0);
    assert_no_validation_messages(&d);
}

/// `heads_from_rows.comp`: a projection's rows `[1, S, H * D]` into heads `[1, H, S, D]`,
/// exactly, at both precisions: head counts that fill their last texel and that do not (Whisper
/// tiny's 6 of 64), odd head dims, and rows folded into a taller image (3 rows of 20 000); heads
/// that do not split the rows are refused.
#[test]
fn heads_from_rows_splits_a_projection() {
    let d = &device();
    for p in [Precision::F32, Precision::F16] {
        let mut rng = Rng::new(51);
        let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for (s, h, hd) in [(1500, 6, 64), (7, 5, 3), (33, 8, 16), (3, 4, 5000)] {
            let v = rng.vec(s * h * hd, -8.0, 8.0);
            let rows = Tensor::from_data(d, "rows", &[1, s, h * hd], p, &v).unwrap();
            let heads = Tensor::new(d, "heads", &[1, h, s, hd], p).unwrap();
            heads_from_rows_into(&mut rec, &rows, &heads).unwrap();
            let mut want = vec![0f64; s * h * hd];
            for head in 0..h {
                for row in 0..s {
                    for x in 0..hd {
                        want[(head * s + row) * hd + x] =
                            p.round(v[row * h * hd + head * hd + x]) as f64;
                    }
                }
            }
            let folded = rows.layout().pw != rows.layout().w;
            assert_eq!(folded, s == 3, "{s} rows of {}", h * hd);
            checks.push((format!("{s}x{h}x{hd} {p:?} folded={folded}"), heads, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, t, want) in checks {
            assert_close(&what, &t.download().unwrap(), &want, 0.0);
        }
    }
    let rows = Tensor::new(d, "rows", &[1, 10, 12], Precision::F16).unwrap();
    let heads = Tensor::new(d, "heads", &[1, 4, 10, 4], Precision::F16).unwrap();
    let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
    let e = heads_from_rows_into(&mut rec, &rows, &heads)
        .unwrap_err()
        .to_string();
    assert!(e.contains("do not split rows `rows`"), "{e}");
    assert_no_validation_messages(d);
}
