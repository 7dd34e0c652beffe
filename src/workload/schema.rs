//! The workload RON schema: models, pipelines (pre/post-processing and model runs with fan-out),
//! cap, policy, bandwidth and demo inputs. Externally tagged enums, no flatten, so RON errors carry
//! line and column.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A whole workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Workload {
    pub name: String,
    /// Memory cap, a size string such as "24MiB".
    pub cap: String,
    /// Policy name (`planned` when absent).
    #[serde(default)]
    pub policy: Option<String>,
    /// Atlas page size (default "1MiB").
    #[serde(default)]
    pub page_size: Option<String>,
    #[serde(default)]
    pub bandwidth: Option<BandwidthSpec>,
    pub models: Vec<ModelSpec>,
    pub pipelines: Vec<PipelineSpec>,
    #[serde(default)]
    pub demo_inputs: Vec<DemoInput>,
}

/// Transfer model; rates are sizes per second ("12GB" = 12e9 bytes/s).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BandwidthSpec {
    pub h2d_per_s: String,
    #[serde(default)]
    pub per_transfer_us: f64,
    #[serde(default)]
    pub disk_per_s: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Precision {
    #[default]
    F16,
    F32,
}

/// One model of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ModelSpec {
    pub name: String,
    pub source: ModelSource,
    /// Input shapes, name → dims.
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<u64>>,
    #[serde(default)]
    pub precision: Precision,
    /// The compiled (packed) model file; default: the ONNX path with extension `.tspk`.
    #[serde(default)]
    pub packed: Option<String>,
    /// Where the load profile comes from while no packed model exists.
    #[serde(default)]
    pub profile_fallback: Option<ProfileFallback>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ModelSource {
    Onnx(String),
    Packed(String),
    Synthetic(SyntheticModel),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ProfileFallback {
    /// A built-in per-layer size table, e.g. "pp-ocrv6-det", "pp-ocr-mobile-cls", "pp-ocrv6-rec".
    Builtin(String),
    Synthetic(SyntheticModel),
}

/// Synthetic models for planning experiments of any size.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum SyntheticModel {
    Uniform(SyntheticUniform),
    Transformer(SyntheticTransformer),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticUniform {
    pub layers: u32,
    pub bytes_per_layer: String,
    pub compute_per_layer_us: f64,
    #[serde(default)]
    pub activation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SyntheticTransformer {
    pub d_model: u64,
    pub layers: u32,
    pub vocab: u64,
    pub seq_len: u64,
    /// Assumed sustained TFLOP/s for compute-time estimates.
    pub tflops: f64,
}

/// A pipeline: steps in order, repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PipelineSpec {
    pub name: String,
    #[serde(default)]
    pub repeat: Repeat,
    pub steps: Vec<PipelineStep>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum Repeat {
    #[default]
    Once,
    Times(u32),
    /// Runs once per input frame, forever; the planner unrolls this many frames for the steady state.
    PerFrame(u32),
}

/// A pipeline step: a model run or a built-in pre/post-processing step (implemented by the runtime).
/// Values are named by strings; a step's inputs name earlier steps' outputs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum PipelineStep {
    ImageLoad(ImageLoad),
    Normalize(Normalize),
    Run(Run),
    OcrBoxes(OcrBoxes),
    CropRotate(CropRotate),
    AngleFix(AngleFix),
    CtcDecode(CtcDecode),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageLoad {
    pub output: String,
    /// Demo input name or camera source; the runtime decides.
    #[serde(default)]
    pub source: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Normalize {
    pub input: String,
    pub output: String,
    /// Resize to [height, width] first, if given.
    #[serde(default)]
    pub resize: Option<Vec<u32>>,
    pub mean: Vec<f32>,
    pub std: Vec<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub model: String,
    /// Model input name → value name.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Model output name → value name.
    #[serde(default)]
    pub outputs: BTreeMap<String, String>,
    #[serde(default)]
    pub fan_out: FanOut,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FanOut {
    #[default]
    One,
    /// One run per item of a list value (e.g. one per detected box).
    PerItem(PerItem),
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PerItem {
    pub over: String,
    /// Expected item count, used for planning.
    pub expected: u32,
    #[serde(default)]
    pub max: Option<u32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OcrBoxes {
    pub input: String,
    pub output: String,
    #[serde(default)]
    pub thresh: Option<f32>,
    #[serde(default)]
    pub box_thresh: Option<f32>,
    #[serde(default)]
    pub unclip_ratio: Option<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CropRotate {
    pub image: String,
    pub boxes: String,
    pub output: String,
    pub height: u32,
    pub max_width: u32,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AngleFix {
    pub crops: String,
    pub scores: String,
    pub output: String,
    #[serde(default)]
    pub thresh: Option<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CtcDecode {
    pub input: String,
    pub output: String,
    /// Character dictionary file, one entry per line.
    pub dict: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DemoInput {
    pub name: String,
    pub path: String,
}
