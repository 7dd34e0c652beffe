//! The exporter sweep of issue 12 (`scripts/export_sweep.py`): small random-weight torchvision and
//! Hugging Face models exported by PyTorch's TorchScript (`dynamo=False`) and dynamo exporters at
//! opsets 14, 17 and 18. Each file is compiled through the public compile path with every input
//! fed at run time (token ids and masks too), run on Vulkan in fp32, and compared with the ONNX
//! Runtime outputs stored beside it: max |got - want| / (max(want) - min(want)) <= 1e-4.
//!
//! Data: `tests/data/exporter_sweep` (the files `scripts/sweep_keep.py` keeps, about 14 MB), or
//! `TEXSTREAM_SWEEP_DIR` (a whole sweep as the device machine wrote it; resnet18 alone is 45 MB a
//! file). `sweep.json` there lists every entry, exported or not. `known_failures.txt` beside the
//! kept files gives the reason of every entry that fails, at export or on texstream: a failure
//! without one fails the test, and so does a listed entry that passes. Writes
//! `target/exporter_sweep/table.md`, the tables of BENCHMARKS.md's "Exporter sweep".
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use texstream::compile::Compiler;
use texstream::packed::Precision;
use texstream::runtime::npy::read_npy;
use texstream::runtime::{Executable, HostTensor};

const TOL: f64 = 1e-4;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn kept_dir() -> PathBuf {
    root().join("tests/data/exporter_sweep")
}

/// Every error in `e`'s chain of causes, on one line.
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        let _ = write!(s, ": {c}");
        cur = c.source();
    }
    s
}

/// The `.npy` files of a folder, by file stem, in name order.
fn npys(dir: &Path) -> Vec<(String, HostTensor)> {
    let mut v: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .map(|p| {
            let name = p
                .file_stem()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let a = read_npy(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            (name, a)
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// Max error over the output's range (a one-value output: over its magnitude).
fn rel_err(got: &[f32], want: &[f32]) -> f64 {
    let (lo, hi) = want.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &v| {
        (lo.min(v as f64), hi.max(v as f64))
    });
    let mag = want.iter().fold(0f64, |m, &v| m.max((v as f64).abs()));
    let range = if want.len() > 1 { hi - lo } else { mag }.max(1e-6);
    let worst = got
        .iter()
        .zip(want)
        .map(|(&g, &w)| (g as f64 - w as f64).abs())
        .fold(
            0.0,
            |m: f64, d| if d.is_nan() { f64::INFINITY } else { m.max(d) },
        );
    worst / range
}

/// What texstream did with one exported file.
enum Outcome {
    Pass { err: f64 },
    Fail(String),
}

/// The sweep's transformer families: each must run its attention as the fused kernel.
const TRANSFORMERS: &[&str] = &[
    "bert",
    "distilbert",
    "gpt2",
    "llama",
    "vit",
    "vit_tv",
    "swin",
    "swin_tv",
    "whisper_encoder",
    "whisper_decoder",
];

/// Compiles, runs and compares one entry folder (`<model>/<exporter>-op<N>`).
fn run_entry(device: &vk_backend::Device, dir: &Path, inputs: &[(String, HostTensor)]) -> Outcome {
    let model = dir.join("model.onnx");
    // Every input keeps its shape and is fed at run time, as an application would feed it.
    let mut c = Compiler::new(&model).precision(Precision::F32);
    for (name, a) in inputs {
        c = c.input_shape(name, a.shape.clone());
    }
    let packed = match c.compile() {
        Ok(p) => p.packed,
        Err(e) => return Outcome::Fail(format!("compile: {}", chain(&e))),
    };
    // Every transformer's attention runs fused (its scores are never stored).
    let family = dir
        .parent()
        .and_then(|p| p.file_name())
        .and_then(|n| n.to_str())
        .unwrap_or("");
    let count = |want: &dyn Fn(&texstream::ir::Op) -> bool| {
        packed
            .header
            .graph
            .nodes
            .iter()
            .filter(|n| want(&n.op))
            .count()
    };
    let fused = count(&|op| matches!(op, texstream::ir::Op::Attention { .. }));
    if TRANSFORMERS.contains(&family) && fused == 0 {
        return Outcome::Fail("no attention was fused".into());
    }
    // Llama's RMSNorms run fused: no ReduceMean is left of them.
    let reduces = count(&|op| matches!(op, texstream::ir::Op::Reduce { .. }));
    if family == "llama" && reduces > 0 {
        return Outcome::Fail(format!("{reduces} Reduce nodes of RMSNorm left unfused"));
    }
    // And its rotary embeddings: no Neg of a rotated half is left.
    let negs = count(&|op| *op == texstream::ir::Op::Unary(texstream::ir::UnaryOp::Neg));
    if family == "llama" && negs > 0 {
        return Outcome::Fail(format!("{negs} Neg nodes of RoPE left unfused"));
    }
    let before = device.validation_messages().len();
    let mut exe = match Executable::new(device, &packed.header, &packed) {
        Ok(x) => x,
        Err(e) => return Outcome::Fail(format!("build: {}", chain(&e))),
    };
    let feeds: Vec<_> = inputs
        .iter()
        .filter(|(n, _)| exe.graph().inputs.iter().any(|p| &p.name == n))
        .cloned()
        .collect();
    let outs = match exe.run(&feeds) {
        Ok(o) => o,
        Err(e) => return Outcome::Fail(format!("run: {}", chain(&e))),
    };
    let msgs = device.validation_messages();
    if msgs.len() > before {
        return Outcome::Fail(format!("validation: {}", msgs[before]));
    }
    let mut worst = 0f64;
    for (name, want) in npys(&dir.join("ort")) {
        let Some((_, got)) = outs.iter().find(|(n, _)| *n == name) else {
            return Outcome::Fail(format!("output {name} missing"));
        };
        if got.data.len() != want.data.len() {
            return Outcome::Fail(format!(
                "output {name} is {:?}, ORT's {:?}",
                got.shape, want.shape
            ));
        }
        let e = rel_err(&got.data, &want.data);
        if e > TOL {
            return Outcome::Fail(format!("output {name}: error {e:.2e} of its range"));
        }
        worst = worst.max(e);
    }
    Outcome::Pass { err: worst }
}

/// `known_failures.txt`: `model/exporter-opN: reason` lines (a trailing `*` matches any rest);
/// `#` starts a comment.
struct KnownFailures(Vec<(String, String)>);

impl KnownFailures {
    fn load() -> KnownFailures {
        let path = kept_dir().join("known_failures.txt");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let v = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                let (k, r) = l
                    .split_once(':')
                    .unwrap_or_else(|| panic!("{}: `{l}` has no `: reason`", path.display()));
                (k.trim().to_string(), r.trim().to_string())
            })
            .collect();
        KnownFailures(v)
    }

    fn reason(&self, key: &str) -> Option<&str> {
        self.0.iter().find_map(|(pat, r)| {
            let hit = match pat.strip_suffix('*') {
                Some(prefix) => key.starts_with(prefix),
                None => key == pat,
            };
            hit.then_some(r.as_str())
        })
    }
}

/// One row of the table.
struct Row {
    model: String,
    exporter: String,
    opset: String,
    ops: String,
    kept: bool,
    result: String,
    error: String,
    notes: String,
}

fn str_of(v: &serde_json::Value) -> String {
    v.as_str().map(str::to_string).unwrap_or_default()
}

/// The text after an assertion's `failed: ` (onnx's version converter), else the line.
fn assertion(line: &str) -> &str {
    line.rsplit_once("failed: ").map_or(line, |(_, m)| m).trim()
}

/// What the exporter did besides the plain call: the opset it fell back to, and a retry under
/// `torch.no_grad()`.
fn export_notes(e: &serde_json::Value) -> String {
    let mut notes = Vec::new();
    if str_of(&e["export_mode"]) == "no_grad" {
        let why = str_of(&e["plain_export_error"]);
        let why = why
            .split_once("[<class '")
            .map_or(why.as_str(), |(_, r)| r.trim_end_matches(']'));
        notes.push(format!(
            "exported under torch.no_grad(); the plain call fails: {}",
            why.replace("'>: ", ": ")
        ));
    }
    let file = e["opset_imports"]["ai.onnx"].as_i64();
    if file.is_some() && file != e["opset"].as_i64() {
        let failed = e["export_notes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|n| n.as_str())
            .find(|n| n.starts_with("Failed to convert"))
            .map(|n| assertion(n).to_string())
            .unwrap_or_default();
        notes.push(format!(
            "onnx's version converter failed ({failed}), file left at opset 18"
        ));
    }
    notes.join("; ")
}

/// The sweep's own record of an entry: requested opset (and the file's where it differs), ops
/// and the exporter's error, if any.
fn describe(e: &serde_json::Value) -> (String, String, Option<String>) {
    let asked = e["opset"].as_i64().unwrap_or(0);
    let got = e["opset_imports"]["ai.onnx"].as_i64();
    let opset = match got {
        Some(g) if g != asked => format!("{asked} (file: {g})"),
        _ => asked.to_string(),
    };
    let ops = match (e["nodes"].as_u64(), e["ops"].as_object()) {
        (Some(n), Some(o)) => format!("{n} nodes, {} types", o.len()),
        _ => "-".into(),
    };
    let err = e["error"].as_str().map(|s| {
        let stage = str_of(&e["stage"]);
        format!("{stage}: {s}")
    });
    (opset, ops, err)
}

#[test]
fn exporter_sweep_matches_ort() {
    let dir = std::env::var_os("TEXSTREAM_SWEEP_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(kept_dir);
    let sweep_json = dir.join("sweep.json");
    let sweep: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&sweep_json)
            .unwrap_or_else(|e| panic!("{}: {e}", sweep_json.display())),
    )
    .expect("sweep.json parses");
    let known = KnownFailures::load();
    let device = vk_backend::testing::device();
    let t0 = Instant::now();
    let mut rows = Vec::new();
    let mut problems = Vec::new();
    let mut inputs_of: BTreeMap<String, Vec<(String, HostTensor)>> = BTreeMap::new();
    let mut ran = 0;
    let entries = sweep["entries"].as_array().expect("entries");
    for e in entries {
        let model = str_of(&e["model"]);
        let exporter = str_of(&e["exporter"]);
        let variant = format!("{exporter}-op{}", e["opset"]);
        let key = format!("{model}/{variant}");
        let (opset, ops, export_err) = describe(e);
        let entry_dir = dir.join(&model).join(&variant);
        let kept = kept_dir()
            .join(&model)
            .join(&variant)
            .join("model.onnx")
            .exists();
        let (result, error) = if let Some(err) = export_err {
            match known.reason(&key) {
                Some(reason) => ("fail (export)".to_string(), reason.to_string()),
                None => {
                    problems.push(format!("{key}: {err} (not in known_failures.txt)"));
                    ("FAIL (export)".to_string(), err)
                }
            }
        } else if !entry_dir.join("model.onnx").exists() {
            ("not run (file not kept)".to_string(), String::new())
        } else {
            let inputs = inputs_of
                .entry(model.clone())
                .or_insert_with(|| npys(&dir.join(&model).join("inputs")));
            let t = Instant::now();
            ran += 1;
            let outcome = run_entry(&device, &entry_dir, inputs);
            let ms = t.elapsed().as_secs_f64() * 1e3;
            match (outcome, known.reason(&key)) {
                (Outcome::Pass { err }, None) => {
                    println!("{key}: pass, error {err:.1e} ({ms:.0} ms)");
                    (format!("pass ({err:.0e})"), String::new())
                }
                (Outcome::Pass { .. }, Some(_)) => {
                    problems.push(format!("{key} passes: remove it from known_failures.txt"));
                    ("pass".into(), String::new())
                }
                (Outcome::Fail(why), Some(reason)) => {
                    println!("{key}: known failure ({reason}): {why}");
                    ("fail (texstream)".into(), format!("{reason} ({why})"))
                }
                (Outcome::Fail(why), None) => {
                    println!("{key}: FAIL: {why}");
                    problems.push(format!("{key}: {why}"));
                    ("FAIL".into(), why)
                }
            }
        };
        rows.push(Row {
            model,
            exporter,
            opset,
            ops,
            kept,
            result,
            error,
            notes: export_notes(e),
        });
    }
    let table = summary(&rows) + &render(&rows, &sweep["versions"]) + &op_table(entries);
    let out = root().join("target/exporter_sweep");
    let _ = std::fs::create_dir_all(&out);
    let _ = std::fs::write(out.join("table.md"), &table);
    println!(
        "{} entries in {:.1} s; table in {}",
        rows.len(),
        t0.elapsed().as_secs_f64(),
        out.join("table.md").display()
    );
    vk_backend::testing::assert_no_validation_messages(&device);
    assert!(ran > 0, "no exported file found under {}", dir.display());
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// One row per model: its result for each exporter and opset (`*`: the file is at another
/// opset than asked for).
fn summary(rows: &[Row]) -> String {
    let mut cells: BTreeMap<&str, BTreeMap<(String, String), String>> = BTreeMap::new();
    let mut columns = BTreeSet::new();
    for r in rows {
        let asked = r.opset.split(' ').next().unwrap_or_default().to_string();
        let mut cell = r.result.split(' ').next().unwrap_or_default().to_string();
        if r.result.contains("export") {
            cell = "fail (export)".into();
        }
        if r.opset.contains("file") {
            cell.push('*');
        }
        columns.insert((r.exporter.clone(), asked.clone()));
        cells
            .entry(&r.model)
            .or_default()
            .insert((r.exporter.clone(), asked), cell);
    }
    // TorchScript first, as the older exporter.
    let mut columns: Vec<_> = columns.into_iter().collect();
    columns.sort_by_key(|(e, o)| (e != "torchscript", o.parse::<u32>().unwrap_or(0)));
    let mut s = String::from("| model |");
    for (e, o) in &columns {
        let _ = write!(s, " {e} {o} |");
    }
    s.push_str("\n|---|");
    s.push_str(&"---|".repeat(columns.len()));
    s.push('\n');
    for (m, c) in cells {
        let _ = write!(s, "| {m} |");
        for col in &columns {
            let _ = write!(s, " {} |", c.get(col).map_or("-", String::as_str));
        }
        s.push('\n');
    }
    s.push('\n');
    s
}

/// The markdown table: one row per entry.
fn render(rows: &[Row], versions: &serde_json::Value) -> String {
    let mut s = String::new();
    let v = |k: &str| str_of(&versions[k]);
    let _ = writeln!(
        s,
        "torch {}, torchvision {}, transformers {}, onnx {}, onnxscript {}, onnxruntime {}\n",
        v("torch"),
        v("torchvision"),
        v("transformers"),
        v("onnx"),
        v("onnxscript"),
        v("onnxruntime")
    );
    s.push_str("| model | exporter | opset | ops | in CI | result | error | notes |\n");
    s.push_str("|---|---|---|---|---|---|---|---|\n");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.model,
            r.exporter,
            r.opset,
            r.ops,
            if r.kept { "yes" } else { "no" },
            r.result,
            r.error.replace('|', "\\|"),
            r.notes.replace('|', "\\|")
        );
    }
    s
}

/// Every op type each model's exports use (the union over exporters and opsets).
fn op_table(entries: &[serde_json::Value]) -> String {
    let mut by_model: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in entries {
        let ops = by_model.entry(str_of(&e["model"])).or_default();
        for op in e["ops"].as_object().into_iter().flatten().map(|(k, _)| k) {
            ops.insert(op.clone());
        }
    }
    let mut s = String::from("\n| model | op types in its exports |\n|---|---|\n");
    for (m, ops) in by_model {
        let names: Vec<&str> = ops.iter().map(String::as_str).collect();
        let _ = writeln!(s, "| {m} | {} |", names.join(", "));
    }
    s
}

/// The ops and forms the sweep needed, one small case each (`scripts/make_exporter_op_cases.py`):
/// IsNaN, GatherND with constant indices, GlobalAveragePool of rank 3 and 5.
#[test]
fn exporter_op_cases_match_ort() {
    let device = vk_backend::testing::device();
    let dir = kept_dir().join("ops");
    let mut cases: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    assert!(cases.len() >= 3, "op cases missing in {}", dir.display());
    for case in cases {
        let inputs = npys(&case.join("inputs"));
        match run_entry(&device, &case, &inputs) {
            Outcome::Pass { err } => println!("{}: pass, error {err:.1e}", case.display()),
            Outcome::Fail(why) => panic!("{}: {why}", case.display()),
        }
    }
    vk_backend::testing::assert_no_validation_messages(&device);
}

/// The exports of BERT, GPT-2 and Whisper split every attention's queries, keys and values into
/// heads with a Reshape and a Transpose (the dynamo exporter's keys with three more steps): all
/// of them run as the attention kernel's loads, and match ONNX Runtime both so and with the
/// operands copied into heads first (`DeviceOptions::attention_head_copies`). Their residual Adds
/// before a norm run in the norm (`passes::residual_norm`), counted, and no Mul is left: the
/// scalar factors on queries and keys join the attention's scale, Whisper's query factor too,
/// which its export applies before the head split.
#[test]
fn head_splits_run_as_attention_loads() {
    let sweep = root().join("tests/data/exporter_sweep");
    let mut opts = vk_backend::DeviceOptions::from_env();
    opts.attention_head_copies = true;
    let copying = vk_backend::Device::new(&opts).expect("a Vulkan device");
    // (family, export, attention operands read from rows, layout copies left, residual norms).
    // Whisper's encoder keeps its Transpose of the convolutions' output and the copies its two
    // 1-D convolutions run between (`passes::conv1d`, four, the last folded into that Transpose).
    let cases = [
        ("bert", "torchscript-op14", 6, 0, 5),
        ("gpt2", "torchscript-op14", 6, 0, 5),
        ("whisper_encoder", "torchscript-op14", 6, 4, 5),
        ("bert", "dynamo-op18", 6, 0, 5),
        ("whisper_decoder", "dynamo-op18", 12, 0, 7),
    ];
    for (family, export, split, copies, residual_norms) in cases {
        let dir = sweep.join(family);
        let inputs = npys(&dir.join("inputs"));
        let mut c = Compiler::new(&dir.join(export).join("model.onnx")).precision(Precision::F32);
        for (name, a) in &inputs {
            c = c.input_shape(name, a.shape.clone());
        }
        let report = c
            .compile()
            .unwrap_or_else(|e| panic!("{family}: {e}"))
            .report;
        assert_eq!(
            report.passes.attention_heads_split, split,
            "{family} {export}"
        );
        assert_eq!(report.passes.layout_copies, copies, "{family} {export}");
        // Norms of a residual sum (BERT's after each block, the others' before it and at the
        // end) and of the embeddings plus a constant positional embedding (the first norm):
        // the Add runs in the norm.
        assert_eq!(
            report.passes.residual_norms_fused, residual_norms,
            "{family} {export}"
        );
        assert_eq!(
            report.op_histogram.get("Mul"),
            None,
            "{family} {export}: {:?}",
            report.op_histogram
        );
        for (device, how) in [
            (&copying, "head copies"),
            (&vk_backend::testing::device(), "rows"),
        ] {
            if let Outcome::Fail(e) = run_entry(device, &dir.join(export), &inputs) {
                panic!("{family} {export}, {how}: {e}");
            }
        }
    }
}
