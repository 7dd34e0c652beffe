//! The conv2d benchmark cases run in both storage kinds (images, storage buffers) and agree.

use vk_backend::bench::{cases, run_case, BenchConfig};
use vk_backend::testing::{assert_no_validation_messages, device};
use vk_backend::Precision;

#[test]
fn conv2d_bench_cases_run_and_agree() {
    let d = device();
    let mut cfg = BenchConfig::new(Precision::F16, true);
    cfg.runs = 1;
    cfg.warmup = 0;
    cfg.filter = vec!["conv2d".into()];
    let cs = cases(&cfg);
    assert!(cs.len() >= 3, "expected the conv2d cases");
    for c in &cs {
        let r = run_case(&d, &cfg, c).unwrap();
        assert!(r.image.median_ms > 0.0 && r.buffer.median_ms > 0.0, "{r:?}");
        assert!(r.max_rel_diff < 1e-2, "{r:?}");
    }
    assert_no_validation_messages(&d);
}

/// Full-size conv2d cases with timings (GPU use: `cargo test --test kernel_conv_bench -- --ignored
/// --nocapture`).
#[test]
#[ignore]
fn conv2d_bench_full_sizes() {
    let d = device();
    for p in [Precision::F16, Precision::F32] {
        let mut cfg = BenchConfig::new(p, false);
        cfg.filter = vec!["conv2d".into()];
        println!("device {} {p:?}", d.name());
        for c in &cases(&cfg) {
            let r = run_case(&d, &cfg, c).unwrap();
            println!(
                "{:<60} image {:8.3} ms {:8.1} GFLOP/s | buffer {:8.3} ms {:8.1} GFLOP/s | diff {:.1e}",
                r.shape, r.image.median_ms, r.image.gflops, r.buffer.median_ms, r.buffer.gflops,
                r.max_rel_diff
            );
        }
    }
}
