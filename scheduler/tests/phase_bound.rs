//! The lower bound's phase term: a compute-bound model followed by a transfer-bound one under a
//! cap too small to stream the second one's pages behind the first one's compute. The other
//! terms let every transfer hide behind the first phase; the phase term does not, and the best
//! plan sits just above it.
mod common;
use common::step;
use scheduler::*;

const PAGE: u64 = 1 << 20;

/// `encoder`: 10 steps of 10 ms on one page. `decoder`: 8 steps of 0.1 ms, each on its own page,
/// run 5 times (a decode loop whose weights stream every step).
fn workload() -> (Vec<Profile>, Pipeline) {
    let encoder = Profile {
        model: "encoder".into(),
        page_bytes: PAGE,
        total_pages: 1,
        steps: (0..10)
            .map(|k| step(format!("e{k}"), vec![0], 10e-3))
            .collect(),
    };
    let decoder = Profile {
        model: "decoder".into(),
        page_bytes: PAGE,
        total_pages: 8,
        steps: (0..8)
            .map(|k| step(format!("d{k}"), vec![k], 0.1e-3))
            .collect(),
    };
    let pipeline = Pipeline {
        stages: vec![Stage { model: 0, count: 1 }, Stage { model: 1, count: 5 }],
        repetitions: 1,
    };
    (vec![encoder, decoder], pipeline)
}

/// A page streams in 1 ms.
fn bandwidth() -> Bandwidth {
    Bandwidth {
        h2d_bytes_per_s: PAGE as f64 * 1e3,
        per_transfer_s: 0.0,
        disk_bytes_per_s: None,
        reuse_lag_steps: 0,
        handoff_s: 0.0,
        first_read_bytes_per_s: None,
    }
}

#[test]
fn a_streaming_phase_after_a_compute_phase_is_bounded_by_its_own_transfers() {
    let (profiles, pipeline) = workload();
    let bw = bandwidth();
    let cap = 3 * PAGE;
    let plan = plan(&profiles, &pipeline, cap, &bw, Policy::Planned).unwrap();
    let lb = plan.stats.lower_bound;
    // 100 ms of encoder + 4 ms of decoder compute; with 3 slots the 40 decoder steps need far
    // more loads than the slots can hold before they start.
    assert!((lb.compute_s - 0.104).abs() < 1e-9, "{lb:?}");
    assert!(lb.io_s < lb.compute_s, "{lb:?}");
    // The cold start adds the first page's transfer only.
    assert!(lb.cold_start_s <= lb.compute_s + 1e-3 + 1e-9, "{lb:?}");
    // The phase term: the encoder's 100 ms, then (MIN's decoder loads − 3 slots − 1 in flight)
    // ms, which exceeds the decoder's 4 ms of compute.
    let decoder_loads = lb.min_loads - 1;
    let expect = 0.100 + (decoder_loads - 4) as f64 * 1e-3;
    assert!(
        (lb.phase_s - expect).abs() < 1e-9,
        "{lb:?}, expected {expect}"
    );
    assert!(lb.bound_s > lb.compute_s + 0.02, "{lb:?}");
    // No construction beats it, and the best one is close: the bound is not loose here.
    for c in candidates(&profiles, &pipeline, cap, &bw).unwrap() {
        assert!(c.predicted_s + 1e-12 >= lb.bound_s, "{c:?} below {lb:?}");
    }
    assert!(
        plan.stats.predicted_s <= 1.1 * lb.bound_s,
        "planned {} against the bound {}",
        plan.stats.predicted_s,
        lb.bound_s
    );
}

#[test]
fn the_phase_term_vanishes_when_the_cap_holds_every_page() {
    let (profiles, pipeline) = workload();
    let bw = bandwidth();
    let plan = plan(&profiles, &pipeline, 16 * PAGE, &bw, Policy::Planned).unwrap();
    let lb = plan.stats.lower_bound;
    // Every page is loaded once and fits: the decoder's pages stream behind the encoder.
    assert_eq!(lb.min_loads, 9);
    assert!((lb.phase_s - lb.compute_s).abs() < 1e-9, "{lb:?}");
    assert!((lb.bound_s - lb.cold_start_s).abs() < 1e-9, "{lb:?}");
}
