//! A trace put together from steps of other traces ([`Trace::from_steps`], how the engine
//! bounds what ran across re-plans) links and bounds as the trace built whole does.
mod common;
use common::{decoder, page_a_step};
use scheduler::*;

fn workload(reps: u32) -> (Vec<Profile>, Pipeline) {
    let profiles = vec![page_a_step(12, 1e-4), decoder(20, 2e-5)];
    let pipeline = Pipeline {
        stages: vec![Stage { model: 0, count: 1 }, Stage { model: 1, count: 3 }],
        repetitions: reps,
    };
    (profiles, pipeline)
}

fn bandwidth() -> Bandwidth {
    Bandwidth {
        h2d_bytes_per_s: 16e9,
        per_transfer_s: 5e-6,
        disk_bytes_per_s: None,
        reuse_lag_steps: 0,
        handoff_s: 0.0,
        first_read_bytes_per_s: None,
    }
}

#[test]
fn two_runs_joined_step_by_step_are_the_workload_run_twice() {
    let (profiles, once) = workload(1);
    let (_, twice) = workload(2);
    let one = Trace::build(&profiles, &once).unwrap();
    let whole = Trace::build(&profiles, &twice).unwrap();
    let (mut steps, mut refs, mut ref_start) = (Vec::new(), Vec::new(), vec![0u32]);
    for _ in 0..2 {
        for j in 0..one.steps.len() {
            steps.push(one.steps[j]);
            refs.extend_from_slice(one.pages(j));
            ref_start.push(refs.len() as u32);
        }
    }
    let joined = Trace::from_steps(&one, steps, refs, ref_start).unwrap();
    assert_eq!(joined.refs, whole.refs);
    assert_eq!(joined.ref_start, whole.ref_start);
    assert_eq!(joined.next_use, whole.next_use);
    assert_eq!(joined.first_use, whole.first_use);
    let slots = 6;
    let a = lower_bound_trace(&joined, slots, &bandwidth());
    let b = lower_bound_trace(&whole, slots, &bandwidth());
    assert_eq!(a.min_loads, b.min_loads);
    assert!((a.bound_s - b.bound_s).abs() < 1e-12, "{a:?} against {b:?}");
    // Joining is not summing: the second run starts with pages the first left, so the bound of
    // the whole is below twice the bound of one run.
    let single = lower_bound_trace(&one, slots, &bandwidth());
    assert!(a.bound_s < 2.0 * single.bound_s, "{a:?} against {single:?}");
}

#[test]
fn steps_that_do_not_form_a_trace_are_refused() {
    let (profiles, once) = workload(1);
    let one = Trace::build(&profiles, &once).unwrap();
    let s = one.steps[0];
    let bad = [
        (vec![s], vec![3, 1], vec![0, 2], "not sorted"),
        (vec![s], vec![99], vec![0, 1], "page 99"),
        (vec![s], vec![1], vec![0], "reference starts"),
    ];
    for (steps, refs, starts, want) in bad {
        let e = Trace::from_steps(&one, steps, refs, starts).unwrap_err();
        assert!(e.to_string().contains(want), "{e}");
    }
}
