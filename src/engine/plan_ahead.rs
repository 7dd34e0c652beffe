//! Plans made ahead of need, off the request path. When a request arrives that the current plan
//! did not predict, the session re-plans before its first model run, and that planning sat on
//! the request's critical path. After each request the session asks a planner thread for the
//! plan each likely next request would need ("the next request is pipeline P"); a re-plan whose
//! look-ahead equals a prepared one takes it instead of planning. Plans do not depend on what is
//! resident (the executor keeps pages that are already in place), only on the stages planned,
//! the step costs and the cap, so a prepared plan is exactly the one the re-plan would make.
use std::collections::{HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use crossbeam_channel::{Receiver, Sender};
use scheduler::{Bandwidth, Choice, Pipeline, Plan, Policy, Profile, Stage};

use crate::runtime::run_budget::{plan_under_cap, EngineCost};

/// Prepared plans kept (the oldest goes first); a few pipelines times a few mixes.
const KEPT: usize = 8;
/// Requests the planner thread may have waiting (older ones are dropped: they are stale).
const QUEUED: usize = 4;

/// What a plan is made from besides its stages; fixed for one session until calibration.
#[derive(Debug, Clone)]
pub struct PlanBasis {
    pub profiles: Arc<Vec<Profile>>,
    pub cap: u64,
    pub bandwidth: Bandwidth,
    pub policy: Policy,
    pub cost: EngineCost,
    /// `planned`'s only construction, where one is forced ([`super::StreamTuning`]).
    pub only: Option<&'static str>,
    /// Bumped when the step costs change; plans of an older basis are never handed out.
    pub generation: u64,
}

/// A plan's identity: the stages it covers (runs of zero left out).
pub type PlanKey = Vec<(usize, u32)>;

pub fn key_of(stages: &[Stage]) -> PlanKey {
    stages
        .iter()
        .filter(|s| s.count > 0)
        .map(|s| (s.model, s.count))
        .collect()
}

#[derive(Default)]
struct Shelf {
    generation: u64,
    plans: VecDeque<(PlanKey, Arc<Plan>)>,
    /// Plans asked for and not yet made, with the generation of the basis they are made on: a
    /// plan still in the making on an old basis (the step costs changed since) does not stand
    /// for the same stages' plan on the new one.
    in_flight: HashSet<(PlanKey, u64)>,
}

impl Shelf {
    fn put(&mut self, key: PlanKey, plan: Arc<Plan>) {
        self.plans.retain(|(k, _)| k != &key);
        if self.plans.len() == KEPT {
            self.plans.pop_front();
        }
        self.plans.push_back((key, plan));
    }
}

struct Job {
    key: PlanKey,
    pipeline: Pipeline,
    basis: Arc<PlanBasis>,
}

/// The shelf, and a signal the planner thread gives each time it finishes a job.
type SharedShelf = Arc<(Mutex<Shelf>, Condvar)>;

/// The shelf of prepared plans and the thread that fills it.
pub struct PlanAhead {
    shelf: SharedShelf,
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    /// Re-plans that took a prepared plan.
    pub hits: u64,
}

impl PlanAhead {
    /// Starts the planner thread (none when it cannot be spawned: every re-plan then plans
    /// on the request path, as it would without this).
    pub fn start() -> PlanAhead {
        let shelf: SharedShelf = Arc::new((Mutex::new(Shelf::default()), Condvar::new()));
        let (tx, rx) = crossbeam_channel::bounded::<Job>(QUEUED);
        let s = shelf.clone();
        let thread = std::thread::Builder::new()
            .name("texstream-planner".into())
            .spawn(move || planner(rx, s))
            .ok();
        PlanAhead {
            shelf,
            jobs: thread.as_ref().map(|_| tx),
            thread,
            hits: 0,
        }
    }

    fn shelf(&self) -> std::sync::MutexGuard<'_, Shelf> {
        self.shelf.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits (at most `limit`) until the planner thread has no plan in the making. After
    /// calibration the engine waits for the next request's plan here, at the end of the last
    /// profiling request, rather than make it again on the next request's path.
    pub fn wait_idle(&self, limit: Duration) {
        let (lock, done) = &*self.shelf;
        let s = lock.lock().unwrap_or_else(|e| e.into_inner());
        let _ = done.wait_timeout_while(s, limit, |s| !s.in_flight.is_empty());
    }

    /// Forgets every prepared plan (the step costs changed).
    pub fn invalidate(&mut self, generation: u64) {
        let mut s = self.shelf();
        s.generation = generation;
        s.plans.clear();
    }

    /// The prepared plan for `key` made on `generation`'s basis, if there is one.
    pub fn take(&mut self, key: &PlanKey, generation: u64) -> Option<Plan> {
        let s = self.shelf();
        if s.generation != generation {
            return None;
        }
        let plan = s
            .plans
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, p)| Plan::clone(p));
        drop(s);
        if plan.is_some() {
            self.hits += 1;
        }
        plan
    }

    /// Asks the planner thread for `pipeline`'s plan unless it is prepared or being made; a
    /// full queue drops the request (the re-plan then plans itself).
    pub fn prepare(&mut self, pipeline: Pipeline, basis: Arc<PlanBasis>) {
        let Some(tx) = &self.jobs else { return };
        let key = key_of(&pipeline.stages);
        let generation = basis.generation;
        {
            let mut s = self.shelf();
            if s.generation != generation
                || s.in_flight.contains(&(key.clone(), generation))
                || s.plans.iter().any(|(k, _)| k == &key)
            {
                return;
            }
            s.in_flight.insert((key.clone(), generation));
        }
        if let Err(e) = tx.try_send(Job {
            key,
            pipeline,
            basis,
        }) {
            let job = e.into_inner();
            self.shelf().in_flight.remove(&(job.key, generation));
        }
    }
}

impl Drop for PlanAhead {
    fn drop(&mut self) {
        self.jobs = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn planner(jobs: Receiver<Job>, shelf: SharedShelf) {
    while let Ok(job) = jobs.recv() {
        let b = &job.basis;
        let current = shelf.0.lock().unwrap_or_else(|e| e.into_inner()).generation == b.generation;
        // Asked for on a basis since replaced: nobody can take it, so it is not made.
        let made = current.then(|| {
            plan_under_cap(
                &b.profiles,
                &job.pipeline,
                b.cap,
                &b.bandwidth,
                b.policy,
                &b.cost,
                // Off the request path: the full search.
                Choice {
                    previous: None,
                    only: b.only,
                },
            )
        });
        let mut s = shelf.0.lock().unwrap_or_else(|e| e.into_inner());
        s.in_flight.remove(&(job.key.clone(), b.generation));
        // A plan that fails here fails on the request path too, with its error; keep nothing.
        if let (Some(Ok(c)), true) = (made, s.generation == b.generation) {
            s.put(job.key, Arc::new(c.plan));
        }
        drop(s);
        shelf.1.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use scheduler::synth::{layered, LayerSpec};
    use vk_backend::StackLimits;

    /// A model of `layers` one-page layers, planned under a cap of a quarter of its pages, so
    /// that `planned` searches its constructions for a while.
    fn basis(layers: usize, generation: u64) -> Arc<PlanBasis> {
        let page = 1 << 20;
        let specs: Vec<LayerSpec> = (0..layers)
            .map(|i| LayerSpec {
                name: format!("l{i}"),
                weight_bytes: page,
                compute_s: 1e-4,
                activation_bytes: 0,
                reuses: None,
            })
            .collect();
        Arc::new(PlanBasis {
            profiles: Arc::new(vec![layered("m", page, &specs)]),
            cap: layers as u64 / 4 * page,
            bandwidth: Bandwidth::default(),
            policy: Policy::Planned,
            cost: EngineCost {
                slot_bytes: page,
                table_bytes: 0,
                staging_bytes: 0,
                stack: StackLimits {
                    max_layers: u32::MAX,
                    max_pages_per_layer: 1,
                },
            },
            only: None,
            generation,
        })
    }

    fn pipeline(repetitions: u32) -> Pipeline {
        Pipeline {
            stages: vec![Stage { model: 0, count: 4 }],
            repetitions,
        }
    }

    /// Calibration asks again for a plan of the same stages while the old basis's plan is
    /// still in the making (session 27 on an H200: `planned`'s full search outlasted the
    /// request after it, so the calibrated plan was never asked for and the first request
    /// after calibration planned on its own path for 3.8 s). The new basis's plan is made.
    #[test]
    fn a_new_basis_gets_its_own_plan_while_the_old_one_is_in_the_making() {
        let mut ahead = PlanAhead::start();
        let key = key_of(&pipeline(40).stages);
        ahead.prepare(pipeline(40), basis(1000, 0));
        // The planner thread is well into the old basis's plan (0.1-0.2 s here).
        std::thread::sleep(Duration::from_millis(20));
        ahead.invalidate(1);
        ahead.prepare(pipeline(40), basis(1000, 1));
        ahead.wait_idle(Duration::from_secs(120));
        assert!(
            ahead.take(&key, 1).is_some(),
            "the plan on the calibrated basis was made ahead"
        );
        assert!(ahead.take(&key, 0).is_none(), "no plan of the old basis");
    }
}
