//! Streaming executor: runs model steps in a plan's global step order on the [`StreamEngine`],
//! issuing the plan's loads and evictions in FIFO order so that weight residency follows the
//! scheduler's timeline exactly.
//!
//! The plan's trace is one global step sequence (models × fan-out runs × repetitions). The caller
//! drives it one model run at a time with [`StreamExec::run_model`], doing host work (pre/post
//! processing, reading outputs back) between runs. Before recording global step `j`, every op up
//! to `step_wait[j]` is issued, plus every later op whose `after_step` is already recorded (that
//! is the prefetch: the engine makes the copy wait on the GPU for the slot's last reader, so the
//! CPU never waits for it). When the fan-out differs from the plan, [`StreamExec::replan`]
//! switches to a new plan for the remaining work. The scheduler plans from an empty atlas; the
//! switch keeps what is resident where the new plan allows it: the new plan's slot labels are
//! mapped to physical slots so that a page whose first use of a slot is its load lands in the slot
//! that already holds it, and that load is skipped. Every other slot is evicted, so the new
//! plan's cap accounting holds unchanged.
use std::sync::Arc;

use super::ran_bound::RanBound;
use scheduler::{Op, Plan, TraceStep};
use vk_backend::{
    PageSource, Recorder, StreamConfig, StreamEngine, StreamEvent, StreamStats, VkError,
};

/// Log target of the lookups' page loads and of copies waiting for a newer reader than planned.
const TRACE: &str = "texstream::runtime::stream_exec";

/// Errors of a streamed run.
#[derive(Debug, thiserror::Error)]
pub enum StreamExecError {
    #[error(transparent)]
    Vk(#[from] VkError),
    #[error("plan mismatch: {0}")]
    Plan(String),
    #[error("step `{step}` of model `{model}`: {source}")]
    Step {
        model: String,
        step: String,
        source: VkError,
    },
}

/// A model run whose steps can be recorded one at a time (profile step `i` = the model's `i`-th
/// kernel-running node). Implemented by the graph executor for one run's activations.
pub trait StepRecorder {
    /// Records profile step `step` into `rec` (the weight atlas is bound). Every weight texel
    /// offset must be shifted by `texel_base` (the model's first texel in the global page space).
    fn record_step(
        &mut self,
        step: u32,
        rec: &mut Recorder,
        texel_base: u32,
    ) -> Result<(), VkError>;

    /// For a lookup step ([`scheduler::Step::lookup`]): the model's pages its rows lie on this
    /// run, known from its ids. None for every other step.
    fn lookup_pages(&self, _step: u32) -> Option<Vec<u32>> {
        None
    }
}

impl<F> StepRecorder for F
where
    F: FnMut(u32, &mut Recorder, u32) -> Result<(), VkError>,
{
    fn record_step(
        &mut self,
        step: u32,
        rec: &mut Recorder,
        texel_base: u32,
    ) -> Result<(), VkError> {
        self(step, rec, texel_base)
    }
}

/// Runs plans on one stream engine; see the module docs.
pub struct StreamExec {
    engine: StreamEngine,
    plan: Plan,
    next_op: usize,
    next_step: usize,
    /// Compute value of the newest recorded step.
    last_value: u64,
    replans: u32,
    /// Predicted time of the parts of replaced plans that ran (the current plan's executed part
    /// is added on read, so a prediction never counts steps that did not run).
    done_predicted_s: f64,
    /// Every step that ran, for the lower bound of exactly that work.
    ran: RanBound,
    /// Plan slot label → physical atlas slot.
    slot_map: Vec<u32>,
    /// Per plan op: a load of a page already resident in its (mapped) slot.
    skip: Vec<bool>,
    /// Loads skipped that way so far.
    kept_pages: u64,
    /// The physical slot lookups load their pages into (the last one), when the plan keeps one.
    lookup_slot: Option<u32>,
    /// Pages lookups loaded.
    lookup_loads: u64,
    /// Compute value of each step of the current plan recorded so far, while the trace that
    /// names copies waiting for a newer reader than the plan's is on (empty otherwise).
    step_values: Vec<u64>,
    /// Per plan slot label: the step after which the plan's last eviction from it may run.
    evicted_after: Vec<Option<u32>>,
}

impl StreamExec {
    /// Creates the engine with `plan.slots` atlas slots (other fields of `config` as given) over
    /// `sources` (`sources[m]` is the plan's model `m`, with the profile's page count).
    pub fn new(
        device: &vk_backend::Device,
        mut config: StreamConfig,
        sources: Vec<Arc<dyn PageSource>>,
        plan: Plan,
    ) -> Result<StreamExec, StreamExecError> {
        check_sources(&plan, &sources)?;
        let lookup = plan.trace.lookup_slots;
        config.slots = plan.slots.max(1) + lookup;
        // A host mirror reads the pages in the order this plan first loads them.
        let first_loads: Vec<(u32, u32)> = plan
            .schedule
            .ops
            .iter()
            .filter_map(|op| match *op {
                Op::Load { page, .. } => {
                    let r = plan.trace.page_ref(page);
                    Some((r.model, r.page))
                }
                Op::Evict { .. } => None,
            })
            .collect();
        let engine = StreamEngine::with_load_order(device, config, sources, &first_loads)?;
        let slot_map = (0..config.slots - lookup).collect();
        let lookup_slot = (lookup > 0).then_some(config.slots - 1);
        let skip = vec![false; plan.schedule.ops.len()];
        Ok(StreamExec {
            engine,
            slot_map,
            lookup_slot,
            lookup_loads: 0,
            step_values: Vec::new(),
            evicted_after: Vec::new(),
            skip,
            kept_pages: 0,
            plan,
            next_op: 0,
            next_step: 0,
            last_value: 0,
            replans: 0,
            done_predicted_s: 0.0,
            ran: RanBound::default(),
        })
    }

    pub fn engine(&self) -> &StreamEngine {
        &self.engine
    }
    pub fn plan(&self) -> &Plan {
        &self.plan
    }
    /// Pages that lookup steps loaded (their rows were on no resident page).
    pub fn lookup_loads(&self) -> u64 {
        self.lookup_loads
    }

    /// Slots the plans may use (the lookup slot is not one).
    fn plan_slots(&self) -> u32 {
        self.engine.config().slots - self.lookup_slot.map_or(0, |_| 1)
    }

    /// How many times [`Self::replan`] switched plans.
    pub fn replans(&self) -> u32 {
        self.replans
    }
    /// Predicted time of the plan steps that ran: for every plan in turn (the first and each
    /// re-plan), its simulated timeline up to the last step executed on it.
    pub fn predicted_s(&self) -> f64 {
        self.done_predicted_s + self.ran_predicted_s()
    }
    /// Lower bound of the same steps: the bound of the steps that ran, as one trace
    /// ([`RanBound`]).
    pub fn lower_bound_s(&self) -> f64 {
        self.ran.bound_s(&self.plan)
    }

    /// Ends the lower bound's segment of steps that ran (at the end of a request).
    pub fn end_ran_segment(&mut self) {
        self.ran.end_segment(&self.plan);
    }

    /// Predicted time of the current plan's executed steps.
    fn ran_predicted_s(&self) -> f64 {
        let plan = &self.plan;
        if self.next_step == 0 || plan.sim.step_end.is_empty() {
            return 0.0;
        }
        let i = (self.next_step - 1).min(plan.sim.step_end.len() - 1);
        plan.sim.step_end[i].min(plan.stats.predicted_s)
    }

    /// The next step of the plan, if any.
    pub fn next(&self) -> Option<TraceStep> {
        self.plan.trace.steps.get(self.next_step).copied()
    }

    /// Global steps not run yet.
    pub fn remaining_steps(&self) -> usize {
        self.plan.trace.steps.len() - self.next_step
    }

    /// Records the next model run of the plan (all its steps, in order) with `rec`; it must be a
    /// run of `model`. Returns the compute value of its last step (pass it to [`Self::wait`]
    /// before reading its outputs). Nothing is waited for on the CPU.
    pub fn run_model(
        &mut self,
        model: u32,
        rec: &mut dyn StepRecorder,
    ) -> Result<u64, StreamExecError> {
        let Some(first) = self.next() else {
            return Err(StreamExecError::Plan(format!(
                "a run of model {model} was asked for, but the plan has no steps left"
            )));
        };
        if first.model != model || first.step != 0 {
            return Err(StreamExecError::Plan(format!(
                "a run of model `{}` was asked for, but the plan's next step is step {} of model `{}`",
                self.model_name(model),
                first.step,
                self.model_name(first.model)
            )));
        }
        let base = self.engine.weight_texel_base(model)?;
        self.engine.label_steps(Some(model));
        let start = self.next_step;
        let mut j = start;
        while j < self.plan.trace.steps.len() {
            let s = self.plan.trace.steps[j];
            if j > start
                && (s.step == 0
                    || s.model != first.model
                    || s.run != first.run
                    || s.stage != first.stage
                    || s.rep != first.rep)
            {
                break;
            }
            self.issue_ops(j)?;
            let needs: Vec<(u32, u32)> = self
                .plan
                .trace
                .pages(j)
                .iter()
                .map(|&g| {
                    let r = self.plan.trace.page_ref(g);
                    (r.model, r.page)
                })
                .collect();
            let step = s.step;
            let value = match rec.lookup_pages(step) {
                None => self.engine.step(&needs, |r| rec.record_step(step, r, base)),
                Some(pages) => self.lookup_step(model, needs, &pages, &mut |r| {
                    rec.record_step(step, r, base)
                }),
            }
            .map_err(|source| StreamExecError::Step {
                model: self.model_name(model),
                step: self.plan.trace.step_name(j).to_string(),
                source,
            })?;
            self.last_value = value;
            // Kept only for the newer-reader trace: a service's long plans carry nothing.
            if self.step_values.len() == j && log::log_enabled!(target: TRACE, log::Level::Trace) {
                self.step_values.push(value);
            }
            self.ran.ran(&self.plan, j);
            j += 1;
            self.next_step = j;
        }
        // Ops that only wait for steps already recorded: start them now so they overlap with the
        // host work that follows this run.
        self.issue_ready(self.next_step)?;
        Ok(self.last_value)
    }

    /// Records a lookup step: once over the rows on resident pages, then once per page that is
    /// not resident, loaded into the lookup slot (the kernel writes only rows on mapped pages).
    /// The last page stays there, so the next lookup of its rows loads nothing.
    fn lookup_step(
        &mut self,
        model: u32,
        mut needs: Vec<(u32, u32)>,
        pages: &[u32],
        record: &mut dyn FnMut(&mut Recorder) -> Result<(), VkError>,
    ) -> Result<u64, VkError> {
        let Some(slot) = self.lookup_slot else {
            return Err(VkError::Stream(
                "a lookup step, but the plan keeps no lookup slot".into(),
            ));
        };
        let (resident, missing): (Vec<u32>, Vec<u32>) = pages
            .iter()
            .partition(|&&p| self.engine.slot_of(model, p).is_some());
        let plan_needs = needs.len();
        needs.extend(resident.iter().map(|&p| (model, p)));
        let mut value = self.engine.step(&needs, &mut *record)?;
        for p in missing {
            log::trace!(target: TRACE, "lookup of model {model} loads page {p} into the lookup slot");
            self.engine.load(model, p, slot)?;
            self.lookup_loads += 1;
            needs.truncate(plan_needs);
            needs.push((model, p));
            value = self.engine.step(&needs, &mut *record)?;
        }
        Ok(value)
    }

    fn model_name(&self, m: u32) -> String {
        self.plan
            .trace
            .model_names
            .get(m as usize)
            .cloned()
            .unwrap_or_else(|| format!("#{m}"))
    }

    /// Issues every op step `j` waits for, then every op that is ready before `j`.
    fn issue_ops(&mut self, j: usize) -> Result<(), StreamExecError> {
        if let Some(w) = self.plan.schedule.step_wait.get(j).copied().flatten() {
            while self.next_op <= w as usize {
                let op = self.plan.schedule.ops[self.next_op];
                if op.after_step().is_some_and(|a| a as usize >= j) {
                    return Err(StreamExecError::Plan(format!(
                        "step {j} waits for op {w}, but op {} waits for step {:?}",
                        self.next_op,
                        op.after_step()
                    )));
                }
                self.issue(op)?;
            }
        }
        self.issue_ready(j)
    }

    /// Issues ops in FIFO order while their `after_step` is below `j` (already recorded).
    fn issue_ready(&mut self, j: usize) -> Result<(), StreamExecError> {
        while let Some(&op) = self.plan.schedule.ops.get(self.next_op) {
            if op.after_step().is_some_and(|a| a as usize >= j) {
                break;
            }
            self.issue(op)?;
        }
        Ok(())
    }

    fn issue(&mut self, op: Op) -> Result<(), StreamExecError> {
        let phys = |slot: u32| self.slot_map.get(slot as usize).copied().unwrap_or(slot);
        match op {
            Op::Load { .. } if self.skip.get(self.next_op).copied().unwrap_or(false) => {}
            Op::Load {
                page,
                slot,
                after_step,
            } => {
                let r = self.plan.trace.page_ref(page);
                // A page a lookup left in the lookup slot moves to the plan's slot.
                if let Some(ls) = self.lookup_slot {
                    if self.engine.slot_of(r.model, r.page) == Some(ls) {
                        self.engine.evict(ls)?;
                    }
                }
                let plan_after =
                    after_step.or(self.evicted_after.get(slot as usize).copied().flatten());
                if log::log_enabled!(target: TRACE, log::Level::Trace) {
                    self.trace_newer_reader(r.model, r.page, phys(slot), plan_after)?;
                }
                self.engine.load(r.model, r.page, phys(slot))?;
            }
            Op::Evict {
                slot, after_step, ..
            } => {
                let l = slot as usize;
                if self.evicted_after.len() <= l {
                    self.evicted_after.resize(l + 1, None);
                }
                self.evicted_after[l] = after_step;
                self.engine.evict(phys(slot))?
            }
        }
        self.next_op += 1;
        Ok(())
    }

    /// Logs a copy about to wait for a newer reader than its plan's (`plan_after`, the step
    /// after which the plan lets it overwrite the slot): the plan then counts on a copy that
    /// cannot start yet, and a step needing it soon forces a part boundary.
    fn trace_newer_reader(
        &self,
        model: u32,
        page: u32,
        slot: u32,
        plan_after: Option<u32>,
    ) -> Result<(), StreamExecError> {
        let waits = self.engine.copy_would_wait_for(model, page, slot)?;
        let planned = plan_after
            .and_then(|a| self.step_values.get(a as usize).copied())
            .unwrap_or(0);
        if waits > planned {
            // The plan step whose value the copy waits for (values grow with the steps).
            let j = self.step_values.partition_point(|&v| v < waits);
            log::trace!(
                target: TRACE,
                "newer reader: model {model} page {p} into slot {slot} waits for value {waits} (plan step {j} of {n}), the plan's reader is step {a:?} (value {planned}); issued before step {next}",
                p = page,
                n = self.step_values.len(),
                a = plan_after,
                next = self.next_step,
            );
        }
        Ok(())
    }

    /// What the stream engine did since the last call (brought up to what the GPU has
    /// finished, without waiting), and how many older events its bounded journal dropped.
    pub fn take_events(&mut self) -> Result<(Vec<StreamEvent>, u64), StreamExecError> {
        self.engine.refresh()?;
        Ok(self.engine.take_events())
    }

    /// Seconds on the clock of [`StreamEvent`]s.
    pub fn clock_s(&self) -> f64 {
        self.engine.elapsed_s()
    }

    /// Records commands that are not a step (a run's input copies) ahead of the next step,
    /// in the same submission.
    pub fn record(
        &mut self,
        record: impl FnOnce(&mut Recorder) -> Result<(), VkError>,
    ) -> Result<(), StreamExecError> {
        Ok(self.engine.record(record)?)
    }

    /// Records commands that are not a step (a run's output copies) after every step so far,
    /// submits them and returns the compute value to [`Self::wait`] for.
    pub fn record_and_submit(
        &mut self,
        record: impl FnOnce(&mut Recorder) -> Result<(), VkError>,
    ) -> Result<u64, StreamExecError> {
        Ok(self.engine.record_and_submit(record)?)
    }

    /// Blocks until compute value `value` (from [`Self::run_model`]) has finished on the GPU.
    pub fn wait(&mut self, value: u64) -> Result<(), StreamExecError> {
        Ok(self.engine.wait_step(value)?)
    }

    /// Switches to `plan` for the remaining work (same models, same page size, at most as many
    /// slots as the engine has). The plan assumes an empty atlas; see the module docs for how
    /// resident pages are kept anyway.
    pub fn replan(&mut self, plan: Plan) -> Result<(), StreamExecError> {
        let slots = self.plan_slots();
        if plan.slots > slots {
            return Err(StreamExecError::Plan(format!(
                "re-plan wants {} slots, the atlas has {slots}",
                plan.slots
            )));
        }
        if plan.trace.model_offset != self.plan.trace.model_offset
            || plan.page_bytes != self.plan.page_bytes
            || (plan.trace.lookup_slots > 0) != self.lookup_slot.is_some()
        {
            return Err(StreamExecError::Plan(
                "re-plan changes the models, the page size or the lookup slot".into(),
            ));
        }
        self.keep_resident(&plan, slots)?;
        // Only the replaced plan's executed part counts towards the prediction.
        self.done_predicted_s += self.ran_predicted_s();
        self.plan = plan;
        self.next_op = 0;
        self.next_step = 0;
        self.step_values.clear();
        self.evicted_after.clear();
        self.replans += 1;
        Ok(())
    }

    /// Counts predictions from the current plan on (after a calibration re-plan).
    pub fn restart_prediction(&mut self) {
        self.done_predicted_s = 0.0;
        self.ran.restart();
    }

    /// Loads the switches to new plans skipped because the page was already in place.
    pub fn kept_pages(&self) -> u64 {
        self.kept_pages
    }

    /// Maps `plan`'s slot labels onto the `slots` physical slots, keeping pages in place where the
    /// label's first op loads a page that a physical slot already holds; evicts the rest.
    fn keep_resident(&mut self, plan: &Plan, slots: u32) -> Result<(), StreamExecError> {
        let labels = plan.slots as usize;
        let mut map: Vec<Option<u32>> = vec![None; labels];
        let mut taken = vec![false; slots as usize];
        let mut seen = vec![false; labels];
        let mut skip = vec![false; plan.schedule.ops.len()];
        for (i, op) in plan.schedule.ops.iter().enumerate() {
            let (Op::Load { slot, .. } | Op::Evict { slot, .. }) = *op;
            let l = slot as usize;
            if l >= labels || std::mem::replace(&mut seen[l], true) {
                continue;
            }
            if let Op::Load { page, .. } = *op {
                let r = plan.trace.page_ref(page);
                if let Some(s) = self.engine.slot_of(r.model, r.page) {
                    if s < slots && !taken[s as usize] {
                        taken[s as usize] = true;
                        map[l] = Some(s);
                        skip[i] = true;
                    }
                }
            }
        }
        for s in 0..slots {
            if !taken[s as usize] {
                self.engine.evict(s)?;
            }
        }
        // What a lookup left in its slot is not the new plan's.
        if let Some(ls) = self.lookup_slot {
            self.engine.evict(ls)?;
        }
        let mut free = (0..slots).filter(|&s| !taken[s as usize]);
        self.slot_map = map
            .into_iter()
            .map(|m| m.or_else(|| free.next()).unwrap_or(0))
            .collect();
        self.kept_pages += skip.iter().filter(|&&k| k).count() as u64;
        self.skip = skip;
        Ok(())
    }

    /// Ends the run: waits for everything, joins the engine's threads, returns its statistics or
    /// the run's first error. Planned steps not run (fewer items than planned at the end) are
    /// simply dropped. Dropping a `StreamExec` instead shuts the engine down the same way.
    pub fn finish(self) -> Result<StreamStats, StreamExecError> {
        Ok(self.engine.finish()?)
    }
}

fn check_sources(plan: &Plan, sources: &[Arc<dyn PageSource>]) -> Result<(), StreamExecError> {
    let t = &plan.trace;
    if sources.len() != t.model_offset.len() {
        return Err(StreamExecError::Plan(format!(
            "{} page sources for a plan of {} models",
            sources.len(),
            t.model_offset.len()
        )));
    }
    for (m, s) in sources.iter().enumerate() {
        let end = t.model_offset.get(m + 1).copied().unwrap_or(t.total_pages);
        let pages = end - t.model_offset[m];
        if s.page_count() != pages || s.page_bytes() as u64 != t.page_bytes {
            return Err(StreamExecError::Plan(format!(
                "model `{}`: the source has {} pages of {} bytes, the plan {pages} of {}",
                t.model_names[m],
                s.page_count(),
                s.page_bytes(),
                t.page_bytes
            )));
        }
    }
    Ok(())
}
