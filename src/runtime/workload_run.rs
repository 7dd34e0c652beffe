//! `texstream run`: a workload's pipeline, frame after frame, with its models streamed through one
//! atlas under the cap, following the scheduler's timeline. The pipeline shapes it runs live in
//! `ocr` (detector → per-box classifier and recognizer) and `chain` (`Run` steps by value name).
//!
//! Order of work: everything that can fail on bad input happens in [`prepare`] (workload parse,
//! model files, packed checksums, the pipeline's shape, the image, the dictionary) before any
//! device exists. [`run_policy`] then builds the executors (activations), measures what they and
//! the engine take, plans under the cap (a cap below the minimum fails here, before any kernel
//! runs), and executes.
//!
//! Fan-out: the plan is made with the workload's expected box counts. When a frame's actual count
//! differs, the run re-plans at the first mismatch ([`StreamExec::replan`]): the rest of the frame
//! with the count seen so far for this frame (a stage with more items than planned is re-planned
//! to its `max`, then trimmed at the next mismatch), and every later frame with the same counts
//! (camera frames look alike). A re-plan starts from an empty atlas, so the cap stays exact.
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use scheduler::{Pipeline, Plan, Policy, Profile, Stage};
use vk_backend::{Device, DeviceOptions, PageSource, StreamConfig};

use super::metrics::{
    names, CpuStages, HeapReading, HostPhases, MemoryRecorder, RunFacts, RunSummary,
};
use super::run_budget::{measure_engine_cost, min_cap, plan_under_cap, CapError, EngineCost};
use super::run_model::StreamedModel;
use super::stream_exec::{StreamExec, StreamExecError};
use super::RuntimeError;
use crate::ops::{self, BgrImage, OcrConfig, TextLine};
use crate::packed::{CostModel, PackedModel};
use crate::workload::profiles::resolve;
use crate::workload::{
    load_workload, FanOut, LoadedWorkload, ModelSource, PipelineSpec, PipelineStep, Repeat,
    WorkloadError,
};

mod chain;
mod ocr;

use chain::{chain_shape, run_chain_frame, ChainStep};
use ocr::{ocr_roles, ocr_shape, run_frame, stages, OcrRoles};

/// Errors of `texstream run`; each says which file, model or step.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("{workload}: model `{model}`: {msg}")]
    Model {
        workload: PathBuf,
        model: String,
        msg: String,
    },
    #[error("{workload}: pipeline `{pipeline}`: {msg}")]
    Pipeline {
        workload: PathBuf,
        pipeline: String,
        msg: String,
    },
    #[error(transparent)]
    Cap(#[from] CapError),
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    #[error(transparent)]
    Stream(#[from] StreamExecError),
    #[error("Vulkan: {0}")]
    Vk(#[from] vk_backend::VkError),
    #[error("OCR: {0}")]
    Ocr(#[from] ops::OcrError),
}

/// Command-line overrides.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub cap: Option<u64>,
    pub iterations: Option<u32>,
    /// Image to use instead of the workload's demo input.
    pub image: Option<PathBuf>,
    pub device: DeviceOptions,
    pub stream: Option<StreamConfig>,
    /// Step costs to plan with after the profiling frame(s) instead of the ones measured in
    /// this run: a resident reference run's ([`RunOutcome::costs`]), so that a streamed run's
    /// predicted time and lower bound come from resident compute, not from its own (possibly
    /// stalled) model runs.
    pub fixed_costs: Option<Vec<Profile>>,
}

/// What the runtime runs for a pipeline.
#[derive(Debug, Clone)]
enum Shape {
    /// The OCR pipeline: detector, per-box classifier and recognizer, with the demo image and
    /// the recognizer's dictionary.
    Ocr {
        roles: Box<OcrRoles>,
        image: BgrImage,
        dict: Vec<String>,
    },
    /// Only `Run` steps without fan-out, each once per frame, values passed by name; the first
    /// values come from the workload's demo inputs (.npy files).
    Chain {
        steps: Vec<ChainStep>,
        demo: Vec<(String, Vec<usize>, Vec<f32>)>,
    },
}

impl Shape {
    /// Stages of `frames` whole frames (OCR: `count` boxes each) after `partial`.
    fn frames(&self, partial: &[Stage], frames: u32, count: u32) -> Pipeline {
        match self {
            Shape::Ocr { roles, .. } => stages(roles, partial, frames, count),
            Shape::Chain { steps, .. } => {
                let mut stages = partial.to_vec();
                for _ in 0..frames {
                    stages.extend(steps.iter().map(|s| Stage {
                        model: s.model,
                        count: 1,
                    }));
                }
                Pipeline {
                    stages,
                    repetitions: 1,
                }
            }
        }
    }

    /// Boxes per frame the first plan assumes (1 for chains).
    fn expected(&self) -> u32 {
        match self {
            Shape::Ocr { roles, .. } => roles.expected,
            Shape::Chain { .. } => 1,
        }
    }
}

/// A checked workload, its packed models opened and verified, before any GPU work.
pub struct Prepared {
    pub workload: LoadedWorkload,
    pub pipeline: PipelineSpec,
    pub models: Vec<(String, Arc<PackedModel>)>,
    pub profiles: Vec<Profile>,
    pub iterations: u32,
    shape: Shape,
}

impl Prepared {
    pub fn cap_bytes(&self, opts: &RunOptions) -> Result<u64, RunError> {
        Ok(match opts.cap {
            Some(c) => c,
            None => self.workload.cap_bytes()?,
        })
    }
}

fn perr(w: &LoadedWorkload, p: &PipelineSpec, msg: String) -> RunError {
    RunError::Pipeline {
        workload: w.path.clone(),
        pipeline: p.name.clone(),
        msg,
    }
}

/// Parses and checks everything; no device is touched.
pub fn prepare(path: &Path, opts: &RunOptions) -> Result<Prepared, RunError> {
    let w = load_workload(path)?;
    let pipeline = w.pipeline_spec(None)?.clone();
    let chain = pipeline
        .steps
        .iter()
        .all(|s| matches!(s, PipelineStep::Run(_)));
    let ocr = if chain {
        None
    } else {
        Some(ocr_roles(&w, &pipeline)?)
    };
    let page_bytes = w.page_bytes()?;
    let mut models = Vec::new();
    let mut profiles = Vec::new();
    for m in &w.spec.models {
        let merr = |msg: String| RunError::Model {
            workload: w.path.clone(),
            model: m.name.clone(),
            msg,
        };
        let packed = match (&m.source, &m.packed) {
            (_, Some(p)) | (ModelSource::Packed(p), None) => resolve(&w, p),
            (ModelSource::Onnx(o), None) => resolve(&w, o).with_extension("tspk"),
            (ModelSource::Synthetic(_), _) => {
                return Err(merr(
                    "synthetic models have no weights to run (use `texstream plan`)".into(),
                ))
            }
        };
        if !packed.exists() {
            return Err(merr(format!(
                "packed model {} does not exist: compile it with `texstream compile` (scripts/main-job.sh does)",
                packed.display()
            )));
        }
        let pm = PackedModel::open(&packed).map_err(|e| merr(e.to_string()))?;
        if pm.page_bytes() != page_bytes {
            return Err(merr(format!(
                "{} has {}-byte pages, the workload's page_size is {page_bytes}",
                packed.display(),
                pm.page_bytes()
            )));
        }
        let prof = pm.load_profile(
            &m.name,
            CostModel {
                flops_per_s: 1e12,
                bytes_per_s: 200e9,
            },
        );
        profiles.push(prof);
        models.push((m.name.clone(), Arc::new(pm)));
    }
    let shape = match ocr {
        None => chain_shape(&w, &pipeline, &models)?,
        Some((roles, dict_path)) => ocr_shape(&w, &pipeline, &models, opts, roles, &dict_path)?,
    };
    let iterations = opts.iterations.unwrap_or(match pipeline.repeat {
        Repeat::Once => 1,
        Repeat::Times(n) | Repeat::PerFrame(n) => n,
    });
    Ok(Prepared {
        workload: w,
        pipeline,
        models,
        profiles,
        iterations: iterations.max(1),
        shape,
    })
}

/// A tensor's shape and values.
type ShapedValues = (Vec<usize>, Vec<f32>);

/// A named tensor value (name, shape, values).
pub type NamedTensor = (String, Vec<usize>, Vec<f32>);

/// One frame's results.
#[derive(Debug, Clone, PartialEq)]
pub struct FrameOutput {
    /// OCR: the recognized lines.
    pub lines: Vec<TextLine>,
    /// Chains: the values no step reads.
    pub tensors: Vec<NamedTensor>,
}

/// What one policy's run produced.
pub struct RunOutcome {
    pub summary: RunSummary,
    pub frames: Vec<FrameOutput>,
    /// The step costs the run planned with after calibration.
    pub costs: Vec<Profile>,
}

struct Driver<'a> {
    prep: &'a Prepared,
    ex: StreamExec,
    models: Vec<StreamedModel>,
    cap: u64,
    policy: Policy,
    cost: EngineCost,
    frame: u32,
    /// Runs of each model done in the current frame.
    done: Vec<u32>,
    /// Step costs the plans use (calibrated after the profiling frame).
    profiles: Vec<Profile>,
    /// Per model: how long its runs took (upload, GPU work, download) until calibration.
    run_times: Vec<Vec<f64>>,
    /// Wall time spent in model runs.
    model_s: f64,
    /// That wall time by phase.
    phases: HostPhases,
    /// OCR CPU stage times.
    cpu_stages: CpuStages,
    /// See [`RunOptions::fixed_costs`].
    fixed_costs: Option<Vec<Profile>>,
    io: IoStaging,
}

/// The staging buffers every upload and readback of a run goes through.
struct IoStaging {
    up: vk_backend::Buffer,
    down: vk_backend::Buffer,
}

impl Driver<'_> {
    /// Runs model `m` on one item; re-plans first when the plan expects something else.
    fn run(
        &mut self,
        m: usize,
        input: &str,
        output: &str,
        data: &[f32],
    ) -> Result<(Vec<usize>, Vec<f32>), RunError> {
        let mut out = self.run_multi(m, &[(input, data)], &[output])?;
        Ok(out.remove(0))
    }

    /// Runs model `m` once on the named inputs and reads back the named outputs.
    fn run_multi(
        &mut self,
        m: usize,
        inputs: &[(&str, &[f32])],
        outputs: &[&str],
    ) -> Result<Vec<ShapedValues>, RunError> {
        let want = self.ex.next().map(|s| s.model as usize);
        if want != Some(m) || self.ex.next().is_some_and(|s| s.step != 0) {
            self.replan(m)?;
        }
        let t0 = Instant::now();
        self.models[m].begin_run();
        for (name, data) in inputs {
            self.models[m].upload(name, data, &self.io.up)?;
        }
        let t1 = Instant::now();
        let v = self.ex.run_model(m as u32, &mut self.models[m])?;
        let t2 = Instant::now();
        self.ex.wait(v)?;
        let t3 = Instant::now();
        let mut out = Vec::with_capacity(outputs.len());
        for name in outputs {
            out.push(self.models[m].download(name, &self.io.down)?);
        }
        let t4 = Instant::now();
        let secs = |a: Instant, b: Instant| (b - a).as_secs_f64();
        self.phases.upload_s += secs(t0, t1);
        self.phases.record_s += secs(t1, t2);
        self.phases.wait_s += secs(t2, t3);
        self.phases.download_s += secs(t3, t4);
        let dt = secs(t0, t4);
        ::metrics::histogram!(names::MODEL_LATENCY, "model" => self.models[m].name.clone())
            .record(dt);
        self.run_times[m].push(dt);
        self.model_s += dt;
        self.done[m] += 1;
        Ok(out)
    }

    /// Plans the rest of the work given that model `m` runs next in this frame.
    fn replan(&mut self, m: usize) -> Result<(), RunError> {
        let left = self.prep.iterations - self.frame - 1;
        let r = match &self.prep.shape {
            Shape::Ocr { roles, .. } => roles,
            Shape::Chain { steps, .. } => {
                // The rest of this frame from model `m`'s step on, then whole frames.
                let ran: u32 = self.done.iter().sum();
                let partial: Vec<Stage> = steps
                    .iter()
                    .skip(ran as usize)
                    .map(|s| Stage {
                        model: s.model,
                        count: 1,
                    })
                    .collect();
                let pipe = self.prep.shape.frames(&partial, left, 1);
                return self.switch_plan(&pipe);
            }
        };
        let mut partial = Vec::new();
        // Counts seen this frame: cls ran `done[cls]` times so far.
        let count = if m == r.cls {
            // More crops than planned: plan up to the bound, trim at the next mismatch.
            let c = r.max.max(self.done[r.cls] + 1);
            partial.push(Stage {
                model: r.cls,
                count: c - self.done[r.cls],
            });
            partial.push(Stage {
                model: r.rec,
                count: c,
            });
            c
        } else if m == r.rec {
            let c = self.done[r.cls].max(self.done[r.rec] + 1);
            partial.push(Stage {
                model: r.rec,
                count: c - self.done[r.rec],
            });
            c
        } else {
            // The detector: a new frame starts where the plan expected more crops.
            let c = self.done[r.cls].max(1);
            partial.extend(stages(r, &[], 1, c).stages);
            c
        };
        let pipe = stages(r, &partial, left, count);
        self.switch_plan(&pipe)
    }

    /// Plans `pipe` under the cap and switches the executor to it.
    fn switch_plan(&mut self, pipe: &Pipeline) -> Result<(), RunError> {
        let plan = plan_under_cap(
            &self.profiles,
            pipe,
            self.cap,
            &self.prep.workload.bandwidth()?,
            self.policy,
            &self.cost,
        )?;
        self.ex.replan(plan)?;
        Ok(())
    }
}

impl Driver<'_> {
    /// After the profiling frame: scales each model's step costs so that a run costs what its
    /// median run took (the compile-time estimates assume a nominal device), then plans the
    /// remaining frames with them and counts predictions from there.
    fn calibrate(&mut self) -> Result<(), RunError> {
        if let Some(fixed) = &self.fixed_costs {
            for (p, f) in self.profiles.iter_mut().zip(fixed) {
                for (s, fs) in p.steps.iter_mut().zip(&f.steps) {
                    s.compute_s = fs.compute_s;
                }
            }
        }
        for (m, p) in self.profiles.iter_mut().enumerate() {
            if self.fixed_costs.is_some() {
                break;
            }
            let times = &mut self.run_times[m];
            times.sort_by(f64::total_cmp);
            let (t, est) = (times.get(times.len() / 2).copied(), p.compute_s());
            if let (Some(t), true) = (t, est > 0.0) {
                let k = t / est;
                for s in &mut p.steps {
                    s.compute_s *= k;
                }
            }
        }
        let left = self.prep.iterations - self.frame - 1;
        let count = match &self.prep.shape {
            Shape::Ocr { roles, .. } => self.done[roles.cls].max(1),
            Shape::Chain { .. } => 1,
        };
        let pipe = self.prep.shape.frames(&[], left, count);
        self.switch_plan(&pipe)?;
        self.ex.restart_prediction();
        self.model_s = 0.0;
        self.phases = HostPhases::default();
        self.cpu_stages = CpuStages::default();
        Ok(())
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

/// Largest upload (or, on UMA, I/O) staging buffer (larger than any image row: rows are at
/// most 32768 texels of 8 bytes here).
const IO_STAGING_PIECE_BYTES: u64 = 1 << 19;
/// Staging ring pages where the ring counts against the cap.
const UMA_STAGING_SLOTS: u32 = 1;

/// Runs the prepared workload under `cap` with `policy` on a fresh device.
pub fn run_policy(
    prep: &Prepared,
    opts: &RunOptions,
    policy: Policy,
    progress: Option<&indicatif::ProgressBar>,
) -> Result<RunOutcome, RunError> {
    let cap = prep.cap_bytes(opts)?;
    let dev = Device::new(&DeviceOptions {
        memory_cap: Some(cap),
        ..opts.device.clone()
    })?;
    let mut config = opts.stream.unwrap_or_else(|| {
        let mut c = StreamConfig::default();
        // A staging ring in device memory (UMA) is paid for out of the cap: keep it double
        // buffered rather than six pages deep.
        if c.staging_memory.counts_against_cap(&dev) {
            c.staging_slots = c.staging_slots.min(UMA_STAGING_SLOTS);
        }
        c
    });
    let first = &prep.models[0].1;
    config.precision = super::weights::vk_precision(first.header().precision);
    config.page_height = Some((first.header().texels_per_page / 512) as u32);
    let before = dev.memory_stats().current_bytes;
    let mut models = Vec::new();
    let mut base = 0u32;
    for (i, (name, pm)) in prep.models.iter().enumerate() {
        if let Some(p) = progress {
            p.set_message(format!("building {name}"));
            p.set_position(i as u64);
        }
        let sm = StreamedModel::new(&dev, name, pm.clone(), base)?;
        base += pm.page_count() as u32;
        models.push(sm);
    }
    // The models run one at a time, so their activation arenas overlay one memory: the largest
    // arena, not the sum, counts against the cap.
    let mut layouts = Vec::with_capacity(models.len());
    let mut shared = vk_backend::SharedMemoryLayout::default();
    for m in &models {
        let (offsets, layout) = m.arena_layout()?;
        let a = m.executable().arena_stats();
        log::info!(
            "model `{}`: activation arena {} B packed by liveness (live peak {} B, {} tensors)",
            m.name,
            layout.size,
            a.live_peak_bytes,
            a.tensors
        );
        shared = shared.overlay(&layout);
        layouts.push(offsets);
    }
    // Fail a too-small cap before the big allocations: the arena's size is known from the
    // layouts, and what is allocated so far (constants) is counted. Scratch tensors made by the
    // warm-up are the only part this estimate misses; the exact check follows below.
    let cost = measure_engine_cost(&dev, &config, base)?;
    // Inputs go up and outputs come back through host-visible staging kept for the whole run,
    // sized for the largest of each. Where host-visible memory is device memory (UMA) one
    // buffer serves both directions and counts. Otherwise there are two: the upload buffer
    // counts where the allocator places it in device-local (BAR) memory, the readback buffer
    // lives in host memory.
    let shared_io = vk_backend::StagingDirection::Download.counts_against_cap(&dev);
    let (mut up_bytes, mut down_bytes) = (0, 0);
    for m in &models {
        up_bytes = up_bytes.max(m.staging_bytes(true)?);
        down_bytes = down_bytes.max(m.staging_bytes(false)?);
    }
    use vk_backend::StagingDirection as Dir;
    let up_dir = if shared_io { Dir::Both } else { Dir::Upload };
    let up_size = if shared_io {
        up_bytes.max(down_bytes)
    } else {
        up_bytes
    };
    // The upload buffer (on UMA the one buffer) is one piece at most: it counts against the
    // cap wherever the allocator puts it in device-local memory (UMA, or the BAR of a discrete
    // GPU), and larger tensors go through it in row blocks (the detector's input is 2.4 MB, the
    // recognizer's logits 3.6 MB). The separate readback buffer lives in host memory.
    let up_size = up_size.min(IO_STAGING_PIECE_BYTES);
    let io = vk_backend::Buffer::staging_requirements(&dev, up_size, up_dir)?.size;
    let stats = dev.memory_stats();
    log::info!(
        "before the arena: {} B allocated by the models (by category {:?}), I/O staging {io} B",
        stats.current_bytes - before,
        stats.category_bytes
    );
    let estimate = stats.current_bytes - before + shared.size + io;
    let pipe = prep
        .shape
        .frames(&[], prep.iterations, prep.shape.expected());
    plan_under_cap(
        &with_activation(&prep.profiles, estimate),
        &pipe,
        cap,
        &prep.workload.bandwidth()?,
        policy,
        &cost,
    )?;
    let arena = vk_backend::SharedMemory::new(
        &dev,
        "activation arena (all models)",
        &shared,
        vk_backend::MemoryCategory::Activations,
    )?;
    for (m, offsets) in models.iter_mut().zip(&layouts) {
        m.bind_arena(&arena, offsets)?;
        m.warm_up()?;
    }
    let up = vk_backend::Buffer::staging(&dev, "I/O staging", up_size, up_dir)?;
    let io = IoStaging {
        down: if shared_io {
            up.clone()
        } else {
            vk_backend::Buffer::staging(&dev, "output staging", down_bytes, Dir::Download)?
        },
        up,
    };
    let act = dev.memory_stats().current_bytes - before;
    log::info!(
        "activations: shared arena {} B; per category {:?} (weights, activations, staging, \
         scratch); carried by every step {act} B",
        arena.size(),
        dev.memory_stats().category_bytes,
    );
    // The shared arena and every model's own scratch and constants stay allocated for the whole
    // run: each step carries all of them.
    let profiles = with_activation(&prep.profiles, act);
    let prep_local = Prepared {
        workload: prep.workload.clone(),
        pipeline: prep.pipeline.clone(),
        models: prep.models.clone(),
        profiles,
        iterations: prep.iterations,
        shape: prep.shape.clone(),
    };
    let prep = &prep_local;
    let bw = prep.workload.bandwidth()?;
    let pipe = prep
        .shape
        .frames(&[], prep.iterations, prep.shape.expected());
    let min = min_cap(&prep.profiles, &pipe, &cost)?;
    let plan: Plan = plan_under_cap(&prep.profiles, &pipe, cap, &bw, policy, &cost)?;
    let slots = plan.slots;
    let sources: Vec<Arc<dyn PageSource>> = prep
        .models
        .iter()
        .map(|(_, pm)| pm.clone() as Arc<dyn PageSource>)
        .collect();
    let ex = StreamExec::new(&dev, config, sources, plan)?;
    for m in &mut models {
        m.attach(ex.engine());
    }
    let rec = MemoryRecorder::default();
    let mut driver = Driver {
        prep,
        ex,
        models,
        cap,
        policy,
        cost,
        frame: 0,
        done: vec![0; prep.models.len()],
        profiles: prep.profiles.clone(),
        run_times: vec![Vec::new(); prep.models.len()],
        model_s: 0.0,
        phases: HostPhases::default(),
        cpu_stages: CpuStages::default(),
        fixed_costs: opts.fixed_costs.clone(),
        io,
    };
    let calibrate = prep.iterations > 1;
    // Profiling frames: the first one also pays one-time costs (pipeline creation, first
    // touches), so with enough frames the step costs come from the second.
    let profile_frames = if prep.iterations >= 3 { 2 } else { 1 };
    let mut t0 = Instant::now();
    let mut profiling_frame_s = 0.0;
    let frames = ::metrics::with_local_recorder(&rec, || -> Result<Vec<FrameOutput>, RunError> {
        let mut frames = Vec::new();
        for f in 0..prep.iterations {
            if let Some(p) = progress {
                p.set_message(format!("{policy}: frame {}/{}", f + 1, prep.iterations));
            }
            driver.frame = f;
            driver.done.iter_mut().for_each(|d| *d = 0);
            if f + 1 == profile_frames {
                driver.run_times.iter_mut().for_each(Vec::clear);
            }
            let tf = Instant::now();
            let lines = match &prep.shape {
                Shape::Ocr { .. } => FrameOutput {
                    lines: run_frame(&mut driver)?,
                    tensors: Vec::new(),
                },
                Shape::Chain { .. } => FrameOutput {
                    lines: Vec::new(),
                    tensors: run_chain_frame(&mut driver)?,
                },
            };
            ::metrics::histogram!(names::PIPELINE_LATENCY, "pipeline" => prep.pipeline.name.clone())
                .record(tf.elapsed().as_secs_f64());
            frames.push(lines);
            if calibrate && f + 1 == profile_frames {
                profiling_frame_s = t0.elapsed().as_secs_f64();
                driver.calibrate()?;
                t0 = Instant::now();
            }
        }
        Ok(frames)
    })?;
    let measured_s = t0.elapsed().as_secs_f64();
    let (phases, costs) = (driver.phases, driver.profiles.clone());
    let cpu_stages = matches!(prep.shape, Shape::Ocr { .. }).then_some(driver.cpu_stages);
    let (predicted_s, lower_bound_s, replans, kept_pages, model_s) = (
        driver.ex.predicted_s(),
        driver.ex.lower_bound_s(),
        driver.ex.replans(),
        driver.ex.kept_pages(),
        driver.model_s,
    );
    let stats = driver.ex.finish()?;
    // With TEXSTREAM_VALIDATION=1 any validation message fails the run (the tests rely on it).
    dev.check_validation()?;
    let mem = dev.memory_stats();
    let budget = dev.memory_budget().map(|hs| {
        hs.into_iter()
            .filter(|h| h.device_local)
            .map(|h| HeapReading {
                heap: h.heap_index,
                budget_bytes: h.budget,
                usage_bytes: h.usage,
            })
            .collect()
    });
    ::metrics::with_local_recorder(&rec, || {
        ::metrics::counter!(names::BYTES_STREAMED).increment(stats.bytes_streamed);
        ::metrics::counter!(names::PAGES_LOADED).increment(stats.pages_loaded);
        ::metrics::counter!(names::EVICTIONS).increment(stats.evictions);
        let s = |d: Option<std::time::Duration>| d.map_or(0.0, |d| d.as_secs_f64());
        ::metrics::gauge!(names::STALL).set(s(stats.compute_stall));
        ::metrics::gauge!(names::TRANSFER_BUSY).set(s(stats.transfer_busy));
        ::metrics::gauge!(names::COMPUTE_BUSY).set(s(stats.compute_busy));
        ::metrics::gauge!(names::PEAK_DEVICE_BYTES).set(mem.peak_bytes as f64);
        ::metrics::gauge!(names::CAP_BYTES).set(cap as f64);
    });
    let summary = RunSummary::build(
        &rec,
        RunFacts {
            workload: prep.workload.spec.name.clone(),
            policy: policy.name().into(),
            iterations: prep.iterations,
            cap_bytes: cap,
            min_cap_bytes: min,
            slots,
            replans,
            measured_s,
            predicted_s,
            lower_bound_s,
            vk_memory_budget: budget,
            calibrated: calibrate,
            profiling_frame_s,
            model_s,
            kept_pages,
            phases,
            cpu_stages,
        },
    );
    Ok(RunOutcome {
        summary,
        frames,
        costs,
    })
}
