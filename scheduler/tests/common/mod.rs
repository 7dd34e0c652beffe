//! Workloads shared by the scheduler's integration tests.
// Each test crate compiles this module and uses part of it.
#![allow(dead_code)]

use scheduler::{Profile, Step};

/// A step reading `pages` for `compute_s`.
pub fn step(name: String, pages: Vec<u32>, compute_s: f64) -> Step {
    Step {
        name,
        pages,
        compute_s,
        activation_bytes: 0,
        lookup: false,
    }
}

/// One model of `pages` 1 MiB pages, read in order by every fourth step (the others read none),
/// like a decoder's matrices between its norms and activations; its runs are decode steps.
pub fn decoder(pages: u32, step_s: f64) -> Profile {
    Profile {
        model: "lm".into(),
        page_bytes: 1 << 20,
        total_pages: pages,
        steps: (0..4 * pages)
            .map(|k| {
                let read = if k % 4 == 0 { vec![k / 4] } else { Vec::new() };
                step(format!("s{k}"), read, step_s)
            })
            .collect(),
    }
}

/// One model of `pages` 1 MiB pages whose step `k` reads page `k`, `step_s` each.
pub fn page_a_step(pages: u32, step_s: f64) -> Profile {
    Profile {
        model: "m".into(),
        page_bytes: 1 << 20,
        total_pages: pages,
        steps: (0..pages)
            .map(|k| step(format!("s{k}"), vec![k], step_s))
            .collect(),
    }
}
