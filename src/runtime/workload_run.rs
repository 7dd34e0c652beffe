//! `texstream run`: a workload's pipeline, frame after frame, with its models streamed through one
//! atlas under the cap, following the scheduler's timeline.
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

use super::metrics::{names, HeapReading, MemoryRecorder, RunFacts, RunSummary};
use super::run_budget::{measure_engine_cost, min_cap, plan_under_cap, CapError, EngineCost};
use super::run_model::StreamedModel;
use super::run_source::PackedSource;
use super::stream_exec::{StreamExec, StreamExecError};
use super::RuntimeError;
use crate::ops::{self, BgrImage, OcrConfig, TextLine};
use crate::packed::{CostModel, PackedModel};
use crate::workload::profiles::resolve;
use crate::workload::{
    load_workload, FanOut, LoadedWorkload, ModelSource, PipelineSpec, PipelineStep, Repeat,
    WorkloadError,
};

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
}

/// Which workload model plays which OCR role, and the step parameters.
#[derive(Debug, Clone)]
struct OcrRoles {
    det: usize,
    cls: usize,
    rec: usize,
    det_in: String,
    det_out: String,
    cls_in: String,
    cls_out: String,
    rec_in: String,
    rec_out: String,
    cfg: OcrConfig,
    expected: u32,
    max: u32,
}

/// One `Run` step of a chain pipeline: model input → value, model output → value.
#[derive(Debug, Clone)]
struct ChainStep {
    model: usize,
    inputs: Vec<(String, String)>,
    outputs: Vec<(String, String)>,
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

/// Reads a chain pipeline: every step a `Run` without fan-out whose inputs are demo inputs or
/// earlier outputs.
fn chain_shape(
    w: &LoadedWorkload,
    p: &PipelineSpec,
    models: &[(String, Arc<PackedModel>)],
) -> Result<Shape, RunError> {
    let err = |m: String| perr(w, p, m);
    let mut steps = Vec::new();
    let mut known: Vec<String> = Vec::new();
    let mut demo = Vec::new();
    for (i, st) in p.steps.iter().enumerate() {
        let PipelineStep::Run(r) = st else {
            return Err(err(format!(
                "step {i}: a chain pipeline has only Run steps"
            )));
        };
        if r.fan_out != FanOut::One {
            return Err(err(format!(
                "step {i} (`{}`): fan-out runs only in the OCR pipeline",
                r.model
            )));
        }
        let model = w
            .spec
            .models
            .iter()
            .position(|m| m.name == r.model)
            .ok_or_else(|| err(format!("step {i}: unknown model `{}`", r.model)))?;
        for value in r.inputs.values() {
            if known.contains(value) {
                continue;
            }
            let d = w
                .spec
                .demo_inputs
                .iter()
                .find(|d| &d.name == value)
                .ok_or_else(|| {
                    err(format!(
                        "step {i} (`{}`) reads `{value}`, which no earlier step writes and no demo input provides",
                        r.model
                    ))
                })?;
            let path = resolve(w, &d.path);
            let a = super::npy::read_npy(&path)
                .map_err(|e| err(format!("demo input `{value}`: {}: {e}", path.display())))?;
            demo.push((value.clone(), a.shape.clone(), a.data.clone()));
            known.push(value.clone());
        }
        let g = models[model].1.graph();
        for name in r.inputs.keys() {
            if !g.inputs.iter().any(|q| &q.name == name) {
                return Err(err(format!(
                    "step {i}: model `{}` has no input `{name}`",
                    r.model
                )));
            }
        }
        if r.inputs.len() != g.inputs.len() {
            return Err(err(format!(
                "step {i}: model `{}` has {} inputs, the step gives {}",
                r.model,
                g.inputs.len(),
                r.inputs.len()
            )));
        }
        for name in r.outputs.keys() {
            if !g.outputs.iter().any(|q| &q.name == name) {
                return Err(err(format!(
                    "step {i}: model `{}` has no output `{name}`",
                    r.model
                )));
            }
        }
        known.extend(r.outputs.values().cloned());
        steps.push(ChainStep {
            model,
            inputs: r
                .inputs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            outputs: r
                .outputs
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        });
    }
    if steps.is_empty() {
        return Err(err("the pipeline has no steps".into()));
    }
    Ok(Shape::Chain { steps, demo })
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

/// Reads the OCR pipeline's shape: ImageLoad, Normalize, Run(det), OcrBoxes, CropRotate,
/// Run(cls, per item), AngleFix, Run(rec, per item), CtcDecode.
fn ocr_roles(w: &LoadedWorkload, p: &PipelineSpec) -> Result<(OcrRoles, String), RunError> {
    let err = |m: String| perr(w, p, m);
    let model_ix = |name: &str| {
        w.spec
            .models
            .iter()
            .position(|m| m.name == name)
            .ok_or_else(|| err(format!("unknown model `{name}`")))
    };
    let kinds: Vec<&str> = p
        .steps
        .iter()
        .map(|s| match s {
            PipelineStep::ImageLoad(_) => "ImageLoad",
            PipelineStep::Normalize(_) => "Normalize",
            PipelineStep::Run(_) => "Run",
            PipelineStep::OcrBoxes(_) => "OcrBoxes",
            PipelineStep::CropRotate(_) => "CropRotate",
            PipelineStep::AngleFix(_) => "AngleFix",
            PipelineStep::CtcDecode(_) => "CtcDecode",
        })
        .collect();
    let want = [
        "ImageLoad",
        "Normalize",
        "Run",
        "OcrBoxes",
        "CropRotate",
        "Run",
        "AngleFix",
        "Run",
        "CtcDecode",
    ];
    if kinds != want {
        return Err(err(format!(
            "the runtime runs OCR pipelines of the form {want:?}; this one is {kinds:?}"
        )));
    }
    let run = |i: usize| match &p.steps[i] {
        PipelineStep::Run(r) => Ok(r.clone()),
        _ => Err(err(format!("step {i} must be a Run"))),
    };
    let (det, cls, rec) = (run(2)?, run(5)?, run(7)?);
    let one = |r: &crate::workload::Run, what: &str| -> Result<(String, String), RunError> {
        let i = r.inputs.keys().next().cloned();
        let o = r.outputs.keys().next().cloned();
        match (i, o, r.inputs.len(), r.outputs.len()) {
            (Some(i), Some(o), 1, 1) => Ok((i, o)),
            _ => Err(err(format!(
                "the {what} run must name exactly one model input and one output"
            ))),
        }
    };
    let (det_in, det_out) = one(&det, "detector")?;
    let (cls_in, cls_out) = one(&cls, "classifier")?;
    let (rec_in, rec_out) = one(&rec, "recognizer")?;
    let (expected, max) = match &rec.fan_out {
        FanOut::PerItem(pi) => (pi.expected, pi.max.unwrap_or(pi.expected.max(64))),
        FanOut::One => return Err(err("the recognizer run needs a PerItem fan-out".into())),
    };
    let mut cfg = OcrConfig::default();
    if let PipelineStep::Normalize(n) = &p.steps[1] {
        if n.mean.len() != 3 || n.std.len() != 3 || n.std.contains(&0.0) {
            return Err(err("Normalize needs 3 means and 3 non-zero stds".into()));
        }
        // The image is BGR; the workload lists RGB like the model cards.
        cfg.det.mean = [n.mean[2] as f64, n.mean[1] as f64, n.mean[0] as f64];
        cfg.det.std = [n.std[2] as f64, n.std[1] as f64, n.std[0] as f64];
    }
    if let PipelineStep::OcrBoxes(b) = &p.steps[3] {
        if let Some(t) = b.thresh {
            cfg.db.thresh = t;
        }
        if let Some(t) = b.box_thresh {
            cfg.db.box_thresh = t as f64;
        }
        if let Some(u) = b.unclip_ratio {
            cfg.db.unclip_ratio = u as f64;
        }
    }
    if let PipelineStep::AngleFix(a) = &p.steps[6] {
        if let Some(t) = a.thresh {
            cfg.cls_thresh = t;
        }
    }
    let dict = match &p.steps[8] {
        PipelineStep::CtcDecode(c) => c.dict.clone(),
        _ => String::new(),
    };
    Ok((
        OcrRoles {
            det: model_ix(&det.model)?,
            cls: model_ix(&cls.model)?,
            rec: model_ix(&rec.model)?,
            det_in,
            det_out,
            cls_in,
            cls_out,
            rec_in,
            rec_out,
            cfg,
            expected,
            max,
        },
        dict,
    ))
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

/// The OCR pipeline's image and dictionary, and its models' inputs checked.
fn ocr_shape(
    w: &LoadedWorkload,
    pipeline: &PipelineSpec,
    models: &[(String, Arc<PackedModel>)],
    opts: &RunOptions,
    roles: OcrRoles,
    dict_path: &str,
) -> Result<Shape, RunError> {
    let image_path = match &opts.image {
        Some(p) => p.clone(),
        None => {
            let src = match &pipeline.steps[0] {
                PipelineStep::ImageLoad(l) => l.source.clone(),
                _ => None,
            };
            let demo = w
                .spec
                .demo_inputs
                .iter()
                .find(|d| src.as_deref().is_none_or(|s| s == d.name))
                .ok_or_else(|| {
                    perr(
                        w,
                        pipeline,
                        "no demo input for the ImageLoad step (give --image)".into(),
                    )
                })?;
            resolve(w, &demo.path)
        }
    };
    let image = ops::load_image(&image_path)?;
    let dict_file = resolve(w, dict_path);
    let dict = match std::fs::read_to_string(&dict_file) {
        Ok(t) => ops::dict_from_metadata(&t),
        Err(e) => {
            let meta = models[roles.rec]
                .1
                .header()
                .metadata
                .get("character")
                .cloned();
            match meta {
                Some(s) => ops::dict_from_metadata(&s),
                None => {
                    return Err(perr(
                        w,
                        pipeline,
                        format!(
                            "dictionary {}: {e} (and the recognizer has no `character` metadata)",
                            dict_file.display()
                        ),
                    ))
                }
            }
        }
    };
    for (role, ix, input) in [
        ("detector", roles.det, &roles.det_in),
        ("classifier", roles.cls, &roles.cls_in),
        ("recognizer", roles.rec, &roles.rec_in),
    ] {
        let g = models[ix].1.graph();
        if !g.inputs.iter().any(|p| &p.name == input) || g.inputs.len() != 1 {
            return Err(perr(
                w,
                pipeline,
                format!("the {role} must have exactly one input, named `{input}`"),
            ));
        }
    }
    Ok(Shape::Ocr {
        roles: Box::new(roles),
        image,
        dict,
    })
}

/// Pipeline stages for frames with `counts` boxes each, after `partial` (the rest of a frame).
fn stages(r: &OcrRoles, partial: &[Stage], frames: u32, count: u32) -> Pipeline {
    let mut stages = partial.to_vec();
    for _ in 0..frames {
        stages.push(Stage {
            model: r.det,
            count: 1,
        });
        stages.push(Stage {
            model: r.cls,
            count,
        });
        stages.push(Stage {
            model: r.rec,
            count,
        });
    }
    Pipeline {
        stages,
        repetitions: 1,
    }
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
}

/// Bilinear resize of an NCHW tensor's H and W (half-pixel centers).
fn resize_nchw(shape: &[usize], data: &[f32], h2: usize, w2: usize) -> Vec<f32> {
    let (n, c, h, w) = (shape[0], shape[1], shape[2], shape[3]);
    if (h, w) == (h2, w2) {
        return data.to_vec();
    }
    let mut out = vec![0.0f32; n * c * h2 * w2];
    let src = |v: usize, s: usize, d: usize| -> (usize, usize, f32) {
        let x = ((v as f32 + 0.5) * s as f32 / d as f32 - 0.5).max(0.0);
        let x0 = (x.floor() as usize).min(s - 1);
        let x1 = (x0 + 1).min(s - 1);
        (x0, x1, x - x0 as f32)
    };
    for p in 0..n * c {
        let base = &data[p * h * w..(p + 1) * h * w];
        for y in 0..h2 {
            let (y0, y1, fy) = src(y, h, h2);
            for x in 0..w2 {
                let (x0, x1, fx) = src(x, w, w2);
                let a = base[y0 * w + x0] * (1.0 - fx) + base[y0 * w + x1] * fx;
                let b = base[y1 * w + x0] * (1.0 - fx) + base[y1 * w + x1] * fx;
                out[p * h2 * w2 + y * w2 + x] = a * (1.0 - fy) + b * fy;
            }
        }
    }
    out
}

/// Pads (zeros on the right) or resizes the width of a [1, C, H, W] item to `w2`.
fn fit_width(shape: &[usize], data: &[f32], h2: usize, w2: usize) -> Vec<f32> {
    let (c, h, w) = (shape[1], shape[2], shape[3]);
    if h != h2 || w > w2 {
        return resize_nchw(shape, data, h2, w2);
    }
    let mut out = vec![0.0f32; c * h2 * w2];
    for p in 0..c {
        for y in 0..h {
            out[(p * h2 + y) * w2..(p * h2 + y) * w2 + w]
                .copy_from_slice(&data[(p * h + y) * w..(p * h + y) * w + w]);
        }
    }
    out
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
            self.models[m].upload(name, data)?;
        }
        let v = self.ex.run_model(m as u32, &mut self.models[m])?;
        self.ex.wait(v)?;
        let mut out = Vec::with_capacity(outputs.len());
        for name in outputs {
            out.push(self.models[m].download(name)?);
        }
        let dt = t0.elapsed().as_secs_f64();
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
        for (m, p) in self.profiles.iter_mut().enumerate() {
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
    let mut config = opts.stream.unwrap_or_default();
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
    // One input upload or output readback at a time goes through a transient host-visible
    // staging buffer. Uploads always count: on discrete GPUs the allocator may place them in
    // device-local BAR memory. Readbacks (host-cached memory) count only on UMA devices.
    let readback_counts = dev
        .memory()
        .counts_against_cap(vk_backend::MemoryLocation::GpuToCpu);
    let mut io = 0;
    for m in &models {
        io = io.max(m.io_bytes(readback_counts)?);
    }
    let estimate = dev.memory_stats().current_bytes - before + shared.size + io;
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
    let act = dev.memory_stats().current_bytes - before + io;
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
        .map(|(_, pm)| Arc::new(PackedSource::new(pm.clone())) as Arc<dyn PageSource>)
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
        },
    );
    Ok(RunOutcome { summary, frames })
}

/// Runs the chain's steps once, values passed by name; returns the values no step reads.
fn run_chain_frame(d: &mut Driver<'_>) -> Result<Vec<NamedTensor>, RunError> {
    let Shape::Chain { steps, demo } = &d.prep.shape else {
        return Ok(Vec::new());
    };
    let mut values: Vec<NamedTensor> = demo.clone();
    let mut read: Vec<String> = Vec::new();
    for st in steps {
        let inputs: Vec<(&str, &[f32])> =
            st.inputs
                .iter()
                .map(|(input, value)| {
                    let v = values.iter().find(|(n, ..)| n == value).ok_or_else(|| {
                        RunError::Pipeline {
                            workload: d.prep.workload.path.clone(),
                            pipeline: d.prep.pipeline.name.clone(),
                            msg: format!("value `{value}` is missing"),
                        }
                    })?;
                    Ok((input.as_str(), v.2.as_slice()))
                })
                .collect::<Result<_, RunError>>()?;
        let outputs: Vec<&str> = st.outputs.iter().map(|(o, _)| o.as_str()).collect();
        let got = d.run_multi(st.model, &inputs, &outputs)?;
        read.extend(st.inputs.iter().map(|(_, v)| v.clone()));
        for ((_, value), (shape, data)) in st.outputs.iter().zip(got) {
            values.retain(|(n, ..)| n != value);
            values.push((value.clone(), shape, data));
        }
    }
    values.retain(|(n, ..)| !read.contains(n));
    Ok(values)
}

fn run_frame(d: &mut Driver<'_>) -> Result<Vec<TextLine>, RunError> {
    let Shape::Ocr { roles, image, dict } = &d.prep.shape else {
        return Ok(Vec::new());
    };
    let (r, image, dict) = (roles.clone(), image.clone(), dict.clone());
    let det_hw = shape_hw(&d.models[r.det], &r.det_in)?;
    let cls_hw = shape_hw(&d.models[r.cls], &r.cls_in)?;
    let rec_hw = shape_hw(&d.models[r.rec], &r.rec_in)?;
    let mut cfg = r.cfg.clone();
    cfg.cls_hw = cls_hw;
    cfg.rec_hw = rec_hw;
    let cell = std::cell::RefCell::new(d);
    let det = |t: ops::Tensor| -> Result<ops::Tensor, RunError> {
        let (ih, iw) = (t.shape[2], t.shape[3]);
        let x = resize_nchw(&t.shape, &t.data, det_hw.0, det_hw.1);
        let (shape, y) = cell.borrow_mut().run(r.det, &r.det_in, &r.det_out, &x)?;
        let y = resize_nchw(&shape, &y, ih, iw);
        Ok(ops::Tensor::new(vec![1, 1, ih, iw], y)?)
    };
    let per_item = |m: usize, input: &str, output: &str, t: ops::Tensor, hw: (usize, usize)| {
        let n = t.shape[0];
        let item = t.data.len() / n.max(1);
        let mut out = Vec::new();
        let mut oshape = Vec::new();
        for i in 0..n {
            let mut s = t.shape.clone();
            s[0] = 1;
            let x = fit_width(&s, &t.data[i * item..(i + 1) * item], hw.0, hw.1);
            let (sh, y) = cell.borrow_mut().run(m, input, output, &x)?;
            oshape = sh;
            out.extend(y);
        }
        if let Some(b) = oshape.first_mut() {
            *b = n;
        }
        Ok::<_, RunError>(ops::Tensor::new(oshape, out)?)
    };
    let cls = |t: ops::Tensor| per_item(r.cls, &r.cls_in, &r.cls_out, t, cls_hw);
    let rec = |t: ops::Tensor| per_item(r.rec, &r.rec_in, &r.rec_out, t, rec_hw);
    Ok(ops::ocr_pipeline(&image, &cfg, &dict, det, cls, rec)?)
}

fn shape_hw(m: &StreamedModel, input: &str) -> Result<(usize, usize), RunError> {
    match m.input_shape(input).as_deref() {
        Some([_, _, h, w]) => Ok((*h, *w)),
        other => Err(RunError::Model {
            workload: PathBuf::new(),
            model: m.name.clone(),
            msg: format!("input `{input}` must be [N, C, H, W], it is {other:?}"),
        }),
    }
}
