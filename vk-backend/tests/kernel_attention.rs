//! Fused attention against a CPU reference that stores the whole score matrix and takes the
//! softmax the textbook way: heads that do not fill a texel, key counts that are not a multiple of
//! the key block, query rows past a workgroup, K given transposed, masks broadcast over heads and
//! rows or given per head, a fully masked prefix (a KV cache's unwritten tail), a fully masked
//! row under the NaN guard, grouped-query attention (fewer key/value heads), both precisions;
//! the blocked kernels (five query rows and more) and the decode kernel (up to four); without a
//! batch, Q, K and V also read from a projection's rows `[1, S, H * D]` (split heads).

use vk_backend::kernels::{
    attention_into, attention_packed_into, attention_packed_out_shape, attention_partials_shape,
    attention_uses_tensor_cores, AttentionInputs, AttentionOpts, SplitHeads,
};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Device, DeviceOptions, Precision, QueueKind, Recorder, Tensor};

struct Case {
    batch: usize,
    heads: usize,
    /// Key/value heads (grouped-query attention when fewer than `heads`).
    kv_heads: usize,
    sq: usize,
    sk: usize,
    d: usize,
    dv: usize,
    /// Mask shape as [N, C, H] (each 1 or full); None: no mask.
    mask: Option<[usize; 3]>,
    key_rows: bool,
    /// Mask query row 0 entirely to -inf and expect zeros there (the exporters' NaN guard).
    nan_guard: bool,
    /// The mask rises by 0.6 a key: each block of 16 keys lifts a row's max by more than 8, so
    /// the one-pass kernels rescale their accumulators at every block.
    ramp: bool,
}

fn inputs<'a>(
    q: &'a Tensor,
    k: &'a Tensor,
    v: &'a Tensor,
    mask: Option<&'a Tensor>,
) -> AttentionInputs<'a> {
    AttentionInputs { q, k, v, mask }
}

fn rounded(v: Vec<f32>, p: Precision) -> Vec<f32> {
    match p {
        Precision::F32 => v,
        Precision::F16 => v.iter().map(|&x| half::f16::from_f32(x).to_f32()).collect(),
    }
}

/// Row-major reference over [B, H, Sq, Dv].
fn reference(c: &Case, q: &[f32], k: &[f32], v: &[f32], m: &[f32], scale: f32) -> Vec<f64> {
    let mut out = vec![0f64; c.batch * c.heads * c.sq * c.dv];
    for b in 0..c.batch {
        for h in 0..c.heads {
            let bh = b * c.heads + h;
            // The key/value head this query head reads.
            let bkh = b * c.kv_heads + h / (c.heads / c.kv_heads);
            for i in 0..c.sq {
                let mut s = vec![0f64; c.sk];
                for (j, sj) in s.iter_mut().enumerate() {
                    let mut dot = 0f64;
                    for x in 0..c.d {
                        let kv = if c.key_rows {
                            k[(bkh * c.sk + j) * c.d + x]
                        } else {
                            k[(bkh * c.d + x) * c.sk + j]
                        };
                        dot += q[(bh * c.sq + i) * c.d + x] as f64 * kv as f64;
                    }
                    *sj = dot * scale as f64;
                    if let Some([mn, mc, mh]) = c.mask {
                        let (mb, mhh, mi) = (
                            if mn == 1 { 0 } else { b },
                            if mc == 1 { 0 } else { h },
                            if mh == 1 { 0 } else { i },
                        );
                        *sj += m[((mb * mc + mhh) * mh + mi) * c.sk + j] as f64;
                    }
                }
                let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                if mx == f64::NEG_INFINITY {
                    continue; // every key masked: zeros under the guard
                }
                let e: Vec<f64> = s.iter().map(|&x| (x - mx).exp()).collect();
                let sum: f64 = e.iter().sum();
                for y in 0..c.dv {
                    let mut acc = 0f64;
                    for j in 0..c.sk {
                        acc += e[j] * v[(bkh * c.sk + j) * c.dv + y] as f64;
                    }
                    out[(bh * c.sq + i) * c.dv + y] = acc / sum;
                }
            }
        }
    }
    out
}

fn run(c: &Case, p: Precision, seed: u64) {
    run_on(&device(), c, p, seed);
}

fn run_on(d: &Device, c: &Case, p: Precision, seed: u64) {
    let d = d.clone();
    let mut rng = Rng::new(seed);
    let mut fill = |n: usize| rounded((0..n).map(|_| rng.uniform(-1.5, 1.5)).collect(), p);
    let q = fill(c.batch * c.heads * c.sq * c.d);
    let k = fill(c.batch * c.kv_heads * c.sk * c.d);
    let v = fill(c.batch * c.kv_heads * c.sk * c.dv);
    let mask_shape = c.mask.map(|[n, ch, h]| [n, ch, h, c.sk]);
    let m: Vec<f32> = match mask_shape {
        // A causal-like band and a masked prefix: ties in the max, -inf-like values, and rows
        // whose first key blocks are all masked.
        Some(s) => (0..s.iter().product::<usize>())
            .map(|e| {
                let j = e % c.sk;
                let row = (e / c.sk) % s[2];
                // A mask shared by every row also masks its last third (a cache's unwritten
                // tail): whole key blocks the kernel skips.
                let tail = s[0] * s[1] * s[2] == 1 && j >= c.sk - c.sk / 3;
                if j < 3 || tail || (s[2] > 1 && j > row + c.sk / 2) {
                    f32::MIN
                } else if c.ramp {
                    0.25 * ((e % 7) as f32 - 3.0) + 0.6 * j as f32
                } else {
                    0.25 * ((e % 7) as f32 - 3.0)
                }
            })
            .collect(),
        None => Vec::new(),
    };
    let mut m = rounded(m, p);
    if c.nan_guard {
        let s = mask_shape.expect("the guard needs a mask");
        for (e, v) in m.iter_mut().enumerate() {
            if (e / c.sk).is_multiple_of(s[2]) {
                *v = f32::NEG_INFINITY;
            }
        }
    }
    let kshape = if c.key_rows {
        [c.batch, c.kv_heads, c.sk, c.d]
    } else {
        [c.batch, c.kv_heads, c.d, c.sk]
    };
    let qt = Tensor::from_data(&d, "q", &[c.batch, c.heads, c.sq, c.d], p, &q).unwrap();
    let kt = Tensor::from_data(&d, "k", &kshape, p, &k).unwrap();
    let vt = Tensor::from_data(&d, "v", &[c.batch, c.kv_heads, c.sk, c.dv], p, &v).unwrap();
    let mt = mask_shape.map(|s| Tensor::from_data(&d, "mask", &s, p, &m).unwrap());
    let out = Tensor::new(&d, "out", &[c.batch, c.heads, c.sq, c.dv], p).unwrap();
    let scale = 1.0 / (c.d as f32).sqrt();
    let opts = AttentionOpts {
        scale,
        key_rows: c.key_rows,
        nan_to_zero: c.nan_guard,
        merge_heads: false,
        split_heads: None,
    };
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    attention_into(
        &mut rec,
        &inputs(&qt, &kt, &vt, mt.as_ref()),
        &opts,
        &out,
        None,
    )
    .unwrap();
    // A decode step split over key spans (its partial results in an fp32 tensor, merged by a
    // second kernel): the same result.
    let partials = attention_partials_shape(&qt, &kt, &vt, mt.as_ref(), &opts)
        .unwrap()
        .map(|s| Tensor::new(&d, "partials", &s, Precision::F32).unwrap());
    if c.sq <= 4 {
        assert_eq!(
            partials.is_some(),
            c.sk > 16,
            "a decode step over more than one chunk of keys splits them"
        );
    } else if !attention_uses_tensor_cores(&d, &out) {
        assert!(
            partials.is_none(),
            "the portable blocked kernels take every key of a row in one workgroup"
        );
    }
    if let Some(n) = d.features().attention_splits {
        let blocks = c.sk.div_ceil(16);
        if c.sq > 4 && attention_uses_tensor_cores(&d, &out) && blocks > 1 && n > 1 {
            assert!(partials.is_some(), "{n} key spans were asked for");
        }
    }
    if let Some(pt) = &partials {
        let l = pt.layout();
        let folded = l.pw != l.w || l.ph != l.h || l.pl != 1;
        assert!(
            !d.pads_image_rows() || pt.shape()[2] != 94 || folded,
            "94 rows of partials fold on a device that pads image rows"
        );
    }
    let split = partials.as_ref().map(|pt| {
        let o = Tensor::new(&d, "split", &[c.batch, c.heads, c.sq, c.dv], p).unwrap();
        attention_into(
            &mut rec,
            &inputs(&qt, &kt, &vt, mt.as_ref()),
            &opts,
            &o,
            Some(pt),
        )
        .unwrap();
        o
    });
    // Without a batch, the same with the heads merged into [1, Sq, H * Dv] (split where a
    // decode step splits).
    let merged = (c.batch == 1).then(|| {
        let o = Tensor::new(&d, "merged", &[1, c.sq, c.heads * c.dv], p).unwrap();
        let opts = AttentionOpts {
            merge_heads: true,
            ..opts
        };
        let ins = inputs(&qt, &kt, &vt, mt.as_ref());
        attention_into(&mut rec, &ins, &opts, &o, partials.as_ref()).unwrap();
        // On the tensor cores over key spans, the merged heads also written as the next
        // MatMul's packed A ([4, H * Dv / 4, Sq]) by the spans' merge.
        let packed_shape = attention_packed_out_shape(&ins, &opts, &o).unwrap();
        let coop = attention_uses_tensor_cores(&d, &o) && c.sq > 4 && partials.is_some();
        assert_eq!(
            packed_shape.is_some(),
            coop && c.dv.is_multiple_of(4) && d.features().attention_packed_out != Some(false),
            "packed merged heads"
        );
        let packed = packed_shape.map(|shape| {
            let t = Tensor::new(&d, "packed", &shape, p).unwrap();
            attention_packed_into(&mut rec, &ins, &opts, (&o, &t), partials.as_ref()).unwrap();
            t
        });
        (o, packed)
    });
    // Without a batch, the same read from the projections' rows [1, S, H * D] (the exporters'
    // head split run as the kernels' load; K by rows), split over key spans where it splits.
    let from_rows = (c.batch == 1).then(|| {
        // rows[s, h * D + x] = heads[h, s, x]
        let rows =
            |heads: usize, len: usize, dim: usize, at: &dyn Fn(usize, usize, usize) -> f32| {
                let mut r = vec![0.0; heads * len * dim];
                for h in 0..heads {
                    for i in 0..len {
                        for x in 0..dim {
                            r[(i * heads + h) * dim + x] = at(h, i, x);
                        }
                    }
                }
                r
            };
        let qr = rows(c.heads, c.sq, c.d, &|h, i, x| q[(h * c.sq + i) * c.d + x]);
        let kr = rows(c.kv_heads, c.sk, c.d, &|h, j, x| {
            if c.key_rows {
                k[(h * c.sk + j) * c.d + x]
            } else {
                k[(h * c.d + x) * c.sk + j]
            }
        });
        let vr = rows(c.kv_heads, c.sk, c.dv, &|h, j, x| {
            v[(h * c.sk + j) * c.dv + x]
        });
        let qt = Tensor::from_data(&d, "q rows", &[1, c.sq, c.heads * c.d], p, &qr).unwrap();
        let kt = Tensor::from_data(&d, "k rows", &[1, c.sk, c.kv_heads * c.d], p, &kr).unwrap();
        let vt = Tensor::from_data(&d, "v rows", &[1, c.sk, c.kv_heads * c.dv], p, &vr).unwrap();
        let opts = AttentionOpts {
            key_rows: true,
            split_heads: Some(SplitHeads {
                heads: c.heads,
                kv_heads: c.kv_heads,
                q: true,
                k: true,
                v: true,
                packed_kv: false,
            }),
            ..opts
        };
        let inputs = inputs(&qt, &kt, &vt, mt.as_ref());
        let wanted = attention_partials_shape(&qt, &kt, &vt, mt.as_ref(), &opts).unwrap();
        assert_eq!(
            wanted.as_deref(),
            partials.as_ref().map(|t| t.shape()),
            "split heads change no plan"
        );
        let o = Tensor::new(&d, "from rows", &[1, c.heads, c.sq, c.dv], p).unwrap();
        attention_into(&mut rec, &inputs, &opts, &o, partials.as_ref()).unwrap();
        // K and V as their projections write them packed, [4, H * D / 4, S] (texel (s, col / 4)
        // holding columns col..col+3 of row s), where the head dims allow it.
        let packed = (c.d.is_multiple_of(4) && c.dv.is_multiple_of(4)).then(|| {
            let pack = |rows: &[f32], len: usize, width: usize| {
                let mut r = vec![0.0; rows.len()];
                for s in 0..len {
                    for col in 0..width {
                        r[((col % 4) * (width / 4) + col / 4) * len + s] = rows[s * width + col];
                    }
                }
                r
            };
            let (kw, vw) = (c.kv_heads * c.d, c.kv_heads * c.dv);
            let kp = pack(&kr, c.sk, kw);
            let vp = pack(&vr, c.sk, vw);
            let kpt = Tensor::from_data(&d, "k packed", &[4, kw / 4, c.sk], p, &kp).unwrap();
            let vpt = Tensor::from_data(&d, "v packed", &[4, vw / 4, c.sk], p, &vp).unwrap();
            let opts = AttentionOpts {
                split_heads: opts.split_heads.map(|s| SplitHeads {
                    packed_kv: true,
                    ..s
                }),
                ..opts
            };
            let ins = AttentionInputs {
                q: &qt,
                k: &kpt,
                v: &vpt,
                mask: mt.as_ref(),
            };
            let wanted = attention_partials_shape(&qt, &kpt, &vpt, mt.as_ref(), &opts).unwrap();
            assert_eq!(
                wanted.as_deref(),
                partials.as_ref().map(|t| t.shape()),
                "packed keys and values change no plan"
            );
            let o = Tensor::new(&d, "from packed", &[1, c.heads, c.sq, c.dv], p).unwrap();
            attention_into(&mut rec, &ins, &opts, &o, partials.as_ref()).unwrap();
            (kpt, vpt, o)
        });
        (qt, kt, vt, o, packed)
    });
    rec.submit_and_wait().unwrap();
    let want = reference(c, &q, &k, &v, &m, scale);
    let tol = match p {
        Precision::F32 => 2e-5,
        Precision::F16 => 2e-3,
    };
    let what = format!(
        "attention {p:?} B{} H{} Sq{} Sk{} D{} Dv{} mask {:?} key_rows {}",
        c.batch, c.heads, c.sq, c.sk, c.d, c.dv, c.mask, c.key_rows
    );
    assert_close(&what, &out.download().unwrap(), &want, tol);
    if let Some(o) = split {
        let what = format!("{what} split over key spans");
        assert_close(&what, &o.download().unwrap(), &want, tol);
    }
    if let Some((o, packed)) = merged {
        // want is [1, H, Sq, Dv]; merged is [1, Sq, H * Dv]; packed [4, H * Dv / 4, Sq].
        let mut want_merged = vec![0.0; want.len()];
        let mut want_packed = vec![0.0; want.len()];
        let width = c.heads * c.dv;
        for h in 0..c.heads {
            for s in 0..c.sq {
                for x in 0..c.dv {
                    let value = want[(h * c.sq + s) * c.dv + x];
                    let col = h * c.dv + x;
                    want_merged[s * width + col] = value;
                    want_packed[((col % 4) * (width / 4) + col / 4) * c.sq + s] = value;
                }
            }
        }
        let what = format!("{what} heads merged");
        assert_close(&what, &o.download().unwrap(), &want_merged, tol);
        if let Some(t) = packed {
            let what = format!("{what} and packed");
            assert_close(&what, &t.download().unwrap(), &want_packed, tol);
        }
    }
    if let Some((_, _, _, o, packed)) = from_rows {
        let what = format!("{what} read from split rows");
        assert_close(&what, &o.download().unwrap(), &want, tol);
        if let Some((_, _, o)) = packed {
            let what = format!("{what}, K and V packed");
            assert_close(&what, &o.download().unwrap(), &want, tol);
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn fused_attention_matches_the_stored_softmax() {
    let cases = [
        // An encoder layer in miniature: 6 heads (two texels, half of the second padding), Sk not
        // a multiple of the key block, Sq past one workgroup, K transposed as the graph holds it.
        Case {
            batch: 1,
            heads: 6,
            kv_heads: 6,
            sq: 37,
            sk: 45,
            d: 64,
            dv: 64,
            mask: None,
            key_rows: false,
            nan_guard: false,
            ramp: false,
        },
        // A decoder step over a cache: one query row, a mask over keys broadcast over heads,
        // the cache's tail masked out.
        Case {
            batch: 1,
            heads: 9,
            kv_heads: 9,
            sq: 1,
            sk: 70,
            d: 16,
            dv: 16,
            mask: Some([1, 1, 1]),
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
        // Grouped-query attention: SmolLM2's decode step (9 query heads on 3 key/value heads,
        // four query heads a texel gathering from two key texels), and a prefill with 8 on 2,
        // K transposed, no mask.
        Case {
            batch: 1,
            heads: 9,
            kv_heads: 3,
            sq: 1,
            sk: 70,
            d: 64,
            dv: 64,
            mask: Some([1, 1, 1]),
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
        Case {
            batch: 2,
            heads: 8,
            kv_heads: 2,
            sq: 20,
            sk: 19,
            d: 16,
            dv: 8,
            mask: None,
            key_rows: false,
            nan_guard: false,
            ramp: false,
        },
        // Prefill with a per-row mask, and a per-head per-row mask with a batch.
        Case {
            batch: 1,
            heads: 3,
            kv_heads: 3,
            sq: 20,
            sk: 20,
            d: 8,
            dv: 12,
            mask: Some([1, 1, 20]),
            key_rows: true,
            nan_guard: true,
            ramp: false,
        },
        Case {
            batch: 2,
            heads: 4,
            kv_heads: 4,
            sq: 5,
            sk: 17,
            d: 33,
            dv: 7,
            mask: Some([2, 4, 5]),
            key_rows: false,
            nan_guard: false,
            ramp: false,
        },
        // Head dims past 64 take attention_d128.comp: the 1.34 B scale decoder's decode step
        // (16 query heads on 4, D 128, a cache mask), and a prefill with D 96 and Dv 128 over
        // more rows than one workgroup, a per-row mask and K transposed.
        Case {
            batch: 1,
            heads: 16,
            kv_heads: 4,
            sq: 1,
            sk: 67,
            d: 128,
            dv: 128,
            mask: Some([1, 1, 1]),
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
        Case {
            batch: 1,
            heads: 5,
            kv_heads: 5,
            sq: 19,
            sk: 23,
            d: 96,
            dv: 128,
            mask: Some([1, 1, 19]),
            key_rows: false,
            nan_guard: true,
            ramp: false,
        },
        // Up to four query rows take attention_decode.comp (a workgroup a row and a span of its
        // keys, its threads over the keys, 16 keys a chunk; `run` also splits the keys into
        // spans): a 300-key cache (spans over several chunks, the last one short) with eight
        // query heads on one key/value head (one load a texel), K transposed and the NaN guard;
        // four rows with a per-head mask over a cache one key past a chunk boundary.
        Case {
            batch: 2,
            heads: 8,
            kv_heads: 1,
            sq: 2,
            sk: 300,
            d: 128,
            dv: 128,
            mask: Some([2, 1, 2]),
            key_rows: false,
            nan_guard: true,
            ramp: false,
        },
        Case {
            batch: 1,
            heads: 6,
            kv_heads: 6,
            sq: 4,
            sk: 129,
            d: 40,
            dv: 24,
            mask: Some([1, 6, 4]),
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        for p in [Precision::F32, Precision::F16] {
            run(c, p, 11 + i as u64);
        }
    }
}

/// Prefills on the tensor cores where the device has them (`attention_coop.comp`, fp16; the
/// portable blocked kernels elsewhere, and at fp32 always): the 1.34 B scale decoder's 128-token
/// prefill (16 query heads on 4 key/value heads, D 128, a causal-like per-row mask, the heads
/// merged by `run`), an encoder's self-attention over more key blocks than one with heads that
/// leave a texel's lanes unused (6 heads of 64, K transposed, no mask), and grouped heads whose
/// texel takes two key texels (9 on 3) with rows and keys past whole blocks, a per-head mask and
/// the NaN guard. On the tensor cores, the keys split into spans over workgroups where the query
/// blocks alone would leave the device idle (`attention_coop_split.comp` and the merge).
#[test]
fn prefill_attention_on_tensor_cores_where_available() {
    let d = device();
    let coop = d.features().cooperative_matrix_f16;
    if !coop {
        eprintln!("no cooperative matrices on this device: the portable kernels run these cases");
    }
    for p in [Precision::F32, Precision::F16] {
        let out = Tensor::new(&d, "out", &[1, 16, 128, 128], p).unwrap();
        assert_eq!(
            attention_uses_tensor_cores(&d, &out),
            coop && p == Precision::F16,
            "{p:?}"
        );
    }
    let cases = [
        Case {
            batch: 1,
            heads: 16,
            kv_heads: 4,
            sq: 128,
            sk: 128,
            d: 128,
            dv: 128,
            mask: Some([1, 1, 128]),
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
        Case {
            batch: 1,
            heads: 6,
            kv_heads: 6,
            sq: 150,
            sk: 150,
            d: 64,
            dv: 64,
            mask: None,
            key_rows: false,
            nan_guard: false,
            ramp: false,
        },
        Case {
            batch: 1,
            heads: 9,
            kv_heads: 3,
            sq: 37,
            sk: 45,
            d: 40,
            dv: 24,
            mask: Some([1, 9, 37]),
            key_rows: true,
            nan_guard: true,
            ramp: false,
        },
        // Rows whose max grows by more than e^8 every key block (the one-pass rescale).
        Case {
            batch: 1,
            heads: 4,
            kv_heads: 4,
            sq: 64,
            sk: 100,
            d: 64,
            dv: 64,
            mask: Some([1, 1, 1]),
            key_rows: true,
            nan_guard: false,
            ramp: true,
        },
    ];
    // By shape (the first two split their keys over workgroups on an H200, the third has too
    // few key blocks), then every case over three key spans: short last spans, spans whose
    // keys are all masked for some rows, rows masked to -inf in every span; then each with four
    // query blocks a head lane (`attention_coop_wide.comp` for the last two, whose head dims
    // are at most 64), by shape and over three spans.
    let with = |splits: Option<u32>, query_blocks: Option<u32>, one_pass: Option<bool>| {
        Device::new(&DeviceOptions {
            attention_splits: splits,
            attention_query_blocks: query_blocks,
            attention_one_pass: one_pass,
            ..DeviceOptions::from_env()
        })
        .expect("a device")
    };
    let three_spans = with(Some(3), None, None);
    let four_blocks = with(None, Some(4), None);
    let four_blocks_three_spans = with(Some(3), Some(4), None);
    for (i, c) in cases.iter().enumerate() {
        run(c, Precision::F16, 61 + i as u64);
        run_on(&three_spans, c, Precision::F16, 71 + i as u64);
        run_on(&four_blocks, c, Precision::F16, 81 + i as u64);
        run_on(&four_blocks_three_spans, c, Precision::F16, 91 + i as u64);
    }
    // The same in two passes over the keys (`attention_coop*.comp`; the cases above ran in one,
    // `attention_coop*_1p*.comp`), where the device has tensor cores (elsewhere the portable
    // kernels ran every case above already).
    if coop {
        for (i, c) in cases.iter().enumerate() {
            for (j, (splits, blocks)) in [
                (None, None),
                (Some(3), None),
                (None, Some(4)),
                (Some(3), Some(4)),
            ]
            .into_iter()
            .enumerate()
            {
                let two_passes = with(splits, blocks, Some(false));
                run_on(&two_passes, c, Precision::F16, 101 + (10 * j + i) as u64);
            }
        }
    }
}

/// Whisper tiny.en's cross-attention step (6 heads over 1500 encoder frames: 47 key spans a
/// row, 94 rows of partial results) on a device that pads image heights, as NVIDIA's does: the
/// partials' image is folded into two layers, and the kernels address it through its fold.
#[test]
fn split_attention_through_a_folded_partials_image() {
    let d = Device::new(&DeviceOptions {
        pads_image_rows: Some(true),
        ..DeviceOptions::from_env()
    })
    .expect("a device");
    let c = Case {
        batch: 1,
        heads: 6,
        kv_heads: 6,
        sq: 1,
        sk: 1500,
        d: 64,
        dv: 64,
        mask: None,
        key_rows: true,
        nan_guard: false,
        ramp: false,
    };
    run_on(&d, &c, Precision::F16, 41);
}

/// Keys and values in folded images (a device limited to 128-texel image edges, so 300 keys
/// fold), with an unfolded Q: those dispatches take the kernels' general addressing, not the
/// pipelines specialized for unfolded operands (on any device; the tensor-core kernel's fp16
/// case with 20 rows where the device has it). A decode step and a prefill, masked and not.
#[test]
fn attention_reads_folded_keys_and_values() {
    let d = Device::new(&DeviceOptions {
        limits_override: Some(vk_backend::ImageLimits {
            max_image_dimension_2d: 128,
            max_image_array_layers: 2048,
        }),
        ..DeviceOptions::from_env()
    })
    .expect("a device");
    let k = Tensor::new(&d, "k", &[1, 4, 300, 64], Precision::F16).unwrap();
    let l = k.layout();
    assert!(
        l.pw != l.w || l.ph != l.h,
        "300 keys fold under 128-texel edges"
    );
    let cases = [
        Case {
            batch: 1,
            heads: 8,
            kv_heads: 4,
            sq: 1,
            sk: 300,
            d: 64,
            dv: 64,
            mask: None,
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
        Case {
            batch: 1,
            heads: 4,
            kv_heads: 4,
            sq: 20,
            sk: 300,
            d: 64,
            dv: 32,
            mask: Some([1, 1, 20]),
            key_rows: true,
            nan_guard: false,
            ramp: false,
        },
    ];
    for (i, c) in cases.iter().enumerate() {
        for p in [Precision::F32, Precision::F16] {
            run_on(&d, c, p, 90 + i as u64);
        }
    }
}

#[test]
fn attention_refuses_shapes_it_cannot_hold() {
    let d = device();
    let p = Precision::F32;
    let q = Tensor::new(&d, "q", &[1, 2, 4, 160], p).unwrap();
    let k = Tensor::new(&d, "k", &[1, 2, 6, 160], p).unwrap();
    let v = Tensor::new(&d, "v", &[1, 2, 6, 160], p).unwrap();
    let out = Tensor::new(&d, "out", &[1, 2, 4, 160], p).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let opts = AttentionOpts {
        scale: 1.0,
        key_rows: true,
        nan_to_zero: false,
        merge_heads: false,
        split_heads: None,
    };
    let e = attention_into(&mut rec, &inputs(&q, &k, &v, None), &opts, &out, None).unwrap_err();
    assert!(e.to_string().contains("head dims"), "{e}");
    let v2 = Tensor::new(&d, "v", &[1, 2, 5, 8], p).unwrap();
    let q2 = Tensor::new(&d, "q", &[1, 2, 4, 8], p).unwrap();
    let k2 = Tensor::new(&d, "k", &[1, 2, 6, 8], p).unwrap();
    let o2 = Tensor::new(&d, "out", &[1, 2, 4, 8], p).unwrap();
    let e = attention_into(&mut rec, &inputs(&q2, &k2, &v2, None), &opts, &o2, None).unwrap_err();
    assert!(e.to_string().contains("head dim"), "{e}");
    // Heads merge only without a batch.
    let qb = Tensor::new(&d, "q", &[2, 2, 4, 8], p).unwrap();
    let kb = Tensor::new(&d, "k", &[2, 2, 6, 8], p).unwrap();
    let vb = Tensor::new(&d, "v", &[2, 2, 6, 8], p).unwrap();
    let ob = Tensor::new(&d, "out", &[2, 4, 16], p).unwrap();
    let merged = AttentionOpts {
        merge_heads: true,
        ..opts
    };
    let e = attention_into(&mut rec, &inputs(&qb, &kb, &vb, None), &merged, &ob, None).unwrap_err();
    assert!(e.to_string().contains("heads merge"), "{e}");
    // Split rows must be [1, S, H * D] of the heads given, and a split K is read by rows.
    let rows = Tensor::new(&d, "q rows", &[1, 4, 15], p).unwrap();
    let split = |k: bool, key_rows: bool| AttentionOpts {
        key_rows,
        split_heads: Some(SplitHeads {
            heads: 2,
            kv_heads: 2,
            q: true,
            k,
            v: false,
            packed_kv: false,
        }),
        ..opts
    };
    let e = attention_into(
        &mut rec,
        &inputs(&rows, &k2, &v2, None),
        &split(false, true),
        &o2,
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("projection's rows"), "{e}");
    let krows = Tensor::new(&d, "k rows", &[1, 6, 16], p).unwrap();
    let e = attention_into(
        &mut rec,
        &inputs(&q2, &krows, &v2, None),
        &split(true, false),
        &o2,
        None,
    )
    .unwrap_err();
    assert!(e.to_string().contains("key_rows"), "{e}");
    // A decode step's partial results must be the fp32 tensor of its key spans.
    let q1 = Tensor::new(&d, "q", &[1, 4, 1, 8], p).unwrap();
    let k1 = Tensor::new(&d, "k", &[1, 4, 40, 8], p).unwrap();
    let v1 = Tensor::new(&d, "v", &[1, 4, 40, 8], p).unwrap();
    let o1 = Tensor::new(&d, "out", &[1, 4, 1, 8], p).unwrap();
    let shape = attention_partials_shape(&q1, &k1, &v1, None, &opts)
        .unwrap()
        .expect("40 keys split");
    let half = Tensor::new(&d, "partials", &shape, Precision::F16).unwrap();
    let e = attention_into(
        &mut rec,
        &inputs(&q1, &k1, &v1, None),
        &opts,
        &o1,
        Some(&half),
    )
    .unwrap_err();
    assert!(e.to_string().contains("partials"), "{e}");
    let short = Tensor::new(&d, "partials", &[1, 4, 1, 10], p).unwrap();
    let e = attention_into(
        &mut rec,
        &inputs(&q1, &k1, &v1, None),
        &opts,
        &o1,
        Some(&short),
    )
    .unwrap_err();
    assert!(e.to_string().contains("partials"), "{e}");
}

/// A decoder's key/value cache at fp16 under fp32 activations (the `_kv16` kernels): Q, the
/// mask and the output fp32, K and V fp16 images. The reference takes the same fp16 keys and
/// values, so the result must match at fp32's tolerance: SmolLM2's grouped decode step, split
/// over key spans and not, four query rows, a blocked prefill with a masked tail, and a 128-wide
/// head (`attention_d128_kv16`).
#[test]
fn fp16_cache_under_fp32_activations() {
    let d = device();
    let case = |heads, kv_heads, sq, sk, dd| Case {
        batch: 1,
        heads,
        kv_heads,
        sq,
        sk,
        d: dd,
        dv: dd,
        mask: Some([1, 1, 1]),
        key_rows: true,
        nan_guard: false,
        ramp: false,
    };
    let cases = [
        case(9, 3, 1, 256, 64),
        case(9, 3, 4, 70, 64),
        case(6, 6, 9, 45, 64),
        case(4, 2, 6, 40, 128),
    ];
    let mut rng = Rng::new(17);
    for c in &cases {
        let half = |v: Vec<f32>| rounded(v, Precision::F16);
        let q: Vec<f32> = rng.vec(c.heads * c.sq * c.d, -1.5, 1.5);
        let k = half(rng.vec(c.kv_heads * c.sk * c.d, -1.5, 1.5));
        let v = half(rng.vec(c.kv_heads * c.sk * c.dv, -1.5, 1.5));
        // A mask shared by every row: the cache's unwritten last third masked out.
        let m: Vec<f32> = (0..c.sk)
            .map(|j| {
                if j >= c.sk - c.sk / 3 {
                    f32::MIN
                } else {
                    0.25 * ((j % 7) as f32 - 3.0)
                }
            })
            .collect();
        let (f32p, f16p) = (Precision::F32, Precision::F16);
        let qt = Tensor::from_data(&d, "q", &[1, c.heads, c.sq, c.d], f32p, &q).unwrap();
        let kt = Tensor::from_data(&d, "k cache", &[1, c.kv_heads, c.sk, c.d], f16p, &k).unwrap();
        let vt = Tensor::from_data(&d, "v cache", &[1, c.kv_heads, c.sk, c.dv], f16p, &v).unwrap();
        let mt = Tensor::from_data(&d, "mask", &[1, 1, 1, c.sk], f32p, &m).unwrap();
        let opts = AttentionOpts {
            scale: 1.0 / (c.d as f32).sqrt(),
            key_rows: true,
            nan_to_zero: false,
            merge_heads: false,
            split_heads: None,
        };
        let ins = inputs(&qt, &kt, &vt, Some(&mt));
        let out = Tensor::new(&d, "out", &[1, c.heads, c.sq, c.dv], f32p).unwrap();
        let partials = attention_partials_shape(&qt, &kt, &vt, Some(&mt), &opts)
            .unwrap()
            .map(|s| Tensor::new(&d, "partials", &s, f32p).unwrap());
        assert_eq!(
            partials.is_some(),
            c.sq <= 4,
            "decode steps split their keys"
        );
        let split = Tensor::new(&d, "split", &[1, c.heads, c.sq, c.dv], f32p).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        attention_into(&mut rec, &ins, &opts, &out, None).unwrap();
        if let Some(p) = &partials {
            attention_into(&mut rec, &ins, &opts, &split, Some(p)).unwrap();
        }
        rec.submit_and_wait().unwrap();
        let want = reference(c, &q, &k, &v, &m, opts.scale);
        let what = format!(
            "fp16 cache H{} KV{} Sq{} Sk{} D{}",
            c.heads, c.kv_heads, c.sq, c.sk, c.d
        );
        assert_close(&what, &out.download().unwrap(), &want, 2e-5);
        if partials.is_some() {
            let what = format!("{what} split over key spans");
            assert_close(&what, &split.download().unwrap(), &want, 2e-5);
        }
    }
    // K fp16 with V fp32 is no cache the kernels know: refused, not misread.
    let c = &cases[0];
    let qt = Tensor::new(&d, "q", &[1, c.heads, 1, c.d], Precision::F32).unwrap();
    let kt = Tensor::new(&d, "k", &[1, c.kv_heads, c.sk, c.d], Precision::F16).unwrap();
    let vt = Tensor::new(&d, "v", &[1, c.kv_heads, c.sk, c.d], Precision::F32).unwrap();
    let out = Tensor::new(&d, "out", &[1, c.heads, 1, c.d], Precision::F32).unwrap();
    let opts = AttentionOpts {
        scale: 0.125,
        key_rows: true,
        nan_to_zero: false,
        merge_heads: false,
        split_heads: None,
    };
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let e = attention_into(&mut rec, &inputs(&qt, &kt, &vt, None), &opts, &out, None)
        .expect_err("mixed K and V precisions");
    assert!(e.to_string().contains("F16"), "{e}");
    assert_no_validation_messages(&d);
}
