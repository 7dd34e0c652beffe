//! Executes a checked [`PipelineGraph`] on one request's values: built-in steps on the CPU,
//! model runs through a [`ModelRunner`] (the engine's GPU worker), fan-out item by item. Before
//! each model run it tells the runner what the rest of the request will run, so the runner can
//! re-plan residency when that differs from its plan (a different box count, say).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use scheduler::Stage;

use super::generate::{generate, GenerateCall, GenerateError};
use super::graph::{Fan, PipelineGraph, StepKind, StepNode, Stream, ValueId};
use super::steps::{run_builtin, StepError};
use super::value::{Tensor, Value};

/// Why a request stopped before its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    Cancelled,
    DeadlineExceeded,
}

/// A request's failure.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    #[error("pipeline `{pipeline}`: {msg}")]
    Input { pipeline: String, msg: String },
    #[error("pipeline `{pipeline}` step {step} ({label}): {source}")]
    Step {
        pipeline: String,
        step: usize,
        label: String,
        #[source]
        source: Box<StepError>,
    },
    #[error("pipeline `{pipeline}` step {step} ({label}): {source}")]
    Model {
        pipeline: String,
        step: usize,
        label: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("request {0}")]
    Stopped(&'static str),
}

impl ExecError {
    pub fn stop(s: Stop) -> ExecError {
        ExecError::Stopped(match s {
            Stop::Cancelled => "cancelled",
            Stop::DeadlineExceeded => "deadline exceeded",
        })
    }
}

/// One model run asked of the runner.
pub struct ModelCall<'a> {
    pub model: usize,
    /// (model input, value) for every input of the model.
    pub inputs: Vec<(&'a str, &'a Tensor)>,
    /// Model outputs to read back, in the order the results must come.
    pub outputs: Vec<&'a str>,
    /// The rest of this request's model runs, this one first (fan-outs not yet known at
    /// their expected count).
    pub rest: Vec<Stage>,
}

/// Runs models for the executor.
pub trait ModelRunner {
    fn run_model(
        &mut self,
        call: ModelCall<'_>,
    ) -> Result<Vec<Tensor>, Box<dyn std::error::Error + Send + Sync>>;

    /// The fan-out count to assume for step `step` (its index in the workload file) of the
    /// running request while its list is not computed yet; `None`: the workload's expected.
    fn fan_out_hint(&self, _step: usize) -> Option<u32> {
        None
    }

    /// The conversation a `Generate` step (`step`, its index in the workload file) of the
    /// running request's pipeline left, taken out (see [`super::generate::Conversation`]).
    fn take_conversation(&mut self, _step: usize) -> Option<super::generate::Conversation> {
        None
    }

    /// Keeps the conversation for the pipeline's next request.
    fn keep_conversation(&mut self, _step: usize, _c: super::generate::Conversation) {}

    /// How many times `model` has run (None: not counted, so a conversation always feeds its
    /// whole history).
    fn model_uses(&self, _model: usize) -> Option<u64> {
        None
    }
}

/// What a request produced.
#[derive(Debug, Default)]
pub struct Execution {
    pub outputs: BTreeMap<String, Value>,
    /// CPU time of each built-in step (by label), model runs excluded.
    pub step_times: Vec<(String, Duration)>,
    /// Model runs made, per fan-out step (step index, runs).
    pub fan_counts: Vec<(usize, u32)>,
}

/// Checks a request's values against the pipeline's inputs: every input given, with a fitting
/// type, and nothing else.
pub fn check_inputs(g: &PipelineGraph, inputs: &BTreeMap<String, Value>) -> Result<(), ExecError> {
    let err = |msg: String| ExecError::Input {
        pipeline: g.name.clone(),
        msg,
    };
    let names: Vec<String> = g
        .inputs
        .iter()
        .map(|&i| format!("`{}` ({})", g.values[i].name, g.values[i].ty))
        .collect();
    for &i in &g.inputs {
        let v = &g.values[i];
        match inputs.get(&v.name) {
            None => {
                return Err(err(format!(
                    "input `{}` ({}) is missing (the pipeline's inputs: {})",
                    v.name,
                    v.ty,
                    names.join(", ")
                )))
            }
            Some(x) if !x.value_type().fits(&v.ty) => {
                return Err(err(format!(
                    "input `{}` must be {}, it is {}",
                    v.name,
                    v.ty,
                    x.value_type()
                )))
            }
            _ => {}
        }
    }
    for name in inputs.keys() {
        if !g.inputs.iter().any(|&i| &g.values[i].name == name) {
            return Err(err(format!(
                "unknown input `{name}` (the pipeline's inputs: {})",
                names.join(", ")
            )));
        }
    }
    Ok(())
}

/// Runs `g` on `inputs`. `stop` is asked between steps and fan-out items.
pub fn execute(
    g: &PipelineGraph,
    inputs: BTreeMap<String, Value>,
    runner: &mut dyn ModelRunner,
    stop: &dyn Fn() -> Option<Stop>,
) -> Result<Execution, ExecError> {
    check_inputs(g, &inputs)?;
    let mut values: Vec<Option<Value>> = vec![None; g.values.len()];
    for (name, v) in inputs {
        if let Some(id) = g.value(&name) {
            values[id] = Some(v);
        }
    }
    let mut ex = Execution::default();
    // Steps skipped by a gate (or because a value they read was skipped).
    let mut skipped = vec![false; g.steps.len()];
    for (k, st) in g.steps.iter().enumerate() {
        if let Some(s) = stop() {
            return Err(ExecError::stop(s));
        }
        let step_err = |source: StepError| ExecError::Step {
            pipeline: g.name.clone(),
            step: st.index,
            label: st.label.clone(),
            source: Box::new(source),
        };
        if st.skippable && skips(g, st, &values).map_err(|m| step_err(StepError::Invalid(m)))? {
            skipped[k] = true;
            if st.runs.is_some() {
                ex.fan_counts.push((st.index, 0));
            }
            continue;
        }
        let reads: Vec<&Value> = st
            .reads
            .iter()
            .map(|&id| {
                values[id].as_ref().ok_or_else(|| {
                    step_err(StepError::Invalid(format!(
                        "value `{}` was not computed",
                        g.values[id].name
                    )))
                })
            })
            .collect::<Result<_, _>>()?;
        let writes = match &st.kind {
            StepKind::Run {
                model,
                inputs,
                outputs,
                fan,
            } => {
                let model_err = |source| ExecError::Model {
                    pipeline: g.name.clone(),
                    step: st.index,
                    label: st.label.clone(),
                    source,
                };
                let tensor = |id: ValueId, item: Option<usize>| -> Result<&Tensor, ExecError> {
                    let v = values[id].as_ref();
                    let v = match (item, v) {
                        (Some(i), Some(Value::List(l))) => l.get(i),
                        (None, v) => v,
                        _ => None,
                    };
                    v.and_then(Value::as_tensor).ok_or_else(|| {
                        step_err(StepError::Invalid(format!(
                            "value `{}` is not a tensor{}",
                            g.values[id].name,
                            if item.is_some() { " list" } else { "" }
                        )))
                    })
                };
                let items = fan.as_ref().map(|f| {
                    values[f.over]
                        .as_ref()
                        .and_then(Value::as_list)
                        .map_or(0, <[Value]>::len)
                });
                let runs = items.unwrap_or(1);
                let mut per_output: Vec<Vec<Value>> = vec![Vec::new(); outputs.len()];
                for i in 0..runs {
                    if i > 0 {
                        if let Some(s) = stop() {
                            return Err(ExecError::stop(s));
                        }
                    }
                    let item = |id: ValueId| fan.as_ref().is_some_and(|f| f.over == id);
                    let ins: Vec<(&str, &Tensor)> = inputs
                        .iter()
                        .map(|(port, id)| Ok((port.as_str(), tensor(*id, item(*id).then_some(i))?)))
                        .collect::<Result<_, ExecError>>()?;
                    // A run keeps its input's frame, so boxes on its output map to the image.
                    let frame = ins.iter().find_map(|(_, t)| t.frame().cloned());
                    let rest = rest_of_request(g, &values, &skipped, k, runs - i, &|j| {
                        runner.fan_out_hint(j)
                    });
                    let outs = runner
                        .run_model(ModelCall {
                            model: *model,
                            inputs: ins,
                            outputs: outputs.iter().map(|(p, _)| p.as_str()).collect(),
                            rest,
                        })
                        .map_err(model_err)?;
                    if outs.len() != outputs.len() {
                        return Err(step_err(StepError::Invalid(format!(
                            "the model returned {} outputs, {} were asked for",
                            outs.len(),
                            outputs.len()
                        ))));
                    }
                    for (o, t) in per_output.iter_mut().zip(outs) {
                        o.push(Value::Tensor(t.with_frame(frame.clone())));
                    }
                }
                if items.is_some() || st.runs.is_some() {
                    ex.fan_counts.push((st.index, runs as u32));
                }
                if items.is_some() {
                    per_output.into_iter().map(Value::List).collect()
                } else {
                    per_output.into_iter().flatten().collect()
                }
            }
            StepKind::StreamChunks(sc) => {
                let model_err = |source| ExecError::Model {
                    pipeline: g.name.clone(),
                    step: st.index,
                    label: st.label.clone(),
                    source,
                };
                let (outs, runs) = run_stream(sc, &reads, &mut |left, call| {
                    if left.0 > 0 {
                        if let Some(s) = stop() {
                            return Err(ExecError::stop(s));
                        }
                    }
                    let rest = rest_of_request(g, &values, &skipped, k, left.1, &|j| {
                        runner.fan_out_hint(j)
                    });
                    runner
                        .run_model(ModelCall { rest, ..call })
                        .map_err(model_err)
                })
                .map_err(|e| match e {
                    StreamFailure::Step(e) => step_err(e),
                    StreamFailure::Exec(e) => e,
                })?;
                ex.fan_counts.push((st.index, runs));
                outs
            }
            StepKind::Generate {
                model,
                inputs,
                fan,
                max_tokens,
                stop: stop_tokens,
                sampling,
                ports,
                cache_len,
                conversation,
            } => {
                let prompt = match reads.first() {
                    Some(Value::Tokens(t)) => t.as_slice(),
                    _ => {
                        return Err(step_err(StepError::Invalid(
                            "the prompt is not token ids".into(),
                        )))
                    }
                };
                // A conversation continues from its cache, or feeds its history again.
                let before = conversation
                    .then(|| runner.take_conversation(st.index))
                    .flatten()
                    .unwrap_or_default();
                let (history, feed) = if *conversation {
                    before.next_turn(prompt, *max_tokens, *cache_len, runner.model_uses(*model))
                } else {
                    (0, prompt.to_vec())
                };
                let prompt = feed.as_slice();
                let fixed: Vec<(&str, &Tensor)> = inputs
                    .iter()
                    .map(|(port, id)| {
                        values[*id]
                            .as_ref()
                            .and_then(Value::as_tensor)
                            .map(|t| (port.as_str(), t))
                            .ok_or_else(|| {
                                step_err(StepError::Invalid(format!(
                                    "value `{}` is not a tensor",
                                    g.values[*id].name
                                )))
                            })
                    })
                    .collect::<Result<_, _>>()?;
                // Runs the planner assumes: the last request's, else the workload's.
                let expected_runs = runner
                    .fan_out_hint(st.index)
                    .map_or(fan.expected, |h| h.min(fan.max));
                let later =
                    rest_of_request(g, &values, &skipped, k, 0, &|j| runner.fan_out_hint(j));
                let call = GenerateCall {
                    model: *model,
                    history,
                    prompt,
                    fixed,
                    max_tokens: *max_tokens,
                    expected_runs,
                    stop: stop_tokens,
                    sampling,
                    ports,
                    cache_len: *cache_len,
                };
                let halted = std::cell::Cell::new(None);
                let reply = generate(
                    &call,
                    &later,
                    &mut |c| runner.run_model(c).map_err(GenerateError::Model),
                    &|| {
                        halted.set(stop());
                        halted.get().is_some()
                    },
                );
                if let Some(s) = halted.get() {
                    return Err(ExecError::stop(s));
                }
                let reply = reply.map_err(|e| match e {
                    GenerateError::Model(source) => ExecError::Model {
                        pipeline: g.name.clone(),
                        step: st.index,
                        label: st.label.clone(),
                        source,
                    },
                    e => step_err(StepError::Invalid(e.to_string())),
                })?;
                ex.fan_counts.push((st.index, reply.runs));
                if *conversation {
                    // Fed: the cache's tokens, this turn's, and every reply token but the pending.
                    let mut fed = if history > 0 {
                        before.history
                    } else {
                        Vec::new()
                    };
                    fed.extend_from_slice(prompt);
                    let n = reply.tokens.len();
                    let unfed =
                        usize::from(reply.pending.is_some_and(|p| !stop_tokens.contains(&p)));
                    fed.extend_from_slice(&reply.tokens[..n - unfed.min(n)]);
                    runner.keep_conversation(
                        st.index,
                        super::generate::Conversation {
                            history: fed,
                            pending: reply.pending,
                            model_uses: runner.model_uses(*model),
                        },
                    );
                }
                vec![Value::Tokens(reply.tokens)]
            }
            kind => {
                let t0 = Instant::now();
                let w = run_builtin(kind, &reads).map_err(step_err)?;
                ex.step_times.push((st.label.clone(), t0.elapsed()));
                w
            }
        };
        for (&id, v) in st.writes.iter().zip(writes) {
            values[id] = Some(v);
        }
    }
    for &id in &g.outputs {
        if let Some(v) = values[id].take() {
            ex.outputs.insert(g.values[id].name.clone(), v);
        }
    }
    Ok(ex)
}

/// The model runs left in the request when step `k` is about to make the first of its
/// `left` remaining runs: later fan-outs count the items of their list where it exists (or
/// of the value its length follows), else the runner's hint (at most the fan-out's maximum),
/// else what the workload expects.
fn rest_of_request(
    g: &PipelineGraph,
    values: &[Option<Value>],
    skipped: &[bool],
    k: usize,
    left: usize,
    hint: &dyn Fn(usize) -> Option<u32>,
) -> Vec<Stage> {
    let mut rest = Vec::new();
    for (j, st) in g.steps.iter().enumerate().skip(k) {
        let Some((model, _)) = st.kind.model_runs() else {
            continue;
        };
        let count = if j == k {
            left as u32
        } else if st.skippable && known_skip(g, st, values, skipped) {
            0
        } else {
            match &st.runs {
                None => 1,
                Some(f) => known_count(g, values, f)
                    .map(|c| c.min(f.max))
                    .or_else(|| hint(st.index).map(|h| h.min(f.max)))
                    .unwrap_or(f.expected),
            }
        };
        if count > 0 {
            rest.push(Stage { model, count });
        }
    }
    rest
}

/// Whether step `st` is skipped, now that the values it reads are computed or skipped: a
/// read value is absent (its step was skipped), or its gate does not hold.
fn skips(g: &PipelineGraph, st: &StepNode, values: &[Option<Value>]) -> Result<bool, String> {
    if st.reads.iter().any(|&id| values[id].is_none()) {
        return Ok(true);
    }
    match &st.gate {
        None => Ok(false),
        Some(gate) => match &values[gate.value] {
            None => Ok(true),
            Some(v) => gate
                .holds(v)
                .map(|runs| !runs)
                .map_err(|e| format!("gate on `{}`: {e}", g.values[gate.value].name)),
        },
    }
}

/// Whether a later step is already known to be skipped: a value it reads (or its gate's) comes
/// from a skipped step, or its gate's value is computed and the gate does not hold.
fn known_skip(
    g: &PipelineGraph,
    st: &StepNode,
    values: &[Option<Value>],
    skipped: &[bool],
) -> bool {
    let from_skipped = |id: ValueId| {
        g.values[id]
            .producer
            .is_some_and(|p| skipped.get(p).copied().unwrap_or(false))
    };
    if st
        .reads
        .iter()
        .chain(st.gate.as_ref().map(|x| &x.value))
        .any(|&id| from_skipped(id))
    {
        return true;
    }
    st.gate.as_ref().is_some_and(|gate| {
        values[gate.value]
            .as_ref()
            .is_some_and(|v| gate.holds(v) == Ok(false))
    })
}

/// A fan-out's run count, once the value it follows (or one of the same length) is computed.
fn known_count(g: &PipelineGraph, values: &[Option<Value>], f: &Fan) -> Option<u32> {
    values[f.over]
        .as_ref()
        .and_then(|v| f.count_for(v))
        .or_else(|| {
            values[g.values[f.over].len_root]
                .as_ref()
                .and_then(|v| f.count_for(v))
        })
}

/// Why a chunk loop stopped: a problem with its values, or a model run's failure.
enum StreamFailure {
    Step(StepError),
    Exec(ExecError),
}

/// One model run of a chunk loop: `((run, runs left), call)`; the caller fills in `rest`.
type RunChunk<'r> = dyn FnMut((usize, usize), ModelCall<'_>) -> Result<Vec<Tensor>, ExecError> + 'r;

/// Runs `sc`'s model over the audio in `reads[0]` chunk by chunk, carrying its state; returns
/// the stacked outputs and the number of runs.
fn run_stream(
    sc: &Stream,
    reads: &[&Value],
    run: &mut RunChunk<'_>,
) -> Result<(Vec<Value>, u32), StreamFailure> {
    let invalid = |m: String| StreamFailure::Step(StepError::Invalid(m));
    let Some(Value::Audio(audio)) = reads.first() else {
        return Err(invalid("expected audio".into()));
    };
    if let Some(rate) = sc.sample_rate {
        if audio.sample_rate != rate {
            return Err(invalid(format!(
                "the audio is at {} Hz, the model takes {rate} Hz (add a `Resample(to_hz: \
                 {rate})` step before it)",
                audio.sample_rate
            )));
        }
    }
    let samples = &audio.samples;
    let chunks = samples.len().div_ceil(sc.chunk);
    if chunks > sc.fan.max as usize {
        return Err(invalid(format!(
            "{} samples make {chunks} chunks of {}, more than the step's max of {} (at most {} \
             samples{})",
            samples.len(),
            sc.chunk,
            sc.fan.max,
            sc.fan.max as usize * sc.chunk,
            match audio.sample_rate {
                0 => String::new(),
                r => format!(
                    ", {:.1} s",
                    (sc.fan.max as usize * sc.chunk) as f64 / r as f64
                ),
            }
        )));
    }
    let tensor = |shape: &[usize], data: Vec<f32>| {
        Tensor::f32(shape.to_vec(), data).map_err(|e| StreamFailure::Step(e.into()))
    };
    let consts: Vec<(&str, &Tensor)> = sc
        .inputs
        .iter()
        .enumerate()
        .map(|(i, (port, _))| match reads.get(i + 1) {
            Some(Value::Tensor(t)) => Ok((port.as_str(), t)),
            _ => Err(invalid(format!("input `{port}` is not a tensor"))),
        })
        .collect::<Result<_, _>>()?;
    let mut state: Vec<Tensor> = sc
        .state
        .iter()
        .map(|(_, _, shape)| tensor(shape, vec![0.0; shape.iter().product()]))
        .collect::<Result<_, _>>()?;
    let mut collected: Vec<Vec<f32>> = vec![Vec::new(); sc.outputs.len()];
    let width = sc.context + sc.chunk;
    let mut x = vec![0f32; width];
    for i in 0..chunks {
        // The previous input's last `context` samples, then this chunk (zero-padded).
        x.copy_within(width - sc.context.., 0);
        let part = &samples[i * sc.chunk..((i + 1) * sc.chunk).min(samples.len())];
        x[sc.context..sc.context + part.len()].copy_from_slice(part);
        x[sc.context + part.len()..].fill(0.0);
        let input = tensor(&sc.input.1, x.clone())?;
        let mut inputs = vec![(sc.input.0.as_str(), &input)];
        inputs.extend(
            sc.state
                .iter()
                .zip(&state)
                .map(|((_, i, _), t)| (i.as_str(), t)),
        );
        inputs.extend(consts.iter().copied());
        let mut outputs: Vec<&str> = sc.outputs.iter().map(|(p, _, _)| p.as_str()).collect();
        outputs.extend(sc.state.iter().map(|(o, _, _)| o.as_str()));
        let outs = run(
            (i, chunks - i),
            ModelCall {
                model: sc.model,
                inputs,
                outputs,
                rest: Vec::new(),
            },
        )
        .map_err(StreamFailure::Exec)?;
        if outs.len() != sc.outputs.len() + sc.state.len() {
            return Err(invalid(format!(
                "the model returned {} outputs, {} were asked for",
                outs.len(),
                sc.outputs.len() + sc.state.len()
            )));
        }
        let (kept, carried) = outs.split_at(sc.outputs.len());
        for ((c, t), (port, shape, _)) in collected.iter_mut().zip(kept).zip(&sc.outputs) {
            if t.shape() != shape.as_slice() {
                return Err(invalid(format!(
                    "output `{port}` is {:?}, the model says {shape:?}",
                    t.shape()
                )));
            }
            c.extend(t.to_f32().map_err(|e| StreamFailure::Step(e.into()))?);
        }
        for ((s, t), (out, _, shape)) in state.iter_mut().zip(carried).zip(&sc.state) {
            if t.shape() != shape.as_slice() {
                return Err(invalid(format!(
                    "state output `{out}` is {:?}, its input takes {shape:?}",
                    t.shape()
                )));
            }
            *s = t.clone();
        }
    }
    let outs = collected
        .into_iter()
        .zip(&sc.outputs)
        .map(|(data, (_, shape, _))| {
            let mut s = vec![chunks];
            s.extend_from_slice(shape);
            tensor(&s, data).map(Value::Tensor)
        })
        .collect::<Result<_, _>>()?;
    Ok((outs, chunks as u32))
}

/// The label of step `s` of `g` (for messages).
pub fn step_label(g: &PipelineGraph, s: &StepNode) -> String {
    format!("pipeline `{}` step {} ({})", g.name, s.index, s.label)
}
