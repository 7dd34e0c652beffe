//! The GPU worker: the one thread that owns the device's streaming state. It takes jobs from the
//! bounded queue in order (requests, reloads, inspections), so a reload swaps between requests
//! and everything queued before it finishes on the old plan. It records what happened into the
//! shared record that [`crate::Engine::stats`] reads, and into the `metrics` facade.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, Sender};
use vk_backend::Device;

use super::error::{EngineError, RequestError};
use super::loaded::Loaded;
use super::request::{Response, Values};
use super::session::{Session, SessionOptions};

/// Longest the last profiling request waits for the calibrated plan of the next one (a planner
/// that has not finished by then leaves the re-plan to that request, as without the wait).
const CALIBRATION_PLAN_WAIT: Duration = Duration::from_secs(30);
use super::stats::{names, EngineStats, HeapReading, LatencyWindow, ReloadOutcome};
use crate::pipeline::{execute, ExecError, Stop};

/// A request waiting for the worker.
pub(crate) struct RequestJob {
    pub id: u64,
    pub pipeline: String,
    pub inputs: Values,
    pub deadline: Option<Instant>,
    pub cancel: Arc<AtomicBool>,
    pub enqueued: Instant,
    pub reply: Sender<Result<Response, RequestError>>,
}

/// The plan the worker runs, for inspection.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PlanSnapshot {
    pub policy: String,
    pub slots: u32,
    pub page_bytes: u64,
    pub cap_bytes: u64,
    pub min_cap_bytes: u64,
    pub predicted_s: f64,
    pub lower_bound_s: f64,
    pub stats: scheduler::PlanStats,
    /// The model runs the plan covers, in order (model name, runs).
    pub stages: Vec<(String, u32)>,
    /// Residency events of the plan (loads and evictions with their times).
    pub events: Vec<scheduler::Event>,
    /// The residency timeline drawn as SVG.
    #[serde(skip)]
    pub svg: String,
}

pub(crate) enum Job {
    Request(RequestJob),
    Reload {
        loaded: Box<Loaded>,
        reply: Sender<Result<(), EngineError>>,
    },
    Residency {
        reply: Sender<Option<String>>,
    },
    Plan {
        reply: Sender<Option<PlanSnapshot>>,
    },
    /// The step costs the session plans with.
    Costs {
        reply: Sender<Option<Vec<scheduler::Profile>>>,
    },
    /// Ends the streaming session so its GPU times are counted, then starts a new one.
    Settle {
        reply: Sender<Result<(), EngineError>>,
    },
}

/// What the worker keeps for [`crate::Engine::stats`]; guarded by a mutex, updated between
/// requests, read by the caller.
#[derive(Default)]
pub(crate) struct Record {
    pub stats: EngineStats,
    pub pipelines: BTreeMap<String, LatencyWindow>,
    pub models: BTreeMap<String, LatencyWindow>,
}

impl Record {
    pub fn snapshot(&self) -> EngineStats {
        let mut s = self.stats.clone();
        s.pipelines = self.pipelines.iter().map(|(k, w)| w.summary(k)).collect();
        s.models = self.models.iter().map(|(k, w)| w.summary(k)).collect();
        s
    }
}

/// State the engine handle and the worker share.
pub(crate) struct Shared {
    pub record: Mutex<Record>,
    pub loaded: RwLock<Arc<Loaded>>,
}

pub(crate) struct Worker {
    pub dev: Device,
    pub session: Option<Session>,
    pub opts: SessionOptions,
    pub shared: Arc<Shared>,
    pub jobs: Receiver<Job>,
    /// Counters of sessions that ended (a session's own restart from zero).
    pub base: vk_backend::StreamStats,
    pub gpu: (f64, f64, f64),
    /// Host-side streaming times of ended sessions: page reads (summed over the I/O threads)
    /// the dispatcher's waits for a free staging page, and the transfer thread's waits for
    /// copies' readers to be submitted.
    pub host_io: (f64, f64, f64),
    /// Wall time of requests before calibration, and after it.
    pub profiling_s: f64,
    pub measured_s: f64,
    /// Predicted and LB of sessions that ended after calibration.
    pub settled_prediction: (f64, f64),
    /// Re-plans and kept pages of sessions that ended.
    pub settled_replans: super::stats::ReplanCounts,
    pub settled_kept: u64,
    /// Model-run timing of sessions that ended after calibration.
    pub settled_timing: super::session::SessionTiming,
}

fn now_unix() -> f64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

impl Worker {
    pub fn run(mut self) {
        while let Ok(job) = self.jobs.recv() {
            metrics::gauge!(names::QUEUE_DEPTH).set(self.jobs.len() as f64);
            match job {
                Job::Request(r) => {
                    // A balancer may have moved the device's interrupts since (cheap unless
                    // `vk_backend::placement::REFRESH_EVERY` has passed).
                    self.dev.placement().refresh();
                    self.request(r)
                }
                Job::Reload { loaded, reply } => {
                    let r = self.reload(*loaded);
                    let _ = reply.send(r);
                }
                Job::Plan { reply } => {
                    let _ = reply.send(self.plan_snapshot());
                }
                Job::Residency { reply } => {
                    let svg = self
                        .session
                        .as_mut()
                        .map(|s| scheduler::svg::render_timeline(&s.residency_timeline()));
                    let _ = reply.send(svg);
                }
                Job::Costs { reply } => {
                    let _ = reply.send(self.session.as_ref().map(|s| s.costs().to_vec()));
                }
                Job::Settle { reply } => {
                    let r = self.settle();
                    let _ = reply.send(r);
                }
            }
        }
        if let Some(s) = self.session.take() {
            self.end_session(s);
        }
        self.publish();
    }

    fn request(&mut self, r: RequestJob) {
        let queued = r.enqueued.elapsed();
        let result = self.execute(&r);
        let run = r.enqueued.elapsed().saturating_sub(queued);
        let label = r.pipeline.clone();
        let ok = result.is_ok();
        {
            let mut rec = self.shared.record.lock().unwrap_or_else(|e| e.into_inner());
            if ok {
                rec.stats.requests_ok += 1;
                rec.pipelines
                    .entry(label.clone())
                    .or_default()
                    .record(run.as_secs_f64());
            } else {
                rec.stats.requests_failed += 1;
            }
        }
        metrics::counter!(names::REQUESTS, "pipeline" => label.clone(), "outcome" => if ok { "ok" } else { "error" })
            .increment(1);
        if ok {
            metrics::histogram!(names::REQUEST_LATENCY, "pipeline" => label)
                .record(run.as_secs_f64());
        }
        self.publish();
        let _ = r.reply.send(result.map(|outputs| Response {
            outputs,
            queued,
            run,
        }));
    }

    fn execute(&mut self, r: &RequestJob) -> Result<Values, RequestError> {
        if r.cancel.load(Ordering::Relaxed) {
            return Err(RequestError::Cancelled);
        }
        if r.deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(RequestError::DeadlineExceeded);
        }
        let loaded = match &self.session {
            Some(s) => s.loaded.clone(),
            None => {
                // A device failure left no session: try to build one again.
                let loaded = self.shared_loaded();
                self.start_session(loaded.clone())
                    .map_err(|e| RequestError::Device(e.to_string()))?;
                loaded
            }
        };
        let p = loaded
            .graph_index(&r.pipeline)
            .ok_or_else(|| RequestError::UnknownPipeline {
                name: r.pipeline.clone(),
                known: loaded.names(),
            })?;
        let Some(session) = self.session.as_mut() else {
            return Err(RequestError::Device("no streaming session".into()));
        };
        let graph = &loaded.graphs[p];
        session.begin_request(p);
        let t0 = Instant::now();
        let (cancel, deadline) = (r.cancel.clone(), r.deadline);
        let stop = move || {
            if cancel.load(Ordering::Relaxed) {
                Some(Stop::Cancelled)
            } else if deadline.is_some_and(|d| Instant::now() >= d) {
                Some(Stop::DeadlineExceeded)
            } else {
                None
            }
        };
        let result = execute(graph, r.inputs.clone(), session, &stop);
        let dt = t0.elapsed().as_secs_f64();
        let runs = session.take_model_runs();
        match result {
            Ok(ex) => {
                let was_calibrated = session.calibrated;
                let profiled = session.end_request(ex.fan_counts.clone());
                session.prepare_next();
                // Calibration changed every step cost: the next request's plan is made now,
                // as part of the profiling, not on that request's path.
                let dt = if profiled {
                    session.wait_for_prepared_plans(CALIBRATION_PLAN_WAIT);
                    t0.elapsed().as_secs_f64()
                } else {
                    dt
                };
                if was_calibrated {
                    self.measured_s += dt;
                } else {
                    self.profiling_s += dt;
                }
                if profiled {
                    self.measured_s = 0.0;
                }
                self.record_runs(&loaded, runs, &ex.step_times, was_calibrated);
                Ok(ex.outputs)
            }
            Err(e) => {
                session.end_request(Vec::new());
                self.record_runs(&loaded, runs, &[], false);
                if self.session_failed() {
                    // The streaming state is gone: rebuild it for the next request.
                    log::warn!(
                        "request {}: device failure ({e}); rebuilding the session",
                        r.id
                    );
                    if let Some(s) = self.session.take() {
                        self.end_session(s);
                    }
                    if let Err(e2) = self.start_session(loaded) {
                        log::error!("rebuilding the session failed: {e2}");
                    }
                }
                Err(match e {
                    ExecError::Stopped("cancelled") => RequestError::Cancelled,
                    ExecError::Stopped(_) => RequestError::DeadlineExceeded,
                    e => RequestError::from(e),
                })
            }
        }
    }

    fn session_failed(&self) -> bool {
        self.session.as_ref().is_some_and(|s| s.failed())
    }

    fn record_runs(
        &mut self,
        loaded: &Loaded,
        runs: Vec<Vec<f64>>,
        steps: &[(String, std::time::Duration)],
        count_steps: bool,
    ) {
        let mut rec = self.shared.record.lock().unwrap_or_else(|e| e.into_inner());
        for (m, times) in runs.into_iter().enumerate() {
            let Some((name, _)) = loaded.models.get(m) else {
                continue;
            };
            let w = rec.models.entry(name.clone()).or_default();
            for &t in &times {
                w.record(t);
            }
            if !times.is_empty() {
                metrics::counter!(names::MODEL_RUNS, "model" => name.clone())
                    .increment(times.len() as u64);
                let h = metrics::histogram!(names::MODEL_LATENCY, "model" => name.clone());
                for t in times {
                    h.record(t);
                }
            }
        }
        if count_steps {
            for (label, d) in steps {
                *rec.stats.cpu_steps.entry(label.clone()).or_default() += d.as_secs_f64();
            }
        }
    }

    fn shared_loaded(&self) -> Arc<Loaded> {
        self.shared
            .loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub fn start_session(&mut self, loaded: Arc<Loaded>) -> Result<(), EngineError> {
        let s = Session::build(&self.dev, loaded.clone(), &self.opts)?;
        self.session = Some(s);
        *self
            .shared
            .loaded
            .write()
            .unwrap_or_else(|e| e.into_inner()) = loaded;
        self.publish();
        Ok(())
    }

    /// Folds a finished session's counters and GPU times into the totals.
    fn end_session(&mut self, s: Session) {
        let calibrated = s.calibrated;
        self.settled_replans.add(&s.replans);
        self.settled_kept += s.kept_pages();
        let (p, lb) = (s.predicted_s(), s.lower_bound_s());
        let timing = s.timing;
        let counters = s.counters();
        let stats = match s.finish() {
            Ok(st) => st,
            Err(e) => {
                log::warn!("ending the streaming session: {e}");
                counters
            }
        };
        self.base.pages_loaded += stats.pages_loaded;
        self.base.bytes_streamed += stats.bytes_streamed;
        self.base.evictions += stats.evictions;
        self.base.compute_submits += stats.compute_submits;
        self.base.compute_parts += stats.compute_parts;
        self.base.forced_cuts += stats.forced_cuts;
        self.base.host_lead_waits += stats.host_lead_waits;
        self.base.transfer_submits += stats.transfer_submits;
        self.base.host.add(&stats.host);
        let secs = |d: Option<std::time::Duration>| d.map_or(0.0, |d| d.as_secs_f64());
        self.gpu.0 += secs(stats.compute_stall);
        self.gpu.1 += secs(stats.transfer_busy);
        self.gpu.2 += secs(stats.compute_busy);
        self.host_io.0 += stats.read_time.as_secs_f64();
        self.host_io.1 += stats.staging_wait_time.as_secs_f64();
        self.host_io.2 += stats.reader_submit_wait.as_secs_f64();
        if calibrated {
            self.settled_prediction.0 += p;
            self.settled_prediction.1 += lb;
            self.settled_timing.add(&timing);
        }
    }

    /// Swaps in `loaded` between requests. The old session is ended first, so the device
    /// never holds both; if the new one cannot be built, the old workload is built again and
    /// the error returned.
    fn reload(&mut self, loaded: Loaded) -> Result<(), EngineError> {
        let loaded = Arc::new(loaded);
        let old = self.session.as_ref().map(|s| s.loaded.clone());
        if let Some(s) = self.session.take() {
            self.end_session(s);
        }
        let r = self.start_session(loaded.clone());
        let outcome = match &r {
            Ok(()) => ReloadOutcome {
                ok: true,
                message: format!(
                    "loaded {} ({} pipelines, {} models)",
                    loaded.workload.path.display(),
                    loaded.pipelines,
                    loaded.models.len()
                ),
                at_unix_s: now_unix(),
            },
            Err(e) => ReloadOutcome {
                ok: false,
                message: e.to_string(),
                at_unix_s: now_unix(),
            },
        };
        if r.is_err() {
            if let Some(old) = old {
                if let Err(e) = self.start_session(old) {
                    log::error!("restoring the previous workload failed: {e}");
                }
            }
        }
        self.note_reload(outcome);
        r
    }

    pub fn note_reload(&self, outcome: ReloadOutcome) {
        let mut rec = self.shared.record.lock().unwrap_or_else(|e| e.into_inner());
        if outcome.ok {
            rec.stats.reloads_ok += 1;
        } else {
            rec.stats.reloads_failed += 1;
        }
        metrics::counter!(names::RELOADS, "outcome" => if outcome.ok { "ok" } else { "error" })
            .increment(1);
        rec.stats.last_reload = Some(outcome);
    }

    /// Ends the session (counting its GPU times) and starts a fresh one on the same workload.
    fn settle(&mut self) -> Result<(), EngineError> {
        let Some(s) = self.session.take() else {
            return Ok(());
        };
        let loaded = s.loaded.clone();
        self.end_session(s);
        let r = self.start_session(loaded);
        self.publish();
        r
    }

    fn plan_snapshot(&self) -> Option<PlanSnapshot> {
        let s = self.session.as_ref()?;
        let plan = s.plan();
        let t = &plan.trace;
        let mut stages: Vec<(String, u32)> = Vec::new();
        let mut last = None;
        for st in &t.steps {
            let key = (st.rep, st.stage);
            if last == Some(key) {
                continue;
            }
            last = Some(key);
            let runs = t
                .steps
                .iter()
                .filter(|x| (x.rep, x.stage) == key)
                .map(|x| x.run)
                .max()
                .map_or(0, |r| r + 1);
            stages.push((t.model_names[st.model as usize].clone(), runs));
        }
        Some(PlanSnapshot {
            policy: s.loaded.policy.name().into(),
            slots: s.slots,
            page_bytes: s.loaded.page_bytes,
            cap_bytes: s.loaded.cap,
            min_cap_bytes: s.min_cap,
            predicted_s: s.predicted_s(),
            lower_bound_s: s.lower_bound_s(),
            stats: plan.stats.clone(),
            stages,
            events: plan.events(),
            svg: scheduler::svg::render(plan),
        })
    }

    /// Copies the session's state into the shared record and the metrics facade.
    pub fn publish(&self) {
        let mut rec = self.shared.record.lock().unwrap_or_else(|e| e.into_inner());
        let st = &mut rec.stats;
        let mem = self.dev.memory_stats();
        st.device = self.dev.name().to_string();
        let placement = self.dev.placement().current();
        if !placement.interrupt_cores.is_empty() {
            st.thread_placement = placement.describe();
        }
        st.device_bytes = mem.current_bytes;
        st.peak_device_bytes = mem.peak_bytes;
        st.queue_depth = self.jobs.len();
        st.profiling_s = self.profiling_s;
        st.measured_s = self.measured_s;
        st.vk_memory_budget = self.dev.memory_budget().map(|hs| {
            hs.into_iter()
                .filter(|h| h.device_local)
                .map(|h| HeapReading {
                    heap: h.heap_index,
                    budget_bytes: h.budget,
                    usage_bytes: h.usage,
                })
                .collect()
        });
        let (mut loaded, mut bytes, mut ev) = (
            self.base.pages_loaded,
            self.base.bytes_streamed,
            self.base.evictions,
        );
        // GPU times: the ended sessions' totals plus the live session's, as far as the GPU has
        // finished (the stream journal resolves them as batches and copies complete).
        let mut gpu = self.gpu;
        let mut host_io = self.host_io;
        // Totals, not increments: this record is published again after every request.
        st.compute_submits = self.base.compute_submits;
        st.compute_parts = self.base.compute_parts;
        st.forced_cuts = self.base.forced_cuts;
        st.host_lead_waits = self.base.host_lead_waits;
        st.transfer_submits = self.base.transfer_submits;
        let mut host = self.base.host;
        if let Some(s) = &self.session {
            let c = s.counters();
            loaded += c.pages_loaded;
            bytes += c.bytes_streamed;
            ev += c.evictions;
            let secs = |d: Option<std::time::Duration>| d.map_or(0.0, |d| d.as_secs_f64());
            gpu.0 += secs(c.compute_stall);
            gpu.1 += secs(c.transfer_busy);
            gpu.2 += secs(c.compute_busy);
            st.compute_submits += c.compute_submits;
            st.compute_parts += c.compute_parts;
            st.command_pools_created = s.device().command_pools_created();
            st.forced_cuts += c.forced_cuts;
            st.host_lead_waits += c.host_lead_waits;
            st.transfer_submits += c.transfer_submits;
            host.add(&c.host);
            host_io.0 += c.read_time.as_secs_f64();
            host_io.1 += c.staging_wait_time.as_secs_f64();
            host_io.2 += c.reader_submit_wait.as_secs_f64();
            st.staging_pages = s.staging_pages();
            st.host_mirror_bytes = c.host_mirror_bytes;
            st.mirror_fill_s = c.mirror_fill.as_secs_f64();
            st.mirror_fill_behind_s = c.mirror_fill_behind.as_secs_f64();
            st.copy_probe_s = c.copy_probe.map(|d| d.as_secs_f64());
            st.handoff_probe_s = c.handoff_probe.map(|d| d.as_secs_f64());
            st.workload = s.loaded.workload.spec.name.clone();
            st.policy = s.loaded.policy.name().into();
            st.cap_bytes = s.loaded.cap;
            st.min_cap_bytes = s.min_cap;
            st.slots = s.slots;
            st.steps_per_batch = s.steps_per_batch();
            st.steps_per_part = s.steps_per_part();
            st.step_buffers = s.step_buffers();
            st.host_lead = s.host_lead();
            st.construction = s.construction().into();
            st.page_bytes = s.loaded.page_bytes;
            st.page_transfer_s = s.bandwidth().transfer_s(s.loaded.page_bytes);
            st.replans = self.settled_replans;
            st.replans.add(&s.replans);
            st.kept_pages = self.settled_kept + s.kept_pages();
            st.calibrated = s.calibrated;
            st.predicted_s = self.settled_prediction.0 + s.predicted_s();
            st.lower_bound_s = self.settled_prediction.1 + s.lower_bound_s();
            st.cold_first_request = s.first_request_estimate();
            let mut t = self.settled_timing;
            t.add(&s.timing);
            st.model_s = t.model_s;
            st.model_phases = t.phases;
            st.resident_bytes = s.resident_bytes();
        }
        st.stall_s = gpu.0;
        st.transfer_busy_s = gpu.1;
        st.compute_busy_s = gpu.2;
        (st.page_read_s, st.staging_wait_s, st.reader_submit_wait_s) = host_io;
        st.record_parts = host.into();
        st.pages_loaded = loaded;
        st.bytes_streamed = bytes;
        st.evictions = ev;
        metrics::counter!(names::PAGES_LOADED).absolute(loaded);
        metrics::counter!(names::BYTES_STREAMED).absolute(bytes);
        metrics::counter!(names::EVICTIONS).absolute(ev);
        metrics::gauge!(names::CAP_BYTES).set(st.cap_bytes as f64);
        metrics::gauge!(names::DEVICE_BYTES).set(st.device_bytes as f64);
        metrics::gauge!(names::PEAK_DEVICE_BYTES).set(st.peak_device_bytes as f64);
        metrics::gauge!(names::STALL).set(st.stall_s);
        metrics::gauge!(names::TRANSFER_BUSY).set(st.transfer_busy_s);
        metrics::gauge!(names::COMPUTE_BUSY).set(st.compute_busy_s);
        for (m, b) in &st.resident_bytes {
            metrics::gauge!(names::RESIDENT_BYTES, "model" => m.clone()).set(*b as f64);
        }
        let r = st.replans;
        for (cause, n) in [
            ("horizon", r.horizon),
            ("unpredicted_request", r.unpredicted_request),
            ("fan_out", r.fan_out),
            ("mix", r.mix),
            ("calibration", r.calibration),
        ] {
            metrics::counter!(names::REPLANS, "cause" => cause).absolute(n);
        }
    }
}
