//! Load profiles for a workload's models: from the packed model when it exists, else from a synthetic
//! spec or a built-in size table, always saying which.
use super::{
    ocr, LoadedWorkload, ModelSource, ModelSpec, ProfileFallback, SyntheticModel, WorkloadError,
};
use scheduler::synth::{self, TransformerSpec, UniformSpec};
use scheduler::{parse_size, Profile};
use std::fmt;
use std::path::{Path, PathBuf};

/// Where a profile came from (printed by `texstream plan`).
#[derive(Debug, Clone, PartialEq)]
pub enum ProfileSource {
    Packed(PathBuf),
    Synthetic,
    /// A built-in table; the string says what it approximates.
    Builtin(String),
}

impl fmt::Display for ProfileSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileSource::Packed(p) => write!(f, "packed model {}", p.display()),
            ProfileSource::Synthetic => f.write_str("synthetic spec in the workload"),
            ProfileSource::Builtin(d) => write!(f, "built-in size table: {d}"),
        }
    }
}

/// Resolves a path written in the workload against the workload file's directory.
pub fn resolve(w: &LoadedWorkload, p: &str) -> PathBuf {
    w.resolve(p)
}

/// Reads the load profile of a packed model (`src/packed/`). Compute times use the same assumed
/// device as the built-in tables: 1 TFLOP/s and 200 GB/s, whichever bound is slower per step; a
/// calibration run will replace this. Activation bytes are at `activations` (default: the weights').
pub fn packed_profile(
    w: &LoadedWorkload,
    path: &Path,
    name: &str,
    page_bytes: u64,
    activations: Option<crate::Precision>,
) -> Result<Profile, WorkloadError> {
    let invalid = |msg: String| WorkloadError::Invalid {
        path: w.path.clone(),
        msg,
    };
    let m = crate::packed::PackedModel::open_lazy(path)
        .map_err(|e| invalid(format!("model `{name}`: {e}")))?;
    let prof = m
        .header()
        .load_profile_at(name, crate::packed::CostModel::NOMINAL, activations);
    if prof.page_bytes != page_bytes {
        return Err(invalid(format!(
            "model `{name}`: {} has {}-byte pages but the workload's page_size is {page_bytes}",
            path.display(),
            prof.page_bytes
        )));
    }
    Ok(prof)
}

fn synthetic(
    w: &LoadedWorkload,
    name: &str,
    s: &SyntheticModel,
    page_bytes: u64,
) -> Result<Profile, WorkloadError> {
    let size = |v: &str, what: &str| {
        parse_size(v).map_err(|e| WorkloadError::Invalid {
            path: w.path.clone(),
            msg: format!("model `{name}` {what}: {e}"),
        })
    };
    Ok(match s {
        SyntheticModel::Uniform(u) => synth::uniform(
            name,
            page_bytes,
            &UniformSpec {
                layers: u.layers,
                bytes_per_layer: size(&u.bytes_per_layer, "bytes_per_layer")?,
                compute_per_layer_s: u.compute_per_layer_us * 1e-6,
                activation_bytes: match &u.activation {
                    Some(a) => size(a, "activation")?,
                    None => 0,
                },
            },
        ),
        SyntheticModel::Transformer(t) => {
            if t.tflops.is_nan() || t.tflops <= 0.0 {
                return Err(WorkloadError::Invalid {
                    path: w.path.clone(),
                    msg: format!("model `{name}`: tflops must be positive"),
                });
            }
            synth::transformer(
                name,
                page_bytes,
                &TransformerSpec {
                    d_model: t.d_model,
                    layers: t.layers,
                    vocab: t.vocab,
                    seq_len: t.seq_len,
                    bytes_per_param: 2,
                    flops_per_s: t.tflops * 1e12,
                },
            )
        }
    })
}

/// The profile of `model`, and where it came from. Order: a synthetic source; the packed model file
/// (explicit `packed`, a `Packed(..)` source, or the ONNX path with extension `.tspk`) when it exists and
/// can be read; the `profile_fallback`. Otherwise an error saying how to get one.
pub fn load_profile(
    w: &LoadedWorkload,
    model: &ModelSpec,
    page_bytes: u64,
) -> Result<(Profile, ProfileSource), WorkloadError> {
    let bytes_per_value = match model.precision {
        crate::Precision::F16 => 2,
        crate::Precision::F32 => 4,
    };
    let packed = match (&model.source, &model.packed) {
        (ModelSource::Synthetic(s), _) => {
            return Ok((
                synthetic(w, &model.name, s, page_bytes)?,
                ProfileSource::Synthetic,
            ))
        }
        (_, Some(p)) | (ModelSource::Packed(p), None) => Some(resolve(w, p)),
        (ModelSource::Onnx(o), None) => Some(resolve(w, o).with_extension("tspk")),
    };
    if let Some(p) = packed.filter(|p| p.exists()) {
        let prof = packed_profile(w, &p, &model.name, page_bytes, model.activations)?;
        return Ok((prof, ProfileSource::Packed(p)));
    }
    match &model.profile_fallback {
        Some(ProfileFallback::Synthetic(s)) => {
            Ok((synthetic(w, &model.name, s, page_bytes)?, ProfileSource::Synthetic))
        }
        Some(ProfileFallback::Builtin(table)) => {
            let (prof, desc) = ocr::builtin_profile(table, &model.name, page_bytes, bytes_per_value)
                .ok_or_else(|| WorkloadError::Invalid {
                    path: w.path.clone(),
                    msg: format!(
                        "model `{}`: unknown built-in profile `{table}` (known: {})",
                        model.name,
                        ocr::BUILTIN_TABLES.join(", ")
                    ),
                })?;
            Ok((prof, ProfileSource::Builtin(desc)))
        }
        None => Err(WorkloadError::Invalid {
            path: w.path.clone(),
            msg: format!(
                "model `{}` has no load profile: compile it with `texstream compile` to a packed file, \
                 or give `profile_fallback`",
                model.name
            ),
        }),
    }
}
