//! One loaded workload placed on the device: every model's executor on the shared activation
//! arena, the I/O staging buffers, and the stream engine whose atlas holds the weight pages,
//! driven by the scheduler's plan. It runs model runs for the pipeline executor
//! ([`ModelRunner`]) and re-plans when what runs differs from what the plan predicted.
//!
//! Order of work in [`Session::build`]: the executors are built (their activation layouts are
//! known, nothing big allocated), the engine's own costs are measured from the driver's memory
//! requirements, and the cap is checked against the minimum for the workload before the arena,
//! the staging buffers and the atlas are allocated. Everything counts against the cap.
use std::sync::Arc;
use std::time::Instant;

use scheduler::{Bandwidth, Choice, Pipeline, Plan, Policy, Profile, Stage};
use vk_backend::{Device, PageSource, StreamConfig};

use super::error::EngineError;
use super::loaded::Loaded;
use super::plan_ahead::{key_of, PlanAhead, PlanBasis};
use super::predict::Predictor;
use super::run_log::{RunFacts, RunLog};
use super::stats::{FirstRequestEstimate, HostPhases, ReplanCounts};
use super::thread_usage::ThreadUsage;
use crate::pipeline::{ModelCall, ModelRunner, Tensor};
use crate::runtime::run_budget::{
    measure_engine_cost, min_cap, plan_under_cap, CapError, CappedPlan, EngineCost,
};
use crate::runtime::run_model::StreamedModel;
use crate::runtime::run_source::FaultablePages;
use crate::runtime::stream_exec::StreamExec;

/// The log target every stream-journal event goes to at trace level
/// (`RUST_LOG=texstream::stream_journal=trace`).
pub const JOURNAL_LOG: &str = "texstream::stream_journal";

/// Largest upload (or, on UMA, I/O) staging buffer (larger than any image row: rows are at
/// most 32768 texels of 8 bytes here).
const IO_STAGING_PIECE_BYTES: u64 = 1 << 19;
/// Staging ring pages where the ring counts against the cap.
const UMA_STAGING_SLOTS: u32 = 1;
/// The staging ring's size in system memory (not capped): deep enough that page reads run far
/// ahead of the copies, which wait on the GPU for their slots' last readers. With six pages
/// the reads stalled behind every copy that waited, and the copy queue idled between them.
const SYSTEM_STAGING_BYTES: u64 = 64 << 20;
/// Bounds of the ring in pages.
const STAGING_SLOTS_MIN: u32 = 6;
const STAGING_SLOTS_MAX: u32 = 256;

/// How a session plans and calibrates.
#[derive(Debug, Clone)]
pub struct SessionOptions {
    /// The pipeline expected first (before any request arrived).
    pub first_pipeline: usize,
    /// Requests after which step costs are calibrated on the measured model runs (0: never).
    pub calibrate_after: u32,
    /// Step costs to plan with after calibration instead of this session's measurements (a
    /// resident reference run's), so that predicted times come from resident compute.
    pub fixed_costs: Option<Vec<Profile>>,
    pub stream: super::StreamTuning,
    /// Page reads still to fail, shared with every session's sources (fault injection).
    pub faults: Arc<std::sync::atomic::AtomicU32>,
}

/// The staging buffers every upload and readback goes through.
struct IoStaging {
    up: vk_backend::Buffer,
    down: vk_backend::Buffer,
}

/// Per-session timing of the requests after calibration.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionTiming {
    pub model_s: f64,
    pub phases: HostPhases,
}

impl SessionTiming {
    /// Adds `other`'s times to these (sessions end at reloads and settles; totals span them).
    pub fn add(&mut self, other: &SessionTiming) {
        self.model_s += other.model_s;
        let (a, b) = (&mut self.phases, &other.phases);
        a.upload_s += b.upload_s;
        a.replan_s += b.replan_s;
        a.record_s += b.record_s;
        a.record_cpu_s += b.record_cpu_s;
        a.record_sys_s += b.record_sys_s;
        a.record_faults += b.record_faults;
        a.record_waits += b.record_waits;
        a.record_preempted += b.record_preempted;
        a.wait_s += b.wait_s;
        a.download_s += b.download_s;
    }
}

/// Pages that must have streamed before the measured rate replaces the workload's.
const MIN_PAGES_TO_MEASURE: u64 = 16;

/// Why the next model run re-plans.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Replan {
    Horizon,
    Request,
    FanOut,
    Mix,
    Calibration,
}

/// A workload on the device; see the module docs.
pub struct Session {
    pub loaded: Arc<Loaded>,
    dev: Device,
    ex: StreamExec,
    models: Vec<StreamedModel>,
    _arena: vk_backend::SharedMemory,
    io: IoStaging,
    pub cost: EngineCost,
    /// Per model profile with the activation bytes every step carries; costs calibrated.
    profiles: Vec<Profile>,
    pub min_cap: u64,
    pub slots: u32,
    predictor: Predictor,
    /// The request being run: its pipeline and how many model runs it made so far.
    current: Option<(usize, u32)>,
    /// A re-plan owed at the next model run.
    pending: Option<Replan>,
    /// The pipelines of the requests the current plan expects after the current one.
    expected: std::collections::VecDeque<usize>,
    pub replans: ReplanCounts,
    run_times: Vec<Vec<f64>>,
    calibrate_after: u32,
    /// Where the session started cold: its first request alone as planned from disk.
    first_request_estimate: Option<FirstRequestEstimate>,
    requests_done: u32,
    pub calibrated: bool,
    fixed_costs: Option<Vec<Profile>>,
    pub timing: SessionTiming,
    /// Model runs per model and their wall times, for the caller's statistics.
    pub model_runs: Vec<Vec<f64>>,
    /// Plans made ahead for the likely next requests, and what they are made from.
    ahead: PlanAhead,
    basis: Arc<PlanBasis>,
    /// Runs per model since the session began (a conversation's cache is its own while no
    /// other request has run the model since its last call).
    uses: Vec<u64>,
    /// Conversations kept between requests, by (pipeline, step).
    conversations:
        std::collections::HashMap<(usize, usize), crate::pipeline::generate::Conversation>,
    /// The last requests as they really ran on the device.
    run_log: RunLog,
    /// The model whose run finished last, when it finished without error: its arena images
    /// hold what that run left, since no other model has written the shared memory since.
    last_run: Option<usize>,
    /// The inputs (name, [`crate::pipeline::Tensor::content_id`]) whose values that run left
    /// in images that keep them (a Generate step's fixed inputs, the speech decoder's 9 MB of
    /// cross-attention keys and values per token): the model's next run skips uploading them.
    kept_inputs: Vec<(String, u64)>,
}

fn dev_err(what: &str) -> impl Fn(vk_backend::VkError) -> EngineError + '_ {
    move |e| EngineError::Device(format!("{what}: {e}"))
}

/// The stream engine's configuration: the tuning's choices, else a staging ring of
/// [`SYSTEM_STAGING_BYTES`] where it lives in uncapped system memory, or of
/// [`UMA_STAGING_SLOTS`] where it is paid out of the cap (double buffering is not worth a page
/// of weights there).
fn stream_config(
    dev: &Device,
    tuning: &super::StreamTuning,
    page_bytes: u64,
    weight_bytes: u64,
    policy: Policy,
) -> StreamConfig {
    let mut c = StreamConfig::default();
    c.host_mirror = tuning.host_mirror.unwrap_or_else(|| {
        policy != Policy::Preload
            && !c.staging_memory.counts_against_cap(dev)
            && weight_bytes <= host_ram_bytes().map_or(0, |ram| ram / 2)
    });
    c.staging_slots = match tuning.staging_pages {
        Some(n) => n.max(1),
        None if c.staging_memory.counts_against_cap(dev) => UMA_STAGING_SLOTS,
        None => (SYSTEM_STAGING_BYTES / page_bytes.max(1))
            .clamp(STAGING_SLOTS_MIN as u64, STAGING_SLOTS_MAX as u64) as u32,
    };
    if let Some(n) = tuning.loads_per_submit {
        c.max_loads_per_submit = n.max(1);
    }
    if let Some(n) = tuning.io_threads {
        c.io_threads = n.max(1);
    }
    if let Some(n) = tuning.steps_per_batch {
        c.steps_per_batch = n.max(1);
    }
    // A part per batch unless asked otherwise (`StreamConfig::steps_per_part` says why).
    c.steps_per_part = tuning
        .steps_per_part
        .map_or(c.steps_per_batch, |n| n.max(1));
    if let Some(on) = tuning.step_buffers {
        c.step_buffers = on;
    }
    c.host_lead = tuning.host_lead.map(|n| n.max(1));
    c
}

/// The machine's RAM, where the OS says.
fn host_ram_bytes() -> Option<u64> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    {
        nix::sys::sysinfo::sysinfo().ok().map(|i| i.ram_total())
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    {
        None
    }
}

/// The device usage the cap refused to let an allocation bring, where `e` is that refusal.
fn refused_usage(e: &vk_backend::VkError) -> Option<u64> {
    match e {
        vk_backend::VkError::CapExceeded { would_be, .. } => Some(*would_be),
        _ => None,
    }
}

/// [`refused_usage`] inside a model's error.
fn model_refused_usage(e: &crate::runtime::RuntimeError) -> Option<u64> {
    use crate::runtime::RuntimeError as E;
    match e {
        E::Kernel { source, .. } | E::Vk { source, .. } => refused_usage(source),
        _ => None,
    }
}

/// `profiles` with every step carrying `bytes` of activations.
fn with_activation(profiles: &[Profile], bytes: u64) -> Vec<Profile> {
    let mut profiles = profiles.to_vec();
    for p in &mut profiles {
        for s in &mut p.steps {
            s.activation_bytes = bytes;
        }
    }
    profiles
}

impl Session {
    /// Places `loaded` on `dev` under its cap; see the module docs for the order of work.
    pub fn build(
        dev: &Device,
        loaded: Arc<Loaded>,
        opts: &SessionOptions,
    ) -> Result<Session, EngineError> {
        let cap = loaded.cap;
        let first = &loaded.models[0].1;
        let total_pages: u32 = loaded
            .models
            .iter()
            .map(|(_, pm)| pm.page_count() as u32)
            .sum();
        let mut config = stream_config(
            dev,
            &opts.stream,
            loaded.page_bytes,
            total_pages as u64 * loaded.page_bytes,
            loaded.policy,
        );
        // One atlas holds one weight precision (and so one page of texels).
        for (name, pm) in &loaded.models[1..] {
            let (a, b) = (first.header(), pm.header());
            if (b.precision, b.texels_per_page) != (a.precision, a.texels_per_page) {
                return Err(EngineError::Model {
                    workload: loaded.workload.path.clone(),
                    model: name.clone(),
                    msg: format!(
                        "its weights are {:?}, model `{}`'s are {:?}: the models of one workload \
                         share one weight atlas, so give them all the same `precision` (fp16 \
                         weights can keep fp32 activations with `activations: F32`)",
                        b.precision, loaded.models[0].0, a.precision
                    ),
                });
            }
        }
        config.precision = crate::runtime::weights::vk_precision(first.header().precision);
        config.page_height = Some((first.header().texels_per_page / 512) as u32);
        dev.memory().set_cap(Some(cap));
        dev.memory().reset_peak();
        let mut predictor = Predictor::new(
            loaded.graphs.iter().map(|g| g.lookahead).collect(),
            opts.first_pipeline,
        );
        let (first_pipe, expected) = planned_pipeline(&loaded, &mut predictor, Vec::new());
        // Before anything is allocated: the engine's own bytes (from the driver's memory
        // requirements) and the packed models' activation peaks bound the minimum from below,
        // so a cap far too small (even 0) is refused with that bound before any allocation.
        let cost =
            measure_engine_cost(dev, &config, total_pages).map_err(dev_err("engine cost"))?;
        let packed_peak = loaded
            .models
            .iter()
            .map(|(_, pm)| pm.header().peak_activation_bytes)
            .max()
            .unwrap_or(0);
        let (at_least, mc) = min_cap(
            &with_activation(&loaded.profiles, packed_peak),
            &first_pipe,
            &cost,
        )?;
        if cap < at_least {
            return Err(CapError::too_small(cap, at_least, mc, &cost, false).into());
        }
        let before = dev.memory_stats().current_bytes;
        let mut models = Vec::new();
        let mut base = 0u32;
        for (name, pm) in &loaded.models {
            let precisions = loaded.tensor_precisions(name, pm);
            let held = dev.memory_stats().current_bytes;
            models.push(
                StreamedModel::new(dev, name, pm.clone(), base, precisions).map_err(|e| {
                    EngineError::Model {
                        workload: loaded.workload.path.clone(),
                        model: name.clone(),
                        msg: e.to_string(),
                    }
                })?,
            );
            log::info!(
                "model `{name}`: {} device bytes outside the activation arena",
                dev.memory_stats().current_bytes.saturating_sub(held)
            );
            if let Some(on) = opts.stream.step_reuse {
                if let Some(m) = models.last_mut() {
                    m.set_step_reuse(on);
                }
            }
            base += pm.page_count() as u32;
        }
        // The models run one at a time, so their activation arenas overlay one memory: the
        // largest arena, not the sum, counts against the cap.
        let mut layouts = Vec::with_capacity(models.len());
        let mut shared = vk_backend::SharedMemoryLayout::default();
        for m in &models {
            let (offsets, layout) = m.arena_layout().map_err(|e| EngineError::Model {
                workload: loaded.workload.path.clone(),
                model: m.name.clone(),
                msg: e.to_string(),
            })?;
            log::info!("model `{}`: activation arena {} bytes", m.name, layout.size);
            shared = shared.overlay(&layout);
            layouts.push(offsets);
        }
        // Inputs kept alive for the whole run where the shared memory has room for them
        // anyway: an input whose value does not change between runs of one model (a speech
        // decoder's cross-attention keys and values, every token) then stays on the device.
        for (m, offsets) in models.iter_mut().zip(layouts.iter_mut()) {
            let name = m.name.clone();
            let model_err = |e: crate::runtime::RuntimeError| EngineError::Model {
                workload: loaded.workload.path.clone(),
                model: name.clone(),
                msg: e.to_string(),
            };
            m.pin_inputs_within(&shared).map_err(model_err)?;
            let (pinned_offsets, layout) = m.arena_layout().map_err(model_err)?;
            debug_assert_eq!(shared.overlay(&layout), shared);
            *offsets = pinned_offsets;
        }
        // Inputs go up and outputs come back through host-visible staging kept for the whole
        // session. Where host-visible memory is device memory (UMA) one buffer serves both
        // directions and counts; otherwise the upload buffer counts where the allocator places
        // it in device-local (BAR) memory and the readback buffer lives in host memory.
        let shared_io = vk_backend::StagingDirection::Download.counts_against_cap(dev);
        let (mut up_bytes, mut down_bytes) = (0, 0);
        for m in &models {
            let st = |inputs| {
                m.staging_bytes(inputs).map_err(|e| EngineError::Model {
                    workload: loaded.workload.path.clone(),
                    model: m.name.clone(),
                    msg: e.to_string(),
                })
            };
            up_bytes = up_bytes.max(st(true)?);
            down_bytes = down_bytes.max(st(false)?);
        }
        use vk_backend::StagingDirection as Dir;
        let up_dir = if shared_io { Dir::Both } else { Dir::Upload };
        let up_size = if shared_io {
            up_bytes.max(down_bytes)
        } else {
            up_bytes
        }
        .min(IO_STAGING_PIECE_BYTES);
        let io_bytes = vk_backend::Buffer::staging_requirements(dev, up_size, up_dir)
            .map_err(dev_err("staging requirements"))?
            .size;
        let estimate = dev.memory_stats().current_bytes - before + shared.size + io_bytes;
        // A cap below the minimum fails here, before the big allocations (the exact check,
        // with the warm-up's scratch tensors counted, is the plan below).
        let (early_min, mc) = min_cap(
            &with_activation(&loaded.profiles, estimate),
            &first_pipe,
            &cost,
        )?;
        // Only a bound: the warm-up's scratch tensors come on top (below).
        if cap < early_min {
            return Err(CapError::too_small(cap, early_min, mc, &cost, false).into());
        }
        let arena = vk_backend::SharedMemory::new(
            dev,
            "activation arena (all models)",
            &shared,
            vk_backend::MemoryCategory::Activations,
        )
        .map_err(dev_err("activation arena"))?;
        // The warm-up records every kernel once, which makes the models' scratch tensors (a 1-D
        // convolution's 2-D copies, a MatMul's packed A, split partials), and the I/O staging
        // comes after: the estimate above does not know them. Where the cap refuses one of them,
        // the minimum is at least what the refused allocation would have brought (plus the
        // staging still to come), and the error says so rather than naming the allocation.
        let at_least_from =
            |would_be: u64, staging_to_come: u64| -> Result<EngineError, EngineError> {
                let act = would_be.saturating_sub(before) + staging_to_come;
                let (at_least, mc) =
                    min_cap(&with_activation(&loaded.profiles, act), &first_pipe, &cost)?;
                // The refusal itself shows the cap too small, whatever the estimate says.
                Ok(CapError::too_small(cap, at_least.max(cap + 1), mc, &cost, false).into())
            };
        for (m, offsets) in models.iter_mut().zip(&layouts) {
            let name = m.name.clone();
            let merr = |e: crate::runtime::RuntimeError| match model_refused_usage(&e) {
                Some(would_be) => at_least_from(would_be, io_bytes).unwrap_or_else(|e| e),
                None => EngineError::Model {
                    workload: loaded.workload.path.clone(),
                    model: name.clone(),
                    msg: e.to_string(),
                },
            };
            m.bind_arena(&arena, offsets).map_err(merr)?;
            m.warm_up().map_err(merr)?;
        }
        let staging_err = |what: &'static str| {
            move |e: vk_backend::VkError| match refused_usage(&e) {
                Some(would_be) => at_least_from(would_be, 0).unwrap_or_else(|e| e),
                None => dev_err(what)(e),
            }
        };
        let up = vk_backend::Buffer::staging(dev, "I/O staging", up_size, up_dir)
            .map_err(staging_err("I/O staging"))?;
        let io = IoStaging {
            down: if shared_io {
                up.clone()
            } else {
                vk_backend::Buffer::staging(dev, "output staging", down_bytes, Dir::Download)
                    .map_err(staging_err("output staging"))?
            },
            up,
        };
        // The shared arena and every model's own scratch and constants stay allocated for the
        // whole session: each step carries all of them.
        let act = dev.memory_stats().current_bytes - before;
        let profiles = with_activation(&loaded.profiles, act);
        // The stream engine submits compute in parts of batches: a copy over a page waits for
        // its reader's whole part, which the plans must know (see `Bandwidth::reuse_lag_steps`).
        let bandwidth = Bandwidth {
            reuse_lag_steps: config
                .steps_per_part
                .min(config.steps_per_batch)
                .saturating_sub(1),
            ..loaded.bandwidth
        };
        // A cold start: the first plan charges each page's first read from disk; the plans
        // after it (the basis below) are warm.
        let cold = opts.stream.cold_read_bytes_per_s.map(|rate| Bandwidth {
            first_read_bytes_per_s: Some(rate as f64),
            ..bandwidth
        });
        let CappedPlan { plan, min_cap: min } = plan_under_cap(
            &profiles,
            &first_pipe,
            cap,
            cold.as_ref().unwrap_or(&bandwidth),
            loaded.policy,
            &cost,
            Choice {
                previous: None,
                only: opts.stream.plan_construction,
            },
        )?;
        let slots = plan.slots;
        let sources: Vec<Arc<dyn PageSource>> = loaded
            .models
            .iter()
            .map(|(_, pm)| {
                Arc::new(FaultablePages::new(pm.clone(), opts.faults.clone()))
                    as Arc<dyn PageSource>
            })
            .collect();
        let ex = StreamExec::new(dev, config, sources, plan)
            .map_err(|e| EngineError::Device(format!("stream engine: {e}")))?;
        for m in &mut models {
            m.attach(ex.engine());
        }
        // The first request alone, from disk, at the copy rate and hand-off the engine probed
        // as it started (the workload's nominal rate made the H200's bound 3x the copies).
        let first_request_estimate = match (&cold, expected.first()) {
            (Some(bw), Some(&p)) => {
                let c = ex.engine().counters();
                let bw = match c.copy_probe {
                    Some(d) => {
                        streaming_at(*bw, loaded.page_bytes, d.as_secs_f64(), c.handoff_probe)
                    }
                    None => *bw,
                };
                Some(first_request_estimate(
                    &loaded,
                    &predictor,
                    p,
                    opts.fixed_costs
                        .as_deref()
                        .map_or_else(|| profiles.clone(), |f| with_activation(f, act)),
                    (cap, &bw, &cost),
                )?)
            }
            _ => None,
        };
        let run_log = RunLog::new(ex.engine().config().slots);
        let n = models.len();
        let basis = Arc::new(PlanBasis {
            profiles: Arc::new(profiles.clone()),
            cap: loaded.cap,
            bandwidth,
            policy: loaded.policy,
            cost,
            only: opts.stream.plan_construction,
            generation: 0,
        });
        Ok(Session {
            ahead: PlanAhead::start(),
            basis,
            dev: dev.clone(),
            ex,
            models,
            _arena: arena,
            io,
            cost,
            profiles,
            min_cap: min,
            slots,
            predictor,
            current: None,
            pending: None,
            expected: expected.into(),
            replans: ReplanCounts::default(),
            run_times: vec![Vec::new(); n],
            calibrate_after: opts.calibrate_after,
            first_request_estimate,
            requests_done: 0,
            calibrated: false,
            fixed_costs: opts.fixed_costs.clone(),
            timing: SessionTiming::default(),
            model_runs: vec![Vec::new(); n],
            uses: vec![0; n],
            conversations: Default::default(),
            last_run: None,
            kept_inputs: Vec::new(),
            run_log,
            loaded,
        })
    }

    /// A request of pipeline `p` starts.
    pub fn begin_request(&mut self, p: usize) {
        let name = self.loaded.graphs.get(p).map_or("?", |g| g.name.as_str());
        self.run_log.request_started(self.ex.clock_s(), name);
        self.predictor.arrived(p);
        let why = match self.expected.pop_front() {
            None => Some(Replan::Horizon),
            Some(q) if q != p => Some(Replan::Request),
            Some(_) if self.predictor.mix_changed() => Some(Replan::Mix),
            Some(_) => None,
        };
        if self.pending.is_none() {
            self.pending = why;
        }
        self.current = Some((p, 0));
    }

    /// The request ended with these fan-out counts (per step index); calibrates step costs
    /// once enough requests ran. Returns whether this request was the last profiling one.
    pub fn end_request(&mut self, fan_counts: Vec<(usize, u32)>) -> bool {
        self.log_events();
        if let Some((p, _)) = self.current.take() {
            self.predictor.finished(p, fan_counts);
        }
        self.requests_done += 1;
        self.ex.end_ran_segment();
        if !self.calibrated
            && self.calibrate_after > 0
            && self.requests_done >= self.calibrate_after
        {
            self.calibrate();
            return true;
        }
        false
    }

    /// Scales each model's step costs so that a run costs what its median run took (the
    /// compile-time estimates assume a nominal device), or takes the fixed costs; the next
    /// model run re-plans with them and predictions count from there.
    fn calibrate(&mut self) {
        if let Some(fixed) = &self.fixed_costs {
            for (p, f) in self.profiles.iter_mut().zip(fixed) {
                for (s, fs) in p.steps.iter_mut().zip(&f.steps) {
                    s.compute_s = fs.compute_s;
                }
            }
        } else {
            for (m, p) in self.profiles.iter_mut().enumerate() {
                let times = &mut self.run_times[m];
                times.sort_by(f64::total_cmp);
                // The lower median: with two profiling runs it is the warm one, not the
                // first run that also created pipelines and touched every page.
                let mid = times.len().saturating_sub(1) / 2;
                if let Some(&t) = times.get(mid) {
                    p.scale_compute_to(t);
                }
            }
        }
        self.calibrated = true;
        let generation = self.basis.generation + 1;
        self.basis = Arc::new(PlanBasis {
            profiles: Arc::new(self.profiles.clone()),
            bandwidth: self.measured_bandwidth(),
            generation,
            ..PlanBasis::clone(&self.basis)
        });
        self.ahead.invalidate(generation);
        self.pending = Some(Replan::Calibration);
        self.timing = SessionTiming::default();
    }

    /// The transfer model with the time one page really took to stream so far, once enough
    /// pages streamed to tell: the slowest of its GPU copy (timestamps), its read into staging
    /// (spread over the I/O threads), since the two are pipelined, and the copy's wall time
    /// probed when the engine started. The workload's own figures
    /// are a guess for a nominal device; a plan built on a rate 2.5× too slow (as the workloads'
    /// 12 GB/s was on the H200) thinks every policy is transfer-bound and picks the plan with the
    /// fewest loads even where its copies serialize with compute.
    fn measured_bandwidth(&self) -> Bandwidth {
        let c = self.counters();
        let bw = self.basis.bandwidth;
        let Some(copy) = c
            .transfer_busy
            .filter(|_| c.pages_loaded >= MIN_PAGES_TO_MEASURE)
        else {
            return bw;
        };
        let pages = c.pages_loaded as f64;
        // The copy time covers the timed submissions only.
        let timed_pages = match c.transfer_timed_pages {
            0 => pages,
            n => n as f64,
        };
        let config = self.ex.engine().config();
        let io_threads = config.io_threads.max(1) as f64;
        // A load from the host mirror reads nothing: its read time is the fill's, behind the
        // first requests (those loads may wait for it; the copies after it ended do not).
        let read_per_page = if config.host_mirror {
            0.0
        } else {
            c.read_time.as_secs_f64() / pages / io_threads
        };
        // A copy's wall time probed at the start bounds it from below where the transfer
        // queue's timestamps undercount (see `StreamStats::copy_probe`).
        let probe = c.copy_probe.map_or(0.0, |d| d.as_secs_f64());
        let per_page = (copy.as_secs_f64() / timed_pages)
            .max(read_per_page)
            .max(probe);
        if !(per_page > 0.0 && per_page.is_finite()) {
            return bw;
        }
        let measured = streaming_at(bw, self.loaded.page_bytes, per_page, c.handoff_probe);
        log::info!(
            "streaming measured at {:.1} µs a page over {} pages (the workload's model said {:.1} µs)",
            per_page * 1e6,
            c.pages_loaded,
            bw.transfer_s(self.loaded.page_bytes) * 1e6
        );
        measured
    }

    /// Compute steps per submission of this session's stream engine.
    pub fn steps_per_batch(&self) -> u32 {
        self.ex.engine().config().steps_per_batch
    }

    /// The construction the current plan was built by.
    pub fn construction(&self) -> &'static str {
        self.ex.plan().stats.variant
    }

    /// Least compute steps per part of a submission of this session's stream engine.
    pub fn steps_per_part(&self) -> u32 {
        self.ex.engine().config().steps_per_part
    }

    /// Most compute submissions in flight before the host waits (`None`: no limit).
    pub fn host_lead(&self) -> Option<u32> {
        self.ex.engine().config().host_lead
    }

    /// Whether this session's stream engine submits recorded steps as command buffers.
    pub fn step_buffers(&self) -> bool {
        self.ex.engine().config().step_buffers
    }

    /// The transfer model plans use now (measured once calibrated).
    pub fn bandwidth(&self) -> &Bandwidth {
        &self.basis.bandwidth
    }

    /// Asks the planner thread for the plan each pipeline's request would need if it came
    /// next (the predicted one first), so the re-plan at its first model run finds it made.
    pub fn prepare_next(&mut self) {
        // The predicted requests first, then the workload's own pipelines (a model called
        // alone is a pipeline too, but rarely the one that arrives).
        let n = self.loaded.graphs.len();
        let mut order: Vec<usize> = self.predictor.clone().predict();
        order.truncate(1);
        order.extend(0..self.loaded.pipelines.min(n));
        let mut seen = vec![false; n];
        for p in order {
            if p >= n || std::mem::replace(&mut seen[p], true) {
                continue;
            }
            let mut pr = self.predictor.clone();
            pr.arrived(p);
            let rest: Vec<Stage> = predicted_stages(&self.loaded, &pr, p)
                .into_iter()
                .filter(|s| s.count > 0)
                .collect();
            let (pipe, _) = planned_pipeline(&self.loaded, &mut pr, rest);
            self.ahead.prepare(pipe, self.basis.clone());
        }
    }

    /// Waits for the plans [`Self::prepare_next`] asked for (at most `limit`).
    pub fn wait_for_prepared_plans(&self, limit: std::time::Duration) {
        self.ahead.wait_idle(limit);
    }

    /// The profiles the session plans with (calibrated once calibration ran).
    pub fn costs(&self) -> &[Profile] {
        &self.profiles
    }

    pub fn plan(&self) -> &Plan {
        self.ex.plan()
    }

    pub fn predicted_s(&self) -> f64 {
        self.ex.predicted_s()
    }

    pub fn lower_bound_s(&self) -> f64 {
        self.ex.lower_bound_s()
    }

    /// Where the session started cold: its first request alone as planned from disk.
    pub fn first_request_estimate(&self) -> Option<FirstRequestEstimate> {
        self.first_request_estimate
    }

    pub fn kept_pages(&self) -> u64 {
        self.ex.kept_pages()
    }

    pub fn counters(&self) -> vk_backend::StreamStats {
        self.ex.engine().counters()
    }

    /// Pages the stream engine's staging ring holds.
    pub fn staging_pages(&self) -> u32 {
        self.ex.engine().config().staging_slots
    }

    /// Whether the stream engine stopped on a device or I/O error.
    pub fn failed(&self) -> bool {
        self.ex.engine().failed()
    }

    pub fn device(&self) -> &Device {
        &self.dev
    }

    /// Moves what the stream engine did since the last call into the run log.
    fn log_events(&mut self) {
        match self.ex.take_events() {
            Ok((events, dropped)) => {
                // Every GPU-timed copy and batch, for offline analysis of how they interleave.
                if log::log_enabled!(target: JOURNAL_LOG, log::Level::Trace) {
                    for e in &events {
                        log::trace!(target: JOURNAL_LOG, "{e:?}");
                    }
                }
                self.run_log.add(events, dropped)
            }
            Err(e) => log::warn!("reading the stream journal: {e}"),
        }
    }

    /// The last requests' residency as it really ran (see [`RunLog`]).
    pub fn residency_timeline(&mut self) -> scheduler::svg::Timeline {
        self.log_events();
        let engine = self.ex.engine();
        let slots = engine.config().slots;
        let atlas_bytes = slots as u64 * self.loaded.page_bytes;
        let facts = RunFacts {
            workload: &self.loaded.workload.spec.name,
            policy: self.loaded.policy.name(),
            model_names: self.loaded.models.iter().map(|(n, _)| n.clone()).collect(),
            cap_bytes: self.loaded.cap,
            page_bytes: self.loaded.page_bytes,
            slots,
            other_bytes: self
                .dev
                .memory_stats()
                .current_bytes
                .saturating_sub(atlas_bytes),
            now_s: self.ex.clock_s(),
        };
        self.run_log.timeline(&facts)
    }

    /// Bytes of each model's weights resident now.
    pub fn resident_bytes(&self) -> Vec<(String, u64)> {
        let page = self.loaded.page_bytes;
        self.loaded
            .models
            .iter()
            .enumerate()
            .map(|(m, (name, pm))| {
                let n = (0..pm.page_count() as u32)
                    .filter(|&p| self.ex.engine().slot_of(m as u32, p).is_some())
                    .count() as u64;
                (name.clone(), n * page)
            })
            .collect()
    }

    /// Ends the session: waits for the GPU, joins the engine's threads, returns its stats.
    pub fn finish(self) -> Result<vk_backend::StreamStats, EngineError> {
        self.ex
            .finish()
            .map_err(|e| EngineError::Device(e.to_string()))
    }

    /// How many runs the plan has next for the stage it is at (0 when it has none).
    fn planned_runs_ahead(&self) -> (Option<u32>, u32) {
        let t = &self.ex.plan().trace;
        let Some(first) = self.ex.next() else {
            return (None, 0);
        };
        let start = t.steps.len() - self.ex.remaining_steps();
        let mut runs = 0u32;
        let mut last_run = None;
        for s in &t.steps[start..] {
            if s.stage != first.stage || s.rep != first.rep {
                break;
            }
            if last_run != Some(s.run) {
                runs += 1;
                last_run = Some(s.run);
            }
        }
        (Some(first.model), runs)
    }

    /// Why model `m` cannot run on the current plan as it stands, if it cannot.
    fn mismatch(&self, m: usize, rest: &[Stage]) -> Option<Replan> {
        if let Some(r) = self.pending {
            return Some(r);
        }
        let first_run = self.current.is_none_or(|(_, runs)| runs == 0);
        match self.ex.next() {
            None => return Some(Replan::Horizon),
            Some(s) if s.model as usize != m || s.step != 0 => {
                return Some(if first_run {
                    Replan::Request
                } else {
                    Replan::FanOut
                })
            }
            _ => {}
        }
        let (_, runs) = self.planned_runs_ahead();
        match rest.first() {
            Some(st) if st.count != runs => Some(Replan::FanOut),
            _ => None,
        }
    }

    /// Plans `rest` of this request and the predicted requests after it.
    fn replan(&mut self, rest: Vec<Stage>, why: Replan) -> Result<(), EngineError> {
        let r = &mut self.replans;
        match why {
            Replan::Horizon => r.horizon += 1,
            Replan::Request => r.unpredicted_request += 1,
            Replan::FanOut => r.fan_out += 1,
            Replan::Mix => r.mix += 1,
            Replan::Calibration => r.calibration += 1,
        }
        let (pipe, expected) = planned_pipeline(&self.loaded, &mut self.predictor, rest);
        self.expected = expected.into();
        let key = key_of(&pipe.stages);
        let generation = self.basis.generation;
        let plan = match self.ahead.take(&key, generation) {
            Some(plan) => {
                self.replans.prepared += 1;
                plan
            }
            // On the request's path: only the construction that won last time and the ones it
            // must not be slower than (`scheduler::replan`).
            None => {
                plan_under_cap(
                    &self.profiles,
                    &pipe,
                    self.loaded.cap,
                    &self.basis.bandwidth,
                    self.loaded.policy,
                    &self.cost,
                    Choice {
                        previous: Some(self.ex.plan().stats.variant),
                        only: self.basis.only,
                    },
                )?
                .plan
            }
        };
        log::debug!(
            target: "texstream::engine::replan",
            "re-plan ({why:?}): {} over {} steps, {} loads, predicted {:.3} ms (÷ LB {:.3}), stall {:.3} ms, {} forced submissions",
            plan.stats.variant,
            plan.trace.steps.len(),
            plan.stats.loads,
            plan.stats.predicted_s * 1e3,
            plan.stats.ratio,
            plan.stats.total_stall_s * 1e3,
            plan.sim.forced_submits,
        );
        self.ex
            .replan(plan)
            .map_err(|e| EngineError::Device(format!("re-plan: {e}")))?;
        if why == Replan::Calibration {
            self.ex.restart_prediction();
        }
        self.pending = None;
        Ok(())
    }

    fn run_one(
        &mut self,
        call: ModelCall<'_>,
    ) -> Result<Vec<Tensor>, Box<dyn std::error::Error + Send + Sync>> {
        let m = call.model;
        let t_plan = Instant::now();
        if let Some(why) = self.mismatch(m, &call.rest) {
            self.replan(call.rest.clone(), why)?;
        }
        let replanned = t_plan.elapsed().as_secs_f64();
        let t0 = Instant::now();
        // A run of the model that ran last finds its images as it left them: no discard, and
        // inputs still there with the same values are not uploaded again.
        let continuing = self.last_run.take() == Some(m);
        let kept_before = std::mem::take(&mut self.kept_inputs);
        let model = &mut self.models[m];
        if !continuing {
            model.begin_run();
        }
        let mut values = Vec::with_capacity(call.inputs.len());
        let mut kept_after = Vec::new();
        for (name, t) in &call.inputs {
            let want = model.input_shape(name).unwrap_or_default();
            if t.shape() != want.as_slice() {
                return Err(format!(
                    "model `{}` input `{name}` is {want:?}, the value is {:?}",
                    model.name,
                    t.shape()
                )
                .into());
            }
            let key = (name.to_string(), t.content_id());
            let on_device = continuing && kept_before.contains(&key);
            if on_device || model.input_kept_between_runs(name) {
                kept_after.push(key);
            }
            if !on_device {
                values.push((*name, t.f32_values()?));
            }
        }
        let all: Vec<(&str, &[f32])> = values.iter().map(|(n, v)| (*n, &v[..])).collect();
        // Inputs that fit the staging buffer together are copied in the run's first
        // submission: no submission and wait of their own (two per run of a model with two
        // inputs, each a round trip to the GPU). The others go up first, each through the
        // staging buffer in pieces with a wait, so the buffer is free again for the rest.
        let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
        let fitting = model.inputs_fitting(&names, &self.io.up)?;
        let mut inputs = Vec::with_capacity(all.len());
        for (input, fits) in all.into_iter().zip(fitting) {
            if fits {
                inputs.push(input);
            } else {
                model.upload(input.0, input.1, &self.io.up)?;
            }
        }
        if !inputs.is_empty() {
            match model.stage_inputs(&inputs, &self.io.up)? {
                Some(offsets) => {
                    let names: Vec<&str> = inputs.iter().map(|(n, _)| *n).collect();
                    let (model, up) = (&self.models[m], &self.io.up);
                    self.ex
                        .record(|rec| model.record_input_copies(&names, &offsets, up, rec))?;
                }
                // Not expected (`inputs_fitting` chose them): each goes up on its own.
                None => {
                    for (name, data) in &inputs {
                        model.upload(name, data, &self.io.up)?;
                    }
                }
            }
        }
        let t1 = Instant::now();
        let usage1 = ThreadUsage::now();
        let mut v = self.ex.run_model(m as u32, &mut self.models[m])?;
        // Outputs that fit the readback staging together are copied by the run's last
        // submission, read once it has finished.
        let (model, down) = (&self.models[m], &self.io.down);
        let staged = model.output_offsets(&call.outputs, down)?;
        if let Some(offsets) = &staged {
            v = self.ex.record_and_submit(|rec| {
                model.record_output_copies(&call.outputs, offsets, down, rec)
            })?;
        }
        let recorded = ThreadUsage::now().since(&usage1);
        let t2 = Instant::now();
        self.ex.wait(v)?;
        let t3 = Instant::now();
        let mut out = Vec::with_capacity(call.outputs.len());
        for (i, name) in call.outputs.iter().enumerate() {
            let (shape, data) = match &staged {
                Some(offsets) => self.models[m].read_output(name, &self.io.down, offsets[i])?,
                None => self.models[m].download(name, &self.io.down)?,
            };
            out.push(Tensor::f32(shape, data)?);
        }
        let t4 = Instant::now();
        let secs = |a: Instant, b: Instant| (b - a).as_secs_f64();
        let ph = &mut self.timing.phases;
        ph.upload_s += secs(t0, t1);
        ph.replan_s += replanned;
        ph.record_s += secs(t1, t2);
        ph.record_cpu_s += recorded.cpu_s;
        ph.record_sys_s += recorded.sys_s;
        ph.record_faults += recorded.minor_faults;
        ph.record_waits += recorded.waits;
        ph.record_preempted += recorded.preempted;
        ph.wait_s += secs(t2, t3);
        ph.download_s += secs(t3, t4);
        let dt = secs(t0, t4);
        self.timing.model_s += dt;
        if !self.calibrated {
            self.run_times[m].push(dt);
        }
        self.model_runs[m].push(dt);
        self.uses[m] += 1;
        if let Some((_, runs)) = &mut self.current {
            *runs += 1;
        }
        self.last_run = Some(m);
        self.kept_inputs = kept_after;
        Ok(out)
    }

    /// Takes the model run times recorded since the last call.
    pub fn take_model_runs(&mut self) -> Vec<Vec<f64>> {
        let n = self.model_runs.len();
        std::mem::replace(&mut self.model_runs, vec![Vec::new(); n])
    }
}

impl ModelRunner for Session {
    fn run_model(
        &mut self,
        call: ModelCall<'_>,
    ) -> Result<Vec<Tensor>, Box<dyn std::error::Error + Send + Sync>> {
        self.run_one(call)
    }

    /// The count the pipeline's last request had at that step (camera frames look alike).
    fn fan_out_hint(&self, step: usize) -> Option<u32> {
        let (p, _) = self.current?;
        self.predictor.count(p, step)
    }

    fn take_conversation(
        &mut self,
        step: usize,
    ) -> Option<crate::pipeline::generate::Conversation> {
        let (p, _) = self.current?;
        self.conversations.remove(&(p, step))
    }

    fn keep_conversation(&mut self, step: usize, c: crate::pipeline::generate::Conversation) {
        if let Some((p, _)) = self.current {
            self.conversations.insert((p, step), c);
        }
    }

    fn model_uses(&self, model: usize) -> Option<u64> {
        self.uses.get(model).copied()
    }
}

/// `rest` of the current request followed by the predicted requests, as planner stages (each
/// fan-out at its pipeline's last observed count, else the workload's expected one), and the
/// predicted requests' pipelines. Before any request, the first predicted one is planned whole.
/// One request of pipeline `p` as planner stages, each fan-out at the pipeline's last observed
/// count (at most its maximum), else the workload's expected one.
fn predicted_stages(loaded: &Loaded, predictor: &Predictor, p: usize) -> Vec<Stage> {
    loaded.graphs[p].stages(|st, f| {
        predictor
            .count(p, st.index)
            .map_or(f.expected, |c| c.min(f.max))
    })
}

/// `bw` with a page's copy taking `per_page` seconds, nothing more a transfer, and the hand-off
/// between the queues where it was probed: copies and steps that wait on each other in turn pay
/// it at every wait, and a plan that ignores it favours MIN's few free slots (BENCHMARKS.md,
/// session 23).
fn streaming_at(
    bw: Bandwidth,
    page_bytes: u64,
    per_page: f64,
    handoff: Option<std::time::Duration>,
) -> Bandwidth {
    Bandwidth {
        h2d_bytes_per_s: page_bytes as f64 / per_page,
        per_transfer_s: 0.0,
        disk_bytes_per_s: None,
        handoff_s: handoff.map_or(bw.handoff_s, |d| d.as_secs_f64()),
        ..bw
    }
}

/// The prediction and lower bound of request `p` alone, planned from a cold start (`bw` has the
/// disk's read rate) with `costs`: a resident reference's step costs where the caller gave them,
/// else the compile-time estimates.
fn first_request_estimate(
    loaded: &Loaded,
    predictor: &Predictor,
    p: usize,
    costs: Vec<Profile>,
    (cap, bw, cost): (u64, &Bandwidth, &EngineCost),
) -> Result<FirstRequestEstimate, EngineError> {
    let one = Pipeline {
        stages: predicted_stages(loaded, predictor, p),
        repetitions: 1,
    };
    let CappedPlan { plan, .. } = plan_under_cap(
        &costs,
        &one,
        cap,
        bw,
        loaded.policy,
        cost,
        Choice::default(),
    )?;
    Ok(FirstRequestEstimate {
        predicted_s: plan.stats.predicted_s,
        lower_bound_s: plan.stats.lower_bound.bound_s,
    })
}

fn planned_pipeline(
    loaded: &Loaded,
    predictor: &mut Predictor,
    rest: Vec<Stage>,
) -> (Pipeline, Vec<usize>) {
    let mut stages = rest;
    let next = predictor.predict();
    for &p in &next {
        stages.extend(predicted_stages(loaded, predictor, p));
    }
    (
        Pipeline {
            stages,
            repetitions: 1,
        },
        next,
    )
}
