//! Keeps a workload's packed models in step with their ONNX sources: a model declared as
//! `Onnx(path)` (without an explicit `packed` file) is compiled to `path.tspk` with the workload's
//! input shapes, precision and page size when that file is missing, older than the ONNX file,
//! unreadable, or was compiled for something else. The workload file stays the one place that
//! says which shapes a model runs at.
use std::path::{Path, PathBuf};

use super::workload_run::RunError;
use crate::ir::passes::optimize;
use crate::onnx::{import, ImportOptions};
use crate::packed::format::texels_per_page;
use crate::packed::{pack_graph, PackOptions, PackedModel, StoredPrecision};
use crate::workload::profiles::resolve;
use crate::workload::{load_workload, LoadedWorkload, ModelSource, ModelSpec, Precision};

/// What [`ensure_packed`] did for one model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PackedStatus {
    /// The packed file matched; nothing done.
    UpToDate(PathBuf),
    /// Compiled, with the reason.
    Compiled(PathBuf, String),
}

fn stored(p: Precision) -> StoredPrecision {
    match p {
        Precision::F16 => StoredPrecision::F16,
        Precision::F32 => StoredPrecision::F32,
    }
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
    let pm = match PackedModel::open(packed) {
        Ok(pm) => pm,
        Err(e) => return Some(format!("the packed file is unreadable ({e})")),
    };
    if pm.header().compiler_revision < crate::packed::format::COMPILER_REVISION {
        return Some(format!(
            "compiled by an older texstream (graph passes revision {}, now {})",
            pm.header().compiler_revision,
            crate::packed::format::COMPILER_REVISION
        ));
    }
    if pm.header().precision != stored(spec.precision) {
        return Some(format!(
            "compiled as {:?}, the workload asks for {:?}",
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
    let g = pm.graph();
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

fn compile(
    w: &LoadedWorkload,
    spec: &ModelSpec,
    onnx: &Path,
    packed: &Path,
    page_bytes: u64,
) -> Result<(), RunError> {
    let err = |msg: String| RunError::Model {
        workload: w.path.clone(),
        model: spec.name.clone(),
        msg,
    };
    texels_per_page(page_bytes, stored(spec.precision))
        .map_err(|e| err(format!("page_size: {e}")))?;
    let mut opts = ImportOptions::default();
    for (name, dims) in &spec.inputs {
        opts.input_shapes
            .insert(name.clone(), dims.iter().map(|&d| d as usize).collect());
    }
    let mut model = import(onnx, &opts).map_err(|e| err(e.to_string()))?;
    let report = optimize(&mut model.graph);
    let meta = model.metadata().clone();
    let packed_model = pack_graph(
        model.graph,
        &onnx.display().to_string(),
        report,
        meta,
        PackOptions {
            page_bytes,
            ..PackOptions::new(stored(spec.precision))
        },
    )
    .map_err(|e| err(format!("{}: {e}", onnx.display())))?;
    packed_model
        .write(packed)
        .map_err(|e| err(format!("writing {}: {e}", packed.display())))
}

/// Compiles every `Onnx` model of the workload at `path` whose packed file is not current;
/// `on_compile(model name, reason)` is called before each compilation (for progress output).
pub fn ensure_packed(
    path: &Path,
    mut on_compile: impl FnMut(&str, &str),
) -> Result<Vec<PackedStatus>, RunError> {
    let w = load_workload(path)?;
    let page_bytes = w.page_bytes()?;
    let mut out = Vec::new();
    for spec in &w.spec.models {
        let (ModelSource::Onnx(o), None) = (&spec.source, &spec.packed) else {
            continue;
        };
        let onnx = resolve(&w, o);
        if !onnx.exists() {
            return Err(RunError::Model {
                workload: w.path.clone(),
                model: spec.name.clone(),
                msg: format!(
                    "ONNX file {} does not exist: fetch or generate it first (scripts/fetch_models.py \
                     fetches the default models; the workload file's comments say where others come from)",
                    onnx.display()
                ),
            });
        }
        let packed = onnx.with_extension("tspk");
        match stale_reason(&onnx, &packed, spec, page_bytes) {
            None => out.push(PackedStatus::UpToDate(packed)),
            Some(reason) => {
                on_compile(&spec.name, &reason);
                compile(&w, spec, &onnx, &packed, page_bytes)?;
                out.push(PackedStatus::Compiled(packed, reason));
            }
        }
    }
    Ok(out)
}
