//! A cold start from disk (`Bandwidth::first_read_bytes_per_s`): every page's first copy waits
//! for its read from disk, the reads one after another. The simulation charges it and the lower
//! bound's cold-start term knows it, so a plan that is read-bound from the first step sits on the
//! bound; a warm start (pages in host memory) is bounded by its copies alone.
mod common;
use common::page_a_step;
use scheduler::*;

const PAGE: u64 = 1 << 20;

/// One model of 8 steps of 0.5 ms, step `k` reading page `k`, run twice.
fn workload() -> (Vec<Profile>, Pipeline) {
    let model = page_a_step(8, 0.5e-3);
    let pipeline = Pipeline {
        stages: vec![Stage { model: 0, count: 1 }],
        repetitions: 2,
    };
    (vec![model], pipeline)
}

/// A page copies in 0.1 ms; read from disk in `read_s` (warm: `None`).
fn bandwidth(read_s: Option<f64>) -> Bandwidth {
    Bandwidth {
        h2d_bytes_per_s: PAGE as f64 / 0.1e-3,
        per_transfer_s: 0.0,
        disk_bytes_per_s: None,
        reuse_lag_steps: 0,
        handoff_s: 0.0,
        first_read_bytes_per_s: read_s.map(|s| PAGE as f64 / s),
    }
}

#[test]
fn a_cold_start_reads_every_page_before_its_first_copy() {
    let (profiles, pipeline) = workload();
    // Every page fits: each is read and copied once.
    let cap = 16 * PAGE;
    let warm = plan(&profiles, &pipeline, cap, &bandwidth(None), Policy::Planned).unwrap();
    let cold = plan(
        &profiles,
        &pipeline,
        cap,
        &bandwidth(Some(2e-3)),
        Policy::Planned,
    )
    .unwrap();
    // Warm: the first copy, then the 16 steps (the other copies hide behind them).
    let compute = 16.0 * 0.5e-3;
    assert!((warm.stats.lower_bound.bound_s - (0.1e-3 + compute)).abs() < 1e-12);
    assert!((warm.stats.predicted_s - warm.stats.lower_bound.bound_s).abs() < 1e-9);
    // Cold, reads of 2 ms: step 7 of the first run needs all 8 pages, the last read ends at 16
    // ms and its copy 0.1 ms later; 9 steps remain. No plan does better, and this one does that.
    let lb = cold.stats.lower_bound;
    let expect = 8.0 * 2e-3 + 0.1e-3 + 9.0 * 0.5e-3;
    assert!(
        (lb.cold_start_s - expect).abs() < 1e-12,
        "{lb:?}, expected {expect}"
    );
    assert!((lb.bound_s - expect).abs() < 1e-12, "{lb:?}");
    assert!(
        (cold.stats.predicted_s - expect).abs() < 1e-9,
        "predicted {} against {expect}",
        cold.stats.predicted_s
    );
    // Every policy and construction stays at or above the bound.
    for c in candidates(&profiles, &pipeline, cap, &bandwidth(Some(2e-3))).unwrap() {
        assert!(c.predicted_s + 1e-12 >= lb.bound_s, "{c:?} below {lb:?}");
    }
}

#[test]
fn reads_faster_than_copies_leave_the_copies_to_bound_the_start() {
    let (profiles, pipeline) = workload();
    let cap = 16 * PAGE;
    // Reads of 0.01 ms under copies of 0.1 ms: the term is the copies' plus one read.
    let cold = plan(
        &profiles,
        &pipeline,
        cap,
        &bandwidth(Some(0.01e-3)),
        Policy::Planned,
    )
    .unwrap();
    let warm = plan(&profiles, &pipeline, cap, &bandwidth(None), Policy::Planned).unwrap();
    let (c, w) = (cold.stats.lower_bound, warm.stats.lower_bound);
    assert!(c.cold_start_s >= w.cold_start_s, "{c:?} {w:?}");
    assert!(
        c.cold_start_s <= w.cold_start_s + 0.01e-3 + 1e-12,
        "{c:?} {w:?}"
    );
    assert!(cold.stats.predicted_s + 1e-12 >= c.bound_s);
}
