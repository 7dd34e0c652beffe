//! Chain pipelines of `texstream run`: only `Run` steps without fan-out, each once per frame,
//! values passed by name, the first ones read from the workload's `.npy` demo inputs.
use super::*;

/// One `Run` step of a chain pipeline: model input → value, model output → value.
#[derive(Debug, Clone)]
pub(super) struct ChainStep {
    pub(super) model: usize,
    pub(super) inputs: Vec<(String, String)>,
    pub(super) outputs: Vec<(String, String)>,
}

/// Reads a chain pipeline: every step a `Run` without fan-out whose inputs are demo inputs or
/// earlier outputs.
pub(super) fn chain_shape(
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
            let a = crate::runtime::npy::read_npy(&path)
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

/// Runs the chain's steps once, values passed by name; returns the values no step reads.
pub(super) fn run_chain_frame(d: &mut Driver<'_>) -> Result<Vec<NamedTensor>, RunError> {
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
