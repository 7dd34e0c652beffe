//! The latency of a wait between the queues (`Bandwidth::handoff_s`): a copy that waits for a
//! step, or a step for a copy, starts that long after what it waits for ends. A schedule whose
//! copies and steps wait on each other in turn pays it at every wait; one whose copies run
//! ahead pays it only where a step really waits.
mod common;
use common::{decoder, page_a_step};
use scheduler::{
    demand_schedule, plan, simulate_schedule, Bandwidth, Eviction, Issue, Pipeline, Policy,
    Profile, Stage, Trace,
};

const PAGE: u64 = 1 << 20;

/// One model whose three steps each read their own page, `step_s` each.
fn three_pages(step_s: f64) -> (Vec<Profile>, Pipeline) {
    let profile = page_a_step(3, step_s);
    let pipeline = Pipeline {
        stages: vec![Stage { model: 0, count: 1 }],
        repetitions: 1,
    };
    (vec![profile], pipeline)
}

/// A page streams in `load_s`, and a hand-off takes `handoff_s`.
fn bandwidth(load_s: f64, handoff_s: f64) -> Bandwidth {
    Bandwidth {
        h2d_bytes_per_s: PAGE as f64 / load_s,
        per_transfer_s: 0.0,
        disk_bytes_per_s: None,
        reuse_lag_steps: 0,
        handoff_s,
        first_read_bytes_per_s: None,
    }
}

#[test]
fn copies_and_steps_in_turn_pay_every_handoff() {
    let (profiles, pipeline) = three_pages(1e-3);
    let trace = Trace::build(&profiles, &pipeline).unwrap();
    // One slot: load, step, load into the slot the step read, step, ...
    let s = demand_schedule(&trace, 1, Eviction::Lru, Issue::Early);
    let t = |h| {
        simulate_schedule(&trace, &s, &bandwidth(2e-3, h))
            .unwrap()
            .makespan_s
    };
    let (none, with) = (t(0.0), t(1e-4));
    assert!((none - 9e-3).abs() < 1e-9, "{none}");
    // Five waits across the queues: each step for its copy, the second and third copies for
    // the step before them.
    assert!((with - none - 5e-4).abs() < 1e-9, "{with} vs {none}");
}

#[test]
fn copies_that_run_ahead_pay_only_where_a_step_waits() {
    let (profiles, pipeline) = three_pages(1e-3);
    let trace = Trace::build(&profiles, &pipeline).unwrap();
    // A slot per page: every copy is issued at once and lands long before its step.
    let s = demand_schedule(&trace, 3, Eviction::Lru, Issue::Early);
    let t = |h| {
        simulate_schedule(&trace, &s, &bandwidth(1e-5, h))
            .unwrap()
            .makespan_s
    };
    let (none, with) = (t(0.0), t(1e-4));
    // Only the first step waits for a copy that has not landed.
    assert!((with - none - 1e-4).abs() < 1e-9, "{with} vs {none}");
}

/// Under a batching runtime whose hand-offs cost time, MIN among pages read just before the
/// reader's batch (`min-cool-early`) still has its copies wait for recent steps; `planned`
/// weighs a construction that keeps a slot's worth of copies ahead (`min-cool-deep`) and
/// ends no slower than LRU, with fewer loads.
#[test]
fn planned_keeps_copies_ahead_where_handoffs_cost_time() {
    let profiles = vec![decoder(64, 5e-6)];
    let pipeline = Pipeline {
        stages: vec![Stage {
            model: 0,
            count: 12,
        }],
        repetitions: 1,
    };
    let trace = Trace::build(&profiles, &pipeline).unwrap();
    let slots = 24;
    let bw = |h| Bandwidth {
        reuse_lag_steps: 3,
        ..bandwidth(28e-6, h)
    };
    let t = |s: &scheduler::Schedule, h| simulate_schedule(&trace, s, &bw(h)).unwrap().makespan_s;
    let cool = demand_schedule(&trace, slots, Eviction::MinCool { lag: 6 }, Issue::Early);
    let deep = demand_schedule(
        &trace,
        slots,
        Eviction::MinCool { lag: 6 + slots },
        Issue::Early,
    );
    let lru = demand_schedule(&trace, slots, Eviction::Lru, Issue::Early);
    eprintln!(
        "cool {:.5} -> {:.5} ({} loads), deep {:.5} -> {:.5} ({} loads), lru {:.5} -> {:.5} ({} loads)",
        t(&cool, 0.0),
        t(&cool, 1e-5),
        cool.loads(),
        t(&deep, 0.0),
        t(&deep, 1e-5),
        deep.loads(),
        t(&lru, 0.0),
        t(&lru, 1e-5),
        lru.loads()
    );
    let lost = |s| t(s, 1e-5) - t(s, 0.0);
    assert!(
        lost(&deep) < lost(&cool),
        "{} vs {}",
        lost(&deep),
        lost(&cool)
    );
    let p = plan(
        &profiles,
        &pipeline,
        slots as u64 * PAGE,
        &bw(1e-5),
        Policy::Planned,
    )
    .unwrap();
    assert!(
        p.stats.predicted_s <= t(&lru, 1e-5).min(t(&deep, 1e-5)) * 1.01,
        "{:?}",
        p.stats
    );
    assert!(p.stats.loads < lru.loads(), "{:?}", p.stats);
}
