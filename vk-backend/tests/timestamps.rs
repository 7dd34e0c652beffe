//! Timestamp queries written by the recorder: a timed region measures a positive, plausible
//! duration; unwritten queries read as `None`; bad indices are refused.

use vk_backend::kernels::{unary_into, UnaryOp};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device};
use vk_backend::{Precision, QueueKind, Recorder, Tensor, TimestampQueries};

#[test]
fn timed_region_reads_back() {
    let d = device();
    let q = TimestampQueries::new(&d, QueueKind::Compute, 3).unwrap();
    let shape = [1, 16, 64, 64];
    let x = Tensor::from_data(&d, "x", &shape, Precision::F32, &vec![0.5; 16 * 64 * 64]).unwrap();
    let y = Tensor::new(&d, "y", &shape, Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.barrier();
    rec.write_timestamp(&q, 0).unwrap();
    for _ in 0..4 {
        unary_into(&mut rec, UnaryOp::Gelu, &x, &y).unwrap();
    }
    rec.write_timestamp(&q, 1).unwrap();
    assert!(rec.write_timestamp(&q, 3).is_err());
    rec.submit_and_wait().unwrap();
    let ns = q.elapsed_ns(0, 1).unwrap();
    assert!(ns > 0.0 && ns < 10e9, "elapsed {ns} ns");
    let all = q.read_ns().unwrap();
    assert!(all[0].is_some() && all[1].is_some());
    assert!(all[2].is_none(), "query 2 was never written");
    assert!(q.elapsed_ns(0, 2).is_err());
    // The timed work really ran: Gelu(0.5) everywhere (fp32 tolerance 1e-5).
    let v = 0.5f64;
    let want = 0.5 * v * (1.0 + erf_series(v / 2f64.sqrt()));
    assert_close(
        "gelu",
        &y.download().unwrap(),
        &vec![want; 16 * 64 * 64],
        1e-5,
    );
    assert_no_validation_messages(&d);
}

/// erf via its Taylor series (|x| < 1 here), independent of the shader's approximation.
fn erf_series(x: f64) -> f64 {
    let mut sum = 0.0;
    let mut term = x;
    for n in 0..30 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}
