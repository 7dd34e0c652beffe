//! Throughput of the MatMul / Softmax / LayerNorm / Transpose kernels on the current device.
//! Ignored by default (lavapipe is too slow to be meaningful); run on a real GPU with
//! `cargo test -p texstream-vk --release --test kernel_bench -- --ignored --nocapture`.
//! Each figure is wall time of `ITERS` dispatches in one submission divided by `ITERS`.

use std::time::Instant;

use vk_backend::kernels::{layernorm, matmul, softmax, transpose, MatMulOpts, MatRhs};
use vk_backend::layout::{pack_matrix_kn, pack_vector};
use vk_backend::testing::{device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Result, Tensor, WeightAtlas};

const ITERS: u32 = 20;

fn time(what: &str, flops: f64, bytes: f64, mut f: impl FnMut(&mut Recorder) -> Result<()>) {
    let d = device();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    f(&mut rec).unwrap(); // warm-up: pipeline build
    rec.submit_and_wait().unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    for _ in 0..ITERS {
        f(&mut rec).unwrap();
    }
    let t = Instant::now();
    rec.submit_and_wait().unwrap();
    let s = t.elapsed().as_secs_f64() / ITERS as f64;
    println!(
        "{what:<58} {:>9.3} ms {:>9.1} GFLOP/s {:>8.1} GB/s",
        s * 1e3,
        flops / s / 1e9,
        bytes / s / 1e9
    );
}

#[test]
#[ignore]
fn bench_kernels() {
    let d = device();
    println!("device: {}", d.name());
    let mut rng = Rng::new(7);
    for p in [Precision::F16, Precision::F32] {
        let bpe = p.bytes_per_texel() as f64 / 4.0;
        // Constant-B GEMM, rank 2 (scalar path).
        for (m, k, n) in [(1024usize, 1024usize, 1024usize), (4096, 768, 3072)] {
            let a = Tensor::from_data(&d, "a", &[m, k], p, &rng.vec(m * k, -1.0, 1.0)).unwrap();
            let w = pack_matrix_kn(&rng.vec(k * n, -1.0, 1.0), k, n).unwrap();
            let tpp = 512 * p.default_page_height() as usize;
            let pages = (w.len() / 4).div_ceil(tpp) as u32;
            let atlas = WeightAtlas::new(
                &d,
                AtlasConfig {
                    slots: pages,
                    precision: p,
                    page_height: None,
                    logical_pages: pages,
                },
            )
            .unwrap();
            let mut wp = w.clone();
            wp.resize(pages as usize * tpp * 4, 0.0);
            atlas.load_all_now(&wp).unwrap();
            let out = Tensor::new(&d, "o", &[m, n], p).unwrap();
            let rhs = MatRhs::Weights {
                texel_offset: 0,
                k,
                n,
            };
            time(
                &format!("matmul [{m},{k}] x W[{k},{n}] {p:?}"),
                2.0 * (m * k * n) as f64,
                ((m * k + k * n + m * n) as f64) * bpe,
                |rec| {
                    rec.use_weights(&atlas);
                    vk_backend::kernels::matmul_into(rec, &a, rhs, &MatMulOpts::default(), &out)
                },
            );
        }
        // Attention-style activation x activation with heads in the lanes.
        let (h, s, dh) = (16usize, 512usize, 64usize);
        let q =
            Tensor::from_data(&d, "q", &[1, h, s, dh], p, &rng.vec(h * s * dh, -1.0, 1.0)).unwrap();
        let kt =
            Tensor::from_data(&d, "k", &[1, h, s, dh], p, &rng.vec(h * s * dh, -1.0, 1.0)).unwrap();
        let opts = MatMulOpts {
            trans_b: true,
            ..Default::default()
        };
        time(
            &format!("matmul Q[1,{h},{s},{dh}] x K^T {p:?}"),
            2.0 * (h * s * s * dh) as f64,
            ((2 * h * s * dh + h * s * s) as f64) * bpe,
            |rec| matmul(rec, &q, MatRhs::Tensor(&kt), &opts, "qk").map(|_| ()),
        );
        let sc =
            Tensor::from_data(&d, "sc", &[1, h, s, s], p, &rng.vec(h * s * s, -4.0, 4.0)).unwrap();
        time(
            &format!("softmax [1,{h},{s},{s}] axis -1 {p:?}"),
            0.0,
            2.0 * (h * s * s) as f64 * bpe,
            |rec| softmax(rec, &sc, &[-1], false, "sm").map(|_| ()),
        );
        let x = Tensor::from_data(&d, "x", &[1, s, 768], p, &rng.vec(s * 768, -2.0, 2.0)).unwrap();
        let atlas = WeightAtlas::new(
            &d,
            AtlasConfig {
                slots: 1,
                precision: p,
                page_height: None,
                logical_pages: 1,
            },
        )
        .unwrap();
        let mut wv = pack_vector(&rng.vec(768, 0.5, 1.5));
        wv.extend(pack_vector(&rng.vec(768, -0.5, 0.5)));
        wv.resize(512 * p.default_page_height() as usize * 4, 0.0);
        atlas.load_all_now(&wv).unwrap();
        time(
            &format!("layernorm [1,{s},768] axis -1 {p:?}"),
            0.0,
            2.0 * (s * 768) as f64 * bpe,
            |rec| {
                rec.use_weights(&atlas);
                layernorm(rec, &x, -1, 1e-5, 0, Some(192), "ln").map(|_| ())
            },
        );
        let t4 =
            Tensor::from_data(&d, "t", &[1, s, 12, 64], p, &rng.vec(s * 768, -1.0, 1.0)).unwrap();
        time(
            &format!("transpose [1,{s},12,64] perm [0,2,1,3] {p:?}"),
            0.0,
            2.0 * (s * 768) as f64 * bpe,
            |rec| transpose(rec, &t4, &[0, 2, 1, 3], "tr").map(|_| ()),
        );
    }
}
