//! `texstream serve` end to end on lavapipe: the real binary on a loopback port, driven by
//! Triton's own Python client (`tritonclient[http]`, tests/serve_client.py) and by reqwest.
//! Outputs are compared bit for bit with the library call and `texstream infer`, and with
//! ONNX Runtime within tolerance; then the error answers (4xx JSON, 401, 413, 503 with
//! Retry-After), `/metrics` through promtool, the status page in headless Chromium, hot
//! reload of valid and invalid files (under load, with a model file replaced by rename and one
//! truncated in place), and SIGTERM with requests in flight.
//!
//! The workload is tests/data/serve/tiny.ron (two tiny fp32 models); each test copies it into
//! a fresh temporary folder, since the server compiles next to the models and the reload tests
//! edit the files.
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use texstream::{Engine, EngineOptions, Image, Tensor, Value, Values};

const TOKEN: &str = "s3cret-token";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn data() -> PathBuf {
    root().join("tests/data/serve")
}

fn image_path() -> PathBuf {
    root().join("tests/data/ocr/page_crop0.png")
}

/// A fresh copy of the test workload (without its demo inputs) in a temporary folder.
fn workspace(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("texstream-serve-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for f in [
        "conv.onnx",
        "mlp.onnx",
        "mlp_b.onnx",
        "pixels.npy",
        "feat.npy",
    ] {
        std::fs::copy(data().join(f), dir.join(f)).unwrap();
    }
    std::fs::write(dir.join("tiny.ron"), variant(&Variant::default())).unwrap();
    dir
}

/// What a workload variant changes.
#[derive(Clone, Default)]
struct Variant {
    cap: Option<&'static str>,
    policy: Option<&'static str>,
    /// Source of the `mlp` model (default `Onnx("mlp.onnx")`).
    mlp_source: Option<&'static str>,
    /// The second pipeline's second model (default `mlp`).
    chain_model: Option<&'static str>,
    /// Drop the closing parenthesis (a syntax error).
    broken: bool,
}

fn variant(v: &Variant) -> String {
    let text = std::fs::read_to_string(data().join("tiny.ron")).unwrap();
    let mut text = text[..text.find("    demo_inputs").unwrap()].to_string() + ")\n";
    if let Some(c) = v.cap {
        text = text.replace("cap: \"8MiB\"", &format!("cap: \"{c}\""));
    }
    if let Some(p) = v.policy {
        text = text.replace("policy: \"planned\"", &format!("policy: \"{p}\""));
    }
    if let Some(s) = v.mlp_source {
        text = text.replace("source: Onnx(\"mlp.onnx\")", &format!("source: {s}"));
    }
    if let Some(m) = v.chain_model {
        let at = text.find("name: \"chain\"").unwrap();
        let tail = text[at..].replacen("Run(model: \"mlp\"", &format!("Run(model: \"{m}\""), 1);
        text = text[..at].to_string() + &tail;
    }
    if v.broken {
        text = text.trim_end().trim_end_matches(')').to_string() + "\n";
    }
    text
}

/// A running `texstream serve`.
struct Server {
    child: Child,
    base: String,
    log: Arc<Mutex<String>>,
}

impl Server {
    fn start(workload: &Path, extra: &[&str]) -> Server {
        let mut child = Command::new(env!("CARGO_BIN_EXE_texstream"))
            .arg("serve")
            .arg(workload)
            .args(["--listen", "127.0.0.1:0", "--debounce-ms", "100"])
            .args(extra)
            .env_remove("TEXSTREAM_TOKEN")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let log = Arc::new(Mutex::new(String::new()));
        let stderr = child.stderr.take().unwrap();
        let log_c = log.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let mut l = log_c.lock().unwrap();
                l.push_str(&line);
                l.push('\n');
            }
        });
        let (tx, rx) = std::sync::mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        });
        let base = match rx.recv_timeout(Duration::from_secs(240)) {
            Ok(b) => b,
            Err(_) => {
                let _ = child.kill();
                panic!("the server did not start:\n{}", log.lock().unwrap());
            }
        };
        Server { child, base, log }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    fn host_port(&self) -> &str {
        self.base.trim_start_matches("http://")
    }

    fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    /// No validation-layer message reached the server's log.
    fn assert_clean_log(&self) {
        let log = self.log();
        let bad: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("vulkan: ") && !l.contains("not counted"))
            .collect();
        assert!(bad.is_empty(), "validation messages:\n{}", bad.join("\n"));
    }

    fn sigterm(&self) {
        let ok = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());
    }

    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(
                t0.elapsed() < within,
                "the server did not exit:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("TEXSTREAM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    p.exists().then_some(p)
}

fn f32_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn npy(path: &Path) -> (Vec<usize>, Vec<f32>) {
    let a = texstream::runtime::npy::read_npy(path).unwrap();
    (a.shape, a.data)
}

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// A KServe infer request in the binary-tensor extension.
struct Infer {
    header: Vec<u8>,
    body: Vec<u8>,
}

fn infer_body(inputs: &[(&str, &str, Vec<usize>, Vec<u8>)]) -> Infer {
    let ins: Vec<Json> = inputs
        .iter()
        .map(|(n, dt, shape, raw)| {
            serde_json::json!({"name": n, "datatype": dt, "shape": shape,
                "parameters": {"binary_data_size": raw.len()}})
        })
        .collect();
    let header = serde_json::to_vec(&serde_json::json!({
        "inputs": ins, "parameters": {"binary_data_output": true}
    }))
    .unwrap();
    let mut body = header.clone();
    for (_, _, _, raw) in inputs {
        body.extend_from_slice(raw);
    }
    Infer { header, body }
}

fn bytes_element(b: &[u8]) -> Vec<u8> {
    let mut v = (b.len() as u32).to_le_bytes().to_vec();
    v.extend_from_slice(b);
    v
}

/// Sends a binary infer request; returns the status and, on 200, the first output's f32s.
fn post_infer(
    c: &reqwest::blocking::Client,
    s: &Server,
    model: &str,
    req: &Infer,
    token: Option<&str>,
) -> Result<(u16, Vec<f32>, Json), reqwest::Error> {
    let mut r = c
        .post(s.url(&format!("/v2/models/{model}/infer")))
        .header("Inference-Header-Content-Length", req.header.len())
        .body(req.body.clone());
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let resp = r.send()?;
    let status = resp.status().as_u16();
    let hl: Option<usize> = resp
        .headers()
        .get("inference-header-content-length")
        .and_then(|v| v.to_str().ok()?.parse().ok());
    let body = resp.bytes()?;
    match hl {
        Some(n) => {
            let doc: Json = serde_json::from_slice(&body[..n]).unwrap();
            let size = doc["outputs"][0]["parameters"]["binary_data_size"]
                .as_u64()
                .unwrap() as usize;
            let y = body[n..n + size]
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect();
            Ok((status, y, doc))
        }
        None => Ok((
            status,
            Vec::new(),
            serde_json::from_slice(&body).unwrap_or(Json::Null),
        )),
    }
}

/// The library's answer for a request of `pipeline`.
fn library_outputs(engine: &Engine, pipeline: &str, inputs: Values) -> Vec<f32> {
    let r = engine.run(pipeline, inputs).unwrap();
    let (_, v) = r.outputs.iter().next().unwrap();
    v.as_tensor().unwrap().as_f32().unwrap().to_vec()
}

fn tensor_value(path: &Path) -> Value {
    let (shape, data) = npy(path);
    Value::Tensor(Tensor::f32(shape, data).unwrap())
}

/// The first output `texstream infer` writes for `model` on one input.
fn cli_infer(dir: &Path, model: &str, input: &str, out: &str) -> Vec<f32> {
    let out_dir = dir.join(out);
    let st = Command::new(env!("CARGO_BIN_EXE_texstream"))
        .arg("infer")
        .arg(dir.join(format!("{model}.tspk")))
        .arg("--input")
        .arg(format!("x={}", dir.join(input).display()))
        .arg("--out")
        .arg(&out_dir)
        .status()
        .unwrap();
    assert!(st.success(), "texstream infer {model}");
    npy(&out_dir.join("y.npy")).1
}

fn get_json(c: &reqwest::blocking::Client, s: &Server, path: &str, token: Option<&str>) -> Json {
    let mut r = c.get(s.url(path));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    let resp = r.send().unwrap();
    assert_eq!(resp.status().as_u16(), 200, "GET {path}");
    resp.json_body()
}

trait JsonBody {
    fn json_body(self) -> Json;
}

impl JsonBody for reqwest::blocking::Response {
    fn json_body(self) -> Json {
        let b = self.bytes().unwrap();
        serde_json::from_slice(&b)
            .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&b)))
    }
}

/// Protocol, conformance with the library, `texstream infer` and ONNX Runtime, error
/// answers, metrics, the full queue, and SIGTERM with requests in flight; one server with a
/// token and a queue of one.
#[test]
fn kserve_protocol_errors_metrics_and_sigterm() {
    let dir = workspace("protocol");
    let workload = dir.join("tiny.ron");
    let mut s = Server::start(
        &workload,
        &["--token", TOKEN, "--queue-depth", "1", "--no-watch"],
    );
    let c = client();
    let tok = Some(TOKEN);

    // The library's answers, on the packed files the server compiled.
    let engine = Engine::open(&workload, EngineOptions::from_env()).unwrap();
    let png = std::fs::read(image_path()).unwrap();
    let lib = |p: &str, name: &str, v: Value| {
        let mut i = Values::new();
        i.insert(name.into(), v);
        library_outputs(&engine, p, i)
    };
    let lib_conv = lib("conv", "x", tensor_value(&dir.join("pixels.npy")));
    let lib_mlp = lib("mlp", "x", tensor_value(&dir.join("feat.npy")));
    let lib_chain = lib("chain", "pixels", tensor_value(&dir.join("pixels.npy")));
    let lib_classify = lib(
        "classify",
        "camera",
        Value::Image(Image::decode(&png).unwrap()),
    );
    engine.shutdown();
    drop(engine);
    let cli_conv = cli_infer(&dir, "conv", "pixels.npy", "infer_conv");
    let cli_mlp = cli_infer(&dir, "mlp", "feat.npy", "infer_mlp");
    assert_eq!(
        bits(&cli_conv),
        bits(&lib_conv),
        "texstream infer vs library: conv"
    );
    assert_eq!(
        bits(&cli_mlp),
        bits(&lib_mlp),
        "texstream infer vs library: mlp"
    );

    // Triton's client: metadata, readiness, binary and JSON inference, ONNX Runtime.
    match python() {
        None => {
            eprintln!("SKIPPED tritonclient part: no .venv/bin/python (scripts/setup.sh makes it)")
        }
        Some(py) => {
            let out = dir.join("client");
            std::fs::create_dir_all(&out).unwrap();
            let r = Command::new(py)
                .arg(root().join("tests/serve_client.py"))
                .args([s.host_port(), TOKEN])
                .arg(&dir)
                .arg(image_path())
                .arg(&out)
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&r.stdout).to_string()
                + &String::from_utf8_lossy(&r.stderr);
            if text.contains("No module named 'tritonclient'") {
                panic!("tritonclient is missing from the venv: run scripts/setup.sh\n{text}");
            }
            assert!(
                r.status.success(),
                "serve_client.py failed:\n{text}\nserver:\n{}",
                s.log()
            );
            assert!(text.contains("serve_client: ok"), "{text}");
            for (model, want) in [
                ("conv", &lib_conv),
                ("mlp", &lib_mlp),
                ("chain", &lib_chain),
                ("classify", &lib_classify),
            ] {
                for kind in ["bin", "json"] {
                    let (_, got) = npy(&out.join(format!("{model}_{kind}.npy")));
                    assert_eq!(
                        bits(&got),
                        bits(want),
                        "{model} ({kind}) vs the library call"
                    );
                }
            }
        }
    }

    // reqwest: the same answers, and every error named.
    let pixels = npy(&dir.join("pixels.npy")).1;
    let good = infer_body(&[("pixels", "FP32", vec![1, 3, 8, 8], f32_bytes(&pixels))]);
    let (st, y, _) = post_infer(&c, &s, "chain", &good, tok).unwrap();
    assert_eq!((st, bits(&y)), (200, bits(&lib_chain)));

    let (st, _, doc) = post_infer(&c, &s, "chain", &good, None).unwrap();
    assert_eq!(st, 401);
    assert!(doc["error"].as_str().unwrap().contains("Bearer"), "{doc}");
    let (st, _, _) = post_infer(&c, &s, "chain", &good, Some("wrong")).unwrap();
    assert_eq!(st, 401);
    let live = c.get(s.url("/v2/health/live")).send().unwrap();
    assert_eq!(live.status().as_u16(), 200, "health probes need no token");

    let err = |status: u16, resp: reqwest::blocking::Response| -> String {
        assert_eq!(resp.status().as_u16(), status);
        assert!(resp
            .headers()
            .get("content-type")
            .is_some_and(|v| v.to_str().unwrap().starts_with("application/json")));
        resp.json_body()["error"].as_str().unwrap().to_string()
    };
    let post = |model: &str, body: Vec<u8>| {
        c.post(s.url(&format!("/v2/models/{model}/infer")))
            .bearer_auth(TOKEN)
            .body(body)
            .send()
            .unwrap()
    };
    let e = err(400, post("chain", b"{\"inputs\": [".to_vec()));
    assert!(e.contains("malformed JSON"), "{e}");
    let e = err(404, post("nope", b"{\"inputs\": []}".to_vec()));
    assert!(
        e.contains("unknown model `nope`") && e.contains("chain"),
        "{e}"
    );
    let wrong_shape = br#"{"inputs":[{"name":"pixels","shape":[1,3,4,4],"datatype":"FP32","data":[
        0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0]}]}"#;
    let e = err(400, post("chain", wrong_shape.to_vec()));
    assert!(
        e.contains("shape [1, 3, 4, 4], the model takes [1, 3, 8, 8]"),
        "{e}"
    );
    let e = err(
        400,
        post(
            "chain",
            br#"{"inputs":[{"name":"pixels","shape":[1],"datatype":"BF16","data":[1]}]}"#.to_vec(),
        ),
    );
    assert!(e.contains("datatype `BF16` is not supported"), "{e}");
    let e = err(400, post("chain", br#"{"inputs":[]}"#.to_vec()));
    assert!(e.contains("input `pixels` is missing"), "{e}");
    let bad_png = infer_body(&[("camera", "BYTES", vec![1], bytes_element(b"not a png"))]);
    let r = c
        .post(s.url("/v2/models/classify/infer"))
        .bearer_auth(TOKEN)
        .header("Inference-Header-Content-Length", bad_png.header.len())
        .body(bad_png.body.clone())
        .send()
        .unwrap();
    assert!(err(400, r).contains("not a PNG or JPEG"));
    let e = err(
        404,
        c.get(s.url("/v2/nothing"))
            .bearer_auth(TOKEN)
            .send()
            .unwrap(),
    );
    assert!(e.contains("no route GET /v2/nothing"), "{e}");
    // A client's timeout shorter than the server's becomes the deadline: 504.
    let late = serde_json::json!({
        "inputs": [{"name": "pixels", "shape": [1, 3, 8, 8], "datatype": "FP32", "data": pixels}],
        "parameters": {"timeout": 1},
    });
    let e = err(504, post("chain", serde_json::to_vec(&late).unwrap()));
    assert!(e.contains("deadline exceeded"), "{e}");
    // Bad requests failed alone: the next good one gets the same bits.
    let (st, y, _) = post_infer(&c, &s, "chain", &good, tok).unwrap();
    assert_eq!((st, bits(&y)), (200, bits(&lib_chain)));

    // A queue of one: a burst gets 503 with Retry-After for some, the right bits for the rest.
    let classify = Arc::new(infer_body(&[(
        "camera",
        "BYTES",
        vec![1],
        bytes_element(&png),
    )]));
    let outcomes: Vec<(u16, Vec<f32>, Option<String>, Json)> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..12)
            .map(|_| {
                let (c, s, req) = (&c, &s, classify.clone());
                sc.spawn(move || {
                    let resp = c
                        .post(s.url("/v2/models/classify/infer"))
                        .bearer_auth(TOKEN)
                        .header("Inference-Header-Content-Length", req.header.len())
                        .body(req.body.clone())
                        .send()
                        .unwrap();
                    let st = resp.status().as_u16();
                    let retry = resp
                        .headers()
                        .get("retry-after")
                        .map(|v| v.to_str().unwrap().to_string());
                    let hl: Option<usize> = resp
                        .headers()
                        .get("inference-header-content-length")
                        .and_then(|v| v.to_str().ok()?.parse().ok());
                    let body = resp.bytes().unwrap();
                    match hl {
                        Some(n) => {
                            let y = body[n..]
                                .chunks_exact(4)
                                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                                .collect();
                            (st, y, retry, Json::Null)
                        }
                        None => (
                            st,
                            Vec::new(),
                            retry,
                            serde_json::from_slice(&body).unwrap(),
                        ),
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let busy: Vec<_> = outcomes.iter().filter(|o| o.0 == 503).collect();
    assert!(
        !busy.is_empty(),
        "no 503 from a burst of 12 at queue depth 1"
    );
    for (st, y, retry, doc) in &outcomes {
        match st {
            200 => assert_eq!(bits(y), bits(&lib_classify)),
            503 => {
                assert_eq!(retry.as_deref(), Some("1"));
                assert!(doc["error"].as_str().unwrap().contains("busy"), "{doc}");
            }
            other => panic!("status {other} in the burst: {doc}"),
        }
    }

    // Metrics: the named families, promtool's check, and a scrape leaves residency alone.
    let before = get_json(&c, &s, "/v1/status", tok)["stats"].clone();
    let mut text = String::new();
    for _ in 0..3 {
        text = c
            .get(s.url("/metrics"))
            .bearer_auth(TOKEN)
            .send()
            .unwrap()
            .text()
            .unwrap();
    }
    let after = get_json(&c, &s, "/v1/status", tok)["stats"].clone();
    for k in [
        "pages_loaded",
        "evictions",
        "bytes_streamed",
        "resident_bytes",
    ] {
        assert_eq!(before[k], after[k], "a scrape changed {k}");
    }
    for family in [
        "texstream_requests_total{",
        "texstream_request_latency_seconds_bucket{",
        "texstream_model_latency_seconds_bucket{",
        "texstream_model_runs_total{",
        "texstream_queue_depth ",
        "texstream_bytes_streamed_total ",
        "texstream_pages_loaded_total ",
        "texstream_evictions_total ",
        "texstream_gpu_stall_seconds ",
        "texstream_transfer_busy_seconds ",
        "texstream_compute_busy_seconds ",
        "texstream_resident_bytes{model=\"conv\"}",
        "texstream_cap_bytes 8388608",
        "texstream_peak_device_bytes ",
        "texstream_reloads_total{outcome=\"error\"} 0",
        "texstream_replans_total{cause=",
        "texstream_http_requests_total{",
    ] {
        assert!(text.contains(family), "/metrics lacks {family}:\n{text}");
    }
    check_with_promtool(&text);
    // GPU times are live: no session has ended (no reload ran), and the requests above ran.
    let gauge = |name: &str| -> f64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in /metrics:\n{text}"))
    };
    assert!(
        gauge("texstream_compute_busy_seconds") > 0.0,
        "compute busy is not live:\n{text}"
    );

    // The plan and the plot.
    let plan = get_json(&c, &s, "/v1/plan", tok);
    assert_eq!(plan["cap_bytes"], 8u64 << 20);
    assert!(plan["lower_bound_s"].as_f64().unwrap() > 0.0, "{plan}");
    let svg = c
        .get(s.url("/v1/residency.svg"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap();
    assert_eq!(svg.headers()["content-type"], "image/svg+xml");
    // The last requests as they ran: their marks and the compute batches timed on the GPU.
    let measured = svg.text().unwrap();
    assert!(measured.starts_with("<svg"), "{measured}");
    assert!(measured.contains("as it ran"), "{measured}");
    assert!(
        measured.contains(">classify</text>"),
        "no request marks:\n{measured}"
    );
    let planned = c
        .get(s.url("/v1/plan.svg"))
        .bearer_auth(TOKEN)
        .send()
        .unwrap()
        .text()
        .unwrap();
    assert!(
        planned.starts_with("<svg") && planned.contains("predicted"),
        "{planned}"
    );
    let st = get_json(&c, &s, "/v1/status", tok);
    assert_eq!(st["pipelines"].as_array().unwrap().len(), 4, "{st}");
    let peak = st["stats"]["peak_device_bytes"].as_u64().unwrap();
    assert!(peak > 0 && peak <= 8 << 20, "peak {peak}");

    // SIGTERM with a request in flight: its body stops half way until the signal was sent
    // (the server is reading it by then: more than the socket buffers hold is out), then
    // comes in full; the request finishes with 200 and the server exits 0.
    let big = noise_png(2000, 2000);
    let slow = infer_body(&[("camera", "BYTES", vec![1], bytes_element(&big))]);
    let (half_tx, half_rx) = std::sync::mpsc::channel();
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let status = std::thread::scope(|sc| {
        let h = sc.spawn(|| {
            let len = slow.body.len() as u64;
            let body = GatedBody {
                data: slow.body.clone(),
                pos: 0,
                gate_at: slow.body.len() * 5 / 6,
                half: Some(half_tx),
                go: go_rx,
            };
            let r = c
                .post(s.url("/v2/models/classify/infer"))
                .bearer_auth(TOKEN)
                .header("Inference-Header-Content-Length", slow.header.len())
                .body(reqwest::blocking::Body::sized(body, len))
                .send()
                .unwrap();
            let st = r.status().as_u16();
            let _ = r.bytes();
            st
        });
        half_rx.recv_timeout(Duration::from_secs(60)).unwrap();
        s.sigterm();
        // The signal lands and the server stops accepting before the rest of the body.
        let t0 = Instant::now();
        while !s
            .log()
            .contains("stopping: finishing the requests in flight")
        {
            assert!(t0.elapsed() < Duration::from_secs(30), "{}", s.log());
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        let quick = reqwest::blocking::Client::builder()
            .timeout(Duration::from_secs(3))
            .build()
            .unwrap();
        let refused = quick.get(s.url("/v2/health/live")).send();
        assert!(
            refused.is_err(),
            "a new connection was answered after SIGTERM"
        );
        go_tx.send(()).unwrap();
        h.join().unwrap()
    });
    assert_eq!(
        status,
        200,
        "the in-flight request failed at shutdown:\n{}",
        s.log()
    );
    let status = s.wait_exit(Duration::from_secs(60));
    assert!(status.success(), "exit {status:?}:\n{}", s.log());
    assert!(s.log().contains("texstream serve: stopped"), "{}", s.log());
    s.assert_clean_log();
    let _ = std::fs::remove_dir_all(&dir);
}

/// A request body that stops at `gate_at` bytes, says so on `half`, and goes on once `go`
/// says so.
struct GatedBody {
    data: Vec<u8>,
    pos: usize,
    gate_at: usize,
    half: Option<std::sync::mpsc::Sender<()>>,
    go: std::sync::mpsc::Receiver<()>,
}

impl std::io::Read for GatedBody {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.pos >= self.gate_at {
            if let Some(h) = self.half.take() {
                let _ = h.send(());
                let _ = self.go.recv();
            }
        }
        let end = if self.pos < self.gate_at {
            self.gate_at
        } else {
            self.data.len()
        };
        let n = buf.len().min(end - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// A `w`×`h` PNG of noise (slow to decode and to normalize).
fn noise_png(w: u32, h: u32) -> Vec<u8> {
    let mut out = Vec::new();
    {
        let mut e = png::Encoder::new(&mut out, w, h);
        e.set_color(png::ColorType::Rgb);
        e.set_depth(png::BitDepth::Eight);
        let mut wr = e.write_header().unwrap();
        let mut x = 0x1234_5678u32;
        let px: Vec<u8> = (0..w * h * 3)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 24) as u8
            })
            .collect();
        wr.write_image_data(&px).unwrap();
    }
    out
}

/// Runs `promtool check metrics` on the scrape when promtool is installed.
fn check_with_promtool(text: &str) {
    let Ok(mut child) = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
    else {
        eprintln!("SKIPPED promtool check: promtool is not installed (Debian package prometheus)");
        return;
    };
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "promtool check metrics:\n{}{}\n{text}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The status page as headless Chromium renders it, or None (SKIPPED) without Chromium.
fn chromium_dom(url: &str, profile: &Path) -> Option<String> {
    let bin = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
        .into_iter()
        .find(|p| Path::new(p).exists());
    let Some(bin) = bin else {
        eprintln!("SKIPPED status page in Chromium: chromium is not installed");
        return None;
    };
    let out = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "chromium: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Writes `text` to `path`, as editors do (temp file + rename) or in place.
fn save(path: &Path, text: &str, by_rename: bool) {
    if by_rename {
        let tmp = path.with_extension("ron.swp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    } else {
        std::fs::write(path, text).unwrap();
    }
}

/// The engine's reload counters.
fn reloads(c: &reqwest::blocking::Client, s: &Server) -> (u64, u64, Json) {
    let st = get_json(c, s, "/v1/status", None)["stats"].clone();
    (
        st["reloads_ok"].as_u64().unwrap(),
        st["reloads_failed"].as_u64().unwrap(),
        st["last_reload"].clone(),
    )
}

/// Waits until one more reload finished; returns whether it succeeded and its message.
fn next_reload(c: &reqwest::blocking::Client, s: &Server, before: (u64, u64)) -> (bool, String) {
    let t0 = Instant::now();
    loop {
        let (ok, failed, last) = reloads(c, s);
        if ok + failed > before.0 + before.1 {
            assert_eq!(ok + failed, before.0 + before.1 + 1, "more than one reload");
            return (
                last["ok"].as_bool().unwrap(),
                last["message"].as_str().unwrap().to_string(),
            );
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "no reload seen:\n{}",
            s.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether `msg` names `file` with a line and a column (`file:L:C`).
fn has_location(msg: &str, file: &str) -> bool {
    msg.split(file).skip(1).any(|rest| {
        let mut parts = rest.split(':');
        parts.next() == Some("")
            && parts
                .next()
                .is_some_and(|l| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
            && parts
                .next()
                .is_some_and(|c| c.chars().next().is_some_and(|d| d.is_ascii_digit()))
    })
}

/// Hot reload: the status page in Chromium, valid and invalid files while two clients run
/// requests (none lost, none wrong, every invalid one reported with its location, after each
/// valid one the plan is the new file's), then a model file replaced by rename (picked up) and
/// one truncated in place (refused, the old one keeps serving).
#[test]
fn hot_reload_under_load() {
    let dir = workspace("reload");
    let workload = dir.join("tiny.ron");
    let s = Server::start(&workload, &[]);
    let c = client();
    let pixels = npy(&dir.join("pixels.npy")).1;
    let chain = Arc::new(infer_body(&[(
        "pixels",
        "FP32",
        vec![1, 3, 8, 8],
        f32_bytes(&pixels),
    )]));
    let (st, reference, _) = post_infer(&c, &s, "chain", &chain, None).unwrap();
    assert_eq!(st, 200);
    let profile = dir.join("chromium");
    if let Some(dom) = chromium_dom(&s.url("/"), &profile) {
        for want in [
            "texstream: serve-tiny",
            "<svg",
            "as it ran",
            "classify",
            "chain",
            "cap 8.00 MiB",
            "none yet",
        ] {
            assert!(dom.contains(want), "the page lacks {want}:\n{dom}");
        }
    }

    // Two clients for the whole sequence.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, lost, wrong) = (
        Arc::new(AtomicUsize::new(0)),
        Arc::new(Mutex::new(Vec::<String>::new())),
        Arc::new(AtomicUsize::new(0)),
    );
    let clients: Vec<_> = (0..2)
        .map(|_| {
            let (stop, done, lost, wrong) =
                (stop.clone(), done.clone(), lost.clone(), wrong.clone());
            let (chain, reference, base) = (chain.clone(), reference.clone(), s.base.clone());
            std::thread::spawn(move || {
                let c = client();
                while !stop.load(Ordering::Relaxed) {
                    let r = c
                        .post(format!("{base}/v2/models/chain/infer"))
                        .header("Inference-Header-Content-Length", chain.header.len())
                        .body(chain.body.clone())
                        .send();
                    match r {
                        Ok(resp) if resp.status().as_u16() == 200 => {
                            let n: usize = resp.headers()["inference-header-content-length"]
                                .to_str()
                                .unwrap()
                                .parse()
                                .unwrap();
                            let b = resp.bytes().unwrap();
                            let y: Vec<f32> = b[n..]
                                .chunks_exact(4)
                                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                                .collect();
                            if bits(&y) != bits(&reference) {
                                wrong.fetch_add(1, Ordering::Relaxed);
                            }
                        }
                        Ok(resp) => {
                            let st = resp.status();
                            lost.lock()
                                .unwrap()
                                .push(format!("{st}: {}", resp.text().unwrap_or_default()));
                        }
                        Err(e) => lost.lock().unwrap().push(e.to_string()),
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();

    // Packed copies for the corrupt-file case.
    let tspk = std::fs::read(dir.join("mlp.tspk")).unwrap();
    std::fs::write(dir.join("corrupt.tspk"), &tspk[..tspk.len() / 2]).unwrap();
    let corrupt_ron = variant(&Variant::default()).replace(
        "source: Onnx(\"mlp.onnx\")",
        "source: Packed(\"corrupt.tspk\")",
    );

    enum Expect {
        Valid(&'static str, u64),
        Invalid(&'static str),
    }
    let mib = |m: u64| m << 20;
    let steps: Vec<(String, Expect)> = vec![
        (
            variant(&Variant {
                policy: Some("lru"),
                ..Variant::default()
            }),
            Expect::Valid("lru", mib(8)),
        ),
        (
            variant(&Variant {
                broken: true,
                ..Variant::default()
            }),
            Expect::Invalid("syntax"),
        ),
        (
            variant(&Variant {
                policy: Some("on-demand"),
                cap: Some("7MiB"),
                ..Variant::default()
            }),
            Expect::Valid("on-demand", mib(7)),
        ),
        (
            variant(&Variant {
                chain_model: Some("nope"),
                ..Variant::default()
            }),
            Expect::Invalid("unknown model"),
        ),
        (
            variant(&Variant {
                cap: Some("10MiB"),
                ..Variant::default()
            }),
            Expect::Valid("planned", mib(10)),
        ),
        (
            variant(&Variant {
                cap: Some("64KiB"),
                ..Variant::default()
            }),
            Expect::Invalid("cap"),
        ),
        (
            variant(&Variant {
                policy: Some("preload"),
                ..Variant::default()
            }),
            Expect::Valid("preload", mib(8)),
        ),
        (
            variant(&Variant {
                mlp_source: Some("Onnx(\"missing.onnx\")"),
                ..Variant::default()
            }),
            Expect::Invalid("missing file"),
        ),
        (
            variant(&Variant {
                policy: Some("lru"),
                cap: Some("9MiB"),
                ..Variant::default()
            }),
            Expect::Valid("lru", mib(9)),
        ),
        (corrupt_ron, Expect::Invalid("corrupt file")),
        (
            variant(&Variant::default()),
            Expect::Valid("planned", mib(8)),
        ),
    ];
    let mut invalid = 0;
    for (i, (text, expect)) in steps.iter().enumerate() {
        let before = reloads(&c, &s);
        save(&workload, text, i % 2 == 0);
        let (ok, msg) = next_reload(&c, &s, (before.0, before.1));
        match expect {
            Expect::Valid(policy, cap) => {
                assert!(ok, "step {i}: a valid file was refused: {msg}");
                let plan = get_json(&c, &s, "/v1/plan", None);
                assert_eq!(plan["policy"], *policy, "step {i}: {plan}");
                assert_eq!(plan["cap_bytes"], *cap, "step {i}");
            }
            Expect::Invalid(kind) => {
                invalid += 1;
                assert!(!ok, "step {i}: an invalid file ({kind}) was accepted");
                let located = match *kind {
                    "syntax" | "unknown model" => has_location(&msg, "tiny.ron"),
                    "cap" => msg.contains("minimum"),
                    "missing file" => msg.contains("missing.onnx"),
                    _ => msg.contains("corrupt.tspk"),
                };
                assert!(
                    located,
                    "step {i} ({kind}): the message does not say where: {msg}"
                );
                let log_has = |m: &str| s.log().contains(m);
                let t0 = Instant::now();
                while !log_has(&msg) && t0.elapsed() < Duration::from_secs(5) {
                    std::thread::sleep(Duration::from_millis(20));
                }
                assert!(
                    log_has(&msg),
                    "step {i}: not in the log: {msg}\n{}",
                    s.log()
                );
                if *kind == "syntax" {
                    if let Some(dom) = chromium_dom(&s.url("/"), &profile) {
                        assert!(
                            dom.contains("failed: ") && dom.contains("tiny.ron:"),
                            "{dom}"
                        );
                    }
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in clients {
        h.join().unwrap();
    }
    let lost = lost.lock().unwrap().clone();
    let n = done.load(Ordering::Relaxed);
    eprintln!(
        "reload under load: {} reloads ({invalid} invalid), {n} requests, {} lost, {} wrong",
        steps.len(),
        lost.len(),
        wrong.load(Ordering::Relaxed)
    );
    assert!(lost.is_empty(), "lost requests: {lost:?}");
    assert_eq!(wrong.load(Ordering::Relaxed), 0, "wrong outputs");
    assert!(n >= steps.len(), "the clients hardly ran ({n} requests)");
    let metrics = c.get(s.url("/metrics")).send().unwrap().text().unwrap();
    assert!(
        metrics.contains(&format!(
            "texstream_reloads_total{{outcome=\"error\"}} {invalid}"
        )),
        "{metrics}"
    );

    // A model file replaced by atomic rename is picked up; one truncated in place is refused
    // by its checksum and the loaded one keeps serving.
    let st = Command::new(env!("CARGO_BIN_EXE_texstream"))
        .arg("compile")
        .arg(dir.join("mlp_b.onnx"))
        .args(["--shape", "x=1x16", "--precision", "f32", "-o"])
        .arg(dir.join("mlp_b.tspk"))
        .status()
        .unwrap();
    assert!(st.success());
    std::fs::copy(dir.join("mlp.tspk"), dir.join("served.tspk")).unwrap();
    let before = reloads(&c, &s);
    save(
        &workload,
        &variant(&Variant {
            mlp_source: Some("Packed(\"served.tspk\")"),
            ..Variant::default()
        }),
        true,
    );
    assert!(next_reload(&c, &s, (before.0, before.1)).0);
    let feat = npy(&dir.join("feat.npy")).1;
    let mlp_req = infer_body(&[("x", "FP32", vec![1, 16], f32_bytes(&feat))]);
    let (_, y_a, _) = post_infer(&c, &s, "mlp", &mlp_req, None).unwrap();
    let want_b = cli_infer(&dir, "mlp_b", "feat.npy", "infer_mlp_b");
    assert_ne!(bits(&y_a), bits(&want_b));

    let before = reloads(&c, &s);
    std::fs::rename(dir.join("mlp_b.tspk"), dir.join("served.tspk")).unwrap();
    let (ok, msg) = next_reload(&c, &s, (before.0, before.1));
    assert!(ok, "{msg}");
    let (st, y_b, _) = post_infer(&c, &s, "mlp", &mlp_req, None).unwrap();
    assert_eq!(
        (st, bits(&y_b)),
        (200, bits(&want_b)),
        "the renamed model file is not served"
    );

    let before = reloads(&c, &s);
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("served.tspk"))
        .unwrap();
    let len = f.metadata().unwrap().len();
    f.set_len(len - 4096).unwrap();
    drop(f);
    let (ok, msg) = next_reload(&c, &s, (before.0, before.1));
    assert!(!ok && msg.contains("served.tspk"), "{msg}");
    assert!(
        msg.contains("truncated") || msg.contains("checksum"),
        "{msg}"
    );
    let (st, y, _) = post_infer(&c, &s, "mlp", &mlp_req, None).unwrap();
    assert_eq!(
        (st, bits(&y)),
        (200, bits(&want_b)),
        "the old model stopped serving"
    );
    s.assert_clean_log();
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `texstream loadgen` against a server, with the library comparison: every request answered,
/// one distinct answer, the peak under the cap; and the body limit (413 with a JSON error).
#[test]
fn loadgen_and_body_limit() {
    let dir = workspace("loadgen");
    let workload = dir.join("tiny.ron");
    let s = Server::start(&workload, &["--no-watch", "--max-body", "256KiB"]);
    let resp = client()
        .post(s.url("/v2/models/chain/infer"))
        .body(vec![b' '; 300 << 10])
        .send()
        .unwrap();
    assert_eq!(resp.status().as_u16(), 413);
    let e = resp.json_body()["error"].as_str().unwrap().to_string();
    assert!(e.contains("limit of 262144 bytes (--max-body)"), "{e}");
    let out = Command::new(env!("CARGO_BIN_EXE_texstream"))
        .args([
            "loadgen",
            "--url",
            &s.base,
            "--model",
            "chain",
            "-c",
            "2",
            "-n",
            "10",
            "--duration",
            "60",
            "--json",
        ])
        .arg("--input")
        .arg(format!("pixels={}", dir.join("pixels.npy").display()))
        .arg("--compare-library")
        .arg(&workload)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary: Json = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["ok"], 20, "{text}");
    assert_eq!(summary["distinct_answers"], 1, "{text}");
    assert!(summary["p99_s"].as_f64().unwrap() >= summary["p50_s"].as_f64().unwrap());
    assert!(summary["library_p50_s"].as_f64().unwrap() > 0.0);
    assert!(
        summary["peak_device_bytes"].as_f64().unwrap() <= summary["cap_bytes"].as_f64().unwrap()
    );
    assert!(text.contains("service overhead per request"), "{text}");
    s.assert_clean_log();
    drop(s);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A workload file rewritten in place stays empty between its truncation and its write for as
/// long as the writer is descheduled (on a loaded machine, past the debounce): the watcher waits
/// for the content instead of reloading an empty file, so the save is one successful reload.
#[test]
fn an_in_place_save_that_lingers_empty_is_one_good_reload() {
    let dir = workspace("empty");
    let workload = dir.join("tiny.ron");
    let s = Server::start(&workload, &[]);
    let c = client();
    let before = reloads(&c, &s);
    let text = variant(&Variant {
        cap: Some("7MiB"),
        ..Variant::default()
    });
    std::fs::write(&workload, "").unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    std::fs::write(&workload, &text).unwrap();
    let (ok, msg) = next_reload(&c, &s, (before.0, before.1));
    assert!(ok, "the save was refused: {msg}");
    let plan = get_json(&c, &s, "/v1/plan", None);
    assert_eq!(plan["cap_bytes"], 7u64 << 20, "{plan}");
    // No second reload follows (the write's own event finds the version already seen).
    std::thread::sleep(Duration::from_millis(1000));
    let after = reloads(&c, &s);
    assert_eq!(
        (after.0, after.1),
        (before.0 + 1, before.1),
        "{:?}",
        after.2
    );
    s.assert_clean_log();
}
