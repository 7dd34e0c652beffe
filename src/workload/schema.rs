//! The workload RON schema: models, pipelines (pre/post-processing and model runs with fan-out),
//! cap, policy, bandwidth and demo inputs. Externally tagged enums, no flatten, so RON errors carry
//! line and column.
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A whole workload file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
pub struct BandwidthSpec {
    pub h2d_per_s: String,
    #[serde(default)]
    pub per_transfer_us: f64,
    #[serde(default)]
    pub disk_per_s: Option<String>,
}

pub use crate::precision::Precision;

/// One model of the workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSpec {
    pub name: String,
    pub source: ModelSource,
    /// Input shapes, name → dims.
    #[serde(default)]
    pub inputs: BTreeMap<String, Vec<u64>>,
    /// Inputs bound to integer constants at compile time, name → value (Silero VAD's
    /// `{"sr": 16000}`): they leave the model's inputs, and the importer folds on them.
    #[serde(default)]
    pub bind: BTreeMap<String, i64>,
    #[serde(default)]
    pub precision: Precision,
    /// The compiled (packed) model file; default: the ONNX path with extension `.tspk`. With an
    /// `Onnx` source it is kept current from the ONNX file (recompiled when stale).
    #[serde(default)]
    pub packed: Option<String>,
    /// Where the load profile comes from while no packed model exists.
    #[serde(default)]
    pub profile_fallback: Option<ProfileFallback>,
    /// A decoder exported with past keys and values keeps its cache on the device, updated
    /// in place (see `texstream::onnx::KvCache`); `Generate` steps need one.
    #[serde(default)]
    pub kv_cache: Option<KvCacheSpec>,
    /// Precision of the model's activations; default: the one `texstream compile --activations
    /// auto` measured and recorded in the packed file, else its weights' (`precision`). fp32
    /// activations over fp16 weights keep streaming at half the bytes with fp32 arithmetic
    /// (integer inputs past 2048, such as a large vocabulary's token ids, need it).
    #[serde(default)]
    pub activations: Option<Precision>,
}

/// A decoder's key/value cache: its capacity in positions, the input holding a run's first
/// position, and the precision it is stored at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvCacheSpec {
    pub max_len: u32,
    /// Default `position_ids`.
    #[serde(default)]
    pub position_input: Option<String>,
    /// Precision of the cache; default: the model's activations'. `F16` under `F32`
    /// activations halves the cache's share of the cap (the attention reads it at fp16, the
    /// arithmetic stays fp32), as `llama.cpp`'s f16 cache type does; `F32` under `F16`
    /// activations is refused.
    #[serde(default)]
    pub precision: Option<Precision>,
}

impl KvCacheSpec {
    pub fn position_input(&self) -> &str {
        self.position_input.as_deref().unwrap_or("position_ids")
    }
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
#[serde(deny_unknown_fields)]
pub struct SyntheticUniform {
    pub layers: u32,
    pub bytes_per_layer: String,
    pub compute_per_layer_us: f64,
    #[serde(default)]
    pub activation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SyntheticTransformer {
    pub d_model: u64,
    pub layers: u32,
    pub vocab: u64,
    pub seq_len: u64,
    /// Assumed sustained TFLOP/s for compute-time estimates.
    pub tflops: f64,
}

/// A pipeline: steps over named values (a DAG, checked before anything runs), repeated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PipelineSpec {
    pub name: String,
    /// How many requests the planner looks ahead (`PerFrame(n)`, `Times(n)`), and how many
    /// `texstream run` submits by default.
    #[serde(default)]
    pub repeat: Repeat,
    pub steps: Vec<PipelineStep>,
    /// The values a request gives. Default: every value that a step reads and no step writes.
    /// When given, a read of a value that no step writes and that is not listed here is an
    /// error, and so is a listed value that no step reads.
    #[serde(default)]
    pub inputs: Option<Vec<String>>,
    /// The values a request returns. Default: every value that no step reads. When given, a
    /// value that is neither read nor listed here is an error.
    #[serde(default)]
    pub outputs: Option<Vec<String>>,
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
    TextlineTensors(TextlineTensors),
    AngleFix(AngleFix),
    CtcDecode(CtcDecode),
    Generate(Generate),
    AudioLoad(AudioLoad),
    Resample(Resample),
    LogMel(LogMel),
    StreamChunks(StreamChunks),
    VadSegments(VadSegments),
    /// Another step, run only when a condition on a value holds (see [`Gate`]).
    Gate(Gate),
    Tokenize(Tokenize),
    Detokenize(Detokenize),
    ChatTemplate(ChatTemplate),
    Tokens(Tokens),
}

/// Autoregressive decoding: runs a decoder that has a `kv_cache` one token per call, first
/// over the prompt, then on each token it picks, until a stop token or `max_tokens`. Its runs
/// are planned like a fan-out: `expected_prompt + expected_tokens - 1` runs, re-planned when
/// a request differs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Generate {
    pub model: String,
    /// The prompt's token ids.
    pub prompt: String,
    /// The generated token ids (without the stop token).
    pub output: String,
    /// Other model inputs, the same for every call of the request (a speech decoder's
    /// cross-attention keys and values): model input → value.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    pub max_tokens: u32,
    /// Reply length the planner assumes; default `max_tokens`.
    #[serde(default)]
    pub expected_tokens: Option<u32>,
    /// Prompt length the planner assumes; default 16.
    #[serde(default)]
    pub expected_prompt: Option<u32>,
    /// Token ids that end the reply.
    #[serde(default)]
    pub stop: Vec<u32>,
    #[serde(default)]
    pub sampling: Sampling,
    /// The decoder's port names, when they are not `input_ids`, `position_ids`,
    /// `attention_mask` and `logits`.
    #[serde(default)]
    pub ports: Option<DecoderPorts>,
    /// A conversation: the cache and the token history carry over to the pipeline's next
    /// request, whose prompt continues after this reply (one conversation per step of the
    /// engine). When a turn would not fit the cache, the conversation starts over.
    #[serde(default)]
    pub conversation: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, Default)]
pub enum Sampling {
    /// The most likely token (the lowest id among equals).
    #[default]
    Greedy,
    /// A draw from the `top_k` most likely tokens at `temperature`, from a generator seeded
    /// with `seed` (the same seed gives the same reply).
    Sample {
        temperature: f32,
        top_k: u32,
        seed: u64,
    },
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecoderPorts {
    pub input_ids: String,
    pub position_ids: String,
    pub attention_mask: String,
    pub logits: String,
}

impl Default for DecoderPorts {
    fn default() -> Self {
        DecoderPorts {
            input_ids: "input_ids".into(),
            position_ids: "position_ids".into(),
            attention_mask: "attention_mask".into(),
            logits: "logits".into(),
        }
    }
}

/// A fan-out as the workload writes it: `(expected, max)`.
pub type FanCounts = (u32, Option<u32>);

impl PipelineStep {
    /// The model a step runs and its fan-out's `(expected, max)` (`None`: one run), for the
    /// steps that run one.
    pub fn model_runs(&self) -> Option<(&str, Option<FanCounts>)> {
        match self {
            PipelineStep::Run(r) => Some((
                &r.model,
                match &r.fan_out {
                    FanOut::One => None,
                    FanOut::PerItem(pi) => Some((pi.expected, pi.max)),
                },
            )),
            PipelineStep::StreamChunks(c) => Some((&c.model, Some((c.expected, c.max)))),
            PipelineStep::Generate(g) => {
                let prompt = g.expected_prompt.unwrap_or(16);
                let expected = prompt + g.expected_tokens.unwrap_or(g.max_tokens) - 1;
                Some((&g.model, Some((expected, Some(prompt + g.max_tokens)))))
            }
            PipelineStep::Gate(g) => g.step.model_runs(),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageLoad {
    pub output: String,
    /// The request input holding the image (encoded PNG/JPEG or RGB8); another name than
    /// `output`.
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
/// RapidOCR's detector preprocessing of an image (resize within 736..2000 pixels a side,
/// vertical padding of wide images, per-channel mean/std), then a bilinear resize to `resize`
/// when given (a fixed model input). The tensor remembers that geometry, so boxes found on a
/// model output of the same size map back to the image.
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
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
pub struct PerItem {
    pub over: String,
    /// Expected item count, used for planning.
    pub expected: u32,
    /// Most runs per request; default: the larger of `expected` and 64 (see [`Self::max_runs`]).
    #[serde(default)]
    pub max: Option<u32>,
}

impl PerItem {
    /// The most runs one request may make: `max`, else the larger of `expected` and 64.
    pub fn max_runs(&self) -> u32 {
        self.max.unwrap_or(self.expected.max(64))
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
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
#[serde(deny_unknown_fields)]
/// One crop per box, cut from the image the boxes were found on and turned upright-ish
/// (RapidOCR's perspective crop; tall crops are rotated by 90°).
pub struct CropRotate {
    pub image: String,
    pub boxes: String,
    pub output: String,
}

/// Text-line crops → one model input tensor each, `[1, 3, height, width]`, as RapidOCR prepares
/// them for its angle classifier or its recognizer (aspect-preserving resize to `height`,
/// normalization to [-1, 1], zero padding on the right; the recognizer's batches of `batch`
/// crops share the width of their widest crop, and an item wider than `width` is resized to it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TextlineTensors {
    pub input: String,
    pub output: String,
    pub kind: TextlineKind,
    pub height: u32,
    pub width: u32,
    /// Crops per batch (RapidOCR: 6).
    #[serde(default)]
    pub batch: Option<u32>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TextlineKind {
    Classifier,
    Recognizer,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AngleFix {
    pub crops: String,
    pub scores: String,
    pub output: String,
    #[serde(default)]
    pub thresh: Option<f32>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CtcDecode {
    pub input: String,
    pub output: String,
    /// Character dictionary file, one entry per line; when absent or missing, the
    /// recognizer's `character` metadata.
    #[serde(default)]
    pub dict: Option<String>,
    /// The boxes the lines were cut from: gives each line its corners in the original image.
    #[serde(default)]
    pub boxes: Option<String>,
    /// Lines scoring below this are dropped (RapidOCR: 0.5).
    #[serde(default)]
    pub text_score: Option<f64>,
}

/// A request's audio (a WAV file on the wire, or samples) as the pipeline's audio value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AudioLoad {
    pub output: String,
    /// The request input holding the audio; another name than `output`.
    pub source: String,
}

/// Audio converted to another sample rate (rubato's sinc resampler).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resample {
    pub input: String,
    pub output: String,
    /// The rate to convert to, 1..=384000 Hz.
    pub to_hz: u32,
}

/// Whisper's log-mel front end: 16 kHz audio padded or trimmed to 30 s → tensor
/// `[1, n_mels, 3000]`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogMel {
    pub input: String,
    pub output: String,
    /// Mel bands: 80 (default; Whisper up to large-v2) or 128 (large-v3).
    #[serde(default)]
    pub n_mels: Option<u32>,
}

/// A stateful model run over fixed-size chunks of audio, one run per chunk (the last one
/// zero-padded), as Silero VAD's `OnnxWrapper` runs it: each run's input is the last `context`
/// samples of the previous run's input (zeros before the first) followed by the chunk, and the
/// `state` outputs are fed back into their inputs (zeros before the first run).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamChunks {
    pub model: String,
    /// The audio value.
    pub audio: String,
    /// The model input taking `[1, context + chunk]` samples.
    pub input: String,
    /// Samples per chunk.
    pub chunk: u32,
    /// Samples of the previous input carried before each chunk (default 0).
    #[serde(default)]
    pub context: Option<u32>,
    /// The rate the audio must have, if the model needs one (16000 for Silero VAD).
    #[serde(default)]
    pub sample_rate: Option<u32>,
    /// Model output → model input, carried from each run to the next.
    #[serde(default)]
    pub state: BTreeMap<String, String>,
    /// Other model inputs → values, the same tensor for every chunk.
    #[serde(default)]
    pub inputs: BTreeMap<String, String>,
    /// Model output → value: each run's output stacked along a new first axis, `[chunks,
    /// ...output shape]`.
    pub outputs: BTreeMap<String, String>,
    /// Chunks the planner assumes.
    pub expected: u32,
    /// Most chunks one request may have, which bounds the audio's length; default: the larger
    /// of `expected` and 64.
    #[serde(default)]
    pub max: Option<u32>,
}

impl StreamChunks {
    /// The most runs one request may make: `max`, else the larger of `expected` and 64.
    pub fn max_runs(&self) -> u32 {
        self.max.unwrap_or(self.expected.max(64))
    }
}

/// Speech segments of audio from its per-chunk speech probabilities (silero-vad's
/// `get_speech_timestamps` rules): a list of audio, one per segment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VadSegments {
    /// The probabilities: one per chunk, in order (`StreamChunks`' output).
    pub probs: String,
    pub audio: String,
    pub output: String,
    /// Also write the segments' `[start, end)` samples, an integer tensor `[segments, 2]`.
    #[serde(default)]
    pub bounds: Option<String>,
    /// Samples per probability (default 512, Silero VAD's chunk at 16 kHz).
    #[serde(default)]
    pub chunk: Option<u32>,
    /// Speech starts at this probability (default 0.5).
    #[serde(default)]
    pub threshold: Option<f32>,
    /// Speech ends below this (default `threshold - 0.15`, at least 0.01).
    #[serde(default)]
    pub neg_threshold: Option<f32>,
    /// Shorter segments are dropped (default 250).
    #[serde(default)]
    pub min_speech_ms: Option<u32>,
    /// Silence that ends a segment (default 100).
    #[serde(default)]
    pub min_silence_ms: Option<u32>,
    /// Widening on each side (default 30).
    #[serde(default)]
    pub speech_pad_ms: Option<u32>,
}

/// `step`, run only when `when` holds. When it does not, the step is skipped: its outputs are
/// absent, steps that read them are skipped too, and the request returns no value under their
/// names. A skipped model run is planned like a fan-out of 0: the plan assumes the step runs,
/// and the engine re-plans when it does not (and from then on assumes what the last request
/// did).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    pub when: Condition,
    pub step: Box<PipelineStep>,
}

/// A condition on a value, checked when the value exists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Condition {
    /// The value has at least one item: a list, text, token ids, audio samples, boxes or text
    /// lines.
    NonEmpty(String),
    /// The tensor's largest element is above `threshold` (a scalar's value, for one element).
    Above(Threshold),
    /// The tensor's largest element is below `threshold`.
    Below(Threshold),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    pub value: String,
    pub threshold: f32,
}

impl Condition {
    /// The value the condition is on.
    pub fn value(&self) -> &str {
        match self {
            Condition::NonEmpty(v) => v,
            Condition::Above(t) | Condition::Below(t) => &t.value,
        }
    }
}

/// Text → token ids with a Hugging Face `tokenizer.json` (the `tokenizers` crate).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokenize {
    pub input: String,
    pub output: String,
    /// The `tokenizer.json` file (relative to the workload file).
    pub tokenizer: String,
    /// Add the tokenizer's special tokens (its post-processor's; default true, as
    /// `tokenizer.encode` does).
    #[serde(default)]
    pub add_special_tokens: Option<bool>,
}

/// Token ids → text with a Hugging Face `tokenizer.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Detokenize {
    pub input: String,
    pub output: String,
    pub tokenizer: String,
    /// Leave special tokens out of the text (default true).
    #[serde(default)]
    pub skip_special_tokens: Option<bool>,
}

/// A user message in a chat model's prompt format.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ChatTemplate {
    pub input: String,
    pub output: String,
    /// A system message before the user's, if given.
    #[serde(default)]
    pub system: Option<String>,
    pub template: ChatFormat,
}

/// Constant token ids (a speech decoder's start-of-transcript prompt).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Tokens {
    pub output: String,
    pub ids: Vec<u32>,
}

/// Prompt formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ChatFormat {
    /// `<|im_start|>role\ncontent<|im_end|>\n` per message, then `<|im_start|>assistant\n`
    /// (SmolLM2, Qwen).
    ChatML,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DemoInput {
    pub name: String,
    pub path: String,
}
