//! The engine on the real camera-OCR workload (PP-OCR det → cls → rec, fp16, on lavapipe in
//! CI), through the general pipeline executor: at every cap from the minimum feasible one up to
//! everything resident, and under every streaming policy, the recognized lines (text, score
//! bits, box corners) equal the fully preloaded run's, and the device's peak stays within the
//! cap. A cap one byte below the minimum fails before any kernel runs, naming the minimum. Bad
//! workload input fails in `engine::loaded::load`, which touches no device.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use texstream::compile::auto::{ensure_packed, PackedStatus};
use texstream::compile::Compiler;
use texstream::engine::loaded::{load, Loaded};
use texstream::pipeline::io::read_value;
use texstream::workload::load_workload;
use texstream::{Engine, EngineError, EngineOptions, EngineStats, Policy, Value, Values};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn work_dir() -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("workload_run");
    std::fs::create_dir_all(&d).expect("temp dir");
    d
}

/// Shapes kept small so that each run takes seconds on lavapipe; the detector keeps the demo
/// page's 2:1 aspect.
const MODELS: [(&str, [usize; 4]); 3] = [
    ("det", [1, 3, 320, 640]),
    ("cls", [1, 3, 48, 192]),
    ("rec", [1, 3, 48, 320]),
];

/// Compiles the three models once (fp16) into the temp dir; None when the ONNX files or the
/// demo image were not fetched (then the test says SKIPPED).
fn packed_models() -> Option<&'static PathBuf> {
    static DIR: OnceLock<Option<PathBuf>> = OnceLock::new();
    DIR.get_or_init(|| {
        let need = ["models/ocr/det.onnx", "models/images/page.png"];
        if let Some(m) = need.iter().find(|p| !root().join(p).exists()) {
            eprintln!("SKIPPED: {m} missing; run scripts/fetch_models.py and scripts/fetch_test_images.sh");
            return None;
        }
        let dir = work_dir();
        for (name, shape) in MODELS {
            let onnx = root().join(format!("models/ocr/{name}.onnx"));
            Compiler::new(&onnx)
                .input_shape("x", shape.to_vec())
                .compile_to(&dir.join(format!("{name}.tspk")))
                .unwrap_or_else(|e| panic!("compiling {name}: {e}"));
        }
        Some(dir)
    })
    .as_ref()
}

/// The camera-OCR workload over the packed models in `dir` (`det` may be replaced).
fn workload_text(dir: &Path, det: &Path, steps_extra: &str) -> String {
    let r = root();
    format!(
        r#"Workload(
    name: "camera-ocr-test",
    cap: "512MiB",
    policy: "planned",
    page_size: "1MiB",
    models: [
        ModelSpec(name: "det", source: Packed("{det}"), inputs: {{"x": [1, 3, 320, 640]}}, precision: F16),
        ModelSpec(name: "cls", source: Packed("{dir}/cls.tspk"), inputs: {{"x": [1, 3, 48, 192]}}, precision: F16),
        ModelSpec(name: "rec", source: Packed("{dir}/rec.tspk"), inputs: {{"x": [1, 3, 48, 320]}}, precision: F16),
    ],
    pipelines: [
        PipelineSpec(
            name: "frame",
            repeat: PerFrame(1),
            steps: [
                ImageLoad(output: "image", source: "camera"),{steps_extra}
                Normalize(input: "image", output: "det_in", resize: [320, 640],
                    mean: [0.485, 0.456, 0.406], std: [0.229, 0.224, 0.225]),
                Run(model: "det", inputs: {{"x": "det_in"}}, outputs: {{"fetch_name_0": "prob"}}),
                OcrBoxes(input: "prob", output: "boxes", thresh: 0.3, box_thresh: 0.6, unclip_ratio: 1.5),
                CropRotate(image: "image", boxes: "boxes", output: "crops"),
                TextlineTensors(input: "crops", output: "cls_in", kind: Classifier, height: 48, width: 192),
                Run(model: "cls", inputs: {{"x": "cls_in"}}, outputs: {{"save_infer_model/scale_0.tmp_1": "angles"}},
                    fan_out: PerItem(over: "cls_in", expected: 8, max: 64)),
                AngleFix(crops: "crops", scores: "angles", output: "upright", thresh: 0.9),
                TextlineTensors(input: "upright", output: "rec_in", kind: Recognizer, height: 48, width: 320),
                Run(model: "rec", inputs: {{"x": "rec_in"}}, outputs: {{"fetch_name_0": "logits"}},
                    fan_out: PerItem(over: "rec_in", expected: 8, max: 64)),
                CtcDecode(input: "logits", boxes: "boxes", output: "text"),
            ],
        ),
    ],
    demo_inputs: [DemoInput(name: "camera", path: "{r}/models/images/page.png")],
)
"#,
        det = det.display(),
        dir = dir.display(),
        r = r.display(),
    )
}

fn write_workload(name: &str, text: &str) -> PathBuf {
    let p = work_dir().join(name);
    std::fs::write(&p, text).expect("write workload");
    p
}

/// What one engine run produced: its statistics, every request's outputs, the planning costs.
struct Outcome {
    stats: EngineStats,
    frames: Vec<Values>,
    costs: Vec<scheduler::Profile>,
}

/// The workload's demo inputs as request values.
fn demo_inputs(path: &Path) -> Values {
    let w = load_workload(path).expect("workload");
    w.spec
        .demo_inputs
        .iter()
        .map(|d| {
            (
                d.name.clone(),
                read_value(&w.resolve(&d.path)).expect("demo input"),
            )
        })
        .collect()
}

/// Opens an engine on `path` under `cap` and `policy` and runs its first pipeline `requests`
/// times (the workload's repeat count when `None`).
fn run_with(path: &Path, opts: EngineOptions, requests: usize) -> Result<Outcome, EngineError> {
    let engine = Engine::open(path, opts)?;
    let pipeline = engine.pipelines()[0].name.clone();
    let inputs = demo_inputs(path);
    let mut frames = Vec::new();
    for _ in 0..requests {
        let r = engine
            .run(&pipeline, inputs.clone())
            .unwrap_or_else(|e| panic!("request: {e}"));
        frames.push(r.outputs);
    }
    let costs = engine.costs().expect("costs");
    Ok(Outcome {
        stats: engine.shutdown(),
        frames,
        costs,
    })
}

fn run(path: &Path, cap: u64, policy: Policy) -> Result<Outcome, EngineError> {
    run_with(
        path,
        EngineOptions {
            cap: Some(cap),
            policy: Some(policy),
            calibrate_after: 0,
            ..EngineOptions::from_env()
        },
        1,
    )
}

/// Checks without a device, as `Engine::open` does first.
fn prepare(path: &Path) -> Result<Loaded, EngineError> {
    load(load_workload(path)?, None, None, &mut |_, _| {})
}

/// Everything a frame's output consists of, with scores and corners as bits.
fn fingerprint(frames: &[Values]) -> Vec<Vec<(String, u64, Vec<u32>)>> {
    frames
        .iter()
        .map(|f| match f.get("text") {
            Some(Value::TextLines(lines)) => lines
                .iter()
                .map(|l| {
                    let pts = l.points.iter().flatten().map(|v| v.to_bits()).collect();
                    (l.text.clone(), l.score.to_bits(), pts)
                })
                .collect(),
            other => panic!("no text lines: {other:?}"),
        })
        .collect()
}

#[test]
fn ocr_outputs_equal_preload_at_every_cap_and_policy() {
    let Some(dir) = packed_models() else { return };
    let path = write_workload("ocr.ron", &workload_text(dir, &dir.join("det.tspk"), ""));
    let reference = run(&path, 512 << 20, Policy::Preload).expect("preload run");
    let want = fingerprint(&reference.frames);
    assert!(
        want[0].len() >= 3,
        "the demo page must give several lines, got {:?}",
        reference.frames
    );
    let s = &reference.stats;
    let (min, all) = (s.min_cap_bytes, s.peak_device_bytes);
    assert!(all <= 512 << 20);
    assert!(
        min < all,
        "streaming must save memory: min {min}, preload peak {all}"
    );
    let page = 1u64 << 20;
    // The largest model's pages: reload-per-model holds it whole.
    let largest = ["det", "cls", "rec"]
        .iter()
        .map(|m| {
            texstream::packed::PackedModel::open(&dir.join(format!("{m}.tspk")))
                .map(|p| p.page_count())
                .expect("packed model opens")
        })
        .max()
        .unwrap_or(0);
    // Cap 0 stands for "the minimum plus the slots the largest model lacks there", known once
    // the first run at the minimum reports its slot count.
    let cases = [
        (min, Policy::Planned),
        (min, Policy::Lru),
        (min, Policy::OnDemand),
        (min + 3 * page, Policy::Planned),
        (0, Policy::ReloadPerModel),
        ((min + all) / 2, Policy::Planned),
        (all, Policy::Lru),
    ];
    let mut slots_at_min = None;
    for (cap, policy) in cases {
        let cap = match (cap, slots_at_min) {
            (0, Some(s)) => min + largest.saturating_sub(s) * page,
            (0, None) => panic!("the first case runs at the minimum"),
            (c, _) => c,
        };
        let o = run(&path, cap, policy).unwrap_or_else(|e| panic!("cap {cap} {policy}: {e}"));
        let got = &o.stats;
        if cap == min {
            slots_at_min.get_or_insert(got.slots as u64);
        }
        assert!(
            got.peak_device_bytes <= cap,
            "cap {cap} {policy}: peak {} bytes",
            got.peak_device_bytes
        );
        assert_eq!(got.min_cap_bytes, min, "cap {cap} {policy}: minimum moved");
        assert_eq!(
            fingerprint(&o.frames),
            want,
            "cap {cap} {policy}: outputs differ"
        );
        if cap < all {
            assert!(got.evictions > 0, "cap {cap} {policy}: nothing was evicted");
        }
        eprintln!(
            "cap {cap} {policy}: peak {} of {cap}, streamed {} B, {} evictions",
            got.peak_device_bytes, got.bytes_streamed, got.evictions
        );
    }
    match run(&path, min - 1, Policy::Planned) {
        Ok(_) => panic!("a cap one byte below the minimum must fail"),
        Err(e) => {
            // Named before the kernels are recorded, so as a bound ("at least"): the bound is
            // the minimum itself where the warm-up makes no scratch tensors, as here.
            let msg = e.to_string();
            assert!(
                msg.contains("minimum feasible cap") && msg.contains(&format!(" {min} B")),
                "{msg}"
            );
        }
    }
}

#[test]
fn missing_model_file_is_named_before_any_device_work() {
    let Some(dir) = packed_models() else { return };
    let missing = dir.join("no-such-det.tspk");
    let path = write_workload("missing.ron", &workload_text(dir, &missing, ""));
    let e = prepare(&path).err().expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("model `det`") && msg.contains("no-such-det.tspk"),
        "{msg}"
    );
    assert!(msg.contains("does not exist"), "{msg}");
}

#[test]
fn corrupt_packed_file_fails_its_checksum_before_any_device_work() {
    let Some(dir) = packed_models() else { return };
    let bad = work_dir().join("corrupt-det.tspk");
    let mut bytes = std::fs::read(dir.join("det.tspk")).expect("read det.tspk");
    // A header byte: the engine opens packed files lazily, so a flipped page byte is only
    // caught when that page is read (tests/import_packed.rs).
    bytes[80] ^= 0x01;
    std::fs::write(&bad, &bytes).expect("write corrupt copy");
    let path = write_workload("corrupt.ron", &workload_text(dir, &bad, ""));
    let e = prepare(&path).err().expect("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains("corrupt-det.tspk") && msg.contains("checksum"),
        "{msg}"
    );
}

/// A flipped byte inside a page passes the lazy open (only the header is read then) and fails
/// the request that reads the page, with the file and the page named; the engine answers the
/// request with that error instead of computing on bad weights.
#[test]
fn a_corrupt_page_fails_the_request_that_reads_it_and_names_it() {
    let Some(dir) = packed_models() else { return };
    let bad = work_dir().join("corrupt-page-det.tspk");
    let mut bytes = std::fs::read(dir.join("det.tspk")).expect("read det.tspk");
    let at = bytes.len() - 1000;
    bytes[at] ^= 0x40;
    std::fs::write(&bad, &bytes).expect("write corrupt copy");
    let path = write_workload("corrupt-page.ron", &workload_text(dir, &bad, ""));
    prepare(&path).expect("the header is intact: the lazy open passes");
    let opts = EngineOptions {
        policy: Some(Policy::OnDemand),
        calibrate_after: 0,
        ..EngineOptions::from_env()
    };
    let msg = match Engine::open(&path, opts) {
        Err(e) => e.to_string(),
        Ok(engine) => {
            let pipeline = engine.pipelines()[0].name.clone();
            match engine.run(&pipeline, demo_inputs(&path)) {
                Err(e) => e.to_string(),
                Ok(_) => panic!("a request computed on a corrupt page"),
            }
        }
    };
    assert!(
        msg.contains("corrupt-page-det.tspk") && msg.contains("page") && msg.contains("checksum"),
        "{msg}"
    );
}

#[test]
fn unknown_pipeline_step_gives_file_line_and_column() {
    let Some(dir) = packed_models() else { return };
    let extra = "\n                Sharpen(input: \"image\"),";
    let path = write_workload(
        "unknown-step.ron",
        &workload_text(dir, &dir.join("det.tspk"), extra),
    );
    let e = prepare(&path).err().expect("must fail");
    let msg = e.to_string();
    // The step sits on line 17 of the generated file.
    assert!(msg.contains("unknown-step.ron:17:"), "{msg}");
    assert!(msg.contains("Sharpen"), "{msg}");
}

/// An output as (name, shape, value bits).
type OutputBits = (String, Vec<usize>, Vec<u32>);

/// Bits of every output tensor of every request, by name.
fn tensor_bits(frames: &[Values]) -> Vec<Vec<OutputBits>> {
    frames
        .iter()
        .map(|f| {
            f.iter()
                .map(|(n, v)| {
                    let t = v.as_tensor().expect("tensor output");
                    let bits = t
                        .as_f32()
                        .expect("f32")
                        .iter()
                        .map(|x| x.to_bits())
                        .collect();
                    (n.clone(), t.shape().to_vec(), bits)
                })
                .collect()
        })
        .collect()
}

/// A weight-heavy chain (three MLP models with random weights, made by
/// scripts/make_chain_models.py): every policy at the minimum cap reproduces preload's outputs
/// bit for bit, and the minimum cap is at least 2× below preload's peak.
#[test]
fn weight_heavy_chain_streams_at_half_the_preload_peak() {
    let py = std::env::var_os("TEXSTREAM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    if !py.exists() {
        eprintln!("SKIPPED: no python venv (.venv/bin/python or TEXSTREAM_PYTHON)");
        return;
    }
    let dir = work_dir().join("chain");
    let st = std::process::Command::new(&py)
        .arg(root().join("scripts/make_chain_models.py"))
        .arg(&dir)
        .args([
            "--batch", "4", "--seq", "8", "--dim", "512", "--layers", "6,8,10", "--vocab", "1024",
        ])
        .status()
        .expect("run make_chain_models.py");
    assert!(st.success(), "make_chain_models.py failed");
    for name in ["enc", "mid", "lm"] {
        Compiler::new(&dir.join(format!("{name}.onnx")))
            .input_shape("x", vec![4, 8, 512])
            .compile_to(&dir.join(format!("{name}.tspk")))
            .unwrap_or_else(|e| panic!("compiling {name}: {e}"));
    }
    let text = std::fs::read_to_string(root().join("workloads/assistant-chain.ron"))
        .expect("workloads/assistant-chain.ron")
        .replace(
            "Onnx(\"../models/chain/",
            &format!("Packed(\"{}/", dir.display()),
        )
        .replace(".onnx\")", ".tspk\")")
        .replace(
            "../models/chain/input.npy",
            &dir.join("input.npy").display().to_string(),
        )
        .replace("[4, 64, 1024]", "[4, 8, 512]")
        .replace("PerFrame(4)", "PerFrame(2)");
    let path = write_workload("chain.ron", &text);
    let opts = |cap: u64, policy: Policy| EngineOptions {
        cap: Some(cap),
        policy: Some(policy),
        calibrate_after: 1,
        ..EngineOptions::from_env()
    };
    let reference = run_with(&path, opts(256 << 20, Policy::Preload), 2).expect("preload run");
    let want = tensor_bits(&reference.frames);
    assert_eq!(want.len(), 2);
    assert_eq!(want[0].len(), 1, "one final output per request");
    let (min, preload_peak) = (
        reference.stats.min_cap_bytes,
        reference.stats.peak_device_bytes,
    );
    for policy in [Policy::Planned, Policy::Lru, Policy::OnDemand] {
        let o = run_with(&path, opts(min, policy), 2)
            .unwrap_or_else(|e| panic!("{policy} at {min}: {e}"));
        assert!(
            o.stats.peak_device_bytes <= min,
            "{policy}: peak over the cap"
        );
        assert_eq!(
            tensor_bits(&o.frames),
            want,
            "{policy}: outputs differ from preload"
        );
        assert!(
            2 * o.stats.peak_device_bytes <= preload_peak,
            "{policy}: peak {} is not 2x below preload's {preload_peak}",
            o.stats.peak_device_bytes
        );
    }
    // Given a resident run's step costs (`run --resident-reference`), a streamed run plans with
    // exactly those instead of calibrating on its own model runs.
    let o = run_with(
        &path,
        EngineOptions {
            fixed_costs: Some(reference.costs.clone()),
            ..opts(min, Policy::Planned)
        },
        2,
    )
    .expect("planned, resident costs");
    let step_costs = |c: &[scheduler::Profile]| -> Vec<f64> {
        c.iter()
            .flat_map(|p| p.steps.iter().map(|s| s.compute_s))
            .collect()
    };
    assert_eq!(step_costs(&o.costs), step_costs(&reference.costs));
    assert_eq!(tensor_bits(&o.frames), want);
}

/// `run` compiles ONNX sources itself: once when the packed file is missing, not again when it
/// is current, and again when the workload's input shape changes.
#[test]
fn onnx_sources_are_compiled_when_missing_or_stale() {
    let cls = root().join("models/ocr/cls.onnx");
    if !cls.exists() {
        eprintln!(
            "SKIPPED: {} missing; run scripts/fetch_models.py",
            cls.display()
        );
        return;
    }
    let dir = work_dir().join("auto");
    std::fs::create_dir_all(&dir).expect("dir");
    let onnx = dir.join("cls.onnx");
    std::fs::copy(&cls, &onnx).expect("copy cls.onnx");
    let _ = std::fs::remove_file(dir.join("cls.tspk"));
    let ron = |w: u32| {
        format!(
            r#"Workload(name: "auto", cap: "64MiB", models: [ModelSpec(name: "cls", source: Onnx("{}"), inputs: {{"x": [1, 3, 48, {w}]}}, precision: F16)], pipelines: [PipelineSpec(name: "p", steps: [Run(model: "cls", inputs: {{"x": "x"}})])])"#,
            onnx.display()
        )
    };
    let path = write_workload("auto.ron", &ron(192));
    let mut seen = Vec::new();
    let w = |p: &Path| load_workload(p).expect("workload");
    let first =
        ensure_packed(&w(&path), |m, why| seen.push(format!("{m}: {why}"))).expect("compile");
    assert!(
        matches!(&first[0], PackedStatus::Compiled(_, why) if why.contains("no packed file")),
        "{first:?}"
    );
    let again = ensure_packed(&w(&path), |_, _| {}).expect("check");
    assert!(matches!(&again[0], PackedStatus::UpToDate(_)), "{again:?}");
    let path = write_workload("auto.ron", &ron(160));
    let changed = ensure_packed(&w(&path), |_, _| {}).expect("recompile");
    assert!(
        matches!(&changed[0], PackedStatus::Compiled(_, why) if why.contains("[1, 3, 48, 192]")),
        "{changed:?}"
    );
    assert_eq!(seen.len(), 1);
}
