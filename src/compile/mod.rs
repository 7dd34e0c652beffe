//! The one compile chain: ONNX file → IR ([`crate::onnx::import`]) → optimized IR
//! ([`crate::ir::passes::optimize`]) → packed model ([`crate::packed::pack_graph`]). Every entry
//! point that turns ONNX into something runnable (`texstream compile`, `texstream infer` on an
//! `.onnx`, the engine's compile-on-open in [`auto`]) goes through [`Compiler`], as tract chains
//! `onnx().model_for_path(..)` into an optimized, runnable model.
pub mod auto;
pub mod precision;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::ir::passes::PassReport;
use crate::ir::TensorData;
use crate::onnx::{import, ImportError, ImportOptions};
use crate::packed::{pack_graph, PackOptions, Packed};
use crate::Precision;

/// Why a model did not compile; names the file.
#[derive(Debug, thiserror::Error)]
pub enum CompileError {
    #[error(transparent)]
    Import(Box<ImportError>),
    #[error("{path}: {source}")]
    Pack {
        path: PathBuf,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("{path}: {msg}")]
    Options { path: PathBuf, msg: String },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        #[source]
        source: Box<crate::packed::PackedError>,
    },
}

impl From<ImportError> for CompileError {
    fn from(e: ImportError) -> Self {
        CompileError::Import(Box::new(e))
    }
}

/// What a compilation did, for `texstream compile`'s report.
#[derive(Debug, Clone)]
pub struct CompileReport {
    pub opset: i64,
    pub onnx_ops: BTreeMap<String, usize>,
    pub nodes_imported: usize,
    pub passes: PassReport,
    pub op_histogram: BTreeMap<String, usize>,
}

/// A compiled model and its report.
pub struct Compiled {
    pub packed: Packed,
    pub report: CompileReport,
}

/// Builds a packed model from an ONNX file: set the input shapes, bindings and packing options,
/// then [`Compiler::compile`].
#[derive(Clone, Debug)]
pub struct Compiler {
    path: PathBuf,
    import: ImportOptions,
    pack: PackOptions,
}

impl Compiler {
    /// An fp16 compile of `onnx` with 1 MiB pages and default compensation.
    pub fn new(onnx: &Path) -> Compiler {
        Compiler {
            path: onnx.to_path_buf(),
            import: ImportOptions::default(),
            pack: PackOptions::new(Precision::F16),
        }
    }

    /// Fixes input `name` to `dims`.
    pub fn input_shape(mut self, name: &str, dims: Vec<usize>) -> Compiler {
        self.import.input_shapes.insert(name.into(), dims);
        self
    }

    /// Binds input `name` to a constant (it leaves the model's inputs and lets the importer
    /// fold on it, e.g. Silero VAD's `sr`).
    pub fn bind(mut self, name: &str, value: TensorData) -> Compiler {
        self.import.bindings.insert(name.into(), value);
        self
    }

    /// Fixes the inputs from example values, as `texstream infer` does: float inputs give
    /// input shapes, integer inputs (Silero VAD's `sr`) are bound as constants so the importer
    /// can fold on them.
    pub fn for_inputs(mut self, inputs: &[(String, crate::runtime::HostTensor)]) -> Compiler {
        for (name, a) in inputs {
            self = if a.integer {
                let v = a.data.iter().map(|&x| x as i64).collect();
                self.bind(name, TensorData::from_i64(a.shape.clone(), v))
            } else {
                self.input_shape(name, a.shape.clone())
            };
        }
        self
    }

    /// `NAME=D0xD1x...` (the CLI's `--shape`).
    pub fn shape_spec(mut self, spec: &str) -> Result<Compiler, CompileError> {
        self.import
            .add_input_spec(spec)
            .map_err(|e| self.options_error(e.to_string()))?;
        Ok(self)
    }

    /// `NAME=VALUE` (the CLI's `--bind`).
    pub fn bind_spec(mut self, spec: &str) -> Result<Compiler, CompileError> {
        self.import
            .add_binding(spec)
            .map_err(|e| self.options_error(e.to_string()))?;
        Ok(self)
    }

    /// Keeps a with-past decoder's key/value caches as state of `max_len` positions, written in
    /// place at the position that input `position_input` gives (see [`crate::onnx::KvCache`]).
    pub fn kv_cache(mut self, max_len: usize, position_input: &str) -> Compiler {
        self.import.kv_cache = Some(crate::onnx::KvCache {
            max_len,
            position_input: position_input.into(),
        });
        self
    }

    pub fn precision(mut self, p: Precision) -> Compiler {
        self.pack.precision = p;
        self
    }

    pub fn page_bytes(mut self, bytes: u64) -> Compiler {
        self.pack.page_bytes = bytes;
        self
    }

    pub fn compensate_max_values(mut self, n: usize) -> Compiler {
        self.pack.compensate_max_values = n;
        self
    }

    fn options_error(&self, msg: String) -> CompileError {
        CompileError::Options {
            path: self.path.clone(),
            msg,
        }
    }

    /// Imports, optimizes and packs.
    pub fn compile(self) -> Result<Compiled, CompileError> {
        // Before the import: a page that no atlas layer holds would only fail (or fill RAM)
        // later.
        let tpp = crate::packed::format::texels_per_page(self.pack.page_bytes, self.pack.precision)
            .map_err(|e| self.options_error(format!("page size: {e}")))?;
        let mut model = import(&self.path, &self.import)?;
        let nodes_imported = model.graph.nodes.len();
        let pass_opts = crate::ir::passes::PassOptions {
            page_values: (tpp * 4) as usize,
        };
        let passes = crate::ir::passes::optimize_with(&mut model.graph, &pass_opts);
        let op_histogram = model.graph.op_histogram();
        let report = CompileReport {
            opset: model.opset,
            onnx_ops: model.onnx_ops.clone(),
            nodes_imported,
            passes: passes.clone(),
            op_histogram,
        };
        let mut meta = model.metadata().clone();
        // What was bound is part of what the packed model is (`auto` compares it).
        for (name, t) in &self.import.bindings {
            meta.insert(bind_key(name), bind_note(t));
        }
        let packed = pack_graph(
            model.graph,
            &self.path.display().to_string(),
            passes,
            meta,
            self.pack,
        )
        .map_err(|e| CompileError::Pack {
            path: self.path.clone(),
            source: e.into(),
        })?;
        Ok(Compiled { packed, report })
    }

    /// Compiles and writes the packed model to `out` (atomically).
    pub fn compile_to(self, out: &Path) -> Result<Compiled, CompileError> {
        let c = self.compile()?;
        c.packed.write(out).map_err(|source| CompileError::Write {
            path: out.to_path_buf(),
            source: Box::new(source),
        })?;
        Ok(c)
    }
}

/// The packed header's metadata key that records a bound input's value.
pub fn bind_key(input: &str) -> String {
    format!("texstream.bind.{input}")
}

/// A bound value as that metadata records it: the values, comma-separated.
pub fn bind_note(t: &crate::ir::TensorData) -> String {
    let v: Vec<String> = match &t.values {
        crate::ir::tensor::Values::F(v) => v.iter().map(|x| x.to_string()).collect(),
        crate::ir::tensor::Values::I(v) => v.iter().map(|x| x.to_string()).collect(),
    };
    v.join(",")
}
