//! The pipeline unrolled into one global step sequence over one global page space, with next-use links.
use crate::{PageRef, Pipeline, PlanError, Profile};
use serde::Serialize;

/// Marks "never used again".
pub const NEVER: u32 = u32::MAX;

/// One executed step in the unrolled pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TraceStep {
    pub model: u32,
    /// Step index within the model's profile.
    pub step: u32,
    /// Repetition (e.g. frame) index.
    pub rep: u32,
    /// Stage index within the pipeline.
    pub stage: u32,
    /// Run index within the stage's fan-out.
    pub run: u32,
    pub compute_s: f64,
    pub activation_bytes: u64,
}

/// The whole workload as one sequence of steps. Global page `g` of model `m` page `p` is
/// `model_offset[m] + p`.
#[derive(Debug, Clone)]
pub struct Trace {
    pub steps: Vec<TraceStep>,
    /// Global pages read by each step: `refs[ref_start[j]..ref_start[j+1]]`, sorted, no duplicates.
    pub refs: Vec<u32>,
    pub ref_start: Vec<u32>,
    /// For each reference, the next step index (> its own) that reads the same page, or [`NEVER`].
    pub next_use: Vec<u32>,
    /// For each global page, the first step that reads it, or [`NEVER`].
    pub first_use: Vec<u32>,
    pub model_offset: Vec<u32>,
    pub total_pages: u32,
    pub page_bytes: u64,
    pub model_names: Vec<String>,
    /// Step names per model, for messages.
    pub step_names: Vec<Vec<String>>,
    /// Slots kept out of the plan for lookups ([`crate::Step::lookup`]): 1 when a step of any
    /// profile is one, else 0. Plans count them against the cap.
    pub lookup_slots: u32,
}

impl Trace {
    /// Unrolls `pipeline` over `profiles`, checking the input (page indices, page sizes, times).
    pub fn build(profiles: &[Profile], pipeline: &Pipeline) -> Result<Trace, PlanError> {
        let inv = |m: String| Err(PlanError::Invalid(m));
        let Some(first) = profiles.first() else {
            return inv("no model profiles".into());
        };
        let page_bytes = first.page_bytes;
        if page_bytes == 0 {
            return inv(format!("model `{}` has page_bytes 0", first.model));
        }
        let mut model_offset = Vec::with_capacity(profiles.len());
        let mut total: u64 = 0;
        for p in profiles {
            if p.page_bytes != page_bytes {
                return inv(format!(
                    "model `{}` has {}-byte pages but model `{}` has {}-byte pages; one atlas needs one page size",
                    p.model, p.page_bytes, first.model, page_bytes
                ));
            }
            model_offset.push(total as u32);
            total += p.total_pages as u64;
            for s in &p.steps {
                if let Some(&bad) = s.pages.iter().find(|&&x| x >= p.total_pages) {
                    return inv(format!(
                        "model `{}` step `{}` reads page {bad} but the model has {} pages",
                        p.model, s.name, p.total_pages
                    ));
                }
                if !(s.compute_s.is_finite() && s.compute_s >= 0.0) {
                    return inv(format!(
                        "model `{}` step `{}` has compute time {} s",
                        p.model, s.name, s.compute_s
                    ));
                }
            }
        }
        if total >= NEVER as u64 {
            return inv(format!("{total} pages in all is too many"));
        }
        for (i, st) in pipeline.stages.iter().enumerate() {
            if st.model >= profiles.len() {
                return inv(format!(
                    "pipeline stage {i} names model index {} but there are {} profiles",
                    st.model,
                    profiles.len()
                ));
            }
        }
        // Each profile's references as one run of it lays them out, once per build (not once per
        // run): its steps' global pages, each step's sorted and without duplicates, and where
        // each step's pages end.
        let mut scratch = Vec::new();
        let local: Vec<(Vec<u32>, Vec<usize>)> = profiles
            .iter()
            .zip(&model_offset)
            .map(|(p, &off)| {
                let mut pages = Vec::new();
                let mut ends = Vec::with_capacity(p.steps.len());
                for s in &p.steps {
                    scratch.clear();
                    scratch.extend(s.pages.iter().map(|&x| x + off));
                    scratch.sort_unstable();
                    scratch.dedup();
                    pages.extend_from_slice(&scratch);
                    ends.push(pages.len());
                }
                (pages, ends)
            })
            .collect();
        // The sizes are known before unrolling: check them, and allocate once.
        let (mut n_steps, mut n_refs) = (0u64, 0u64);
        for st in &pipeline.stages {
            let runs = st.count as u64 * pipeline.repetitions as u64;
            n_steps =
                n_steps.saturating_add(runs.saturating_mul(profiles[st.model].steps.len() as u64));
            n_refs = n_refs.saturating_add(runs.saturating_mul(local[st.model].0.len() as u64));
        }
        if n_refs >= NEVER as u64 || n_steps >= NEVER as u64 {
            return inv("workload too large (over 2^32 steps or references)".into());
        }
        let mut steps = Vec::with_capacity(n_steps as usize);
        let mut refs = Vec::with_capacity(n_refs as usize);
        let mut ref_start = Vec::with_capacity(n_steps as usize + 1);
        ref_start.push(0u32);
        // From every profile, not only the stages planned: every plan of one workload keeps the
        // same slots, so the engine can switch between them.
        let lookup_slots = u32::from(profiles.iter().any(|p| p.steps.iter().any(|s| s.lookup)));
        for rep in 0..pipeline.repetitions {
            for (si, st) in pipeline.stages.iter().enumerate() {
                let prof = &profiles[st.model];
                let (pages, ends) = &local[st.model];
                for run in 0..st.count {
                    // A run is its profile's steps and references, whole slices at a time.
                    let base = refs.len();
                    refs.extend_from_slice(pages);
                    ref_start.extend(ends.iter().map(|&e| (base + e) as u32));
                    steps.extend(prof.steps.iter().enumerate().map(|(k, s)| TraceStep {
                        model: st.model as u32,
                        step: k as u32,
                        rep,
                        stage: si as u32,
                        run,
                        compute_s: s.compute_s,
                        activation_bytes: s.activation_bytes,
                    }));
                }
            }
        }
        let total_pages = total as u32;
        let (next_use, first_use) = link(&refs, &ref_start, total_pages);
        Ok(Trace {
            steps,
            refs,
            ref_start,
            next_use,
            first_use,
            model_offset,
            total_pages,
            page_bytes,
            model_names: profiles.iter().map(|p| p.model.clone()).collect(),
            step_names: profiles
                .iter()
                .map(|p| p.steps.iter().map(|s| s.name.clone()).collect())
                .collect(),
            lookup_slots,
        })
    }

    /// The trace of `steps` over `like`'s models and page space, step `j` reading
    /// `refs[ref_start[j]..ref_start[j + 1]]` (sorted, no duplicates): steps gathered from
    /// several traces of one workload, such as what ran across re-plans.
    pub fn from_steps(
        like: &Trace,
        steps: Vec<TraceStep>,
        refs: Vec<u32>,
        ref_start: Vec<u32>,
    ) -> Result<Trace, PlanError> {
        let inv = |m: String| Err(PlanError::Invalid(m));
        if ref_start.len() != steps.len() + 1
            || ref_start.first() != Some(&0)
            || ref_start.last().map(|&e| e as usize) != Some(refs.len())
            || ref_start.windows(2).any(|w| w[0] > w[1])
        {
            return inv(format!(
                "{} steps with {} reference starts over {} references",
                steps.len(),
                ref_start.len(),
                refs.len()
            ));
        }
        if refs.len() >= NEVER as usize || steps.len() >= NEVER as usize {
            return inv("trace too large (over 2^32 steps or references)".into());
        }
        if let Some(&bad) = refs.iter().find(|&&g| g >= like.total_pages) {
            return inv(format!(
                "a step reads page {bad} but the workload has {} pages",
                like.total_pages
            ));
        }
        for (j, s) in steps.iter().enumerate() {
            let pages = &refs[ref_start[j] as usize..ref_start[j + 1] as usize];
            if pages.windows(2).any(|w| w[0] >= w[1]) {
                return inv(format!("step {j}'s pages are not sorted and distinct"));
            }
            if s.model as usize >= like.model_offset.len() {
                return inv(format!(
                    "step {j} is of model {} but the workload has {}",
                    s.model,
                    like.model_offset.len()
                ));
            }
        }
        let (next_use, first_use) = link(&refs, &ref_start, like.total_pages);
        Ok(Trace {
            steps,
            refs,
            ref_start,
            next_use,
            first_use,
            model_offset: like.model_offset.clone(),
            total_pages: like.total_pages,
            page_bytes: like.page_bytes,
            model_names: like.model_names.clone(),
            step_names: like.step_names.clone(),
            lookup_slots: like.lookup_slots,
        })
    }

    /// Global pages read by step `j`.
    pub fn pages(&self, j: usize) -> &[u32] {
        &self.refs[self.ref_start[j] as usize..self.ref_start[j + 1] as usize]
    }

    /// Reference index range of step `j` (indexes `refs` and `next_use`).
    pub fn ref_range(&self, j: usize) -> std::ops::Range<usize> {
        self.ref_start[j] as usize..self.ref_start[j + 1] as usize
    }

    /// The model-local name of global page `g`.
    pub fn page_ref(&self, g: u32) -> PageRef {
        let m = self.model_offset.partition_point(|&o| o <= g) - 1;
        // Models with zero pages share an offset with the next one; take the last model starting at or below g.
        PageRef {
            model: m as u32,
            page: g - self.model_offset[m],
        }
    }

    /// The profile name of trace step `j`.
    pub fn step_name(&self, j: usize) -> &str {
        let s = &self.steps[j];
        self.step_names[s.model as usize]
            .get(s.step as usize)
            .map_or("", |n| n.as_str())
    }

    /// Largest activation peak over all steps.
    pub fn max_activation(&self) -> u64 {
        self.steps
            .iter()
            .map(|s| s.activation_bytes)
            .max()
            .unwrap_or(0)
    }

    /// Sum of all steps' compute times.
    pub fn compute_s(&self) -> f64 {
        self.steps.iter().map(|s| s.compute_s).sum()
    }
}

/// Per reference, the next step that reads its page ([`NEVER`] if none); per page, the first
/// step that reads it.
fn link(refs: &[u32], ref_start: &[u32], total_pages: u32) -> (Vec<u32>, Vec<u32>) {
    let mut next_use = vec![NEVER; refs.len()];
    let mut seen = vec![NEVER; total_pages as usize];
    for j in (0..ref_start.len().saturating_sub(1)).rev() {
        for r in ref_start[j] as usize..ref_start[j + 1] as usize {
            let g = refs[r] as usize;
            next_use[r] = seen[g];
            seen[g] = j as u32;
        }
    }
    (next_use, seen)
}
