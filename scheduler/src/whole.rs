//! Whole-model policies: `preload` (everything resident once) and `reload-per-model` (load a stage's
//! model, run it, free it), which is what apps do today.

use crate::{Op, Schedule, Trace};

/// Pages of models `models` (global ids) in first-use order, then never-used pages in index order.
fn pages_in_first_use_order(trace: &Trace, models: &[u32]) -> Vec<u32> {
    let mut pages: Vec<u32> = Vec::new();
    for &m in models {
        let start = trace.model_offset[m as usize];
        let end = trace
            .model_offset
            .get(m as usize + 1)
            .copied()
            .unwrap_or(trace.total_pages);
        pages.extend(start..end);
    }
    pages.sort_by_key(|&p| (trace.first_use[p as usize], p));
    pages
}

/// Every page of every model loaded once, in first-use order, never evicted. The caller checks that
/// all pages fit in `slots`.
pub fn preload_schedule(trace: &Trace, slots: u32) -> Schedule {
    let models: Vec<u32> = (0..trace.model_offset.len() as u32).collect();
    let pages = pages_in_first_use_order(trace, &models);
    let mut load_op = vec![0u32; trace.total_pages as usize];
    let mut ops = Vec::with_capacity(pages.len());
    for (k, &p) in pages.iter().enumerate() {
        load_op[p as usize] = ops.len() as u32;
        ops.push(Op::Load {
            page: p,
            slot: k as u32,
            after_step: None,
        });
    }
    let step_wait = (0..trace.steps.len())
        .map(|j| trace.pages(j).iter().map(|&p| load_op[p as usize]).max())
        .collect();
    Schedule {
        slots,
        ops,
        step_wait,
    }
}

/// For each run of consecutive steps of one stage (all its fan-out runs): free what the previous stage
/// held once it finished, load the whole model, and start the stage's first step only when all of it is
/// in. The caller checks that the largest model fits in `slots`.
pub fn reload_schedule(trace: &Trace, slots: u32) -> Schedule {
    let n = trace.steps.len();
    let mut ops = Vec::new();
    let mut step_wait = vec![None; n];
    let mut occupant: Vec<Option<u32>> = vec![None; slots as usize];
    let mut j = 0;
    while j < n {
        let (rep, stage, model) = (
            trace.steps[j].rep,
            trace.steps[j].stage,
            trace.steps[j].model,
        );
        let mut end = j;
        while end < n && trace.steps[end].rep == rep && trace.steps[end].stage == stage {
            end += 1;
        }
        let prev = j.checked_sub(1).map(|x| x as u32);
        for (k, o) in occupant.iter_mut().enumerate() {
            if let Some(p) = o.take() {
                ops.push(Op::Evict {
                    page: p,
                    slot: k as u32,
                    after_step: prev,
                });
            }
        }
        let pages = pages_in_first_use_order(trace, &[model]);
        for (k, &p) in pages.iter().enumerate() {
            occupant[k] = Some(p);
            ops.push(Op::Load {
                page: p,
                slot: k as u32,
                after_step: prev,
            });
        }
        if !ops.is_empty() {
            step_wait[j] = Some(ops.len() as u32 - 1);
        }
        j = end;
    }
    Schedule {
        slots,
        ops,
        step_wait,
    }
}
