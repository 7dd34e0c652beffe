//! The compile step's activation precision: measured on a calibration input against the fp32
//! model, fp16 activations where they hold, fp32 where they drift. Checked against ONNX Runtime
//! (`scripts/ort_reference.py`): the OCR detector's fp16 activations miss 1e-2 of ORT's output
//! range, so fp32 is chosen, and the chosen precision meets 1e-2; the classifier keeps fp16.
//! Then the command line records the choice in the packed file, and `infer` runs at it.
mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::{python, root};
use texstream::compile::precision::{choose_activations, range_error, DEFAULT_TOLERANCE};
use texstream::compile::Compiler;
use texstream::runtime::npy::read_npy;
use texstream::runtime::{BuildOptions, Executable, HostTensor};
use texstream::Precision;

const BIN: &str = env!("CARGO_BIN_EXE_texstream");

/// A model, its input and ONNX Runtime's output on it.
struct Reference {
    model: PathBuf,
    inputs: Vec<(String, HostTensor)>,
    want: HostTensor,
}

/// The ORT reference of `case`, or None with a SKIPPED line.
fn reference(case: &str) -> Option<Reference> {
    let model = root().join(format!("models/ocr/{case}.onnx"));
    if !model.exists() {
        eprintln!("SKIPPED {case}: run scripts/fetch_models.py");
        return None;
    }
    let py = python()?;
    let dir = root().join("target/activation_choice").join(case);
    let st = Command::new(&py)
        .arg(root().join("scripts/ort_reference.py"))
        .arg(case)
        .arg(&dir)
        .output()
        .expect("run ort_reference.py");
    assert!(
        st.status.success(),
        "ort_reference.py {case}: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let input = read_npy(&dir.join("in_0.npy")).expect("input");
    let want = read_npy(&dir.join("out_0.npy")).expect("ORT output");
    Some(Reference {
        model,
        inputs: vec![("x".to_string(), input)],
        want,
    })
}

/// Runs the fp16-weight model at `activations` and returns its error against ORT.
fn error_vs_ort(
    device: &vk_backend::Device,
    packed: &texstream::packed::Packed,
    inputs: &[(String, HostTensor)],
    activations: Precision,
    want: &HostTensor,
) -> f64 {
    let opts = BuildOptions {
        precisions: texstream::runtime::TensorPrecisions {
            activations: Some(texstream::runtime::weights::vk_precision(activations)),
            cache: None,
        },
        ..BuildOptions::default()
    };
    let mut exe = Executable::with_options(device, &packed.header, packed, &opts).expect("build");
    let out = exe.run(inputs).expect("run");
    range_error(&out[0].1.data, &want.data)
}

#[test]
fn the_detector_gets_fp32_activations_and_the_classifier_keeps_fp16() {
    let device = vk_backend::testing::device();
    for (case, expect) in [("det", Precision::F32), ("cls", Precision::F16)] {
        let Some(Reference {
            model,
            inputs,
            want,
        }) = reference(case)
        else {
            return;
        };
        let compiler = Compiler::new(&model).for_inputs(&inputs);
        let half = compiler.clone().compile().expect("compile fp16").packed;
        let full = compiler
            .precision(Precision::F32)
            .compile()
            .expect("compile fp32")
            .packed;
        let choice = choose_activations(
            &device,
            (&half.header, &half),
            (&full.header, &full),
            &inputs,
            DEFAULT_TOLERANCE,
        )
        .expect("choose");
        eprintln!("{case}: {choice:?}");
        assert_eq!(choice.precision, expect, "{case}: {choice:?}");
        // ONNX Runtime agrees with the measurement: the precision refused misses 1e-2 of ORT's
        // range, the one chosen meets it.
        let chosen = error_vs_ort(&device, &half, &inputs, choice.precision, &want);
        assert!(chosen <= DEFAULT_TOLERANCE, "{case}: chosen {chosen:.3e}");
        if expect == Precision::F32 {
            let refused = error_vs_ort(&device, &half, &inputs, Precision::F16, &want);
            assert!(refused > DEFAULT_TOLERANCE, "{case}: fp16 {refused:.3e}");
            assert!(
                choice.fp16_error > DEFAULT_TOLERANCE && choice.fp32_error <= DEFAULT_TOLERANCE
            );
        }
        vk_backend::testing::assert_no_validation_messages(&device);
    }
}

fn texstream(args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN)
        .args(args)
        .output()
        .expect("run texstream");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn path(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

#[test]
fn compile_records_the_choice_and_infer_runs_at_it() {
    let Some(Reference { model, inputs, .. }) = reference("cls") else {
        return;
    };
    let dir = root().join("target/activation_choice/cli");
    std::fs::create_dir_all(&dir).expect("dir");
    let input = root().join("target/activation_choice/cls/in_0.npy");
    let shape = inputs[0]
        .1
        .shape
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join("x");
    let tspk = dir.join("cls.tspk");
    let calibrate = format!("x={}", path(&input));
    let shape_arg = format!("x={shape}");
    // A tolerance no fp16 run meets forces fp32, which the file then records.
    let (ok, text) = texstream(&[
        "compile",
        path(&model),
        "--shape",
        &shape_arg,
        "--activations",
        "auto",
        "--calibrate",
        &calibrate,
        "--activation-tolerance",
        "1e-15",
        "-o",
        path(&tspk),
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("f32 chosen"), "{text}");
    let header = texstream::packed::PackedModel::open(&tspk)
        .expect("open")
        .header()
        .clone();
    let choice = header.activations.expect("a recorded choice");
    assert_eq!(choice.precision, Precision::F32);
    assert_eq!(
        choice.calibration,
        vec![format!("x {:?}", inputs[0].1.shape)]
    );
    // `infer` runs at the recorded precision unless told otherwise.
    let out = dir.join("out");
    let input_arg = format!("x={}", path(&input));
    let (ok, text) = texstream(&[
        "infer",
        path(&tspk),
        "--input",
        &input_arg,
        "-o",
        path(&out),
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("F16 weights, F32 activations"), "{text}");
    let (ok, text) = texstream(&[
        "infer",
        path(&tspk),
        "--input",
        &input_arg,
        "--activations",
        "f16",
        "-o",
        path(&out),
    ]);
    assert!(ok, "{text}");
    assert!(text.contains("F16 weights, F16 activations"), "{text}");
    // A missing calibration input is named; so are fp32 weights.
    let (ok, text) = texstream(&[
        "compile",
        path(&model),
        "--shape",
        &shape_arg,
        "--activations",
        "auto",
        "-o",
        path(&tspk),
    ]);
    assert!(
        !ok && text.contains("calibration input `x` is missing"),
        "{text}"
    );
    assert!(!text.contains("panicked"), "{text}");
    let (ok, text) = texstream(&[
        "compile",
        path(&model),
        "--shape",
        &shape_arg,
        "--precision",
        "f32",
        "--activations",
        "auto",
        "--calibrate",
        &calibrate,
        "-o",
        path(&tspk),
    ]);
    assert!(!ok && text.contains("fp16 weights"), "{text}");
}
