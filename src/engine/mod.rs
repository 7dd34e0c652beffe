//! The engine an app backend embeds: open a workload once, then send it requests from memory
//! for hours, from any number of threads, reload the workload while it serves, and read its
//! statistics. `texstream run` and `texstream serve` are clients of this API.
//!
//! ```no_run
//! use texstream::{Engine, EngineOptions, Image, Value};
//!
//! let engine = Engine::open("workloads/camera-ocr.ron", EngineOptions::default())?;
//! let frame = std::fs::read("models/images/page.png")?;
//! let mut inputs = texstream::Values::new();
//! inputs.insert("camera".into(), Value::Image(Image::decode(&frame)?));
//! let response = engine.run("frame", inputs)?;
//! if let Some(Value::TextLines(lines)) = response.outputs.get("text") {
//!     for line in lines {
//!         println!("{:.3} {}", line.score, line.text);
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! How it works: [`Engine::open`] does everything that can fail on bad input before it touches
//! the device ([`loaded`]), then opens the device once and places the workload on it
//! ([`session`]): executors, the shared activation arena, staging, and the stream engine whose
//! atlas holds the weight pages under the cap. One worker thread ([`worker`]) owns that state and
//! takes jobs from a bounded queue; requests of any pipeline (or any single model, by its name)
//! run in arrival order, and the plan follows the observed request mix ([`predict`]).
pub mod error;
pub mod loaded;
pub mod plan_ahead;
pub mod predict;
pub mod request;
pub mod run_log;
pub mod session;
pub mod stats;
pub mod thread_usage;
pub mod worker;

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::Instant;

use crossbeam_channel::{bounded, Sender, TrySendError};
use scheduler::{Policy, Profile};

pub use error::{EngineError, RequestError};
pub use loaded::Loaded;
pub use request::{CancelToken, RequestHandle, Response, SubmitOptions, Values};
pub use stats::{EngineStats, FirstRequestEstimate, Latency, ReplanCounts};
pub use worker::PlanSnapshot;

use session::SessionOptions;
use worker::{Job, Record, RequestJob, Shared, Worker};

use crate::pipeline::{PipelineGraph, ValueType};
use crate::workload::{load_workload, LoadedWorkload};

/// How an engine is opened. Fields left `None` take the workload's (cap, policy) or the
/// environment's (device) values.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// Device memory cap in bytes; default: the workload's `cap`.
    pub cap: Option<u64>,
    /// Residency policy; default: the workload's `policy`.
    pub policy: Option<Policy>,
    /// Which Vulkan device, and how to open it.
    pub device: DeviceChoice,
    /// Requests that may wait in the queue; a full queue answers [`RequestError::Busy`].
    pub queue_depth: usize,
    /// The pipeline the first plan expects (default: the workload's first).
    pub first_pipeline: Option<String>,
    /// Requests after which step costs are calibrated on measured runs (0: never).
    pub calibrate_after: u32,
    /// Step costs to plan with once calibrated, instead of measured ones (a resident
    /// reference run's, so streamed runs are compared with resident compute).
    pub fixed_costs: Option<Vec<Profile>>,
    /// How weight pages stream (every field `None`: the engine's choice).
    pub stream: StreamTuning,
}

/// Knobs of the weight-streaming pipeline (disk → staging ring → copy into the atlas). Each
/// `None` leaves the choice to the engine; the CLI exposes them to measure one against another.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamTuning {
    /// Pages the host-side staging ring holds: how far page reads may run ahead of the copies
    /// that wait for their slots. Default: 64 MiB of pages (6 to 256) in system memory, or one
    /// page where the ring is device memory paid out of the cap.
    pub staging_pages: Option<u32>,
    /// Most page copies in one transfer submission (default 8).
    pub loads_per_submit: Option<u32>,
    /// Build `planned`'s plans with this construction alone (one of
    /// [`scheduler::PLANNED_CONSTRUCTIONS`]) instead of choosing among them in the simulator.
    pub plan_construction: Option<&'static str>,
    /// Threads reading pages into the staging ring (default 4; the host mirror is filled on one
    /// thread per core, at most 16, and at least this many).
    pub io_threads: Option<u32>,
    /// Read every weight page once into pinned host memory and copy each load from there,
    /// instead of reading the page from its file per load. Default: on where that memory is
    /// not device memory (a discrete GPU), the policy streams (not `preload`) and the weights
    /// take at most half the machine's RAM; `Some(true)` where host memory is device memory
    /// counts the mirror against the cap.
    pub host_mirror: Option<bool>,
    /// Compute steps recorded into one submission before it is submitted (default 16). A copy
    /// into a slot waits for its last reader's whole submission, so a long batch over few slots
    /// leaves the copies little time ahead of the steps that need them; a short one pays a
    /// submission more often (on the H200 shorter batches lost: BENCHMARKS.md, session 21).
    pub steps_per_batch: Option<u32>,
    /// Least compute steps per part of a submission (default: the batch's, so a part is cut
    /// only where a copy needs it). Each part waits for its own steps' pages and signals when
    /// it ends, so a copy into a slot waits only for its last reader's part and a part starts
    /// once its own pages have landed: copies and compute overlap inside one submission.
    /// Shorter parts lost on an H100 in session 50's five processes; session 51's 27 with parts
    /// of a batch spread as widely (BENCHMARKS.md, sessions 50 and 51).
    pub steps_per_part: Option<u32>,
    /// Record each model step's commands once and execute that recording on later runs
    /// (default on); `Some(false)` records every step again on every run, as before (to measure
    /// one against the other).
    pub step_reuse: Option<bool>,
    /// Put each recorded step into the submission as a command buffer of its own
    /// (`Some(true)`) instead of emitting its commands again (the default): the host then does
    /// no per-dispatch driver work for a step it has recorded before, but each command buffer
    /// costs the GPU (6.6 µs on an H100, `texstream bench commands`).
    pub step_buffers: Option<bool>,
    /// Most compute submissions in flight before the host waits for the oldest (default: no
    /// limit): keeps the host at most this many batches ahead of the GPU. A diagnostic: held to
    /// the GPU's pace, the resident host recorded no slower (BENCHMARKS.md, session 51).
    pub host_lead: Option<u32>,
    /// The engine starts cold, its packed files out of the page cache, and the disk reads this
    /// many bytes a second: its first plan charges each page's first read before the page's
    /// first copy (`scheduler::Bandwidth::first_read_bytes_per_s`), and the session estimates
    /// the first request alone that way ([`EngineStats::cold_first_request`]).
    /// Later plans are warm. `None`: a warm start.
    pub cold_read_bytes_per_s: Option<u64>,
}

/// Which Vulkan device an engine opens and how: the backend's device options, without its
/// types. The environment is read only by [`DeviceChoice::from_env`], at the application's edge.
#[derive(Debug, Clone, Default)]
pub struct DeviceChoice {
    /// An index into the enumeration order or a name substring; `None`: the preferred device
    /// (discrete > integrated > virtual > CPU).
    pub name: Option<String>,
    /// The Khronos validation layer; any message it reports fails the request or the open.
    pub validation: bool,
    /// Copy weight pages on the compute queue even where a dedicated transfer queue exists.
    pub no_transfer_queue: bool,
    /// Use the portable kernels even where cooperative matrices exist.
    pub no_cooperative_matrix: bool,
    /// Let the engine's threads run on the cores that service the device's interrupts
    /// (`vk_backend::placement`; by default they keep off them).
    pub threads_anywhere: bool,
    /// Read the device's interrupts from a stand-in sysfs and procfs (tests).
    #[doc(hidden)]
    pub interrupt_source: Option<vk_backend::placement::InterruptSource>,
    /// Where to keep the pipeline cache between runs; `None`: in memory only.
    pub pipeline_cache: Option<std::path::PathBuf>,
    /// Treat the device as having at most this many image array layers (the weight atlas then
    /// stacks pages as it does for models larger than a GPU's 2048 layers; for tests).
    pub max_array_layers: Option<u32>,
}

impl DeviceChoice {
    /// What `TEXSTREAM_DEVICE`, `TEXSTREAM_VALIDATION`, `TEXSTREAM_NO_TRANSFER_QUEUE`,
    /// `TEXSTREAM_NO_COOPMAT`, `TEXSTREAM_THREADS_ANYWHERE` and `TEXSTREAM_MAX_ARRAY_LAYERS` say.
    pub fn from_env() -> DeviceChoice {
        let o = vk_backend::DeviceOptions::from_env();
        DeviceChoice {
            name: o.device,
            validation: o.validation,
            no_transfer_queue: o.no_transfer_queue,
            no_cooperative_matrix: o.no_cooperative_matrix,
            threads_anywhere: o.threads_anywhere,
            interrupt_source: None,
            pipeline_cache: o.pipeline_cache_path,
            max_array_layers: o.limits_override.map(|l| l.max_image_array_layers),
        }
    }

    fn options(&self, cap: u64) -> vk_backend::DeviceOptions {
        vk_backend::DeviceOptions {
            device: self.name.clone(),
            validation: self.validation,
            no_transfer_queue: self.no_transfer_queue,
            no_cooperative_matrix: self.no_cooperative_matrix,
            threads_anywhere: self.threads_anywhere,
            interrupt_source: self.interrupt_source.clone(),
            pipeline_cache_path: self.pipeline_cache.clone(),
            memory_cap: Some(cap),
            limits_override: self.max_array_layers.map(|layers| vk_backend::ImageLimits {
                max_image_dimension_2d: u32::MAX,
                max_image_array_layers: layers,
            }),
            ..vk_backend::DeviceOptions::default()
        }
    }
}

impl EngineOptions {
    /// The defaults with the device chosen by the environment ([`DeviceChoice::from_env`]).
    pub fn from_env() -> EngineOptions {
        EngineOptions {
            device: DeviceChoice::from_env(),
            ..EngineOptions::default()
        }
    }
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            cap: None,
            policy: None,
            device: DeviceChoice::default(),
            queue_depth: 64,
            first_pipeline: None,
            calibrate_after: 2,
            fixed_costs: None,
            stream: StreamTuning::default(),
        }
    }
}

/// A pipeline's (or model's) interface: what a request gives and gets.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PipelineInfo {
    pub name: String,
    /// Whether this is one model run on its own (else a workload pipeline).
    pub single_model: bool,
    pub inputs: Vec<PortInfo>,
    pub outputs: Vec<PortInfo>,
}

/// One input or output: name, value type, and shape where it is a fixed tensor.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PortInfo {
    pub name: String,
    pub value_type: String,
    pub shape: Option<Vec<usize>>,
    /// The value type itself (what `value_type` spells), for callers that convert values.
    #[serde(skip)]
    pub ty: ValueType,
}

/// A running engine; cheap to share (`Send + Sync`), every method takes `&self`.
pub struct Engine {
    shared: Arc<Shared>,
    jobs: Mutex<Option<Sender<Job>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    options: EngineOptions,
    next_id: AtomicU64,
    faults: Arc<std::sync::atomic::AtomicU32>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Engine {
    /// Opens the workload file at `path`; see [`Engine::open_workload`].
    pub fn open(path: impl AsRef<Path>, options: EngineOptions) -> Result<Engine, EngineError> {
        Self::open_workload(load_workload(path.as_ref())?, options, &mut |_, _| {})
    }

    /// Checks and compiles the workload (`on_compile(model, why)` before each compilation),
    /// opens the device once, places the workload on it under the cap and starts the worker.
    /// A cap below the workload's minimum fails here, naming the minimum.
    pub fn open_workload(
        w: LoadedWorkload,
        options: EngineOptions,
        on_compile: &mut dyn FnMut(&str, &str),
    ) -> Result<Engine, EngineError> {
        let loaded = loaded::load(w, options.cap, options.policy, on_compile)?;
        Self::open_loaded(loaded, options)
    }

    /// Opens an engine on a workload already checked and compiled ([`loaded::load`]), e.g. one
    /// loaded once and opened under several policies; `options.cap` and `options.policy`
    /// override the loaded ones.
    pub fn open_loaded(mut loaded: Loaded, options: EngineOptions) -> Result<Engine, EngineError> {
        if let Some(c) = options.cap {
            loaded.cap = c;
        }
        if let Some(p) = options.policy {
            loaded.policy = p;
        }
        let loaded = Arc::new(loaded);
        let dev = vk_backend::Device::new(&options.device.options(loaded.cap))
            .map_err(EngineError::device)?;
        let first_pipeline = match &options.first_pipeline {
            Some(n) => loaded.graph_index(n).ok_or_else(|| {
                EngineError::Workload(crate::workload::WorkloadError::Invalid {
                    path: loaded.workload.path.clone(),
                    msg: format!("no pipeline `{n}` (it has {})", loaded.names()),
                })
            })?,
            None => 0,
        };
        let (tx, rx) = bounded(options.queue_depth.max(1));
        let faults = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let shared = Arc::new(Shared {
            record: Mutex::new(Record::default()),
            loaded: RwLock::new(loaded.clone()),
        });
        // The recording thread keeps off the cores that service the device's interrupts
        // (`vk_backend::placement`: on session 52's H100s it needed two to three times its CPU
        // time there).
        let placement = dev.placement().clone();
        let mut worker = Worker {
            dev,
            session: None,
            opts: SessionOptions {
                first_pipeline,
                calibrate_after: options.calibrate_after,
                fixed_costs: options.fixed_costs.clone(),
                stream: options.stream,
                faults: faults.clone(),
            },
            shared: shared.clone(),
            jobs: rx,
            base: Default::default(),
            gpu: (0.0, 0.0, 0.0),
            host_io: (0.0, 0.0, 0.0),
            profiling_s: 0.0,
            measured_s: 0.0,
            settled_prediction: (0.0, 0.0),
            settled_replans: Default::default(),
            settled_kept: 0,
            settled_timing: Default::default(),
        };
        worker.start_session(loaded)?;
        let handle = std::thread::Builder::new()
            .name("texstream-gpu".into())
            .spawn(move || {
                let _placed = placement.place_current_thread();
                worker.run()
            })
            .map_err(|e| EngineError::Device(format!("starting the GPU worker: {e}")))?;
        Ok(Engine {
            shared,
            jobs: Mutex::new(Some(tx)),
            worker: Mutex::new(Some(handle)),
            options,
            next_id: AtomicU64::new(1),
            faults,
        })
    }

    /// Makes the next `n` weight-page reads fail, as a broken disk or device would: the
    /// request that needs them fails, the engine rebuilds its streaming state and serves the
    /// next ones. For tests of that recovery.
    #[doc(hidden)]
    pub fn inject_page_read_failures(&self, n: u32) {
        self.faults.store(n, Ordering::Relaxed);
    }

    fn sender(&self) -> Result<Sender<Job>, RequestError> {
        lock(&self.jobs).clone().ok_or(RequestError::Shutdown)
    }

    /// Queues a request of pipeline (or model) `pipeline`; returns a handle to wait on.
    pub fn submit(
        &self,
        pipeline: &str,
        inputs: Values,
        opts: SubmitOptions,
    ) -> Result<RequestHandle, RequestError> {
        let (reply, rx) = bounded(1);
        let cancel = Arc::new(AtomicBool::new(false));
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let job = Job::Request(RequestJob {
            id,
            pipeline: pipeline.into(),
            inputs,
            deadline: opts.deadline,
            cancel: cancel.clone(),
            enqueued: Instant::now(),
            reply,
        });
        let tx = self.sender()?;
        let busy = || {
            let mut rec = lock(&self.shared.record);
            rec.stats.requests_busy += 1;
            RequestError::Busy { depth: tx.len() }
        };
        match opts.queue_timeout {
            None => match tx.try_send(job) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => return Err(busy()),
                Err(TrySendError::Disconnected(_)) => return Err(RequestError::Shutdown),
            },
            Some(t) => match tx.send_timeout(job, t) {
                Ok(()) => {}
                Err(crossbeam_channel::SendTimeoutError::Timeout(_)) => return Err(busy()),
                Err(crossbeam_channel::SendTimeoutError::Disconnected(_)) => {
                    return Err(RequestError::Shutdown)
                }
            },
        }
        Ok(RequestHandle {
            id,
            reply: rx,
            cancel,
        })
    }

    /// Runs a request and waits for it (a full queue waits too, without bound).
    pub fn run(&self, pipeline: &str, inputs: Values) -> Result<Response, RequestError> {
        self.submit(
            pipeline,
            inputs,
            SubmitOptions {
                queue_timeout: Some(std::time::Duration::from_secs(u64::MAX / 4)),
                ..SubmitOptions::default()
            },
        )?
        .wait()
    }

    /// Swaps in the workload file at `path`: it is checked and compiled here, off the request
    /// path, then swapped in between requests (everything queued before finishes on the old
    /// plan). The old workload's device state is released before the new one is placed, so
    /// the device never holds both. If anything fails, the old workload keeps serving and the
    /// error is returned (and counted).
    pub fn reload(&self, path: impl AsRef<Path>) -> Result<(), EngineError> {
        let w = match load_workload(path.as_ref()) {
            Ok(w) => w,
            Err(e) => return Err(self.failed_reload(e.into())),
        };
        self.reload_workload(w)
    }

    /// [`Engine::reload`] of an already parsed workload.
    pub fn reload_workload(&self, w: LoadedWorkload) -> Result<(), EngineError> {
        let loaded = match loaded::load(w, self.options.cap, self.options.policy, &mut |_, _| {}) {
            Ok(l) => l,
            Err(e) => return Err(self.failed_reload(e)),
        };
        let (reply, rx) = bounded(1);
        let tx = self.sender().map_err(|_| EngineError::Shutdown)?;
        tx.send(Job::Reload {
            loaded: Box::new(loaded),
            reply,
        })
        .map_err(|_| EngineError::Shutdown)?;
        rx.recv().unwrap_or(Err(EngineError::Shutdown))
    }

    fn failed_reload(&self, e: EngineError) -> EngineError {
        let mut rec = lock(&self.shared.record);
        rec.stats.reloads_failed += 1;
        rec.stats.last_reload = Some(stats::ReloadOutcome {
            ok: false,
            message: e.to_string(),
            at_unix_s: std::time::SystemTime::now()
                .duration_since(std::time::SystemTime::UNIX_EPOCH)
                .map_or(0.0, |d| d.as_secs_f64()),
        });
        metrics::counter!(stats::names::RELOADS, "outcome" => "error").increment(1);
        e
    }

    /// A snapshot of the engine's statistics (GPU times count streaming sessions that ended:
    /// see [`Engine::settle`]).
    pub fn stats(&self) -> EngineStats {
        lock(&self.shared.record).snapshot()
    }

    /// Ends the current streaming session after the queued requests, so its GPU times are
    /// counted in [`Engine::stats`], and starts a fresh one (pages are loaded again).
    pub fn settle(&self) -> Result<(), EngineError> {
        let (reply, rx) = bounded(1);
        let tx = self.sender().map_err(|_| EngineError::Shutdown)?;
        tx.send(Job::Settle { reply })
            .map_err(|_| EngineError::Shutdown)?;
        rx.recv().unwrap_or(Err(EngineError::Shutdown))
    }

    /// The plan the worker follows now (after the queued requests).
    pub fn plan(&self) -> Option<PlanSnapshot> {
        let (reply, rx) = bounded(1);
        self.sender().ok()?.send(Job::Plan { reply }).ok()?;
        rx.recv().ok().flatten()
    }

    /// The residency timeline of the last requests as they really ran on the device (page
    /// copies, evictions, compute batches and stalls, timed on the GPU), drawn as SVG. `None`
    /// while the engine has no session.
    pub fn residency_svg(&self) -> Option<String> {
        let (reply, rx) = bounded(1);
        self.sender().ok()?.send(Job::Residency { reply }).ok()?;
        rx.recv().ok().flatten()
    }

    /// The step costs the engine plans with now (measured ones once calibrated), e.g. to give
    /// another engine a resident run's costs ([`EngineOptions::fixed_costs`]).
    pub fn costs(&self) -> Option<Vec<Profile>> {
        let (reply, rx) = bounded(1);
        self.sender().ok()?.send(Job::Costs { reply }).ok()?;
        rx.recv().ok().flatten()
    }

    /// The workload being served.
    pub fn loaded(&self) -> Arc<Loaded> {
        self.shared
            .loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Every pipeline and model a request may name, with its inputs and outputs.
    pub fn pipelines(&self) -> Vec<PipelineInfo> {
        let l = self.loaded();
        l.graphs
            .iter()
            .enumerate()
            .map(|(i, g)| describe(&l, g, i >= l.pipelines))
            .collect()
    }

    /// The options the engine was opened with.
    pub fn options(&self) -> &EngineOptions {
        &self.options
    }

    /// Stops taking requests, finishes the queued ones, ends the session and returns the
    /// final statistics.
    pub fn shutdown(&self) -> EngineStats {
        lock(&self.jobs).take();
        if let Some(h) = lock(&self.worker).take() {
            if h.join().is_err() {
                log::error!("the GPU worker panicked");
            }
        }
        self.stats()
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A pipeline's interface as [`PipelineInfo`].
fn describe(l: &Loaded, g: &PipelineGraph, single_model: bool) -> PipelineInfo {
    // Tensor shapes come from the model ports the values are wired to.
    let shape_of = |id: usize| -> Option<Vec<usize>> {
        if g.values[id].ty != ValueType::Tensor {
            return None;
        }
        g.steps.iter().find_map(|s| match &s.kind {
            crate::pipeline::StepKind::Run {
                model,
                inputs,
                outputs,
                ..
            } => {
                let g = l.models[*model].1.graph();
                inputs
                    .iter()
                    .find(|(_, v)| *v == id)
                    .and_then(|(p, _)| g.inputs.iter().find(|q| &q.name == p))
                    .map(|q| g.tensors[q.tensor].shape.clone())
                    .or_else(|| {
                        outputs
                            .iter()
                            .find(|(_, v)| *v == id)
                            .and_then(|(p, _)| g.outputs.iter().find(|q| &q.name == p))
                            .map(|q| g.port_shape(q).to_vec())
                    })
            }
            _ => None,
        })
    };
    let port = |id: &usize| PortInfo {
        name: g.values[*id].name.clone(),
        value_type: g.values[*id].ty.to_string(),
        shape: shape_of(*id),
        ty: g.values[*id].ty.clone(),
    };
    PipelineInfo {
        name: g.name.clone(),
        single_model,
        inputs: g.inputs.iter().map(port).collect(),
        outputs: g.outputs.iter().map(port).collect(),
    }
}
