//! Workloads shared by the scheduler's integration tests.

use scheduler::{Profile, Step};

/// One model of `pages` 1 MiB pages, read in order by every fourth step (the others read none),
/// like a decoder's matrices between its norms and activations; its runs are decode steps.
pub fn decoder(pages: u32, step_s: f64) -> Profile {
    Profile {
        model: "lm".into(),
        page_bytes: 1 << 20,
        total_pages: pages,
        steps: (0..4 * pages)
            .map(|k| Step {
                name: format!("s{k}"),
                pages: if k % 4 == 0 { vec![k / 4] } else { Vec::new() },
                compute_s: step_s,
                activation_bytes: 0,
                lookup: false,
            })
            .collect(),
    }
}
