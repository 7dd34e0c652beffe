//! Property tests on random small workloads: invariants, lower bound, MIN optimality against brute
//! force, and `planned` against `on-demand` and `lru` in the simulator.
use proptest::prelude::*;
use scheduler::*;
use std::collections::HashMap;

const PAGE: u64 = 1000;

#[derive(Debug, Clone)]
struct Case {
    profiles: Vec<Profile>,
    pipeline: Pipeline,
    extra_cap: u64,
    bw: Bandwidth,
}

fn arb_profile(idx: usize) -> impl Strategy<Value = Profile> {
    (1u32..=5).prop_flat_map(move |total| {
        prop::collection::vec(
            (
                prop::collection::vec(0..total, 0..=3),
                0u32..=4,
                0u64..=1500,
            ),
            1..=5,
        )
        .prop_map(move |steps| Profile {
            model: format!("m{idx}"),
            page_bytes: PAGE,
            total_pages: total,
            steps: steps
                .into_iter()
                .enumerate()
                .map(|(k, (pages, ms, act))| Step {
                    name: format!("s{k}"),
                    pages,
                    compute_s: ms as f64 * 1e-3,
                    activation_bytes: act,
                    lookup: false,
                })
                .collect(),
        })
    })
}

fn arb_case() -> impl Strategy<Value = Case> {
    (1usize..=3)
        .prop_flat_map(|nm| {
            let profs: Vec<_> = (0..nm).map(arb_profile).collect();
            (
                profs,
                prop::collection::vec((0..nm, 1u32..=3), 1..=4),
                1u32..=3,
                0u64..=12_000,
                (1u32..=8, 0u32..=2, 0u32..=4),
            )
        })
        .prop_map(
            |(profiles, stages, reps, extra_cap, (bw_k, fixed, cold))| Case {
                profiles,
                pipeline: Pipeline {
                    stages: stages
                        .into_iter()
                        .map(|(model, count)| Stage { model, count })
                        .collect(),
                    repetitions: reps,
                },
                extra_cap,
                // One page takes 0.125–1 ms (+0–0.2 ms fixed): comparable to the 0–4 ms steps.
                bw: Bandwidth {
                    h2d_bytes_per_s: bw_k as f64 * 1e6,
                    per_transfer_s: fixed as f64 * 1e-4,
                    disk_bytes_per_s: None,
                    reuse_lag_steps: 0,
                    handoff_s: 0.0,
                    // A cold start from disk in most cases: a page read in 0.5–2 ms before its first
                    // copy (the simulation and the bound both charge it).
                    first_read_bytes_per_s: (cold > 0).then_some(cold as f64 * 0.5e6),
                },
            },
        )
}

/// Fewest loads over all strategies, by dynamic programming over resident sets.
fn brute_force_loads(trace: &Trace, slots: u32) -> u64 {
    let mut best: HashMap<u32, u64> = HashMap::from([(0u32, 0u64)]);
    for j in 0..trace.steps.len() {
        let need: u32 = trace.pages(j).iter().fold(0, |m, &p| m | (1 << p));
        let mut next: HashMap<u32, u64> = HashMap::new();
        for (&r, &c) in &best {
            // Keeping any subset of the other resident pages; loading pages not needed now never helps.
            let keepable = r & !need;
            let mut sub = keepable;
            loop {
                let s = sub | need;
                if s.count_ones() <= slots {
                    let cost = c + (need & !r).count_ones() as u64;
                    let e = next.entry(s).or_insert(u64::MAX);
                    *e = (*e).min(cost);
                }
                if sub == 0 {
                    break;
                }
                sub = (sub - 1) & keepable;
            }
        }
        best = next;
    }
    best.values().copied().min().unwrap_or(0)
}

fn cap_of(case: &Case) -> u64 {
    min_feasible_cap(&case.profiles, &case.pipeline)
        .unwrap()
        .bytes
        + case.extra_cap
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn every_policy_is_valid_and_not_below_the_bound(case in arb_case()) {
        let cap = cap_of(&case);
        for policy in Policy::ALL {
            match plan(&case.profiles, &case.pipeline, cap, &case.bw, policy) {
                Ok(p) => {
                    // Independent re-check of the invariants on a fresh simulation.
                    let sim = simulate(&p, &case.bw).unwrap();
                    prop_assert_eq!(&sim, &p.sim);
                    prop_assert!(p.stats.peak_bytes <= cap);
                    let lb = p.stats.lower_bound.bound_s;
                    prop_assert!(p.stats.predicted_s + 1e-12 >= lb, "{policy}: {} < LB {lb}", p.stats.predicted_s);
                    prop_assert!(p.stats.loads >= p.stats.lower_bound.min_loads);
                }
                Err(PlanError::PolicyExceedsCap { .. })
                    if matches!(policy, Policy::Preload | Policy::ReloadPerModel) => {}
                Err(e) => prop_assert!(false, "{policy}: {e}"),
            }
        }
    }

    #[test]
    fn min_load_count_is_optimal(case in arb_case()) {
        let trace = Trace::build(&case.profiles, &case.pipeline).unwrap();
        prop_assume!(trace.total_pages <= 12);
        let cap = cap_of(&case);
        let slots = slots_for_cap(&trace, cap).unwrap();
        prop_assert_eq!(min_loads(&trace, slots), brute_force_loads(&trace, slots));
    }

    #[test]
    fn planned_beats_on_demand_and_lru(case in arb_case()) {
        let cap = cap_of(&case);
        let t = |policy| plan(&case.profiles, &case.pipeline, cap, &case.bw, policy).unwrap().stats.predicted_s;
        let planned = t(Policy::Planned);
        prop_assert!(planned <= t(Policy::OnDemand) + 1e-12);
        prop_assert!(planned <= t(Policy::Lru) + 1e-12);
    }

    /// A warm re-plan (the previous construction known, the fan-out changed) is still a valid
    /// plan, built from that construction or a demand-paged one, and still never slower than
    /// on-demand or lru; a construction name it does not know plans in full.
    #[test]
    fn warm_replans_keep_planned_ahead(case in arb_case(), fan in 1u32..=3) {
        let cap = cap_of(&case);
        let previous = plan(&case.profiles, &case.pipeline, cap, &case.bw, Policy::Planned)
            .unwrap()
            .stats
            .variant;
        let mut changed = case.pipeline.clone();
        for st in changed.stages.iter_mut() {
            st.count = st.count.max(1) * fan;
        }
        let t = |policy| plan(&case.profiles, &changed, cap, &case.bw, policy).unwrap().stats.predicted_s;
        let warm = replan(&case.profiles, &changed, cap, &case.bw, Policy::Planned, previous).unwrap();
        let v = warm.stats.variant;
        prop_assert!(v == previous || !v.starts_with("prefetch"), "{} after {}", v, previous);
        prop_assert!(warm.stats.predicted_s <= t(Policy::OnDemand) + 1e-12);
        prop_assert!(warm.stats.predicted_s <= t(Policy::Lru) + 1e-12);
        let unknown = replan(&case.profiles, &changed, cap, &case.bw, Policy::Planned, "no-such").unwrap();
        prop_assert_eq!(unknown.stats, plan(&case.profiles, &changed, cap, &case.bw, Policy::Planned).unwrap().stats);
    }

    #[test]
    fn cap_below_minimum_is_refused(case in arb_case()) {
        let min = min_feasible_cap(&case.profiles, &case.pipeline).unwrap();
        prop_assume!(min.bytes > 0);
        let r = plan(&case.profiles, &case.pipeline, min.bytes - 1, &case.bw, Policy::Planned);
        let is_cap_error = matches!(r, Err(PlanError::CapTooSmall { min: m, .. }) if m == min.bytes);
        prop_assert!(is_cap_error);
    }
}

#[test]
fn cap_error_names_the_step_and_minimum() {
    let prof = |name: &str, pages: Vec<Vec<u32>>| Profile {
        model: name.into(),
        page_bytes: 1 << 20,
        total_pages: 8,
        steps: pages
            .into_iter()
            .enumerate()
            .map(|(i, p)| Step {
                name: format!("{name}.op{i}"),
                pages: p,
                compute_s: 1e-3,
                activation_bytes: 3 << 20,
                lookup: false,
            })
            .collect(),
    };
    let profiles = vec![
        prof("det", vec![vec![0], vec![1, 2]]),
        prof("rec", vec![vec![0, 1, 2, 3], vec![4]]),
    ];
    let pipeline = Pipeline {
        stages: vec![Stage { model: 0, count: 1 }, Stage { model: 1, count: 8 }],
        repetitions: 2,
    };
    let min = min_feasible_cap(&profiles, &pipeline).unwrap();
    assert_eq!(min.bytes, (4 + 3) << 20);
    let e = plan(
        &profiles,
        &pipeline,
        min.bytes - 1,
        &Bandwidth::default(),
        Policy::Planned,
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("rec.op0") && e.contains(&min.bytes.to_string()),
        "{e}"
    );
    assert!(plan(
        &profiles,
        &pipeline,
        min.bytes,
        &Bandwidth::default(),
        Policy::Planned
    )
    .is_ok());
}
