//! Imports the four real models (fetched by scripts/fetch_models.py; skipped with a message when
//! absent) and checks op coverage, pass results, and output shapes against ONNX Runtime's
//! (tests/data/import/reference_shapes.json, written by scripts/make_reference.py).
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use texstream::ir::passes::optimize;
use texstream::ir::Op;
use texstream::onnx::{import, ImportOptions, Model, SUPPORTED_OPS};
use texstream::packed::{pack_graph, PackOptions, PackedModel};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (model path, input specs, bindings); keep in sync with scripts/make_reference.py.
fn cases() -> Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)> {
    vec![
        ("models/ocr/det.onnx", vec!["x=1x3x640x640"], vec![]),
        ("models/ocr/rec.onnx", vec!["x=1x3x48x320"], vec![]),
        ("models/ocr/cls.onnx", vec!["x=1x3x48x192"], vec![]),
        (
            "models/vad/silero_vad.onnx",
            vec!["input=1x576", "state=2x1x128"],
            vec!["sr=16000"],
        ),
    ]
}

fn load(path: &str, inputs: &[&str], binds: &[&str]) -> Option<Model> {
    let p = root().join(path);
    if !p.exists() {
        println!(
            "SKIP: {} is missing; run `python3 scripts/fetch_models.py` first",
            p.display()
        );
        return None;
    }
    let mut o = ImportOptions::default();
    for s in inputs {
        o.add_input_spec(s).unwrap();
    }
    for s in binds {
        o.add_binding(s).unwrap();
    }
    Some(import(Path::new(&p), &o).unwrap_or_else(|e| panic!("{e}")))
}

fn reference() -> BTreeMap<String, BTreeMap<String, Vec<usize>>> {
    let text =
        std::fs::read_to_string(root().join("tests/data/import/reference_shapes.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn real_models_import_with_reference_output_shapes() {
    let refs = reference();
    for (path, inputs, binds) in cases() {
        let Some(mut m) = load(path, &inputs, &binds) else {
            continue;
        };
        for op in m.onnx_ops.keys() {
            assert!(
                SUPPORTED_OPS.contains(&op.as_str()),
                "{path}: {op} not in SUPPORTED_OPS"
            );
        }
        let want = &refs[path];
        assert_eq!(m.graph.outputs.len(), want.len(), "{path}");
        for o in &m.graph.outputs {
            assert_eq!(
                &m.graph.tensors[o.tensor].shape, &want[&o.name],
                "{path}: output {}",
                o.name
            );
        }
        let report = optimize(&mut m.graph);
        println!("{path}: {report:?}\n  {:?}", m.graph.op_histogram());
        // The classifier's nine squeeze-and-excitation Muls each run inside the projection
        // that reads their product (`passes::channel_scale`).
        if path.ends_with("cls.onnx") {
            assert_eq!(report.channel_scales_fused, 9, "{path}");
        }
        // Every tensor has a concrete shape; the outputs callers see are unchanged by the passes
        // (a row-packed head keeps its declared shape on the port).
        for o in &m.graph.outputs {
            assert_eq!(
                m.graph.port_shape(o),
                want[&o.name].as_slice(),
                "{path}: after passes"
            );
            assert_eq!(
                m.graph.tensors[o.tensor].shape.iter().product::<usize>(),
                want[&o.name].iter().product::<usize>(),
                "{path}: element count after passes"
            );
        }
        for n in &m.graph.nodes {
            assert!(
                !matches!(n.op, Op::BatchNorm { .. }),
                "{path}: BatchNorm left after folding"
            );
        }
        // Topological order: every node input is a graph input, a constant, or produced earlier.
        let mut ready: std::collections::HashSet<usize> =
            m.graph.inputs.iter().map(|p| p.tensor).collect();
        ready.extend(m.graph.constants.keys().copied());
        for n in &m.graph.nodes {
            for t in n.present_inputs() {
                assert!(
                    ready.contains(&t),
                    "{path}: node {} reads {} before it is produced",
                    n.name,
                    m.graph.tensors[t].name
                );
            }
            ready.extend(n.outputs.iter().copied());
        }
        let dir = std::env::temp_dir().join(format!("texstream-import-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let out = dir.join(format!("{}.tspk", path.replace('/', "_")));
        let meta = m.metadata().clone();
        let packed = pack_graph(m.graph, path, report, meta, PackOptions::default()).unwrap();
        packed.write(&out).unwrap();
        let pm = PackedModel::open(&out).unwrap();
        let prof = pm.load_profile(
            path,
            texstream::packed::CostModel {
                flops_per_s: 1e12,
                bytes_per_s: 1e11,
            },
        );
        assert!(prof
            .steps
            .iter()
            .all(|s| s.pages.iter().all(|&p| (p as u64) < pm.page_count())));
        assert!(pm.page_count() > 0);
        std::fs::remove_file(&out).unwrap();
    }
}

/// Every main-graph ONNX value's inferred shape equals ONNX Runtime's (before the passes).
#[test]
fn every_intermediate_shape_matches_onnxruntime() {
    let text = std::fs::read_to_string(root().join("tests/data/import/reference_all_shapes.json"))
        .unwrap();
    let refs: BTreeMap<String, BTreeMap<String, Vec<usize>>> = serde_json::from_str(&text).unwrap();
    for (path, inputs, binds) in cases() {
        let Some(m) = load(path, &inputs, &binds) else {
            continue;
        };
        let mut checked = 0;
        for (name, want) in &refs[path] {
            let t = m
                .value_names
                .get(name)
                .unwrap_or_else(|| panic!("{path}: value {name} not imported"));
            assert_eq!(&m.graph.tensors[*t].shape, want, "{path}: value {name}");
            checked += 1;
        }
        println!("{path}: {checked} value shapes match ONNX Runtime");
        assert!(checked >= refs[path].len());
    }
}

#[test]
fn model_specific_facts() {
    if let Some(mut m) = load("models/ocr/det.onnx", &["x=1x3x640x640"], &[]) {
        let r = optimize(&mut m.graph);
        assert_eq!(r.gelu_fused, 13, "det has 13 erf-GELUs");
        assert_eq!(m.graph.layout_transform_count(), 0);
    }
    if let Some(m) = load("models/ocr/rec.onnx", &["x=1x3x48x320"], &[]) {
        let chars = m
            .metadata()
            .get("character")
            .expect("rec has a character dictionary");
        let out = &m.graph.tensors[m.graph.outputs[0].tensor].shape;
        // CTC classes = dictionary + blank + space.
        assert_eq!(chars.split('\n').count() + 2, out[2]);
    }
    if let Some(m) = load(
        "models/vad/silero_vad.onnx",
        &["input=1x576", "state=2x1x128"],
        &["sr=16000"],
    ) {
        assert_eq!(m.onnx_ops.get("If"), Some(&25));
        assert!(m
            .graph
            .nodes
            .iter()
            .any(|n| matches!(n.op, Op::Lstm { hidden_size: 128 })));
        assert_eq!(
            m.graph
                .nodes
                .iter()
                .filter(|n| matches!(n.op, Op::Conv { .. }))
                .count(),
            6,
            "16 kHz branch only"
        );
    }
    if let Some(m) = load(
        "models/vad/silero_vad.onnx",
        &["input=1x288", "state=2x1x128"],
        &["sr=8000"],
    ) {
        assert_eq!(
            m.graph
                .nodes
                .iter()
                .filter(|n| matches!(n.op, Op::Conv { .. }))
                .count(),
            6,
            "8 kHz branch"
        );
    }
}
