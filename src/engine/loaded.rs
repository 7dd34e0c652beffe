//! Everything about a workload that can be checked without a device: the file parsed, its ONNX
//! models compiled where stale, the packed models opened and verified, their load profiles,
//! and every pipeline checked into a DAG (plus one single-step pipeline per model, so each
//! model can be run on its own by name). Opening and reloading do this first, off the request
//! path; only then is the device touched.
use std::collections::BTreeMap;
use std::sync::Arc;

use scheduler::{Bandwidth, Policy, Profile};

use super::error::EngineError;
use crate::compile::auto::{ensure_packed, packed_path};
use crate::packed::{CostModel, PackedModel};
use crate::pipeline::{ModelPorts, PipelineGraph};
use crate::runtime::weights::vk_precision;
use crate::runtime::TensorPrecisions;
use crate::workload::{
    FanOut, LoadedWorkload, ModelSource, PipelineSpec, PipelineStep, Repeat, Run,
};

/// A checked workload, ready to be placed on a device.
#[derive(Clone)]
pub struct Loaded {
    pub workload: LoadedWorkload,
    /// The workload's models in file order, with their packed files.
    pub models: Vec<(String, Arc<PackedModel>)>,
    /// Per model: its load profile at nominal costs (calibrated later on the device).
    pub profiles: Vec<Profile>,
    /// The workload's pipelines in file order, then one pipeline per model named like it.
    pub graphs: Vec<PipelineGraph>,
    /// How many of [`Self::graphs`] are the workload's own pipelines.
    pub pipelines: usize,
    pub cap: u64,
    pub policy: Policy,
    pub bandwidth: Bandwidth,
    pub page_bytes: u64,
}

impl Loaded {
    /// Index of the pipeline (or model) named `name`.
    pub fn graph_index(&self, name: &str) -> Option<usize> {
        self.graphs.iter().position(|g| g.name == name)
    }

    /// The names a request may ask for.
    pub fn names(&self) -> String {
        self.graphs
            .iter()
            .map(|g| format!("`{}`", g.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Weight bytes of all models.
    pub fn weight_bytes(&self) -> u64 {
        self.profiles.iter().map(Profile::weight_bytes).sum()
    }

    /// The precisions model `name` (packed as `pm`) stores its tensors at: its activations as
    /// the workload asks, else as compiled and measured; its key/value cache as its
    /// `KvCacheSpec` asks (unset fields: the defaults `Executable` applies).
    pub fn tensor_precisions(&self, name: &str, pm: &PackedModel) -> TensorPrecisions {
        let spec = self.workload.spec.models.iter().find(|m| m.name == name);
        TensorPrecisions {
            activations: pm
                .header()
                .activations_or_measured(spec.and_then(|m| m.activations))
                .map(vk_precision),
            cache: spec
                .and_then(|m| m.kv_cache.as_ref())
                .and_then(|k| k.precision)
                .map(vk_precision),
        }
    }
}

/// Loads `w`: compiles stale ONNX models (`on_compile(model, why)` before each), opens and
/// verifies every packed model, checks every pipeline. `cap` and `policy` override the file's.
pub fn load(
    w: LoadedWorkload,
    cap: Option<u64>,
    policy: Option<Policy>,
    on_compile: &mut dyn FnMut(&str, &str),
) -> Result<Loaded, EngineError> {
    ensure_packed(&w, on_compile)?;
    let page_bytes = w.page_bytes()?;
    let mut models = Vec::new();
    let mut profiles = Vec::new();
    for m in &w.spec.models {
        let merr = |msg: String| EngineError::Model {
            workload: w.path.clone(),
            model: m.name.clone(),
            msg,
        };
        if let ModelSource::Synthetic(_) = m.source {
            return Err(merr(
                "synthetic models have no weights to run (use `texstream plan`)".into(),
            ));
        }
        let packed = packed_path(&w, m).ok_or_else(|| merr("no packed file".into()))?;
        if !packed.exists() {
            return Err(merr(format!(
                "packed model {} does not exist (paths are relative to the workload file): \
                 compile it with `texstream compile`",
                packed.display()
            )));
        }
        let pm = PackedModel::open_lazy(&packed).map_err(|e| merr(e.to_string()))?;
        if pm.page_bytes() != page_bytes {
            return Err(merr(format!(
                "{} has {}-byte pages, the workload's page_size is {page_bytes}",
                packed.display(),
                pm.page_bytes()
            )));
        }
        let activations = pm.header().activations_or_measured(m.activations);
        profiles.push(
            pm.header()
                .load_profile_at(&m.name, CostModel::NOMINAL, activations),
        );
        models.push((m.name.clone(), Arc::new(pm)));
    }
    if models.is_empty() {
        return Err(EngineError::Workload(
            crate::workload::WorkloadError::Invalid {
                path: w.path.clone(),
                msg: "no models to run".into(),
            },
        ));
    }
    let ports: Vec<ModelPorts> = models.iter().map(|(n, pm)| model_ports(n, pm)).collect();
    let mut graphs = Vec::new();
    for spec in &w.spec.pipelines {
        graphs.push(PipelineGraph::build(&w, spec, &ports)?);
    }
    let pipelines = graphs.len();
    for p in &ports {
        graphs.push(PipelineGraph::build(&w, &single_model(p), &ports)?);
    }
    Ok(Loaded {
        cap: match cap {
            Some(c) => c,
            None => w.cap_bytes()?,
        },
        policy: match policy {
            Some(p) => p,
            None => w.policy()?,
        },
        bandwidth: w.bandwidth()?,
        page_bytes,
        workload: w,
        models,
        profiles,
        graphs,
        pipelines,
    })
}

/// A model's ports as the pipeline checker sees them.
pub fn model_ports(name: &str, pm: &PackedModel) -> ModelPorts {
    let g = pm.graph();
    ModelPorts {
        name: name.into(),
        inputs: g
            .inputs
            .iter()
            .map(|p| (p.name.clone(), g.tensors[p.tensor].shape.clone()))
            .collect(),
        outputs: g
            .outputs
            .iter()
            .map(|p| (p.name.clone(), g.port_shape(p).to_vec()))
            .collect(),
        metadata: pm.header().metadata.clone().into_iter().collect(),
        cache_len: g.state.first().map(|s| g.tensors[s.tensor].shape[s.axis]),
    }
}

/// The pipeline that runs model `p` once: every input and output under its own name.
fn single_model(p: &ModelPorts) -> PipelineSpec {
    let names = |ports: &[(String, Vec<usize>)]| -> BTreeMap<String, String> {
        ports.iter().map(|(n, _)| (n.clone(), n.clone())).collect()
    };
    PipelineSpec {
        name: p.name.clone(),
        repeat: Repeat::Once,
        steps: vec![PipelineStep::Run(Run {
            model: p.name.clone(),
            inputs: names(&p.inputs),
            outputs: names(&p.outputs),
            fan_out: FanOut::One,
        })],
        inputs: None,
        outputs: None,
    }
}
