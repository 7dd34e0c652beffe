//! The kernel benchmark harness on tiny sizes: every case runs in both storage kinds and their
//! outputs agree (same inputs, same kernel; fp16 may differ by one rounding step), the copy test
//! reports positive bandwidths relative to the device copy, and validation stays silent.

use vk_backend::bench::{self, BenchConfig};
use vk_backend::testing::{assert_no_validation_messages, device};
use vk_backend::Precision;

#[test]
fn quick_bench_runs_and_storage_kinds_agree() {
    let d = device();
    for p in [Precision::F16, Precision::F32] {
        let mut cfg = BenchConfig::new(p, true);
        cfg.runs = 1;
        cfg.warmup = 0;
        cfg.copy_bytes = 256 << 10;
        // One case per kernel family keeps this fast under validation (the kernels have their own
        // tests; this checks the harness and the buffer variants of each family).
        cfg.filter = vec!["gelu".into(), "M64 K64".into(), "1x1".into()];
        let r = bench::run(&d, &cfg).unwrap();
        assert!(r.skipped.is_empty(), "{:?}", r.skipped);
        assert_eq!(r.kernels.len(), 3, "{:?}", r.kernels);
        // fp16: one rounding step of a value in [-4, 4) is <= 2^-8 relative to max(1, |v|)
        let tol = if p == Precision::F16 { 4e-3 } else { 1e-6 };
        for k in &r.kernels {
            eprintln!(
                "{p:?} {} {}: image {:.3} ms, buffer {:.3} ms",
                k.kernel, k.shape, k.image.median_ms, k.buffer.median_ms
            );
            assert!(
                k.max_rel_diff <= tol,
                "{} {}: {}",
                k.kernel,
                k.shape,
                k.max_rel_diff
            );
            for t in [k.image, k.buffer] {
                assert!(t.median_ms > 0.0 && t.gflops > 0.0, "{} {t:?}", k.kernel);
            }
        }
        let names: Vec<&str> = r.copies.iter().map(|c| c.what.as_str()).collect();
        for want in [
            "buffer -> buffer (device)",
            "-> image",
            "-> buffer",
            "identity kernel image -> image",
            "identity kernel buffer -> buffer",
        ] {
            assert!(names.iter().any(|n| n.ends_with(want)), "{want}: {names:?}");
        }
        assert!(names.iter().any(|n| n.starts_with("staging[")), "{names:?}");
        for c in &r.copies {
            assert!(c.gbps > 0.0 && c.fraction_of_device_copy > 0.0, "{c:?}");
            assert!(c.fraction_of_best_device_copy > 0.0, "{c:?}");
            if !c.what.starts_with("staging") {
                assert!(c.fraction_of_best_device_copy <= 1.0, "{c:?}");
            }
        }
    }
    assert_no_validation_messages(&d);
}
