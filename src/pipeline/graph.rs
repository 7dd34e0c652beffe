//! A pipeline checked into a DAG before anything runs: every step's values typed, every name
//! defined once, no cycles, model ports matched, and the steps in an order that respects their
//! data dependencies (file order where they have none). Errors carry `file:line:col` of the step.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use scheduler::Stage;

use super::value::ValueType;
use crate::ops::{CtcDecoder, DbParams};
use crate::workload::{
    Condition, FanOut, LoadedWorkload, PipelineSpec, PipelineStep, Repeat, TextlineKind,
};

/// A value's index in [`PipelineGraph::values`].
pub type ValueId = usize;

/// A model as the pipeline sees it: its name and ports (name, shape).
#[derive(Clone, Debug)]
pub struct ModelPorts {
    pub name: String,
    pub inputs: Vec<(String, Vec<usize>)>,
    pub outputs: Vec<(String, Vec<usize>)>,
    /// The model's metadata (the OCR recognizer's `character` dictionary).
    pub metadata: BTreeMap<String, String>,
    /// Positions its key/value cache holds, when it keeps one.
    pub cache_len: Option<usize>,
}

/// A pipeline that failed its checks: where, and why.
#[derive(Debug, thiserror::Error)]
#[error("{location}: pipeline `{pipeline}` {}: {msg}", self.place())]
pub struct GraphError {
    pub location: String,
    pub pipeline: String,
    pub step: usize,
    /// The step's label (`Run(det)`), or the pipeline field the error is about (`inputs`,
    /// `outputs`, `steps`), which is lowercase.
    pub kind: String,
    pub msg: String,
}

impl GraphError {
    /// `step 3 (Run(det))`, or `` `inputs` `` for an error about a pipeline field.
    fn place(&self) -> String {
        if self.kind.starts_with(char::is_lowercase) {
            format!("`{}`", self.kind)
        } else {
            format!("step {} ({})", self.step, self.kind)
        }
    }
}

/// The name among `known` that `name` is most likely a misspelling of, as ` (did you mean
/// `x`?)`, or nothing.
fn did_you_mean<'a>(name: &str, known: impl IntoIterator<Item = &'a str>) -> String {
    let best = known
        .into_iter()
        .filter(|k| *k != name)
        .map(|k| (strsim::levenshtein(name, k), k))
        .min();
    match best {
        Some((d, k)) if d <= 2 || d * 3 <= name.chars().count() => {
            format!(" (did you mean `{k}`?)")
        }
        _ => String::new(),
    }
}

/// One named value of the pipeline.
#[derive(Clone, Debug)]
pub struct ValueInfo {
    pub name: String,
    pub ty: ValueType,
    /// The step (index into [`PipelineGraph::steps`]) that writes it; `None` for inputs.
    pub producer: Option<usize>,
    /// For lists: the value whose length this one always has (itself if none), so that a
    /// fan-out's count is known as soon as that value exists.
    pub len_root: ValueId,
}

/// A model run's fan-out: how many times a step runs its model in one request.
#[derive(Clone, Debug)]
pub struct Fan {
    /// The value the count follows.
    pub over: ValueId,
    pub expected: u32,
    pub max: u32,
    /// How the count follows it.
    pub per: Per,
}

/// What one run of a fan-out takes from the value it follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Per {
    /// One run per list item (or box).
    Item,
    /// One run per this many audio samples (the last chunk padded).
    Chunk(usize),
    /// One run per token a decoder reads or writes (known only once decoding stops).
    Token,
    /// One run, or none when a gate skips the step (`over` is the gate's value).
    Once,
}

impl Fan {
    /// The run count for `v`, the value the fan-out follows (or one of the same length).
    pub fn count_for(&self, v: &super::value::Value) -> Option<u32> {
        use super::value::Value;
        let n = match (self.per, v) {
            (Per::Item, Value::List(l)) => l.len(),
            (Per::Item, Value::Boxes(b)) => b.len(),
            (Per::Chunk(c), Value::Audio(a)) => a.samples.len().div_ceil(c.max(1)),
            (Per::Once, _) => 1,
            _ => return None,
        };
        Some(u32::try_from(n).unwrap_or(u32::MAX))
    }
}

/// A step's gate: the value its condition is on, and the test.
#[derive(Clone, Debug)]
pub struct GateTest {
    pub value: ValueId,
    pub test: Test,
}

/// The condition of a gate, resolved.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Test {
    NonEmpty,
    Above(f32),
    Below(f32),
}

impl GateTest {
    /// Whether the step runs, given the gate's value.
    pub fn holds(&self, v: &super::value::Value) -> Result<bool, String> {
        use super::value::Value;
        let top = |v: &Value| -> Result<f32, String> {
            let Value::Tensor(t) = v else {
                return Err(format!(
                    "the gate's value is {}, not a tensor",
                    v.value_type()
                ));
            };
            let x = t.to_f32().map_err(|e| e.to_string())?;
            x.into_iter()
                .reduce(f32::max)
                .ok_or_else(|| "the gate's tensor is empty".to_string())
        };
        Ok(match self.test {
            Test::NonEmpty => match v {
                Value::List(l) => !l.is_empty(),
                Value::Text(t) => !t.is_empty(),
                Value::Tokens(t) => !t.is_empty(),
                Value::Audio(a) => !a.samples.is_empty(),
                Value::Boxes(b) => !b.is_empty(),
                Value::TextLines(l) => !l.is_empty(),
                other => {
                    return Err(format!(
                    "NonEmpty cannot test {} (lists, text, token ids, audio, boxes, text lines)",
                    other.value_type()
                ))
                }
            },
            Test::Above(t) => top(v)? > t,
            Test::Below(t) => top(v)? < t,
        })
    }

    /// Whether a gate of this kind can test a value of type `ty`.
    fn takes(&self, ty: &ValueType) -> bool {
        match self.test {
            Test::NonEmpty => !matches!(ty, ValueType::Tensor | ValueType::Image),
            Test::Above(_) | Test::Below(_) => matches!(ty, ValueType::Tensor | ValueType::Any),
        }
    }
}

/// A stateful model run over audio chunks, resolved (see [`crate::workload::StreamChunks`]).
#[derive(Clone, Debug)]
pub struct Stream {
    pub model: usize,
    /// The model input taking the samples, and its shape (`[1, context + chunk]`).
    pub input: (String, Vec<usize>),
    pub chunk: usize,
    pub context: usize,
    pub sample_rate: Option<u32>,
    /// (output, input, shape) carried between runs, zeros first.
    pub state: Vec<(String, String, Vec<usize>)>,
    /// (model input, value) given the same tensor every run.
    pub inputs: Vec<(String, ValueId)>,
    /// (model output, its shape, value) stacked over the runs.
    pub outputs: Vec<(String, Vec<usize>, ValueId)>,
    /// Over the audio value, in chunks.
    pub fan: Fan,
}

/// What a step does, with its parameters resolved.
#[derive(Clone, Debug)]
pub enum StepKind {
    ImageLoad,
    /// RapidOCR detector preprocessing; mean and std in BGR order (the image's).
    Normalize {
        resize: Option<(usize, usize)>,
        mean: [f64; 3],
        std: [f64; 3],
    },
    Run {
        model: usize,
        /// (model input, value) in the model's input order.
        inputs: Vec<(String, ValueId)>,
        /// (model output, value).
        outputs: Vec<(String, ValueId)>,
        fan: Option<Fan>,
    },
    OcrBoxes(DbParams),
    CropRotate,
    TextlineTensors {
        kind: TextlineKind,
        height: usize,
        width: usize,
        batch: usize,
    },
    AngleFix {
        thresh: f32,
    },
    CtcDecode {
        decoder: Arc<CtcDecoder>,
        text_score: f64,
    },
    AudioLoad,
    Resample {
        to_hz: u32,
    },
    LogMel {
        n_mels: usize,
    },
    StreamChunks(Box<Stream>),
    /// Autoregressive decoding (see [`crate::workload::Generate`]); reads the prompt first,
    /// then `inputs`' values; `fan` counts its model runs (`over` is the prompt).
    Generate {
        model: usize,
        /// (model input, value) given to every call.
        inputs: Vec<(String, ValueId)>,
        fan: Fan,
        max_tokens: u32,
        stop: Vec<u32>,
        sampling: crate::workload::Sampling,
        ports: crate::workload::DecoderPorts,
        /// The model's cache positions (prompt plus reply must fit).
        cache_len: usize,
        /// The cache and the token history carry over to the pipeline's next request.
        conversation: bool,
    },
    VadSegments {
        chunk: usize,
        rules: crate::audio::SegmentRules,
    },
    Tokenize {
        tokenizer: super::steps::text::SharedTokenizer,
        add_special_tokens: bool,
    },
    Detokenize {
        tokenizer: super::steps::text::SharedTokenizer,
        skip_special_tokens: bool,
    },
    ChatTemplate {
        system: Option<String>,
        format: crate::workload::ChatFormat,
    },
    /// Constant token ids.
    Tokens(Vec<u32>),
}

impl StepKind {
    /// The model a step runs and its fan-out (`None`: one run), for steps that run one.
    pub fn model_runs(&self) -> Option<(usize, Option<&Fan>)> {
        match self {
            StepKind::Run { model, fan, .. } => Some((*model, fan.as_ref())),
            StepKind::StreamChunks(s) => Some((s.model, Some(&s.fan))),
            StepKind::Generate { model, fan, .. } => Some((*model, Some(fan))),
            _ => None,
        }
    }
}

/// One step of the checked pipeline.
#[derive(Clone, Debug)]
pub struct StepNode {
    /// Its index in the workload file's step list.
    pub index: usize,
    /// `Run(det)`, `OcrBoxes`, ...: for errors and per-step timings.
    pub label: String,
    pub kind: StepKind,
    /// Values read, in the kind's order (see [`signature`]); for `Run`, the inputs' values.
    pub reads: Vec<ValueId>,
    /// Values written.
    pub writes: Vec<ValueId>,
    /// The step's own gate, if it has one.
    pub gate: Option<GateTest>,
    /// Whether the step can be skipped: it has a gate, or it reads a value that a skippable
    /// step writes (skipped when that value is absent).
    pub skippable: bool,
    /// The planner's view of its model runs (`None`: one, always): its fan-out, or one run
    /// that a gate can skip.
    pub runs: Option<Fan>,
}

/// A checked pipeline.
#[derive(Clone, Debug)]
pub struct PipelineGraph {
    pub name: String,
    pub values: Vec<ValueInfo>,
    /// In execution order.
    pub steps: Vec<StepNode>,
    /// Values a request must give, with their types.
    pub inputs: Vec<ValueId>,
    /// Values a request returns.
    pub outputs: Vec<ValueId>,
    /// Requests the planner looks ahead for this pipeline.
    pub lookahead: u32,
}

/// The reads of a step: (value name, the type it must have).
struct Reads(Vec<(String, ValueType)>);

fn tensor_list() -> ValueType {
    ValueType::list_of(ValueType::Tensor)
}
fn image_list() -> ValueType {
    ValueType::list_of(ValueType::Image)
}

impl PipelineGraph {
    /// Checks `spec` of workload `w` against its models' ports and builds the graph.
    pub fn build(
        w: &LoadedWorkload,
        spec: &PipelineSpec,
        models: &[ModelPorts],
    ) -> Result<PipelineGraph, GraphError> {
        Builder {
            w,
            spec,
            models,
            values: Vec::new(),
            by_name: BTreeMap::new(),
        }
        .build()
    }

    pub fn value(&self, name: &str) -> Option<ValueId> {
        self.values.iter().position(|v| v.name == name)
    }

    /// The model runs of one request, in order, each fan-out at `count(step)` runs.
    pub fn stages(&self, mut count: impl FnMut(&StepNode, &Fan) -> u32) -> Vec<Stage> {
        self.steps
            .iter()
            .filter_map(|s| {
                let (model, _) = s.kind.model_runs()?;
                Some(Stage {
                    model,
                    count: s.runs.as_ref().map_or(1, |f| count(s, f)),
                })
            })
            .collect()
    }

    /// The model runs of one request as the workload expects it.
    pub fn expected_stages(&self) -> Vec<Stage> {
        self.stages(|_, f| f.expected)
    }

    /// The most model runs one request can make (every fan-out at its maximum).
    pub fn max_stages(&self) -> Vec<Stage> {
        self.stages(|_, f| f.max)
    }

    /// A readable listing: inputs, each step with what it reads and writes, outputs.
    pub fn describe(&self) -> String {
        let name = |v: &ValueId| {
            let i = &self.values[*v];
            format!("{}: {}", i.name, i.ty)
        };
        let mut s = format!("pipeline `{}`\n", self.name);
        let ins: Vec<String> = self.inputs.iter().map(name).collect();
        s += &format!("  inputs:  {}\n", ins.join(", "));
        for st in &self.steps {
            let r: Vec<String> = st.reads.iter().map(name).collect();
            let w: Vec<String> = st.writes.iter().map(name).collect();
            let mut fan = match (&st.runs, st.kind.model_runs()) {
                (Some(f), Some(_)) if f.per != Per::Once => {
                    let per = match f.per {
                        Per::Chunk(c) => format!("{c}-sample chunk"),
                        Per::Token => "token".to_string(),
                        _ => "item".to_string(),
                    };
                    format!(
                        "  (per {per} of `{}`, expected {}, at most {})",
                        self.values[f.over].name, f.expected, f.max
                    )
                }
                _ => String::new(),
            };
            if let Some(g) = &st.gate {
                fan += &format!("  (when {:?} on `{}`)", g.test, self.values[g.value].name);
            } else if st.skippable {
                fan += "  (skipped with its gated inputs)";
            }
            s += &format!(
                "  [{}] {:<22} {} -> {}{fan}\n",
                st.index,
                st.label,
                r.join(", "),
                w.join(", ")
            );
        }
        let outs: Vec<String> = self.outputs.iter().map(name).collect();
        s += &format!("  outputs: {}\n", outs.join(", "));
        s
    }
}

struct Builder<'a> {
    w: &'a LoadedWorkload,
    spec: &'a PipelineSpec,
    models: &'a [ModelPorts],
    values: Vec<ValueInfo>,
    by_name: BTreeMap<String, ValueId>,
}

/// A step before ordering: its reads by name with types, its writes by name with types.
struct Pending {
    index: usize,
    label: String,
    kind: StepKind,
    reads: Vec<(String, ValueType)>,
    writes: Vec<(String, ValueType)>,
    /// For each write: the read (index into `reads`) whose list length it has.
    len_from: Vec<Option<usize>>,
    /// The gate's test; its value is the last of `reads`.
    gate: Option<Test>,
}

impl Builder<'_> {
    fn err(&self, step: usize, kind: &str, msg: String) -> GraphError {
        GraphError {
            location: self.w.step_location(&self.spec.name, step),
            pipeline: self.spec.name.clone(),
            step,
            kind: kind.into(),
            msg,
        }
    }

    /// An error about element `n` of the pipeline's list field `field` (`inputs`, `outputs`).
    fn field_err(&self, field: &str, n: usize, msg: String) -> GraphError {
        GraphError {
            location: self.w.field_location(&self.spec.name, field, n),
            pipeline: self.spec.name.clone(),
            step: 0,
            kind: field.into(),
            msg,
        }
    }

    /// With declared `inputs`: every read is written by a step or declared, every declared
    /// input is read and written by no step.
    fn check_declared_inputs(
        &self,
        declared: &[String],
        pending: &[Pending],
        writer: &BTreeMap<&str, usize>,
    ) -> Result<(), GraphError> {
        let known = || {
            writer
                .keys()
                .copied()
                .chain(declared.iter().map(String::as_str))
        };
        for p in pending {
            for (name, _) in &p.reads {
                if !writer.contains_key(name.as_str()) && !declared.contains(name) {
                    return Err(self.err(
                        p.index,
                        &p.label,
                        format!(
                            "undefined value `{name}`{} (no step writes it and the pipeline's                              `inputs` do not declare it)",
                            did_you_mean(name, known())
                        ),
                    ));
                }
            }
        }
        for (i, name) in declared.iter().enumerate() {
            if declared[..i].contains(name) {
                return Err(self.field_err("inputs", i, format!("`{name}` is declared twice")));
            }
            if let Some(&k) = writer.get(name.as_str()) {
                return Err(self.field_err(
                    "inputs",
                    i,
                    format!(
                        "`{name}` is declared an input, but step {} ({}) writes it",
                        pending[k].index, pending[k].label
                    ),
                ));
            }
            if !pending
                .iter()
                .any(|p| p.reads.iter().any(|(r, _)| r == name))
            {
                let readers: Vec<&str> = pending
                    .iter()
                    .flat_map(|p| p.reads.iter().map(|(r, _)| r.as_str()))
                    .filter(|r| !writer.contains_key(r))
                    .collect();
                return Err(self.field_err(
                    "inputs",
                    i,
                    format!(
                        "declared input `{name}` is not read by any step{}",
                        did_you_mean(name, readers)
                    ),
                ));
            }
        }
        Ok(())
    }

    fn build(mut self) -> Result<PipelineGraph, GraphError> {
        let spec = self.spec;
        if spec.steps.is_empty() {
            return Err(GraphError {
                location: self.w.path.display().to_string(),
                pipeline: spec.name.clone(),
                step: 0,
                kind: "steps".into(),
                msg: "the pipeline has no steps".into(),
            });
        }
        let mut pending = Vec::new();
        for (i, st) in spec.steps.iter().enumerate() {
            pending.push(self.pending(i, st)?);
        }
        // Every written name once.
        let mut writer: BTreeMap<&str, usize> = BTreeMap::new();
        for (k, p) in pending.iter().enumerate() {
            for (name, _) in &p.writes {
                if let Some(&o) = writer.get(name.as_str()) {
                    return Err(self.err(
                        p.index,
                        &p.label,
                        format!(
                            "writes `{name}`, which step {} ({}) already writes",
                            pending[o].index, pending[o].label
                        ),
                    ));
                }
                writer.insert(name, k);
            }
        }
        if let Some(declared) = &spec.inputs {
            self.check_declared_inputs(declared, &pending, &writer)?;
        }
        // Order: Kahn's algorithm, taking the earliest ready step in file order.
        let deps: Vec<BTreeSet<usize>> = pending
            .iter()
            .map(|p| {
                p.reads
                    .iter()
                    .filter_map(|(n, _)| writer.get(n.as_str()).copied())
                    .collect()
            })
            .collect();
        let mut done = vec![false; pending.len()];
        let mut order = Vec::new();
        while order.len() < pending.len() {
            let Some(k) =
                (0..pending.len()).find(|&k| !done[k] && deps[k].iter().all(|&d| done[d]))
            else {
                let stuck: Vec<String> = (0..pending.len())
                    .filter(|&k| !done[k])
                    .map(|k| format!("{} ({})", pending[k].index, pending[k].label))
                    .collect();
                let first = (0..pending.len()).find(|&k| !done[k]).unwrap_or(0);
                return Err(self.err(
                    pending[first].index,
                    &pending[first].label,
                    format!(
                        "the steps {} read each other's values in a cycle",
                        stuck.join(", ")
                    ),
                ));
            };
            done[k] = true;
            order.push(k);
        }
        // Values: inputs get their type from their first reader; written values from the
        // writer; every read must fit.
        let mut steps = Vec::new();
        let mut inputs = Vec::new();
        for &k in &order {
            let p = &pending[k];
            let mut reads = Vec::new();
            for (name, want) in &p.reads {
                let id = match self.by_name.get(name) {
                    Some(&id) => id,
                    None => {
                        let id = self.add_value(name, want.clone(), None);
                        inputs.push(id);
                        id
                    }
                };
                let have = &self.values[id].ty;
                if !have.fits(want) {
                    let what = match self.values[id].producer {
                        Some(s) => format!("written by {}", steps_label(&steps, s)),
                        None => "a pipeline input".into(),
                    };
                    return Err(self.err(
                        p.index,
                        &p.label,
                        format!(
                            "reads `{name}` as {want}, but it is {have} ({what}){}",
                            hint(have, want, &p.kind)
                        ),
                    ));
                }
                reads.push(id);
            }
            let gate = match p.gate {
                None => None,
                Some(test) => {
                    let value = reads.pop().unwrap_or_default();
                    let g = GateTest { value, test };
                    let v = &self.values[value];
                    if !g.takes(&v.ty) {
                        let what = match v.producer {
                            Some(s) => format!("written by {}", steps_label(&steps, s)),
                            None => "a pipeline input".into(),
                        };
                        let wants = match test {
                            Test::NonEmpty => "a list, text, token ids, audio, boxes or text lines",
                            _ => "a tensor",
                        };
                        return Err(self.err(
                            p.index,
                            &p.label,
                            format!(
                                "the gate {test:?} on `{}` needs {wants}, but `{}` is {} ({what})",
                                v.name, v.name, v.ty
                            ),
                        ));
                    }
                    Some(g)
                }
            };
            let skippable = gate.is_some()
                || reads
                    .iter()
                    .chain(gate.as_ref().map(|g| &g.value))
                    .any(|&r| {
                        self.values[r]
                            .producer
                            .is_some_and(|s| steps_skippable(&steps, s))
                    });
            let node = steps.len();
            let mut writes = Vec::new();
            for (j, (name, ty)) in p.writes.iter().enumerate() {
                let id = self.add_value(name, ty.clone(), Some(node));
                if let Some(r) = p.len_from[j] {
                    self.values[id].len_root = self.values[reads[r]].len_root;
                }
                writes.push(id);
            }
            let mut kind = p.kind.clone();
            // Run steps name their values by id.
            if let StepKind::Run {
                inputs: ins,
                outputs: outs,
                fan,
                ..
            } = &mut kind
            {
                for (_, v) in ins.iter_mut() {
                    *v = reads[*v];
                }
                for (_, v) in outs.iter_mut() {
                    *v = writes[*v];
                }
                if let Some(f) = fan {
                    f.over = reads[f.over];
                }
            }
            if let StepKind::Generate {
                inputs: ins, fan, ..
            } = &mut kind
            {
                for (_, v) in ins.iter_mut() {
                    *v = reads[*v];
                }
                fan.over = reads[fan.over];
            }
            if let StepKind::StreamChunks(st) = &mut kind {
                st.fan.over = reads[st.fan.over];
                for (_, v) in st.inputs.iter_mut() {
                    *v = reads[*v];
                }
                for (_, _, v) in st.outputs.iter_mut() {
                    *v = writes[*v];
                }
            }
            let runs = match kind.model_runs() {
                Some((_, Some(f))) => Some(f.clone()),
                Some((_, None)) if skippable => Some(Fan {
                    over: gate
                        .as_ref()
                        .map_or(reads.first().copied().unwrap_or(0), |g| g.value),
                    expected: 1,
                    max: 1,
                    per: Per::Once,
                }),
                _ => None,
            };
            steps.push(StepNode {
                index: p.index,
                label: p.label.clone(),
                kind,
                reads,
                writes,
                gate,
                skippable,
                runs,
            });
        }
        let read: BTreeSet<ValueId> = steps
            .iter()
            .flat_map(|s| {
                s.reads
                    .iter()
                    .chain(s.gate.as_ref().map(|g| &g.value))
                    .copied()
            })
            .collect();
        let outputs = match &spec.outputs {
            Some(names) => {
                let mut outs = Vec::new();
                for (i, n) in names.iter().enumerate() {
                    let id = self.by_name.get(n).copied().ok_or_else(|| {
                        self.field_err(
                            "outputs",
                            i,
                            format!(
                                "output `{n}` is not a value of the pipeline{}",
                                did_you_mean(n, self.by_name.keys().map(String::as_str))
                            ),
                        )
                    })?;
                    outs.push(id);
                }
                for (id, v) in self.values.iter().enumerate() {
                    if let Some(s) = v.producer {
                        if !read.contains(&id) && !outs.contains(&id) {
                            return Err(self.err(
                                steps[s].index,
                                &steps[s].label,
                                format!(
                                    "writes `{}`, which no step reads and `outputs` does not list",
                                    v.name
                                ),
                            ));
                        }
                    }
                }
                outs
            }
            None => (0..self.values.len())
                .filter(|id| self.values[*id].producer.is_some() && !read.contains(id))
                .collect(),
        };
        // Declared inputs come in their declared order.
        if let Some(declared) = &spec.inputs {
            inputs = declared
                .iter()
                .filter_map(|n| self.by_name.get(n).copied())
                .collect();
        }
        let lookahead = match spec.repeat {
            Repeat::Once => 1,
            Repeat::Times(n) | Repeat::PerFrame(n) => n,
        };
        Ok(PipelineGraph {
            name: spec.name.clone(),
            values: self.values,
            steps,
            inputs,
            outputs,
            lookahead,
        })
    }

    fn add_value(&mut self, name: &str, ty: ValueType, producer: Option<usize>) -> ValueId {
        let id = self.values.len();
        self.values.push(ValueInfo {
            name: name.into(),
            ty,
            producer,
            len_root: id,
        });
        self.by_name.insert(name.into(), id);
        id
    }

    /// Resolves one step's parameters and its typed reads and writes.
    fn pending(&self, index: usize, st: &PipelineStep) -> Result<Pending, GraphError> {
        let one = |label: &str, kind: StepKind, reads: Reads, writes: Vec<(String, ValueType)>| {
            let n = writes.len();
            Pending {
                index,
                label: label.into(),
                kind,
                reads: reads.0,
                writes,
                len_from: vec![None; n],
                gate: None,
            }
        };
        Ok(match st {
            PipelineStep::ImageLoad(l) => {
                let src = l.source.clone();
                if src == l.output {
                    return Err(self.err(
                        index,
                        "ImageLoad",
                        format!("reads and writes `{src}`: give the image value another name"),
                    ));
                }
                one(
                    "ImageLoad",
                    StepKind::ImageLoad,
                    Reads(vec![(src, ValueType::Image)]),
                    vec![(l.output.clone(), ValueType::Image)],
                )
            }
            PipelineStep::Normalize(n) => {
                if n.mean.len() != 3 || n.std.len() != 3 || n.std.contains(&0.0) {
                    return Err(self.err(
                        index,
                        "Normalize",
                        "needs 3 means and 3 non-zero stds (RGB order)".into(),
                    ));
                }
                let resize = match n.resize.as_deref() {
                    None => None,
                    Some([h, w]) if *h > 0 && *w > 0 && *h <= 16384 && *w <= 16384 => {
                        Some((*h as usize, *w as usize))
                    }
                    Some(r) => {
                        return Err(self.err(
                            index,
                            "Normalize",
                            format!("resize must be [height, width], each 1..=16384, got {r:?}"),
                        ))
                    }
                };
                // The workload lists RGB like the model cards; the image is BGR.
                let bgr = |v: &[f32]| [v[2] as f64, v[1] as f64, v[0] as f64];
                one(
                    "Normalize",
                    StepKind::Normalize {
                        resize,
                        mean: bgr(&n.mean),
                        std: bgr(&n.std),
                    },
                    Reads(vec![(n.input.clone(), ValueType::Image)]),
                    vec![(n.output.clone(), ValueType::Tensor)],
                )
            }
            PipelineStep::Run(r) => self.run_step(index, r)?,
            PipelineStep::StreamChunks(c) => self.stream_step(index, c)?,
            PipelineStep::Generate(gen) => self.generate_step(index, gen)?,
            PipelineStep::Tokenize(t) => one(
                "Tokenize",
                StepKind::Tokenize {
                    tokenizer: self.tokenizer(index, "Tokenize", &t.tokenizer)?,
                    add_special_tokens: t.add_special_tokens.unwrap_or(true),
                },
                Reads(vec![(t.input.clone(), ValueType::Text)]),
                vec![(t.output.clone(), ValueType::Tokens)],
            ),
            PipelineStep::Detokenize(t) => one(
                "Detokenize",
                StepKind::Detokenize {
                    tokenizer: self.tokenizer(index, "Detokenize", &t.tokenizer)?,
                    skip_special_tokens: t.skip_special_tokens.unwrap_or(true),
                },
                Reads(vec![(t.input.clone(), ValueType::Tokens)]),
                vec![(t.output.clone(), ValueType::Text)],
            ),
            PipelineStep::ChatTemplate(c) => one(
                "ChatTemplate",
                StepKind::ChatTemplate {
                    system: c.system.clone(),
                    format: c.template,
                },
                Reads(vec![(c.input.clone(), ValueType::Text)]),
                vec![(c.output.clone(), ValueType::Text)],
            ),
            PipelineStep::Tokens(t) => {
                if t.ids.is_empty() {
                    return Err(self.err(index, "Tokens", "`ids` is empty".into()));
                }
                one(
                    "Tokens",
                    StepKind::Tokens(t.ids.clone()),
                    Reads(vec![]),
                    vec![(t.output.clone(), ValueType::Tokens)],
                )
            }
            PipelineStep::Gate(g) => {
                if matches!(*g.step, PipelineStep::Gate(_)) {
                    return Err(self.err(
                        index,
                        "Gate",
                        "a Gate's step is another Gate: gate the inner step once".into(),
                    ));
                }
                let mut p = self.pending(index, &g.step)?;
                let test = match &g.when {
                    Condition::NonEmpty(_) => Test::NonEmpty,
                    Condition::Above(t) => Test::Above(t.threshold),
                    Condition::Below(t) => Test::Below(t.threshold),
                };
                if let Test::Above(t) | Test::Below(t) = test {
                    if !t.is_finite() {
                        return Err(self.err(index, &p.label, format!("gate threshold {t}")));
                    }
                }
                p.reads.push((g.when.value().to_string(), ValueType::Any));
                p.gate = Some(test);
                p
            }
            PipelineStep::VadSegments(v) => {
                let d = crate::audio::SegmentRules::default();
                let rules = crate::audio::SegmentRules {
                    threshold: v.threshold.unwrap_or(d.threshold),
                    neg_threshold: v.neg_threshold,
                    min_speech_ms: v.min_speech_ms.unwrap_or(d.min_speech_ms),
                    min_silence_ms: v.min_silence_ms.unwrap_or(d.min_silence_ms),
                    speech_pad_ms: v.speech_pad_ms.unwrap_or(d.speech_pad_ms),
                };
                let unit = |x: f32| (0.0..=1.0).contains(&x);
                if !unit(rules.threshold) || !rules.neg_threshold.is_none_or(unit) {
                    return Err(self.err(
                        index,
                        "VadSegments",
                        "threshold and neg_threshold must be probabilities in 0..=1".into(),
                    ));
                }
                let chunk = v.chunk.unwrap_or(512);
                if chunk == 0 {
                    return Err(self.err(
                        index,
                        "VadSegments",
                        "chunk must be at least 1 sample".into(),
                    ));
                }
                let mut writes = vec![(v.output.clone(), ValueType::list_of(ValueType::Audio))];
                if let Some(b) = &v.bounds {
                    writes.push((b.clone(), ValueType::Tensor));
                }
                one(
                    "VadSegments",
                    StepKind::VadSegments {
                        chunk: chunk as usize,
                        rules,
                    },
                    Reads(vec![
                        (v.probs.clone(), ValueType::Tensor),
                        (v.audio.clone(), ValueType::Audio),
                    ]),
                    writes,
                )
            }
            PipelineStep::AudioLoad(l) => {
                if l.source == l.output {
                    return Err(self.err(
                        index,
                        "AudioLoad",
                        format!(
                            "reads and writes `{}`: give the audio value another name",
                            l.source
                        ),
                    ));
                }
                one(
                    "AudioLoad",
                    StepKind::AudioLoad,
                    Reads(vec![(l.source.clone(), ValueType::Audio)]),
                    vec![(l.output.clone(), ValueType::Audio)],
                )
            }
            PipelineStep::Resample(r) => {
                if !(1..=384_000).contains(&r.to_hz) {
                    return Err(self.err(
                        index,
                        "Resample",
                        format!("to_hz must be 1..=384000, got {}", r.to_hz),
                    ));
                }
                one(
                    "Resample",
                    StepKind::Resample { to_hz: r.to_hz },
                    Reads(vec![(r.input.clone(), ValueType::Audio)]),
                    vec![(r.output.clone(), ValueType::Audio)],
                )
            }
            PipelineStep::LogMel(m) => {
                let n_mels = m.n_mels.unwrap_or(80);
                if n_mels != 80 && n_mels != 128 {
                    return Err(self.err(
                        index,
                        "LogMel",
                        format!("n_mels must be 80 or 128 (Whisper's models), got {n_mels}"),
                    ));
                }
                one(
                    "LogMel",
                    StepKind::LogMel {
                        n_mels: n_mels as usize,
                    },
                    Reads(vec![(m.input.clone(), ValueType::Audio)]),
                    vec![(m.output.clone(), ValueType::Tensor)],
                )
            }
            PipelineStep::OcrBoxes(b) => {
                let mut p = DbParams::default();
                if let Some(t) = b.thresh {
                    p.thresh = t;
                }
                if let Some(t) = b.box_thresh {
                    p.box_thresh = t as f64;
                }
                if let Some(u) = b.unclip_ratio {
                    p.unclip_ratio = u as f64;
                }
                one(
                    "OcrBoxes",
                    StepKind::OcrBoxes(p),
                    Reads(vec![(b.input.clone(), ValueType::Tensor)]),
                    vec![(b.output.clone(), ValueType::Boxes)],
                )
            }
            PipelineStep::CropRotate(c) => {
                let mut p = one(
                    "CropRotate",
                    StepKind::CropRotate,
                    Reads(vec![
                        (c.image.clone(), ValueType::Image),
                        (c.boxes.clone(), ValueType::Boxes),
                    ]),
                    vec![(c.output.clone(), image_list())],
                );
                p.len_from = vec![Some(1)];
                p
            }
            PipelineStep::TextlineTensors(t) => {
                let ok = |v: u32| (1..=16384).contains(&v);
                if !ok(t.height) || !ok(t.width) {
                    return Err(self.err(
                        index,
                        "TextlineTensors",
                        format!(
                            "height and width must be 1..=16384, got {}x{}",
                            t.height, t.width
                        ),
                    ));
                }
                let batch = t.batch.unwrap_or(6);
                if !(1..=1024).contains(&batch) {
                    return Err(self.err(
                        index,
                        "TextlineTensors",
                        format!("batch must be 1..=1024, got {batch}"),
                    ));
                }
                let batch = batch as usize;
                let mut p = one(
                    "TextlineTensors",
                    StepKind::TextlineTensors {
                        kind: t.kind,
                        height: t.height as usize,
                        width: t.width as usize,
                        batch,
                    },
                    Reads(vec![(t.input.clone(), image_list())]),
                    vec![(t.output.clone(), tensor_list())],
                );
                p.len_from = vec![Some(0)];
                p
            }
            PipelineStep::AngleFix(a) => {
                let mut p = one(
                    "AngleFix",
                    StepKind::AngleFix {
                        thresh: a.thresh.unwrap_or(0.9),
                    },
                    Reads(vec![
                        (a.crops.clone(), image_list()),
                        (a.scores.clone(), tensor_list()),
                    ]),
                    vec![(a.output.clone(), image_list())],
                );
                p.len_from = vec![Some(0)];
                p
            }
            PipelineStep::CtcDecode(c) => {
                let dict = self.dictionary(index, c)?;
                let mut reads = vec![(c.input.clone(), tensor_list())];
                if let Some(b) = &c.boxes {
                    reads.push((b.clone(), ValueType::Boxes));
                }
                one(
                    "CtcDecode",
                    StepKind::CtcDecode {
                        decoder: Arc::new(CtcDecoder::new(&dict)),
                        text_score: c.text_score.unwrap_or(0.5),
                    },
                    Reads(reads),
                    vec![(c.output.clone(), ValueType::TextLines)],
                )
            }
        })
    }

    fn run_step(&self, index: usize, r: &crate::workload::Run) -> Result<Pending, GraphError> {
        let label = format!("Run({})", r.model);
        let err = |m: String| self.err(index, &label, m);
        let model = self
            .models
            .iter()
            .position(|m| m.name == r.model)
            .ok_or_else(|| err(format!("unknown model `{}`", r.model)))?;
        let ports = &self.models[model];
        for name in r.inputs.keys() {
            if !ports.inputs.iter().any(|(n, _)| n == name) {
                return Err(err(format!(
                    "model `{}` has no input `{name}` (its inputs: {})",
                    r.model,
                    port_names(&ports.inputs)
                )));
            }
        }
        for (name, _) in &ports.inputs {
            if !r.inputs.contains_key(name) {
                return Err(err(format!(
                    "model `{}` input `{name}` is not given a value",
                    r.model
                )));
            }
        }
        for name in r.outputs.keys() {
            if !ports.outputs.iter().any(|(n, _)| n == name) {
                return Err(err(format!(
                    "model `{}` has no output `{name}` (its outputs: {})",
                    r.model,
                    port_names(&ports.outputs)
                )));
            }
        }
        let fan = match &r.fan_out {
            FanOut::One => None,
            FanOut::PerItem(pi) => {
                if !r.inputs.values().any(|v| v == &pi.over) {
                    return Err(err(format!(
                        "fans out over `{}`, which none of its inputs reads",
                        pi.over
                    )));
                }
                Some(Fan {
                    over: 0,
                    expected: pi.expected,
                    max: pi.max_runs(),
                    per: Per::Item,
                })
            }
        };
        let mut reads: Vec<(String, ValueType)> = Vec::new();
        let mut inputs = Vec::new();
        // In the model's input order, one read per distinct value.
        for (port, _) in &ports.inputs {
            let value = &r.inputs[port];
            let over =
                fan.is_some() && matches!(&r.fan_out, FanOut::PerItem(pi) if &pi.over == value);
            let k = match reads.iter().position(|(n, _)| n == value) {
                Some(k) => k,
                None => {
                    let ty = if over {
                        tensor_list()
                    } else {
                        ValueType::Tensor
                    };
                    reads.push((value.clone(), ty));
                    reads.len() - 1
                }
            };
            inputs.push((port.clone(), k));
        }
        let fan = fan.map(|mut f| {
            if let FanOut::PerItem(pi) = &r.fan_out {
                f.over = reads.iter().position(|(n, _)| n == &pi.over).unwrap_or(0);
            }
            f
        });
        let out_ty = if fan.is_some() {
            tensor_list()
        } else {
            ValueType::Tensor
        };
        let writes: Vec<(String, ValueType)> = r
            .outputs
            .values()
            .map(|v| (v.clone(), out_ty.clone()))
            .collect();
        let outputs = r
            .outputs
            .keys()
            .enumerate()
            .map(|(k, port)| (port.clone(), k))
            .collect();
        let len_from = vec![fan.as_ref().map(|f| f.over); writes.len()];
        Ok(Pending {
            index,
            label,
            kind: StepKind::Run {
                model,
                inputs,
                outputs,
                fan,
            },
            reads,
            writes,
            len_from,
            gate: None,
        })
    }

    fn stream_step(
        &self,
        index: usize,
        c: &crate::workload::StreamChunks,
    ) -> Result<Pending, GraphError> {
        let label = format!("StreamChunks({})", c.model);
        let err = |m: String| self.err(index, &label, m);
        let model = self
            .models
            .iter()
            .position(|m| m.name == c.model)
            .ok_or_else(|| err(format!("unknown model `{}`", c.model)))?;
        let ports = &self.models[model];
        let input_shape = |name: &str| ports.inputs.iter().find(|(n, _)| n == name).map(|(_, s)| s);
        let output_shape = |name: &str| {
            ports
                .outputs
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, s)| s)
        };
        let no_input = |name: &str| {
            err(format!(
                "model `{}` has no input `{name}` (its inputs: {})",
                c.model,
                port_names(&ports.inputs)
            ))
        };
        let no_output = |name: &str| {
            err(format!(
                "model `{}` has no output `{name}` (its outputs: {})",
                c.model,
                port_names(&ports.outputs)
            ))
        };
        let (chunk, context) = (c.chunk as usize, c.context.unwrap_or(0) as usize);
        if chunk == 0 {
            return Err(err("chunk must be at least 1 sample".into()));
        }
        let shape = input_shape(&c.input).ok_or_else(|| no_input(&c.input))?;
        if shape.iter().product::<usize>() != context + chunk
            || shape.last() != Some(&(context + chunk))
        {
            return Err(err(format!(
                "model input `{}` is {shape:?}; context + chunk is {} samples, so it must be \
                 [1, {}]",
                c.input,
                context + chunk,
                context + chunk
            )));
        }
        let mut state = Vec::new();
        for (out, inp) in &c.state {
            let so = output_shape(out).ok_or_else(|| no_output(out))?;
            let si = input_shape(inp).ok_or_else(|| no_input(inp))?;
            if so != si {
                return Err(err(format!(
                    "state output `{out}` is {so:?} but input `{inp}` is {si:?}"
                )));
            }
            state.push((out.clone(), inp.clone(), si.clone()));
        }
        let mut reads = vec![(c.audio.clone(), ValueType::Audio)];
        let mut inputs = Vec::new();
        for (port, value) in &c.inputs {
            input_shape(port).ok_or_else(|| no_input(port))?;
            inputs.push((port.clone(), reads.len()));
            reads.push((value.clone(), ValueType::Tensor));
        }
        for (port, _) in &ports.inputs {
            let given = *port == c.input
                || c.state.values().any(|i| i == port)
                || c.inputs.contains_key(port);
            if !given {
                return Err(err(format!(
                    "model `{}` input `{port}` is not given a value (the chunk input, a state \
                     input or `inputs`)",
                    c.model
                )));
            }
        }
        let mut outputs = Vec::new();
        let mut writes = Vec::new();
        for (port, value) in &c.outputs {
            let so = output_shape(port).ok_or_else(|| no_output(port))?;
            outputs.push((port.clone(), so.clone(), writes.len()));
            writes.push((value.clone(), ValueType::Tensor));
        }
        if outputs.is_empty() {
            return Err(err("`outputs` names no model output to keep".into()));
        }
        let n = writes.len();
        Ok(Pending {
            index,
            label,
            kind: StepKind::StreamChunks(Box::new(Stream {
                model,
                input: (c.input.clone(), shape.clone()),
                chunk,
                context,
                sample_rate: c.sample_rate,
                state,
                inputs,
                outputs,
                fan: Fan {
                    over: 0,
                    expected: c.expected,
                    max: c.max_runs(),
                    per: Per::Chunk(chunk),
                },
            })),
            reads,
            writes,
            len_from: vec![None; n],
            gate: None,
        })
    }

    fn generate_step(
        &self,
        index: usize,
        gen: &crate::workload::Generate,
    ) -> Result<Pending, GraphError> {
        let label = format!("Generate({})", gen.model);
        let err = |m: String| self.err(index, &label, m);
        let model = self
            .models
            .iter()
            .position(|m| m.name == gen.model)
            .ok_or_else(|| err(format!("unknown model `{}`", gen.model)))?;
        let m = &self.models[model];
        let cache_len = m.cache_len.ok_or_else(|| {
            err(format!(
                "model `{}` keeps no key/value cache; give it `kv_cache: KvCacheSpec(max_len: ..)` \
                 (a decoder exported with past keys and values)",
                gen.model
            ))
        })?;
        let ports = gen.ports.clone().unwrap_or_default();
        let input = |name: &str| m.inputs.iter().find(|(n, _)| n == name).map(|(_, s)| s);
        for (what, name, want) in [
            ("token", &ports.input_ids, vec![1, 1]),
            ("position", &ports.position_ids, vec![1, 1]),
            ("mask", &ports.attention_mask, vec![1, cache_len]),
        ] {
            match input(name) {
                Some(s) if *s == want => {}
                Some(s) => {
                    return Err(err(format!(
                        "the {what} input `{name}` of model `{}` is {s:?}; decoding one token per \
                         call needs {want:?} (set it in the model's `inputs`)",
                        gen.model
                    )))
                }
                None => {
                    return Err(err(format!(
                    "model `{}` has no {what} input `{name}` (its inputs: {}); name it in `ports`",
                    gen.model,
                    port_names(&m.inputs)
                )))
                }
            }
        }
        let vocab = match m.outputs.iter().find(|(n, _)| n == &ports.logits) {
            Some((_, s)) => s.last().copied().unwrap_or(0),
            None => {
                return Err(err(format!(
                    "model `{}` has no logits output `{}` (its outputs: {})",
                    gen.model,
                    ports.logits,
                    port_names(&m.outputs)
                )))
            }
        };
        let own = [&ports.input_ids, &ports.position_ids, &ports.attention_mask];
        for (name, _) in &m.inputs {
            if !own.contains(&name) && !gen.inputs.contains_key(name) {
                return Err(err(format!(
                    "model `{}` input `{name}` is not given a value (list it in `inputs`)",
                    gen.model
                )));
            }
        }
        for name in gen.inputs.keys() {
            if own.contains(&name) || !m.inputs.iter().any(|(n, _)| n == name) {
                return Err(err(format!(
                    "`inputs` gives `{name}`, which is not a model input the step leaves to you \
                     (model `{}` inputs: {})",
                    gen.model,
                    port_names(&m.inputs)
                )));
            }
        }
        if gen.max_tokens == 0 || gen.max_tokens as usize >= cache_len {
            return Err(err(format!(
                "max_tokens {} must be at least 1 and below the cache's {cache_len} positions",
                gen.max_tokens
            )));
        }
        let expected_tokens = gen.expected_tokens.unwrap_or(gen.max_tokens);
        if expected_tokens == 0 || expected_tokens > gen.max_tokens {
            return Err(err(format!(
                "expected_tokens {expected_tokens} must be within 1..=max_tokens ({})",
                gen.max_tokens
            )));
        }
        let expected_prompt = gen.expected_prompt.unwrap_or(16);
        if expected_prompt == 0 || expected_prompt as usize + gen.max_tokens as usize > cache_len {
            return Err(err(format!(
                "expected_prompt {expected_prompt} plus max_tokens {} must fit the cache's \
                 {cache_len} positions",
                gen.max_tokens
            )));
        }
        if let Some(t) = gen.stop.iter().find(|&&t| t as usize >= vocab) {
            return Err(err(format!(
                "stop token {t} is past the vocabulary of {vocab}"
            )));
        }
        if let crate::workload::Sampling::Sample {
            temperature, top_k, ..
        } = gen.sampling
        {
            if !(temperature.is_finite() && temperature > 0.0) || top_k == 0 {
                return Err(err(format!(
                    "sampling needs a temperature above 0 and top_k at least 1 (got {temperature} \
                     and {top_k})"
                )));
            }
        }
        let mut reads = vec![(gen.prompt.clone(), ValueType::Tokens)];
        let mut inputs = Vec::new();
        for (port, value) in &gen.inputs {
            let k = match reads.iter().position(|(n, _)| n == value) {
                Some(k) => k,
                None => {
                    reads.push((value.clone(), ValueType::Tensor));
                    reads.len() - 1
                }
            };
            inputs.push((port.clone(), k));
        }
        Ok(Pending {
            index,
            label,
            kind: StepKind::Generate {
                model,
                inputs,
                fan: Fan {
                    over: 0,
                    expected: expected_prompt + expected_tokens - 1,
                    max: cache_len as u32,
                    per: Per::Token,
                },
                max_tokens: gen.max_tokens,
                stop: gen.stop.clone(),
                sampling: gen.sampling.clone(),
                ports,
                cache_len,
                conversation: gen.conversation,
            },
            reads,
            writes: vec![(gen.output.clone(), ValueType::Tokens)],
            len_from: vec![None],
            gate: None,
        })
    }

    /// The tokenizer file `path` (relative to the workload), loaded.
    fn tokenizer(
        &self,
        index: usize,
        label: &str,
        path: &str,
    ) -> Result<super::steps::text::SharedTokenizer, GraphError> {
        let f = self.w.resolve(path);
        super::steps::text::SharedTokenizer::load(&f)
            .map_err(|e| self.err(index, label, e.to_string()))
    }

    /// CtcDecode's character list: the dictionary file, else the recognizer's metadata.
    fn dictionary(
        &self,
        index: usize,
        c: &crate::workload::CtcDecode,
    ) -> Result<Vec<String>, GraphError> {
        // A dictionary the user names must be readable: falling back to the metadata would
        // decode with a different alphabet than the one asked for.
        if let Some(d) = c.dict.as_deref() {
            let f = self.w.resolve(d);
            return match std::fs::read_to_string(&f) {
                Ok(t) => Ok(crate::ops::dict_from_metadata(&t)),
                Err(e) => Err(self.err(
                    index,
                    "CtcDecode",
                    format!("dictionary {} cannot be read: {e}", f.display()),
                )),
            };
        }
        // The model whose output the step decodes.
        let from_model = self.spec.steps.iter().find_map(|st| match st {
            PipelineStep::Run(r) if r.outputs.values().any(|v| v == &c.input) => self
                .models
                .iter()
                .find(|m| m.name == r.model)
                .and_then(|m| m.metadata.get("character")),
            _ => None,
        });
        match from_model {
            Some(s) => Ok(crate::ops::dict_from_metadata(s)),
            None => Err(self.err(
                index,
                "CtcDecode",
                "no `dict` given and the recognizer has no `character` metadata".into(),
            )),
        }
    }
}

fn port_names(ports: &[(String, Vec<usize>)]) -> String {
    ports
        .iter()
        .map(|(n, s)| format!("`{n}` {s:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn steps_skippable(steps: &[StepNode], s: usize) -> bool {
    steps.get(s).is_some_and(|n| n.skippable)
}

fn steps_label(steps: &[StepNode], s: usize) -> String {
    steps.get(s).map_or("a step".into(), |n| {
        format!("step {} ({})", n.index, n.label)
    })
}

/// How to fix the commonest type mismatch: a model fed images.
fn hint(have: &ValueType, want: &ValueType, kind: &StepKind) -> String {
    match (have, want, kind) {
        (ValueType::List(h), _, StepKind::Run { .. }) if **h == ValueType::Image => {
            "; models read tensors: convert the crops with a `TextlineTensors(input: .., output: \
             .., kind: Classifier|Recognizer, height: .., width: ..)` step first (see \
             workloads/camera-ocr.ron)"
                .into()
        }
        (ValueType::List(_), ValueType::Tensor, StepKind::Run { .. }) => {
            "; to run the model once per item, add `fan_out: PerItem(over: .., expected: ..)`"
                .into()
        }
        _ => String::new(),
    }
}
