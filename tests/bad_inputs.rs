//! Bad input files through the real `texstream` binary: each must end with exit code 1 and one
//! clear `error:` line that names the file, what is wrong and the limit, with no panic and no
//! backtrace even under `RUST_BACKTRACE=1`. The bad files are crafted here, in temp dirs.
//! Also: temp files of interrupted or dead packed writers do not outlive the next compile.
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_texstream");

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

/// A fresh directory for one case.
fn scratch(case: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("texstream-bad-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn texstream(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

fn path_str(p: &Path) -> &str {
    p.to_str().unwrap()
}

// ---- packed models ----

/// Compiles the tiny conv fixture with 4 KiB pages.
fn tiny_packed(dir: &Path) -> PathBuf {
    let out = dir.join("tiny.tspk");
    let o = texstream(&[
        "compile",
        path_str(&fixture("tiny_conv.onnx")),
        "--shape",
        "x=1x3x8x8",
        "--page-size",
        "4KiB",
        "-o",
        path_str(&out),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    out
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Rewrites a packed file with its JSON header edited, and a valid checksum: the checksum
/// catches accidents, not a file written to be wrong.
fn with_header(src: &Path, dst: &Path, edit: fn(&mut Value)) {
    let b = std::fs::read(src).unwrap();
    let (hl, data_offset) = (u64_at(&b, 16) as usize, u64_at(&b, 24) as usize);
    let mut header: Value = serde_json::from_slice(&b[64..64 + hl]).unwrap();
    edit(&mut header);
    let json = serde_json::to_vec(&header).unwrap();
    let data = &b[data_offset..];
    let new_offset = (64 + json.len()).div_ceil(4096) * 4096;
    let mut out = b[..64].to_vec();
    out[16..24].copy_from_slice(&(json.len() as u64).to_le_bytes());
    out[24..32].copy_from_slice(&(new_offset as u64).to_le_bytes());
    out.extend_from_slice(&json);
    out.resize(new_offset, 0);
    out.extend_from_slice(data);
    with_checksum(&mut out);
    std::fs::write(dst, out).unwrap();
}

fn with_checksum(b: &mut [u8]) {
    let (hl, data_offset) = (u64_at(b, 16) as usize, u64_at(b, 24) as usize);
    let mut crc = crc32fast::Hasher::new();
    crc.update(&b[..48]);
    crc.update(&b[64..64 + hl]);
    crc.update(&b[data_offset..]);
    let sum = crc.finalize().to_le_bytes();
    b[48..52].copy_from_slice(&sum);
}

/// Rewrites preamble field `offset` (u64) without fixing anything else.
fn with_preamble(src: &Path, dst: &Path, offset: usize, value: u64) {
    let mut b = std::fs::read(src).unwrap();
    b[offset..offset + 8].copy_from_slice(&value.to_le_bytes());
    std::fs::write(dst, b).unwrap();
}

fn tensor_shape(h: &mut Value, tensor: usize) -> &mut Value {
    &mut h["graph"]["tensors"][tensor]["shape"]
}

/// (case, edit of the header, substrings of the message).
type HeaderCase = (&'static str, fn(&mut Value), &'static [&'static str]);

const HEADER_CASES: &[HeaderCase] = &[
    (
        "node_input",
        |h| h["graph"]["nodes"][0]["inputs"][0] = 999.into(),
        &["node 0 `conv` input 0 names tensor 999", "the graph has"],
    ),
    (
        "node_output",
        |h| h["graph"]["nodes"][1]["outputs"][0] = 5000.into(),
        &["output 0 names tensor 5000"],
    ),
    (
        "step_node",
        |h| h["steps"][0]["node"] = 77.into(),
        &["step 0 `conv`", "names node 77"],
    ),
    (
        "step_weight",
        |h| h["steps"][0]["weights"][0][1] = 40.into(),
        &["step 0 `conv`", "names weight 40"],
    ),
    (
        "step_pages",
        |h| h["steps"][0]["pages"] = serde_json::json!([0, 1, 2]),
        &["step 0 `conv`", "lists pages [0, 1, 2]"],
    ),
    (
        "weight_offset",
        |h| h["weights"][0]["texel_offset"] = (1u64 << 40).into(),
        &["weight 0", "outside the 2 pages"],
    ),
    (
        "weight_tensor",
        |h| h["weights"][0]["tensor"] = 123456.into(),
        &["weight 0", "names tensor 123456"],
    ),
    (
        "weight_kind",
        |h| h["weights"][0]["kind"]["ConvFilter"]["o"] = 9.into(),
        &["weight 0", "describes 243 values", "has 216"],
    ),
    (
        "tensor_elements",
        |h| *tensor_shape(h, 0) = serde_json::json!([2147483648u64, 2147483648u64, 4]),
        &[
            "tensor 0 `x`",
            "more elements than the limit",
            "17179869184 elements",
        ],
    ),
    (
        "tensor_dimension",
        |h| *tensor_shape(h, 0) = serde_json::json!([1, 3, 8, 18446744073709551615u64]),
        &["tensor 0 `x`", "dimension over the limit", "2147483648"],
    ),
    (
        "inferred_shape",
        |h| *tensor_shape(h, 12) = serde_json::json!([1, 8, 5, 4]),
        &[
            "node 0 `conv`",
            "stored as [1, 8, 5, 4], its inputs give [1, 8, 4, 4]",
        ],
    ),
    (
        "view_cycle",
        |h| h["graph"]["tensors"][12]["layout"] = serde_json::json!({ "ViewOf": 12 }),
        &["tensor 12", "never reaches an image"],
    ),
    (
        "compensated_page",
        |h| h["compensated_pages"] = serde_json::json!([7]),
        &["compensated page 7 is out of range (2 pages)"],
    ),
    (
        "page_size",
        |h| {
            h["page_bytes"] = (1u64 << 30).into();
            h["texels_per_page"] = (1u64 << 27).into();
        },
        &["page size 1073741824 bytes", "16777216-byte limit"],
    ),
    (
        "page_crcs",
        |h| h["page_crcs"] = serde_json::json!([1]),
        &["1 page checksums for 2 pages"],
    ),
    (
        "page_count",
        |h| {
            h["page_count"] = 3.into();
            // One checksum per page, so that only the preamble disagrees.
            h["page_crcs"] = serde_json::json!([1, 2, 3]);
        },
        &["the header says 3 pages of 4096 bytes, the preamble 2 of 4096"],
    ),
];

/// A packed file must be refused by `infer` with `expect` in the message, naming the file.
fn assert_refused(file: &Path, expect: &[&str]) {
    let out = file.with_extension("out");
    let o = texstream(&["infer", path_str(file), "--out", path_str(&out)]);
    let what = file.display().to_string();
    assert_user_error(&what, &o, &[&[path_str(file)], expect].concat());
    assert!(!out.exists(), "{what}: wrote outputs");
}

fn assert_user_error(what: &str, o: &Output, expect: &[&str]) {
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{what}: {stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.to_lowercase().contains("backtrace"),
        "{what}: a panic or a backtrace: {stderr}"
    );
    // Progress lines (e.g. "compiling model ...") may come first; the error is one line.
    assert!(
        stderr.lines().any(|l| l.starts_with("error: ")),
        "{what}: {stderr}"
    );
    for e in expect {
        assert!(stderr.contains(e), "{what}: no `{e}` in: {stderr}");
    }
}

#[test]
fn packed_headers_with_valid_checksums_are_checked() {
    let dir = scratch("packed");
    let good = tiny_packed(&dir);
    // The unedited file passes the same checks (and runs).
    let x = dir.join("x.npy");
    std::fs::write(&x, npy_with("(1, 3, 8, 8)", 768)).unwrap();
    let spec = format!("x={}", x.display());
    let ok = texstream(&[
        "infer",
        path_str(&good),
        "--input",
        &spec,
        "--out",
        path_str(&dir.join("ok")),
    ]);
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stderr)
    );
    for &(case, edit, expect) in HEADER_CASES {
        let bad = dir.join(format!("{case}.tspk"));
        with_header(&good, &bad, edit);
        assert_refused(&bad, expect);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn packed_preamble_sizes_are_checked_before_allocating() {
    let dir = scratch("preamble");
    let good = tiny_packed(&dir);
    let len = std::fs::metadata(&good).unwrap().len();
    let sizes = |v: &str| format!("the file is {len} bytes; the preamble says a {v}");
    let cases: &[(&str, usize, u64, String)] = &[
        (
            "header_len_max",
            16,
            u64::MAX,
            sizes("18446744073709551615-byte header"),
        ),
        ("header_len_past_data", 16, 5000, sizes("5000-byte header")),
        (
            "page_count",
            40,
            3,
            "3 pages of 4096 bytes (truncated?)".into(),
        ),
        (
            "page_bytes",
            32,
            1 << 62,
            "2 pages of 4611686018427387904 bytes".into(),
        ),
        ("data_offset", 24, 4095, "data at 4095".into()),
    ];
    for (case, offset, value, expect) in cases {
        let bad = dir.join(format!("{case}.tspk"));
        with_preamble(&good, &bad, *offset, *value);
        assert_refused(&bad, &["sizes disagree", expect]);
    }
    // A checksum that does not match still comes before parsing the header.
    let mut b = std::fs::read(&good).unwrap();
    let last = b.len() - 1;
    b[last] ^= 1;
    let flipped = dir.join("flipped.tspk");
    std::fs::write(&flipped, b).unwrap();
    assert_refused(&flipped, &["checksum mismatch"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- .npy ----

fn npy_with(shape: &str, body: usize) -> Vec<u8> {
    let header = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}\n");
    let mut b = b"\x93NUMPY\x01\x00".to_vec();
    b.extend_from_slice(&(header.len() as u16).to_le_bytes());
    b.extend_from_slice(header.as_bytes());
    b.resize(b.len() + body, 0);
    b
}

#[test]
fn npy_sizes_are_checked_against_the_file() {
    let dir = scratch("npy");
    let cases: &[(&str, &str, usize, &str)] = &[
        // 2^64 - 1 elements of 4 bytes: the real byte count, not a wrapped one.
        (
            "huge",
            "(18446744073709551615,)",
            16,
            "data is 16 bytes, shape [18446744073709551615] of <f4 needs 73786976294838206460",
        ),
        (
            "product",
            "(4294967296, 4294967296)",
            16,
            "needs 73786976294838206464",
        ),
        (
            "short",
            "(2, 3)",
            20,
            "data is 20 bytes, shape [2, 3] of <f4 needs 24",
        ),
    ];
    for (case, shape, body, expect) in cases {
        let file = dir.join(format!("{case}.npy"));
        std::fs::write(&file, npy_with(shape, *body)).unwrap();
        let spec = format!("x={}", file.display());
        // The inputs are read before the model: it need not exist.
        let o = texstream(&[
            "infer",
            "no-model.tspk",
            "--input",
            &spec,
            "--out",
            path_str(&dir.join("out")),
        ]);
        assert_user_error(case, &o, &[path_str(&file), expect]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- images ----

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    out.extend_from_slice(&crc.finalize().to_be_bytes());
}

/// A PNG header declaring `w` x `h` RGB pixels, with a few bytes of (zlib-stored) data.
fn png_declaring(w: u32, h: u32) -> Vec<u8> {
    let mut b = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::new();
    ihdr.extend_from_slice(&w.to_be_bytes());
    ihdr.extend_from_slice(&h.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    png_chunk(&mut b, b"IHDR", &ihdr);
    png_chunk(
        &mut b,
        b"IDAT",
        &[0x78, 0x01, 0x01, 0x01, 0x00, 0xfe, 0xff, 0x00, 0, 1, 0, 1],
    );
    png_chunk(&mut b, b"IEND", &[]);
    b
}

/// A baseline JPEG up to its frame header declaring `w` x `h` gray pixels.
fn jpeg_declaring(w: u16, h: u16) -> Vec<u8> {
    let mut b = vec![0xff, 0xd8];
    // DQT: one 8-bit table of ones.
    b.extend_from_slice(&[0xff, 0xdb, 0x00, 0x43, 0x00]);
    b.extend_from_slice(&[1; 64]);
    // SOF0: 8-bit, h x w, one component with table 0.
    b.extend_from_slice(&[0xff, 0xc0, 0x00, 0x0b, 0x08]);
    b.extend_from_slice(&h.to_be_bytes());
    b.extend_from_slice(&w.to_be_bytes());
    b.extend_from_slice(&[0x01, 0x01, 0x11, 0x00]);
    // DHT: a DC table with one 1-bit code.
    b.extend_from_slice(&[0xff, 0xc4, 0x00, 0x14, 0x00, 1]);
    b.extend_from_slice(&[0; 15]);
    b.push(0);
    // SOS, one byte of scan data, EOI.
    b.extend_from_slice(&[0xff, 0xda, 0x00, 0x08, 0x01, 0x01, 0x00, 0x00, 0x3f, 0x00]);
    b.extend_from_slice(&[0x00, 0xff, 0xd9]);
    b
}

#[test]
fn images_are_bounded_before_decoding() {
    let dir = scratch("image");
    let cases = [
        (
            "huge.png",
            png_declaring(50_000, 50_000),
            "50000 x 50000 pixels",
        ),
        (
            "huge.jpg",
            jpeg_declaring(60_000, 60_000),
            "60000 x 60000 pixels",
        ),
    ];
    for (name, bytes, expect) in cases {
        let file = dir.join(name);
        std::fs::write(&file, bytes).unwrap();
        // The image is decoded before any model is loaded: the directory need not exist.
        let o = texstream(&[
            "ocr",
            path_str(&file),
            "--models",
            path_str(&dir.join("no-models")),
        ]);
        assert_user_error(
            name,
            &o,
            &[
                path_str(&file),
                expect,
                "limit of 67108864 pixels",
                "MAX_IMAGE_PIXELS",
            ],
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- ONNX external data ----

/// Just enough protobuf to write a model: varint-tagged fields.
fn field(out: &mut Vec<u8>, number: u32, bytes: &[u8]) {
    varint(out, u64::from(number) << 3 | 2);
    varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

fn field_int(out: &mut Vec<u8>, number: u32, v: u64) {
    varint(out, u64::from(number) << 3);
    varint(out, v);
}

fn varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A model whose one initializer `w` (float64 `[n]`) lives in external data at `location`,
/// with the declared `length` when given; the graph's output is `Neg(w)`.
fn external_model(n: u64, location: &str, length: Option<u64>) -> Vec<u8> {
    let entry = |key: &str, value: &str| {
        let mut e = Vec::new();
        field(&mut e, 1, key.as_bytes());
        field(&mut e, 2, value.as_bytes());
        e
    };
    let mut tensor = Vec::new();
    field_int(&mut tensor, 1, n); // dims
    field_int(&mut tensor, 2, 11); // DOUBLE
    field(&mut tensor, 8, b"w");
    field(&mut tensor, 13, &entry("location", location));
    if let Some(l) = length {
        field(&mut tensor, 13, &entry("length", &l.to_string()));
    }
    field_int(&mut tensor, 14, 1); // EXTERNAL
    let mut node = Vec::new();
    field(&mut node, 1, b"w");
    field(&mut node, 2, b"y");
    field(&mut node, 3, b"neg");
    field(&mut node, 4, b"Neg");
    let mut output = Vec::new();
    field(&mut output, 1, b"y");
    let mut graph = Vec::new();
    field(&mut graph, 1, &node);
    field(&mut graph, 2, b"g");
    field(&mut graph, 5, &tensor);
    field(&mut graph, 12, &output);
    let mut opset = Vec::new();
    field_int(&mut opset, 2, 13);
    let mut model = Vec::new();
    field_int(&mut model, 1, 8); // ir_version
    field(&mut model, 7, &graph);
    field(&mut model, 8, &opset);
    model
}

#[test]
fn external_data_is_checked_before_allocating_and_stays_in_the_model_dir() {
    let dir = scratch("external");
    let model_dir = dir.join("model");
    let outside = dir.join("outside");
    std::fs::create_dir_all(&model_dir).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(model_dir.join("w.bin"), [0u8; 64]).unwrap();
    std::fs::write(outside.join("w.bin"), [0u8; 64]).unwrap();
    std::os::unix::fs::symlink(outside.join("w.bin"), model_dir.join("link.bin")).unwrap();
    let compile = |name: &str, model: Vec<u8>| {
        let file = model_dir.join(name);
        std::fs::write(&file, model).unwrap();
        let out = dir.join(format!("{name}.tspk"));
        let o = texstream(&["compile", path_str(&file), "-o", path_str(&out)]);
        (file, o)
    };
    // The crafted model is valid: 8 doubles from w.bin compile.
    let (_, o) = compile("good.onnx", external_model(8, "w.bin", Some(64)));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let cases: &[(&str, Vec<u8>, &[&str])] = &[
        // 2^31 doubles: 16 GiB asked of a 64-byte file.
        (
            "huge.onnx",
            external_model(1 << 31, "w.bin", None),
            &[
                "tensor 'w'",
                "is 64 bytes, too short for 17179869184 bytes at offset 0",
            ],
        ),
        (
            "length.onnx",
            external_model(8, "w.bin", Some(1 << 34)),
            &["tensor 'w'", "length 17179869184 != 64 bytes"],
        ),
        (
            "parent.onnx",
            external_model(8, "../outside/w.bin", None),
            &["tensor 'w'", "outside the model directory"],
        ),
        (
            "symlink.onnx",
            external_model(8, "link.bin", None),
            &["tensor 'w'", "link.bin", "outside the model directory"],
        ),
        (
            "absolute.onnx",
            external_model(8, path_str(&outside.join("w.bin")), None),
            &["tensor 'w'", "must be a relative path"],
        ),
    ];
    for (name, model, expect) in cases {
        let (file, o) = compile(name, model.clone());
        assert_user_error(name, &o, &[&[path_str(&file)], *expect].concat());
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- compile options ----

#[test]
fn page_size_must_fit_one_atlas_layer() {
    let dir = scratch("page-size");
    for (size, expect) in [
        (
            "100GiB",
            "page size 107374182400 bytes is over the 16777216-byte limit",
        ),
        (
            "3000",
            "page size 3000 bytes is not a positive multiple of 4096",
        ),
        // The size parses (one size syntax everywhere); 384 rows is no atlas layer height.
        ("1.5MiB", "384 rows of 512 texels"),
        (
            "1MB",
            "page size 1000000 bytes is not a positive multiple of 4096",
        ),
    ] {
        let o = texstream(&[
            "compile",
            path_str(&fixture("tiny_conv.onnx")),
            "--shape",
            "x=1x3x8x8",
            "--page-size",
            size,
            "-o",
            path_str(&dir.join("x.tspk")),
        ]);
        assert_user_error(size, &o, &["--page-size", expect]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// ---- temp files of the atomic write ----

fn temp_files(dir: &Path, target: &str) -> Vec<String> {
    let prefix = format!(".{target}.tmp");
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with(&prefix))
        .collect()
}

#[test]
fn stale_temp_files_of_dead_writers_are_removed_at_the_next_compile() {
    let dir = scratch("stale");
    let mut child = Command::new("true").spawn().unwrap();
    let dead = child.id();
    child.wait().unwrap();
    std::fs::write(dir.join(format!(".tiny.tspk.tmp{dead}")), b"half a model").unwrap();
    // This test process is alive: its file stays.
    let live = format!(".tiny.tspk.tmp{}", std::process::id());
    std::fs::write(dir.join(&live), b"being written").unwrap();
    tiny_packed(&dir);
    assert_eq!(temp_files(&dir, "tiny.tspk"), vec![live]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn interrupt_during_the_packed_write_removes_the_temp_file() {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let model = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/ocr/det.onnx");
    assert!(
        model.exists(),
        "{}: run scripts/fetch_models.py",
        model.display()
    );
    let dir = scratch("interrupt");
    let out = dir.join("det.tspk");
    // The write is short; a run whose write was missed (renamed before it was seen) is retried.
    for _attempt in 0..5 {
        let _ = std::fs::remove_file(&out);
        let mut child = Command::new(BIN)
            .args(["compile", path_str(&model), "--shape", "x=1x3x384x768"])
            .args(["-o", path_str(&out)])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let pid = Pid::from_raw(child.id() as i32);
        let deadline = Instant::now() + Duration::from_secs(120);
        let mut caught = false;
        while Instant::now() < deadline && child.try_wait().unwrap().is_none() {
            if temp_files(&dir, "det.tspk").is_empty() {
                std::thread::sleep(Duration::from_micros(200));
                continue;
            }
            // Frozen mid-write, the temp file still there: interrupt it.
            kill(pid, Signal::SIGSTOP).unwrap();
            caught = !temp_files(&dir, "det.tspk").is_empty();
            if caught {
                kill(pid, Signal::SIGINT).unwrap();
            }
            kill(pid, Signal::SIGCONT).unwrap();
            break;
        }
        let status = child.wait().unwrap();
        if !caught {
            continue;
        }
        assert_eq!(status.code(), Some(130), "interrupted compile: {status}");
        assert!(
            temp_files(&dir, "det.tspk").is_empty(),
            "left behind: {:?}",
            temp_files(&dir, "det.tspk")
        );
        std::fs::remove_dir_all(&dir).unwrap();
        return;
    }
    panic!("the compile was never caught while writing its temp file");
}

// ---- workload files and the command line ----

/// A synthetic workload (no model files needed) with `repeat`, written to `dir/name`.
fn synthetic_workload(dir: &Path, name: &str, repeat: &str, extra: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(
        &p,
        format!(
            r#"Workload(
    name: "synthetic",
    cap: "64MiB",{extra}
    models: [ModelSpec(name: "m", source: Synthetic(Uniform(layers: 4, bytes_per_layer: "1MiB",
        compute_per_layer_us: 10.0)))],
    pipelines: [PipelineSpec(name: "p", repeat: {repeat}, steps: [Run(model: "m")])],
)"#
        ),
    )
    .unwrap();
    p
}

#[test]
fn workload_numbers_are_bounded_and_unknown_fields_refused() {
    let dir = scratch("workload");
    for (case, repeat, extra, expect) in [
        (
            "huge-repeat",
            "PerFrame(1000000000)",
            "",
            "repeat count 1000000000 is over the limit of 10000",
        ),
        ("zero-repeat", "PerFrame(0)", "", "repeat count 0"),
        ("typo", "Once", "\n    capp: \"1MiB\",", "capp"),
        (
            "old-inner-name",
            "Once",
            "\n    bandwidth: BandwidthSpec(BandwidthSpec(h2d_per_s: \"1GB\")),",
            "BandwidthSpec",
        ),
    ] {
        let w = synthetic_workload(&dir, &format!("{case}.ron"), repeat, extra);
        let o = texstream(&["plan", path_str(&w)]);
        assert_user_error(case, &o, &[path_str(&w), expect]);
    }
    // A cap no policy fits, and a pipeline that runs nothing: plan fails.
    let w = synthetic_workload(&dir, "ok.ron", "Once", "");
    let o = texstream(&["plan", path_str(&w), "--cap", "1KiB"]);
    assert_user_error("tiny cap", &o, &["no policy can run under a cap of 1 KiB"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn model_paths_resolve_against_the_workload_file_however_it_is_named() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    // From inside workloads/ with a bare file name, the packed models (or the built-in tables)
    // are found the same way as from the repository root.
    let from_root = texstream(&["plan", "workloads/camera-ocr.ron", "--policy", "lru"]);
    let inside = Command::new(BIN)
        .args(["plan", "camera-ocr.ron", "--policy", "lru"])
        .current_dir(root.join("workloads"))
        .output()
        .unwrap();
    assert!(
        from_root.status.success(),
        "{}",
        String::from_utf8_lossy(&from_root.stderr)
    );
    assert!(
        inside.status.success(),
        "{}",
        String::from_utf8_lossy(&inside.stderr)
    );
    let profiles = |o: &Output| -> Vec<String> {
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.starts_with("profile"))
            .map(|l| l.replace("/workloads/../", "/"))
            .collect()
    };
    assert_eq!(profiles(&from_root), profiles(&inside));
    assert!(!profiles(&inside).is_empty());
}

#[test]
fn run_arguments_are_checked_before_any_gpu_work() {
    let dir = scratch("run-args");
    let w = synthetic_workload(&dir, "w.ron", "Once", "");
    for (case, args, expect) in [
        (
            "zero",
            vec!["--iterations", "0"],
            "--iterations must be 1..=1000000, got 0",
        ),
        (
            "huge",
            vec!["--iterations", "1000000000"],
            "--iterations must be 1..=1000000, got 1000000000",
        ),
        (
            "json-folder",
            vec!["--metrics-json", "/no/such/folder/m.json"],
            "the folder /no/such/folder does not exist",
        ),
    ] {
        let mut a = vec!["run", path_str(&w)];
        a.extend(args);
        let o = texstream(&a);
        assert_user_error(case, &o, &[expect]);
    }
    // Synthetic models have no weights: run says so instead of opening a device.
    let o = texstream(&["run", path_str(&w)]);
    assert_user_error(
        "synthetic",
        &o,
        &["synthetic models have no weights to run"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cap_of_zero_names_the_minimum_and_unknown_inputs_are_refused() {
    let dir = scratch("run-cap");
    let model = fixture("tiny_conv.onnx");
    let w = dir.join("tiny.ron");
    std::fs::write(
        &w,
        format!(
            r#"Workload(name: "tiny", cap: "64MiB", page_size: "64KiB",
    models: [ModelSpec(name: "conv", source: Onnx("{}"), packed: "{}/conv.tspk",
        inputs: {{"x": [1, 3, 8, 8]}}, precision: F32)],
    pipelines: [PipelineSpec(name: "p", steps: [Run(model: "conv", inputs: {{"x": "x"}})])])"#,
            model.display(),
            dir.display()
        ),
    )
    .unwrap();
    let npy = dir.join("x.npy");
    std::fs::write(&npy, npy_with("(1, 3, 8, 8)", 192 * 4)).unwrap();
    let x = format!("x={}", path_str(&npy));
    let o = texstream(&["run", path_str(&w), "--input", &x, "--cap", "0"]);
    assert_user_error(
        "cap 0",
        &o,
        &["cap 0 B is below the minimum feasible cap", "at least"],
    );
    let o = texstream(&[
        "run",
        path_str(&w),
        "--input",
        &format!("y={}", path_str(&npy)),
    ]);
    assert_user_error("run --input", &o, &["has no input `y`", "`x`"]);
    let o = texstream(&[
        "infer",
        path_str(&model),
        "--input",
        &format!("y={}", path_str(&npy)),
        "--out",
        path_str(&dir.join("out")),
    ]);
    assert_user_error("infer --input", &o, &["no model input named 'y'"]);
    let file = dir.join("a-file");
    std::fs::write(&file, b"").unwrap();
    let o = texstream(&[
        "infer",
        path_str(&model),
        "--input",
        &format!("x={}", path_str(&npy)),
        "--out",
        path_str(&file),
    ]);
    assert_user_error("infer --out", &o, &["exists and is not a folder"]);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `texstream check WORKLOAD` with no Vulkan driver reachable: `check` must not need one.
fn check_without_a_driver(workload: &Path) -> std::process::Output {
    Command::new(BIN)
        .args(["check", path_str(workload)])
        .env("VK_DRIVER_FILES", "/nonexistent/icd.json")
        .env("VK_ICD_FILENAMES", "/nonexistent/icd.json")
        .output()
        .unwrap()
}

#[test]
fn check_validates_a_workload_without_a_device_and_prints_its_dag() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let good = root.join("tests/data/serve/tiny.ron");
    let o = check_without_a_driver(&good);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    for want in [
        "pipeline `classify`",
        "camera: image -> image: image",
        "Run(conv)",
        "feat: tensor -> probs: tensor",
        "minimum cap for one request",
        "ok: no device was opened",
    ] {
        assert!(out.contains(want), "missing `{want}` in:\n{out}");
    }
    // A step that reads an image where its model takes a tensor: refused with its location.
    let dir = scratch("check");
    for f in ["conv.onnx", "mlp.onnx"] {
        std::fs::copy(root.join("tests/data/serve").join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(&good).unwrap().replace(
        r#"inputs: {"x": "feat"}, outputs: {"y": "probs"}),
            ],
        ),
        PipelineSpec(
            name: "chain","#,
        r#"inputs: {"x": "image"}, outputs: {"y": "probs"}),
            ],
        ),
        PipelineSpec(
            name: "chain","#,
    );
    assert!(
        text.contains(r#"{"x": "image"}"#),
        "the fixture changed: update this test"
    );
    let bad = dir.join("bad.ron");
    std::fs::write(&bad, text).unwrap();
    let o = texstream(&["check", path_str(&bad)]);
    assert_user_error(
        "mistyped value",
        &o,
        &[&format!("{}:", path_str(&bad)), "image"],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `line:col` (1-based) of the first occurrence of `needle` in `text`.
fn position_of(text: &str, needle: &str) -> String {
    let at = text
        .find(needle)
        .unwrap_or_else(|| panic!("`{needle}` is not in the fixture: update this test"));
    let before = &text[..at];
    let line = before.matches('\n').count() + 1;
    let col = at - before.rfind('\n').map_or(0, |n| n + 1) + 1;
    format!("{line}:{col}")
}

#[test]
fn declared_inputs_catch_misspelt_and_unused_values_at_their_location() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let good = root.join("tests/data/serve/tiny.ron");
    let dir = scratch("declared");
    for f in ["conv.onnx", "mlp.onnx"] {
        std::fs::copy(root.join("tests/data/serve").join(f), dir.join(f)).unwrap();
    }
    let fixture = std::fs::read_to_string(&good).unwrap();
    let chain_mlp = r#"Run(model: "mlp", inputs: {"x": "feat"}, outputs: {"y": "probs"}),
            ],
        ),
    ],"#;
    for (case, from, to, at, expect) in [
        (
            "misspelt read",
            chain_mlp,
            chain_mlp.replace(r#""x": "feat""#, r#""x": "faet""#),
            r#"Run(model: "mlp", inputs: {"x": "faet"}"#,
            "pipeline `chain` step 1 (Run(mlp)): undefined value `faet` (did you mean `feat`?)",
        ),
        (
            "unread input",
            r#"inputs: ["pixels"],"#,
            r#"inputs: ["pixels", "mask"],"#.to_string(),
            r#""mask"]"#,
            "pipeline `chain` `inputs`: declared input `mask` is not read by any step",
        ),
        (
            "written input",
            r#"inputs: ["pixels"],"#,
            r#"inputs: ["pixels", "feat"],"#.to_string(),
            r#""feat"]"#,
            "`feat` is declared an input, but step 0 (Run(conv)) writes it",
        ),
        (
            "misspelt output",
            r#"inputs: ["pixels"],
            outputs: ["probs"],"#,
            r#"inputs: ["pixels"],
            outputs: ["prbos"],"#
                .to_string(),
            r#""prbos""#,
            "output `prbos` is not a value of the pipeline (did you mean `probs`?)",
        ),
    ] {
        assert!(fixture.contains(from), "{case}: the fixture changed");
        let text = fixture.replacen(from, &to, 1);
        let bad = dir.join("bad.ron");
        std::fs::write(&bad, &text).unwrap();
        let o = texstream(&["check", path_str(&bad)]);
        let loc = format!("{}:{}: ", path_str(&bad), position_of(&text, at));
        assert_user_error(case, &o, &[&loc, expect]);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plan_what_if_options_rescale_the_workload_and_refuse_bad_values() {
    let dir = scratch("what-if");
    let w = synthetic_workload(&dir, "ok.ron", "Once", "");
    // Four 10 µs layers scaled to a 4 ms run, pages in 1 µs: preload computes 4 ms after
    // loading its four pages.
    // `plan`'s JSON for preload with the run scaled to 4 ms and pages in 1 µs, plus `extra`.
    let preload_plan = |extra: &[&str]| -> serde_json::Value {
        let mut a = vec![
            "plan",
            path_str(&w),
            "--policy",
            "preload",
            "--json",
            "--run-time",
            "m=4ms",
            "--page-time",
            "1us",
        ];
        a.extend(extra);
        let o = texstream(&a);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        serde_json::from_slice(&o.stdout).unwrap()
    };
    let v = preload_plan(&[]);
    let predicted = v[0]["predicted_s"].as_f64().unwrap();
    assert!(
        (0.004..0.0041).contains(&predicted),
        "predicted {predicted} s, not 4 ms + 4 µs"
    );
    // A cold start from disk: the four pages read at a page a millisecond before their copies.
    // Layer k waits for page k's read (k + 1 ms) and copy, and the reads run behind the layers
    // before: 1 ms + 1 µs, then the four 1 ms layers. The bound says the same.
    let page = v[0]["page_bytes"].as_f64().unwrap();
    let read_rate = format!("{}", (page * 1e3) as u64);
    let cold = preload_plan(&["--cold-read", &read_rate]);
    let (cold_predicted, cold_lb) = (
        cold[0]["predicted_s"].as_f64().unwrap(),
        cold[0]["lower_bound_s"].as_f64().unwrap(),
    );
    assert!(
        (0.005..0.00501).contains(&cold_predicted) && (cold_predicted - cold_lb).abs() < 1e-9,
        "cold: predicted {cold_predicted} s, LB {cold_lb} s, not one read, a copy and 4 ms"
    );
    let o = texstream(&["plan", path_str(&w), "--candidates", "--cap", "3MiB"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("min-early") && out.contains("phases"), "{out}");
    // Refused by the argument parser (exit code 2, as for every bad argument) or by the plan.
    for (case, args, code, expect) in [
        (
            "unknown model",
            ["--run-time", "x=1ms"],
            1,
            "no model `x` (it has m)",
        ),
        ("no unit", ["--page-time", "5"], 2, "`5` is not a duration"),
        ("no name", ["--run-time", "4ms"], 2, "is not NAME=DURATION"),
        (
            "zero page time",
            ["--page-time", "0us"],
            1,
            "--page-time must be above zero",
        ),
        (
            "zero read rate",
            ["--cold-read", "0"],
            1,
            "--cold-read must be above zero",
        ),
        ("read rate not a size", ["--cold-read", "fast"], 2, "fast"),
    ] {
        let mut a = vec!["plan", path_str(&w)];
        a.extend(args);
        let o = texstream(&a);
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{case}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(expect),
            "{case}: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "{case}: {stderr}");
    }
    // A run's batch length: at least one step.
    let o = texstream(&["run", path_str(&w), "--steps-per-batch", "0"]);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--steps-per-batch") && stderr.contains("0 is not in 1.."),
        "{stderr}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The cap a `cap ... is below the minimum feasible cap` error names: `(bytes, exact)`.
fn named_minimum(stderr: &str) -> Option<(u64, bool)> {
    let line = stderr.lines().find(|l| l.starts_with("error: cap "))?;
    let (at, exact) = match line.find("which is at least ") {
        Some(i) => (i + "which is at least ".len(), false),
        None => (
            line.find("minimum feasible cap ")? + "minimum feasible cap ".len(),
            true,
        ),
    };
    let digits: String = line[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((digits.parse().ok()?, exact))
}

#[test]
fn every_cap_below_the_minimum_names_it_never_an_allocation() {
    // The tiny assistant's encoder makes scratch tensors (its 1-D convolutions' 2-D copies) only
    // when its kernels are first recorded, after the estimate the early check uses: a cap
    // between that estimate and the exact minimum once failed on the allocation itself.
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let w = root.join("workloads/assistant-tiny.ron");
    if !root.join("models/vad/silero_vad.onnx").exists() {
        eprintln!("skipped: models/vad/silero_vad.onnx (scripts/fetch_models.py) is missing");
        return;
    }
    // `None` where the cap runs; else the minimum the refusal names and whether it is exact.
    let attempt = |cap: u64| {
        let c = format!("{cap}B");
        let o = texstream(&["run", path_str(&w), "--cap", &c, "--iterations", "1"]);
        if o.status.success() {
            return None;
        }
        let what = format!("cap {cap}");
        assert_user_error(&what, &o, &["is below the minimum feasible cap"]);
        let stderr = String::from_utf8_lossy(&o.stderr).to_string();
        assert!(!stderr.contains("memory cap exceeded"), "{what}: {stderr}");
        let (named, exact) = named_minimum(&stderr).unwrap_or_else(|| panic!("{what}: {stderr}"));
        assert!(named > cap, "{what}: names {named}");
        Some((named, exact))
    };
    // From a cap of 0, each bound taken as the next cap, until the exact minimum is named or a
    // bound runs (then it was the minimum).
    let (mut cap, mut bounds) = (0, Vec::new());
    let (exact, ran) = loop {
        match attempt(cap) {
            None => break (cap, true),
            Some((named, true)) => break (named, false),
            Some((named, false)) => bounds.push(named),
        }
        assert!(bounds.len() < 8, "no minimum after the bounds {bounds:?}");
        cap = *bounds.last().unwrap_or(&0);
    };
    eprintln!("bounds from a cap of 0: {bounds:?}, minimum {exact}");
    // A minimum named as exact runs.
    assert!(
        ran || attempt(exact).is_none(),
        "the minimum {exact} does not run"
    );
    // Every cap between the first bound and the exact minimum is refused with a bound the
    // exact minimum does not contradict.
    let first = bounds.first().copied().unwrap_or(0);
    for k in 0..6 {
        let cap = first + (exact - 1 - first) * k / 5;
        let (named, _) = attempt(cap).unwrap_or_else(|| panic!("cap {cap} ran below {exact}"));
        assert!(
            named <= exact,
            "cap {cap} names {named}, above the minimum {exact}"
        );
    }
}

/// `check` counts the decoders' key/value caches as the engine keeps them: the tiny assistant's
/// Whisper decoder has four `[1, 4, 64, 16]` caches at its fp32 activations (one texel layer of
/// 64 x 16 texels, 16 B each: 16 KiB a cache) and its language model four `[1, 2, 224, 16]` at
/// the fp16 its `KvCacheSpec` asks (two heads pad to a texel of four: 224 x 16 texels of 8 B, 28
/// KiB a cache): 64 + 112 = 176 KiB.
#[test]
fn check_counts_the_key_value_caches_at_their_precision() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if !root.join("models/vad/silero_vad.onnx").exists() {
        eprintln!("SKIPPED: models/vad/silero_vad.onnx missing (scripts/fetch_models.py)");
        return;
    }
    let o = check_without_a_driver(&root.join("workloads/assistant-tiny.ron"));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let want =
        "state kept on the device all session (key/value caches, at their precision): 176 KiB";
    assert!(out.contains(want), "missing `{want}` in:\n{out}");
}

/// A key/value cache wider than its model's activations (fp32 under fp16) has no kernels: the
/// engine refuses it when it places the model, naming the workload and the model, before any
/// request runs.
#[test]
fn an_fp32_cache_under_fp16_activations_is_refused_with_the_model() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    if !root.join("models/vad/silero_vad.onnx").exists() {
        eprintln!("SKIPPED: models/vad/silero_vad.onnx missing (scripts/fetch_models.py)");
        return;
    }
    let text = std::fs::read_to_string(root.join("workloads/assistant-tiny.ron")).unwrap();
    let asked = "            activations: F32,\n            kv_cache: KvCacheSpec(max_len: 224, precision: F16),";
    assert!(
        text.contains(asked),
        "the fixture changed: update this test"
    );
    let text = text
        .replace(
            asked,
            "            activations: F16,\n            kv_cache: KvCacheSpec(max_len: 224, precision: F32),",
        )
        .replace("\"../", &format!("\"{}/", root.display()));
    let dir = scratch("cache-precision");
    let w = dir.join("assistant.ron");
    std::fs::write(&w, text).unwrap();
    let o = texstream(&["run", path_str(&w), "--iterations", "1"]);
    assert_user_error(
        "fp32 cache under fp16 activations",
        &o,
        &[
            "`lm`",
            "an fp32 key/value cache under fp16 activations is not supported",
        ],
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn plan_writes_the_chosen_schedule_as_json() {
    let dir = scratch("schedule-json");
    // Four 1 MiB layers, three times, under a cap that holds two of them: `lru` streams.
    let w = synthetic_workload(&dir, "sched.ron", "PerFrame(3)", "");
    let out = dir.join("sched.json");
    let o = texstream(&[
        "plan",
        path_str(&w),
        "--policy",
        "lru",
        "--cap",
        "3MiB",
        "--json",
        "--schedule-json",
        path_str(&out),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stats: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sched: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&out).expect("schedule written")).unwrap();
    assert_eq!(sched["policy"], "lru");
    let steps = sched["steps"].as_array().unwrap();
    assert_eq!(steps.len(), 12, "four layers, three frames");
    assert_eq!(sched["step_wait"].as_array().unwrap().len(), steps.len());
    // Replaying the ops in order, every step finds its pages resident once the ops it waits
    // for have run, and the loads are the ones `--json` counts.
    let ops = sched["ops"].as_array().unwrap();
    let loads = ops.iter().filter(|o| o.get("Load").is_some()).count();
    assert_eq!(loads as u64, stats[0]["loads"].as_u64().unwrap());
    let mut resident = std::collections::HashSet::new();
    let mut next = 0usize;
    for (j, s) in steps.iter().enumerate() {
        if let Some(w) = sched["step_wait"][j].as_u64() {
            while next <= w as usize {
                let op = &ops[next];
                if let Some(l) = op.get("Load") {
                    assert!(resident.insert(l["page"].as_u64().unwrap()));
                } else {
                    assert!(resident.remove(&op["Evict"]["page"].as_u64().unwrap()));
                }
                next += 1;
            }
        }
        for p in s["pages"].as_array().unwrap() {
            assert!(
                resident.contains(&p.as_u64().unwrap()),
                "step {j} reads {p}"
            );
        }
    }
}
