//! A runtime that submits compute in batches (`Bandwidth::reuse_lag_steps`): a copy over a page
//! read just now waits for that reader's whole batch. On a decoder-like cyclic workload MIN evicts
//! exactly those pages, so its loads serialize with compute; the simulator must show that, and
//! `planned` must then prefer a plan whose copies do not wait (MIN among pages not read lately),
//! which still loads far fewer pages than LRU.
mod common;
use common::decoder;
use scheduler::{
    candidates, demand_schedule, plan, plan_trace_from, simulate_schedule, Bandwidth, Choice,
    Eviction, Issue, Pipeline, Policy, Profile, Stage, Trace, PLANNED_CONSTRUCTIONS,
};

fn bandwidth(lag: u32) -> Bandwidth {
    // 1 MiB in 43 µs (what the H200's transfer queue measured); a page is read every 60 µs.
    Bandwidth {
        h2d_bytes_per_s: (1u64 << 20) as f64 / 43e-6,
        per_transfer_s: 0.0,
        disk_bytes_per_s: None,
        reuse_lag_steps: lag,
        handoff_s: 0.0,
        first_read_bytes_per_s: None,
    }
}

/// Twelve runs of a 64-page decoder (`common::decoder`, 15 µs steps).
fn twelve_tokens() -> (Vec<Profile>, Pipeline, Trace) {
    let profiles = vec![decoder(64, 15e-6)];
    let pipeline = Pipeline {
        stages: vec![Stage {
            model: 0,
            count: 12,
        }],
        repetitions: 1,
    };
    let trace = Trace::build(&profiles, &pipeline).unwrap();
    (profiles, pipeline, trace)
}

#[test]
fn min_eviction_waits_for_batches_and_planned_avoids_it() {
    let (profiles, pipeline, trace) = twelve_tokens();
    let slots = 24;
    let lagged = bandwidth(15);
    let min = demand_schedule(&trace, slots, Eviction::Min, Issue::Early);
    let cool = demand_schedule(&trace, slots, Eviction::MinCool { lag: 30 }, Issue::Early);
    let lru = demand_schedule(&trace, slots, Eviction::Lru, Issue::Early);
    let t = |s| simulate_schedule(&trace, s, &lagged).unwrap().makespan_s;
    let t0 = |s| {
        simulate_schedule(&trace, s, &bandwidth(0))
            .unwrap()
            .makespan_s
    };
    let compute = trace.compute_s();
    eprintln!(
        "compute {compute:.4}; min {:.4} (lag 0: {:.4}, {} loads), min-cool {:.4} ({} loads), lru {:.4} ({} loads)",
        t(&min),
        t0(&min),
        min.loads(),
        t(&cool),
        cool.loads(),
        t(&lru),
        lru.loads()
    );
    // On a step-granular runtime MIN hides its copies under the three steps between pages; with
    // batches, every MIN copy goes into a slot whose reader's batch is still running.
    assert!(t0(&min) < compute * 1.01, "{} vs {compute}", t0(&min));
    assert!(t(&min) > compute * 1.3, "{} vs {compute}", t(&min));
    // Each MIN copy goes into the slot of the page just read: its batch is submitted early for
    // it, at nearly every page; without batches there is no early submission to count.
    let forced = |s, bw: &Bandwidth| simulate_schedule(&trace, s, bw).unwrap().forced_submits;
    assert!(
        forced(&min, &lagged) > min.loads() / 2,
        "{}",
        forced(&min, &lagged)
    );
    assert_eq!(forced(&min, &bandwidth(0)), 0);
    assert!(forced(&cool, &lagged) < forced(&min, &lagged) / 10);
    // MIN among pages read at least two batches ago hides its copies, with fewer loads than LRU.
    assert!(t(&cool) < compute * 1.05, "{} vs {compute}", t(&cool));
    assert!(
        cool.loads() < lru.loads(),
        "{} vs {}",
        cool.loads(),
        lru.loads()
    );
    // `planned` sees the same: no slower than either, fewer loads than LRU.
    let p = plan(
        &profiles,
        &pipeline,
        slots as u64 * (1 << 20),
        &lagged,
        Policy::Planned,
    )
    .unwrap();
    assert!(
        p.stats.predicted_s <= t(&lru).min(t(&cool)) * 1.01,
        "{:?}",
        p.stats
    );
    assert!(p.stats.loads < lru.loads(), "{:?}", p.stats);
}

/// `Choice::only` builds one construction alone (to measure it on a device against the one the
/// simulator prefers): the plan is that construction's, with its own loads, and a name the
/// planner does not build here is refused with the names it does.
#[test]
fn one_construction_alone_on_request() {
    let (profiles, pipeline, trace) = twelve_tokens();
    let cap = 24 * trace.page_bytes + trace.max_activation();
    let lagged = bandwidth(15);
    let only = |name| {
        let c = Choice {
            previous: None,
            only: Some(name),
        };
        plan_trace_from(trace.clone(), cap, &lagged, Policy::Planned, c)
    };
    let chosen = plan(&profiles, &pipeline, cap, &lagged, Policy::Planned).unwrap();
    for name in ["lru-early", "min-early", "min-cool-early"] {
        let p = only(name).unwrap();
        assert_eq!(p.stats.variant, name);
        let slots = p.slots;
        let eviction = match name {
            "lru-early" => Eviction::Lru,
            "min-early" => Eviction::Min,
            _ => Eviction::MinCool { lag: 30 },
        };
        let own = demand_schedule(&trace, slots, eviction, Issue::Early);
        assert_eq!(p.stats.loads, own.loads(), "{name}");
    }
    assert!(
        only(chosen.stats.variant).unwrap().stats.predicted_s <= chosen.stats.predicted_s * 1.0001
    );
    // The list the CLI offers is what the planner builds (with a reuse lag, all of it).
    let built: Vec<&str> = candidates(&profiles, &pipeline, cap, &lagged)
        .unwrap()
        .iter()
        .map(|c| c.name)
        .collect();
    assert_eq!(built, PLANNED_CONSTRUCTIONS);
    let err = only("min-cool-late").unwrap_err().to_string();
    assert!(
        err.contains("min-cool-late") && err.contains("lru-early"),
        "{err}"
    );
}
