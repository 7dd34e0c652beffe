//! The C ABI end to end from C: `tests/c/ts_demo.c` is compiled with the system C compiler
//! (`$CC`, else `cc`, with `-Wall -Wextra -Werror -pedantic`) against the checked-in header and
//! the crate's staticlib, and run on the tiny workload `tests/data/capi/tiny.ron`. The program
//! checks the tensor pipeline against ONNX Runtime and the error paths itself; this test then
//! checks every output it printed, bit for bit, against the same pipelines run through the Rust
//! API.
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use texstream::{Engine, EngineOptions, Image, Tensor, Value, Values};

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("capi/ has a parent")
        .to_path_buf()
}

/// This crate's staticlib as cargo built it for this test run: beside this test binary in
/// `<target>/<profile>/deps/` (cargo builds the library with all its crate types before the
/// tests that use it, but copies them up to `<profile>/` only for `cargo build`, so the copy
/// there may be stale).
fn staticlib() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    let lib = exe
        .parent()
        .expect("the test binary lies in <target>/<profile>/deps")
        .join("libtexstream_capi.a");
    assert!(
        lib.exists(),
        "{} is missing: cargo should have built it with this test",
        lib.display()
    );
    lib
}

/// The workload and its model copied under a scratch directory with the same relative layout,
/// so that compiling the packed models writes nothing into the source tree.
fn scratch_workload() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("c_demo");
    for sub in ["data/capi", "data/import"] {
        std::fs::create_dir_all(dir.join(sub)).expect("scratch dir");
    }
    let root = repo_root();
    std::fs::copy(
        root.join("tests/data/capi/tiny.ron"),
        dir.join("data/capi/tiny.ron"),
    )
    .expect("copy tiny.ron");
    std::fs::copy(
        root.join("tests/data/import/tiny_conv.onnx"),
        dir.join("data/import/tiny_conv.onnx"),
    )
    .expect("copy tiny_conv.onnx");
    dir.join("data/capi/tiny.ron")
}

fn compile_demo(out: &Path) {
    let capi = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I"])
        .arg(capi.join("include"))
        .arg(capi.join("tests/c/ts_demo.c"))
        .arg(staticlib())
        // What the Rust standard library needs from the system (rustc --print
        // native-static-libs on Linux, less what the C driver links anyway).
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(out)
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}`: {e}"));
    assert!(status.success(), "compiling ts_demo.c failed: {status}");
}

/// A printed output: shape and values.
type Printed = (Vec<usize>, Vec<f32>);

/// The `output LABEL NAME RANK DIMS... : VALUES...` lines, by label.
fn parse_outputs(stdout: &str) -> BTreeMap<String, Printed> {
    let mut out = BTreeMap::new();
    for line in stdout.lines().filter(|l| l.starts_with("output ")) {
        let (head, values) = line.split_once(" : ").expect("output line has ` : `");
        let mut words = head.split_whitespace().skip(1);
        let label = words.next().expect("label").to_string();
        let _name = words.next().expect("name");
        let rank: usize = words.next().expect("rank").parse().expect("rank number");
        let shape: Vec<usize> = words.map(|d| d.parse().expect("dimension")).collect();
        assert_eq!(shape.len(), rank, "{line}");
        let values = values
            .split_whitespace()
            .map(|v| v.parse::<f32>().expect("value"))
            .collect();
        out.insert(label, (shape, values));
    }
    out
}

fn tensor_output(outputs: &Values, name: &str) -> Printed {
    match outputs.get(name) {
        Some(Value::Tensor(t)) => (t.shape().to_vec(), t.to_f32().expect("f32 values")),
        other => panic!("output `{name}` is {other:?}"),
    }
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

#[test]
fn c_program_runs_the_engine_end_to_end() {
    let workload = scratch_workload();
    let exe = workload.with_file_name("ts_demo");
    compile_demo(&exe);
    let root = repo_root();
    let reference = root.join("tests/data/import/tiny_conv_ref.json");
    let image = root.join("tests/data/ocr/page_crop0.png");
    let run = Command::new(&exe)
        .arg(&workload)
        .arg(&reference)
        .arg(&image)
        .output()
        .expect("running ts_demo");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    println!("{stdout}");
    assert!(
        run.status.success(),
        "ts_demo failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        run.status
    );
    assert!(stdout.contains("ts_demo: ok"), "{stdout}");
    let printed = parse_outputs(&stdout);
    assert_eq!(
        printed.keys().map(String::as_str).collect::<Vec<_>>(),
        ["image-encoded", "image-rgb8", "tensor"],
        "{stdout}"
    );

    // The same requests through the Rust API.
    let engine = Engine::open(&workload, EngineOptions::default()).expect("open from Rust");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&reference).expect("reference")).expect("JSON");
    let numbers = |key: &str| -> Vec<f64> {
        json[key]
            .as_array()
            .expect("array")
            .iter()
            .map(|v| v.as_f64().expect("number"))
            .collect()
    };
    let shape: Vec<usize> = numbers("x_shape").iter().map(|&d| d as usize).collect();
    let x: Vec<f32> = numbers("x").iter().map(|&v| v as f32).collect();
    let mut inputs = Values::new();
    inputs.insert("x".into(), Value::Tensor(Tensor::f32(shape, x).expect("x")));
    let tensor = engine.run("tensor", inputs).expect("tensor pipeline");
    let mut inputs = Values::new();
    let png = std::fs::read(&image).expect("image");
    inputs.insert(
        "photo".into(),
        Value::Image(Image::decode(&png).expect("decode")),
    );
    let image_out = engine.run("image", inputs).expect("image pipeline");
    engine.shutdown();

    let (want_shape, want) = tensor_output(&tensor.outputs, "y");
    assert_eq!(printed["tensor"].0, want_shape);
    assert_eq!(bits(&printed["tensor"].1), bits(&want), "{stdout}");
    let (want_shape, want) = tensor_output(&image_out.outputs, "classes");
    for label in ["image-encoded", "image-rgb8"] {
        assert_eq!(printed[label].0, want_shape, "{label}");
        assert_eq!(bits(&printed[label].1), bits(&want), "{label}: {stdout}");
    }
}
