//! ONNX backend node tests (Debian `libonnx-testdata`) for every op texstream claims: import with
//! the test's input shapes, run on Vulkan in fp32, compare with the expected outputs.
//!
//! A case is selected when its model uses at least one op of `texstream::onnx::SUPPORTED_OPS`.
//! Cases whose model also uses an unclaimed op (e.g. function-expanded tests) are skipped with
//! that reason; cases listed in `tests/conformance_skips.txt` are skipped with the listed reason.
//! Every other selected case must pass. Prints one line per case, then `N passed, M failed, K
//! skipped`.
//!
//! Environment: `TEXSTREAM_ONNX_NODE_TESTS` (data directory, default
//! `/usr/share/libonnx-testdata/data/node`), `TEXSTREAM_CONF_FILTER` (substring of case names to
//! run), `TEXSTREAM_CONF_RUN_SKIPPED=0` (do not run skip-listed cases; by default they run, their
//! errors are printed and a listed case that passes is reported as a stale entry),
//! `TEXSTREAM_CONF_THREADS` (worker threads, default 2).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use texstream::ir::passes::optimize;
use texstream::ir::{DType, TensorData, Values};
use texstream::onnx::{
    import, read_tensor_pb, summarize_model, ImportError, ImportOptions, Model, ModelSummary,
    SUPPORTED_OPS,
};
use texstream::packed::{pack_graph, PackOptions, Precision};
use texstream::runtime::{Executable, HostTensor};
use vk_backend::{Device, DeviceOptions};

const DEFAULT_DATA: &str = "/usr/share/libonnx-testdata/data/node";
const SKIP_FILE: &str = "tests/conformance_skips.txt";
/// ONNX's backend test runner defaults.
const RTOL: f64 = 1e-3;
const ATOL: f64 = 1e-4;

/// One test data set: inputs (name from the .pb or the model's input order) and expected outputs.
struct DataSet {
    inputs: Vec<(String, TensorData)>,
    outputs: Vec<(String, TensorData)>,
}

#[derive(Debug)]
enum Outcome {
    /// With a note (inputs bound as constants).
    Pass(String),
    Fail(String),
    Skip(String),
}

/// The documented skip list: case names or `*` patterns, each with a reason.
struct SkipList {
    entries: Vec<(String, String)>,
}

impl SkipList {
    fn load(path: &Path) -> SkipList {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|e| panic!("cannot read skip list {}: {e}", path.display()));
        let mut entries = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (pat, reason) = line.split_once(':').unwrap_or_else(|| {
                panic!(
                    "{}:{}: expected `case_name: reason`, got `{line}`",
                    path.display(),
                    i + 1
                )
            });
            let reason = reason.trim();
            assert!(
                !reason.is_empty(),
                "{}:{}: skip entry `{pat}` has no reason",
                path.display(),
                i + 1
            );
            entries.push((pat.trim().to_string(), reason.to_string()));
        }
        SkipList { entries }
    }

    fn reason(&self, case: &str) -> Option<&str> {
        self.entries
            .iter()
            .find_map(|(p, r)| wildcard(p, case).then_some(r.as_str()))
    }
}

/// `*` matches any run of characters; everything else literally.
fn wildcard(pattern: &str, text: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    if parts.len() == 1 {
        return pattern == text;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !text.starts_with(first) || text.len() < first.len() + last.len() || !text.ends_with(last) {
        return false;
    }
    let mut rest = &text[first.len()..text.len() - last.len()];
    for mid in &parts[1..parts.len() - 1] {
        match rest.find(mid) {
            Some(i) => rest = &rest[i + mid.len()..],
            None => return false,
        }
    }
    true
}

fn numbered_pbs(dir: &Path, prefix: &str) -> Result<Vec<PathBuf>, String> {
    let mut v: Vec<(usize, PathBuf)> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().to_string();
            let idx = name
                .strip_prefix(prefix)?
                .strip_suffix(".pb")?
                .parse()
                .ok()?;
            Some((idx, e.path()))
        })
        .collect();
    v.sort();
    Ok(v.into_iter().map(|(_, p)| p).collect())
}

fn read_data_sets(case_dir: &Path, summary: &ModelSummary) -> Result<Vec<DataSet>, String> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(case_dir)
        .map_err(|e| format!("{}: {e}", case_dir.display()))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with("test_data_set_"))
        })
        .collect();
    dirs.sort();
    if dirs.is_empty() {
        return Err("no test_data_set_* directory".into());
    }
    let read =
        |paths: Vec<PathBuf>, names: &[String]| -> Result<Vec<(String, TensorData)>, String> {
            paths
                .iter()
                .enumerate()
                .map(|(i, p)| {
                    let (name, data) = read_tensor_pb(p).map_err(|e| e.to_string())?;
                    let name = if name.is_empty() {
                        names.get(i).cloned().unwrap_or_default()
                    } else {
                        name
                    };
                    Ok((name, data))
                })
                .collect()
        };
    dirs.into_iter()
        .map(|d| {
            Ok(DataSet {
                inputs: read(numbered_pbs(&d, "input_")?, &summary.inputs)?,
                outputs: read(numbered_pbs(&d, "output_")?, &summary.outputs)?,
            })
        })
        .collect()
}

/// Ops that only move, select or compare values: in fp32 their results must be bit-exact.
const EXACT_OPS: &[&str] = &[
    "Abs",
    "And",
    "ArgMax",
    "Concat",
    "Constant",
    "ConstantOfShape",
    "Dropout",
    "Equal",
    "Expand",
    "Flatten",
    "Gather",
    "Greater",
    "Identity",
    "If",
    "Less",
    "MaxPool",
    "Neg",
    "Not",
    "Or",
    "Pad",
    "Relu",
    "Reshape",
    "Shape",
    "Size",
    "Slice",
    "Split",
    "Squeeze",
    "Tile",
    "Transpose",
    "Unsqueeze",
    "Where",
];

/// Compares one output: exactly for integer/bool outputs and for models made only of
/// [`EXACT_OPS`], otherwise with ONNX's rtol/atol.
fn compare(
    name: &str,
    got: &TensorData,
    want: &TensorData,
    exact_model: bool,
) -> Result<(), String> {
    if got.shape != want.shape {
        return Err(format!(
            "output '{name}': shape {:?}, expected {:?}",
            got.shape, want.shape
        ));
    }
    let exact = exact_model || !want.dtype.is_float();
    let mut worst: Option<(usize, f64, f64, f64)> = None;
    let mut bad = 0usize;
    for i in 0..want.numel() {
        let (g, w) = (got.values.get_f(i), want.values.get_f(i));
        let ok = if w.is_nan() {
            g.is_nan()
        } else if w.is_infinite() || exact {
            g == w
        } else {
            (g - w).abs() <= ATOL + RTOL * w.abs()
        };
        let err = if g.is_nan() || w.is_nan() {
            f64::INFINITY
        } else {
            (g - w).abs()
        };
        if !ok {
            bad += 1;
            if worst.is_none_or(|(_, e, _, _)| err > e) {
                worst = Some((i, err, g, w));
            }
        }
    }
    match worst {
        None => Ok(()),
        Some((i, err, g, w)) => Err(format!(
            "output '{name}': {bad}/{} elements out of tolerance; worst #{i}: got {g}, want {w} (abs err {err:.3e})",
            want.numel()
        )),
    }
}

/// Imports the case's model with the data set's input shapes. Inputs the importer needs as
/// constants (Slice starts, Reshape shape, Resize scales, ...) are bound to the data set's values,
/// one at a time as the importer asks for them; every other input stays a run-time input.
fn import_case(model_path: &Path, set: &DataSet) -> Result<(Model, Vec<String>), String> {
    let mut bound: Vec<String> = Vec::new();
    loop {
        let mut opts = ImportOptions::default();
        for (name, data) in &set.inputs {
            if bound.contains(name) {
                opts.bindings.insert(name.clone(), data.clone());
            } else {
                opts.input_shapes.insert(name.clone(), data.shape.clone());
            }
        }
        match import(model_path, &opts) {
            Ok(m) => return Ok((m, bound)),
            Err(ImportError::Node { tensor, reason, .. })
                if reason.contains("must be a constant")
                    || reason.contains("not a constant after folding") =>
            {
                let before = bound.len();
                if set.inputs.iter().any(|(n, _)| *n == tensor) {
                    if !bound.contains(&tensor) {
                        bound.push(tensor.clone());
                    }
                } else {
                    // An intermediate computed from inputs (e.g. a window size feeding Range):
                    // bind the integer inputs, as `texstream compile --bind` would.
                    for (n, d) in &set.inputs {
                        if !d.dtype.is_float() && !bound.contains(n) {
                            bound.push(n.clone());
                        }
                    }
                }
                if bound.len() == before {
                    return Err(format!("import: tensor '{tensor}': {reason}"));
                }
            }
            Err(e) => return Err(format!("import: {e}")),
        }
    }
}

/// Runs one case end to end; every error becomes a FAIL with its message. Returns a note for the
/// PASS line (inputs bound as constants).
fn run_case(dir: &Path, summary: &ModelSummary, runner: &mut VkRunner) -> Result<String, String> {
    let sets = read_data_sets(dir, summary).map_err(|e| format!("reading test data: {e}"))?;
    let mut note = String::new();
    let exact = summary.ops.keys().all(|o| EXACT_OPS.contains(&o.as_str()));
    if exact {
        note = " (exact)".into();
    }
    for (si, set) in sets.iter().enumerate() {
        let (model, bound) = import_case(&dir.join("model.onnx"), set)?;
        if !bound.is_empty() && !note.contains("bound") {
            note = format!("{note} (bound as constants: {})", bound.join(", "));
        }
        let g = &model.graph;
        if g.outputs.len() != set.outputs.len() {
            return Err(format!(
                "model has {} outputs, test data has {}",
                g.outputs.len(),
                set.outputs.len()
            ));
        }
        for (p, (name, want)) in g.outputs.iter().zip(&set.outputs) {
            let shape = &g.tensors[p.tensor].shape;
            if shape != &want.shape {
                return Err(format!(
                    "output '{name}': imported shape {shape:?}, expected {:?}",
                    want.shape
                ));
            }
        }
        let inputs: Vec<&(String, TensorData)> = set
            .inputs
            .iter()
            .filter(|(n, _)| !bound.contains(n))
            .collect();
        let got = runner
            .run(model, &inputs)
            .map_err(|e| format!("data set {si}: {e}"))?;
        for ((name, want), got) in set.outputs.iter().zip(&got) {
            compare(name, got, want, exact).map_err(|e| format!("data set {si}: {e}"))?;
        }
    }
    Ok(note)
}

/// One worker's Vulkan device (validation on unless `TEXSTREAM_VALIDATION=0`). Validation
/// messages accumulate per device, so a worker whose case produced any gets a fresh device.
struct VkRunner {
    device: Option<Device>,
}

impl VkRunner {
    fn device(&mut self) -> Result<Device, String> {
        if let Some(d) = &self.device {
            return Ok(d.clone());
        }
        let validation = std::env::var("TEXSTREAM_VALIDATION").map_or(true, |v| v != "0");
        let d = Device::new(&DeviceOptions {
            validation,
            ..DeviceOptions::from_env()
        })
        .map_err(|e| format!("cannot open a Vulkan device: {e}"))?;
        self.device = Some(d.clone());
        Ok(d)
    }

    /// Drops the device if it recorded validation messages (they are never cleared).
    fn reset_if_dirty(&mut self) {
        if self
            .device
            .as_ref()
            .is_some_and(|d| !d.validation_messages().is_empty())
        {
            self.device = None;
        }
    }

    /// Optimizes, packs (fp32 weights) and runs the model on Vulkan; outputs in graph order.
    fn run(
        &mut self,
        mut model: Model,
        inputs: &[&(String, TensorData)],
    ) -> Result<Vec<TensorData>, String> {
        let device = self.device()?;
        let report = optimize(&mut model.graph);
        let out_dtypes: Vec<DType> = model
            .graph
            .outputs
            .iter()
            .map(|p| model.graph.tensors[p.tensor].dtype)
            .collect();
        let meta = model.metadata().clone();
        let packed = pack_graph(
            model.graph,
            "conformance",
            report,
            meta,
            PackOptions::new(Precision::F32),
        )
        .map_err(|e| format!("pack: {e}"))?;
        let mut exe =
            Executable::new(&device, &packed.header, &packed).map_err(|e| format!("build: {e}"))?;
        let host: Vec<(String, HostTensor)> = inputs
            .iter()
            .map(|(n, d)| {
                let mut h = HostTensor::new(d.shape.clone(), d.as_f32());
                h.integer = !d.dtype.is_float();
                (n.clone(), h)
            })
            .collect();
        let outs = exe.run(&host).map_err(|e| format!("run: {e}"))?;
        Ok(outs
            .into_iter()
            .zip(out_dtypes)
            .map(|((_, h), dt)| TensorData {
                dtype: if dt.is_float() { DType::F32 } else { dt },
                shape: h.shape,
                values: Values::F(h.data),
            })
            .collect())
    }
}

/// Selection result for one case directory.
enum Selection {
    /// No claimed op: not part of the suite.
    Unclaimed,
    Skip(String),
    Run(ModelSummary),
}

fn select(dir: &Path, skips: &SkipList, run_skipped: bool) -> Selection {
    let case = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let summary = match summarize_model(&dir.join("model.onnx")) {
        Ok(s) => s,
        Err(e) => return Selection::Skip(format!("unreadable model: {e}")),
    };
    if !summary
        .ops
        .keys()
        .any(|o| SUPPORTED_OPS.contains(&o.as_str()))
    {
        return Selection::Unclaimed;
    }
    let unclaimed: Vec<&str> = summary
        .ops
        .keys()
        .map(String::as_str)
        .filter(|o| !SUPPORTED_OPS.contains(o))
        .collect();
    if !unclaimed.is_empty() {
        return Selection::Skip(format!(
            "model also uses unclaimed op(s) {}",
            unclaimed.join(", ")
        ));
    }
    if let Some(r) = skips.reason(&case) {
        if !run_skipped {
            return Selection::Skip(format!("skip list: {r}"));
        }
    }
    Selection::Run(summary)
}

#[test]
fn onnx_node_conformance() {
    let root = PathBuf::from(
        std::env::var("TEXSTREAM_ONNX_NODE_TESTS").unwrap_or_else(|_| DEFAULT_DATA.to_string()),
    );
    if !root.is_dir() {
        println!(
            "SKIPPED: ONNX node test data not found at {} (install libonnx-testdata: scripts/setup.sh)",
            root.display()
        );
        return;
    }
    let filter = std::env::var("TEXSTREAM_CONF_FILTER").unwrap_or_default();
    let run_skipped = std::env::var("TEXSTREAM_CONF_RUN_SKIPPED").map_or(true, |v| v != "0");
    let threads: usize = std::env::var("TEXSTREAM_CONF_THREADS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .max(1);
    let skips = SkipList::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(SKIP_FILE));

    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.join("model.onnx").is_file())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().contains(filter.as_str()))
        })
        .collect();
    dirs.sort();

    let start = Instant::now();
    let mut results: Vec<Option<(String, Outcome)>> = Vec::new();
    let mut to_run: Vec<(usize, PathBuf, ModelSummary)> = Vec::new();
    let mut unclaimed = 0usize;
    for d in &dirs {
        let case = d
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_default();
        match select(d, &skips, run_skipped) {
            Selection::Unclaimed => unclaimed += 1,
            Selection::Skip(r) => results.push(Some((case, Outcome::Skip(r)))),
            Selection::Run(s) => {
                to_run.push((results.len(), d.clone(), s));
                results.push(None);
            }
        }
    }

    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                let mut runner = VkRunner { device: None };
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((slot, dir, summary)) = to_run.get(i) else {
                        break;
                    };
                    let case = dir.file_name().map(|n| n.to_string_lossy().to_string());
                    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        run_case(dir, summary, &mut runner)
                    }))
                    .unwrap_or_else(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        Err(format!("panicked: {msg}"))
                    });
                    runner.reset_if_dirty();
                    let out = match out {
                        Ok(note) => Outcome::Pass(note),
                        Err(e) => Outcome::Fail(e),
                    };
                    if let Ok(mut d) = done.lock() {
                        d.push((*slot, case.unwrap_or_default(), out));
                    }
                }
            });
        }
    });
    for (slot, case, out) in done.into_inner().unwrap_or_default() {
        results[slot] = Some((case, out));
    }

    let (mut passed, mut failed, mut skipped) = (0, 0, 0);
    let mut skip_reasons: BTreeMap<String, usize> = BTreeMap::new();
    let mut stale = Vec::new();
    let mut failures = Vec::new();
    for (case, out) in results.iter().flatten() {
        match out {
            Outcome::Pass(note) => {
                passed += 1;
                if let Some(r) = skips.reason(case) {
                    stale.push(format!("{case} (listed: {r})"));
                }
                println!("PASS {case}{note}");
            }
            Outcome::Fail(e) => {
                if let Some(r) = skips.reason(case) {
                    skipped += 1;
                    *skip_reasons.entry(r.to_string()).or_insert(0) += 1;
                    println!("SKIP({r}) {case}: fails with: {e}");
                    continue;
                }
                failed += 1;
                failures.push(case.clone());
                println!("FAIL {case}: {e}");
            }
            Outcome::Skip(r) => {
                skipped += 1;
                let key = if r.starts_with("model also uses unclaimed") {
                    "model also uses an unclaimed op".to_string()
                } else {
                    r.strip_prefix("skip list: ").unwrap_or(r).to_string()
                };
                *skip_reasons.entry(key).or_insert(0) += 1;
                println!("SKIP({r}) {case}");
            }
        }
    }
    println!(
        "claimed ops: {}, node tests: {}, with a claimed op: {}, of which all ops claimed (run): {}, time {:.1}s",
        SUPPORTED_OPS.len(),
        results.len() + unclaimed,
        results.len(),
        to_run.len(),
        start.elapsed().as_secs_f64()
    );
    for (r, n) in &skip_reasons {
        println!("  skipped ({r}): {n}");
    }
    for s in &stale {
        println!("  skip-list entry no longer needed: {s}");
    }
    println!("{passed} passed, {failed} failed, {skipped} skipped");
    assert!(
        failures.is_empty(),
        "{failed} conformance case(s) failed: {}",
        failures.join(", ")
    );
}
