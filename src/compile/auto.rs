//! Keeps a workload's packed models in step with their ONNX sources: a model declared as
//! `Onnx(path)` is compiled to its `packed` file (default: `path.tspk`) with the workload's
//! input shapes, precision and page size when that file is missing, older than the ONNX file,
//! unreadable, or was compiled for something else. The workload file stays the one place that
//! says which shapes a model runs at.
use std::path::{Path, PathBuf};

use super::{CompileError, Compiler};
use crate::packed::PackedModel;
use crate::workload::{LoadedWorkload, ModelSource, ModelSpec, WorkloadError};

/// What [`ensure_packed`] did for one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackedStatus {
    /// The packed file matched; nothing done.
    UpToDate(PathBuf),
    /// Compiled, with the reason.
    Compiled(PathBuf, String),
}

/// Why keeping a workload's models compiled failed.
#[derive(Debug, thiserror::Error)]
pub enum AutoCompileError {
    #[error(transparent)]
    Workload(#[from] WorkloadError),
    #[error("{workload}: model `{model}`: {msg}")]
    Missing {
        workload: PathBuf,
        model: String,
        msg: String,
    },
    #[error("{workload}: model `{model}`: {source}")]
    Compile {
        workload: PathBuf,
        model: String,
        #[source]
        source: Box<CompileError>,
    },
}

/// Why `packed` must be rebuilt from `onnx` for `spec`, or None when it is current.
fn stale_reason(onnx: &Path, packed: &Path, spec: &ModelSpec, page_bytes: u64) -> Option<String> {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if !packed.exists() {
        return Some("no packed file yet".into());
    }
    if let (Some(o), Some(p)) = (modified(onnx), modified(packed)) {
        if o > p {
            return Some("the ONNX file is newer".into());
        }
    }
    // A bad preamble or header (checksum included) still makes the file unreadable here, so it
    // is recompiled; a corrupt page is caught when the engine reads it.
    let pm = match PackedModel::open_lazy(packed) {
        Ok(pm) => pm,
        // A header this build's ops no longer read, from an older compiler.
        Err(crate::packed::PackedError::Outdated { found, current, .. }) => {
            return Some(format!(
                "compiled by an older texstream (graph passes revision {found}, now {current})"
            ))
        }
        Err(crate::packed::PackedError::Newer { found, current, .. }) => {
            return Some(format!(
                "compiled by a newer texstream (graph passes revision {found}, this one {current})"
            ))
        }
        Err(e) => return Some(format!("the packed file is unreadable ({e})")),
    };
    if pm.header().compiler_revision < crate::packed::format::COMPILER_REVISION {
        return Some(format!(
            "compiled by an older texstream (graph passes revision {}, now {})",
            pm.header().compiler_revision,
            crate::packed::format::COMPILER_REVISION
        ));
    }
    if pm.header().precision != spec.precision {
        return Some(format!(
            "compiled as {}, the workload asks for {}",
            pm.header().precision,
            spec.precision
        ));
    }
    if pm.page_bytes() != page_bytes {
        return Some(format!(
            "compiled with {}-byte pages, the workload uses {page_bytes}",
            pm.page_bytes()
        ));
    }
    let meta = &pm.header().metadata;
    for (name, v) in &spec.bind {
        let want = v.to_string();
        match meta.get(&super::bind_key(name)) {
            Some(got) if *got == want => {}
            Some(got) => {
                return Some(format!(
                    "input `{name}` was bound to {got}, the workload binds {want}"
                ))
            }
            None => return Some(format!("input `{name}` was not bound")),
        }
    }
    if let Some(k) = meta.keys().find(|k| {
        k.strip_prefix("texstream.bind.")
            .is_some_and(|n| !spec.bind.contains_key(n))
    }) {
        return Some(format!(
            "input `{}` was bound, the workload does not bind it",
            &k["texstream.bind.".len()..]
        ));
    }
    let g = pm.graph();
    let cache = g.state.first().map(|s| g.tensors[s.tensor].shape[s.axis]);
    let want_cache = spec.kv_cache.as_ref().map(|k| k.max_len as usize);
    if cache != want_cache {
        let say = |c: Option<usize>| {
            c.map_or("no key/value cache".to_string(), |n| {
                format!("a {n}-position key/value cache")
            })
        };
        return Some(format!(
            "compiled with {}, the workload asks for {}",
            say(cache),
            say(want_cache)
        ));
    }
    for (name, dims) in &spec.inputs {
        let want: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
        match g.inputs.iter().find(|p| &p.name == name) {
            Some(p) if g.tensors[p.tensor].shape == want => {}
            Some(p) => {
                return Some(format!(
                    "input `{name}` was compiled as {:?}, the workload says {want:?}",
                    g.tensors[p.tensor].shape
                ))
            }
            None => return Some(format!("the packed model has no input `{name}`")),
        }
    }
    None
}

/// The packed file a workload model runs from.
pub fn packed_path(w: &LoadedWorkload, spec: &ModelSpec) -> Option<PathBuf> {
    match (&spec.source, &spec.packed) {
        (_, Some(p)) | (ModelSource::Packed(p), None) => Some(w.resolve(p)),
        (ModelSource::Onnx(o), None) => Some(w.resolve(o).with_extension("tspk")),
        (ModelSource::Synthetic(_), None) => None,
    }
}

/// Compiles every `Onnx` model of `w` whose packed file is not current; `on_compile(model
/// name, reason)` is called before each compilation (for progress output).
pub fn ensure_packed(
    w: &LoadedWorkload,
    mut on_compile: impl FnMut(&str, &str),
) -> Result<Vec<PackedStatus>, AutoCompileError> {
    let page_bytes = w.page_bytes()?;
    let mut out = Vec::new();
    for spec in &w.spec.models {
        let ModelSource::Onnx(o) = &spec.source else {
            continue;
        };
        let onnx = w.resolve(o);
        if !onnx.exists() {
            return Err(AutoCompileError::Missing {
                workload: w.path.clone(),
                model: spec.name.clone(),
                msg: format!(
                    "ONNX file {} does not exist (paths are relative to the workload file): fetch \
                     or generate it first (scripts/fetch_models.py fetches the default models; the \
                     workload file's comments say where others come from)",
                    onnx.display()
                ),
            });
        }
        let packed = match &spec.packed {
            Some(p) => w.resolve(p),
            None => onnx.with_extension("tspk"),
        };
        match stale_reason(&onnx, &packed, spec, page_bytes) {
            None => out.push(PackedStatus::UpToDate(packed)),
            Some(reason) => {
                on_compile(&spec.name, &reason);
                let mut c = Compiler::new(&onnx)
                    .precision(spec.precision)
                    .page_bytes(page_bytes);
                for (name, dims) in &spec.inputs {
                    c = c.input_shape(name, dims.iter().map(|&d| d as usize).collect());
                }
                if let Some(kv) = &spec.kv_cache {
                    c = c.kv_cache(kv.max_len as usize, kv.position_input());
                }
                for (name, &v) in &spec.bind {
                    c = c.bind(name, crate::ir::TensorData::from_i64(vec![], vec![v]));
                }
                c.compile_to(&packed)
                    .map_err(|source| AutoCompileError::Compile {
                        workload: w.path.clone(),
                        model: spec.name.clone(),
                        source: Box::new(source),
                    })?;
                out.push(PackedStatus::Compiled(packed, reason));
            }
        }
    }
    Ok(out)
}
