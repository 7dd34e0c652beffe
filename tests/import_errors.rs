//! Bad inputs give clear errors naming the file, node, op and tensor, and never panic.
use std::path::{Path, PathBuf};

use texstream::onnx::{import, import_bytes, ImportError, ImportOptions};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

fn opts(specs: &[&str]) -> ImportOptions {
    let mut o = ImportOptions::default();
    for s in specs {
        o.add_input_spec(s).unwrap();
    }
    o
}

fn err(name: &str, specs: &[&str]) -> String {
    match import(&fixture(name), &opts(specs)) {
        Ok(_) => panic!("{name} imported without error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn truncated_file_names_the_file() {
    let bytes = std::fs::read(fixture("tiny_conv.onnx")).unwrap();
    let p = Path::new("cut.onnx");
    let mut any_decode_error = false;
    for cut in [1, 7, 50, 400, bytes.len() / 2, bytes.len() - 3] {
        let r = import_bytes(&bytes[..cut], p, Path::new("."), &opts(&["x=1x3x8x8"]));
        let e = r
            .err()
            .unwrap_or_else(|| panic!("truncated at {cut} imported"));
        let text = e.to_string();
        assert!(text.starts_with("cut.onnx:"), "{text}");
        any_decode_error |= matches!(e, ImportError::Decode { .. });
    }
    assert!(any_decode_error);
}

#[test]
fn wrong_magic_is_not_onnx() {
    for junk in [
        &b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR"[..],
        b"hello world, not a model",
        b"",
        b"\x08\x07",
    ] {
        let e = import_bytes(
            junk,
            Path::new("junk.bin"),
            Path::new("."),
            &ImportOptions::default(),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("junk.bin") && e.contains("not a valid ONNX model"),
            "{e}"
        );
    }
}

#[test]
fn unknown_op_lists_node_op_and_supported_list() {
    let e = err("unknown_op.onnx", &[]);
    assert!(e.contains("unknown_op.onnx"), "{e}");
    assert!(e.contains("my_fancy_node") && e.contains("FancyOp"), "{e}");
    assert!(e.contains("SUPPORTED_OPS"), "{e}");
}

#[test]
fn input_shape_mismatch_shows_expected_and_given() {
    let e = err("tiny_conv.onnx", &["x=1x4x8x8"]);
    assert!(
        e.contains("'x'") && e.contains("[?, 3, ?, ?]") && e.contains("[1, 4, 8, 8]"),
        "{e}"
    );
    let e = err("tiny_conv.onnx", &["x=1x3x8"]);
    assert!(e.contains("[1, 3, 8]"), "{e}");
    let e = err("tiny_conv.onnx", &[]);
    assert!(
        e.contains("needs a concrete shape") && e.contains("--shape x="),
        "{e}"
    );
    let e = err("tiny_conv.onnx", &["x=1x3x8x8", "nope=1"]);
    assert!(
        e.contains("no model input named 'nope'") && e.contains("x"),
        "{e}"
    );
}

#[test]
fn shape_errors_name_the_node() {
    // 6x6 input: the Conv (stride 2, 3x3, pad 1) is fine but the FC weights expect 8*4*4 features.
    let e = err("tiny_conv.onnx", &["x=1x3x6x6"]);
    assert!(
        e.contains("node 'fc'") && e.contains("MatMul") && e.contains("[1, 72]"),
        "{e}"
    );
}

#[test]
fn missing_initializer_data_names_the_tensor() {
    let e = err("missing_data.onnx", &[]);
    assert!(
        e.contains("missing_data.onnx")
            && e.contains("bias_without_data")
            && e.contains("missing initializer data"),
        "{e}"
    );
}

#[test]
fn unsupported_dtype_is_named() {
    let e = err("bad_dtype.onnx", &[]);
    assert!(e.contains("u16_const") && e.contains("uint16"), "{e}");
}

#[test]
fn old_opset_is_rejected() {
    let e = err("opset9.onnx", &[]);
    assert!(e.contains("opset 9") && e.contains("11 to 18"), "{e}");
}

#[test]
fn dynamic_if_is_rejected_with_hint() {
    let e = err("dynamic_if.onnx", &[]);
    assert!(
        e.contains("dynamic_if") && e.contains("If") && e.contains("cond") && e.contains("--bind"),
        "{e}"
    );
}

#[test]
fn external_data_loads_and_missing_file_is_reported() {
    let a = import(&fixture("external.onnx"), &opts(&["x=2x3x8x8"])).unwrap();
    let b = import(&fixture("tiny_conv.onnx"), &opts(&["x=2x3x8x8"])).unwrap();
    let consts =
        |m: &texstream::onnx::Model| m.graph.constants.values().cloned().collect::<Vec<_>>();
    assert_eq!(consts(&a), consts(&b));
    // Same bytes, but the model "lives" in a directory without external.bin.
    let bytes = std::fs::read(fixture("external.onnx")).unwrap();
    let e = import_bytes(
        &bytes,
        Path::new("moved.onnx"),
        &std::env::temp_dir().join("no-such-dir"),
        &opts(&["x=2x3x8x8"]),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("moved.onnx") && e.contains("external.bin"),
        "{e}"
    );
}
