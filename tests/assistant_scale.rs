//! `workloads/assistant-scale.ron` (an encoder -> a decoder with its cache on the device ->
//! a small encoder) at the CI size: `scripts/make_scale_models.py --decoder tiny` writes the
//! same three graphs with a few hundred kB of weights, as ONNX with external data, and this test
//! runs the workload file on them (its model paths pointed at the generated files). Under every
//! policy and at caps from the minimum up, the reply equals ONNX Runtime's greedy decoding of
//! the decoder, the encoders' output is within fp16's reach of ONNX Runtime's, every policy
//! gives bit-identical outputs, and the peak stays under the cap. The GB-scale sizes
//! (`--decoder 1.3b`, `2.7b`) run the same file on a GPU; see BENCHMARKS.md. The same tiny
//! models beside the real camera OCR models run `workloads/camera-plus-scale.ron`.
mod common;
use common::{assert_cap_held, opts, python, root};
use std::path::{Path, PathBuf};
use std::process::Command;

use texstream::pipeline::io::read_value;
use texstream::{Engine, Policy, Value, Values};

const REPLY_TOKENS: usize = 16;

fn run_python(args: &[&std::ffi::OsStr]) -> Option<()> {
    let py = python()?;
    let out = Command::new(py).args(args).output().expect("run python");
    assert!(
        out.status.success(),
        "{:?}: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
    Some(())
}

/// Generates the tiny models, ORT's encoder outputs and ORT's greedy reply into a directory of
/// its own (`tag`: one per test, since tests run in parallel); returns the workload file
/// pointed at them and the reference (reply ids, final encoder output).
fn setup_in(tag: &str) -> Option<(PathBuf, Vec<u32>, Vec<f32>)> {
    setup_decoder_in(tag, "tiny")
}

/// [`setup_in`] with one of `make_scale_models.py`'s tiny decoder sizes.
fn setup_decoder_in(tag: &str, decoder: &str) -> Option<(PathBuf, Vec<u32>, Vec<f32>)> {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("assistant-scale-{tag}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let models = dir.join("models");
    run_python(&[
        root().join("scripts/make_scale_models.py").as_os_str(),
        models.as_os_str(),
        "--decoder".as_ref(),
        decoder.as_ref(),
        "--reference".as_ref(),
    ])?;
    let prompt = std::fs::read_to_string(models.join("prompt.tokens")).unwrap();
    let lm_json = dir.join("lm.json");
    run_python(&[
        root().join("scripts/lm_reference.py").as_os_str(),
        models.join("lm").as_os_str(),
        lm_json.as_os_str(),
        "--prompt-ids".as_ref(),
        prompt.trim().as_ref(),
        "--steps".as_ref(),
        REPLY_TOKENS.to_string().as_ref(),
        "--token-by-token-prefill".as_ref(),
    ])?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&lm_json).unwrap()).unwrap();
    let reply: Vec<u32> = v["generated_ids"]
        .as_array()
        .expect("generated_ids")
        .iter()
        .map(|x| x.as_u64().unwrap() as u32)
        .collect();
    assert_eq!(reply.len(), REPLY_TOKENS);
    let encoded = match read_value(&models.join("post_out.npy")).expect("post_out.npy") {
        Value::Tensor(t) => t.to_f32().unwrap(),
        other => panic!("post_out.npy: {other:?}"),
    };

    // The shipped workload, with its model directory and the encoders' shapes at the tiny size.
    let text = std::fs::read_to_string(root().join("workloads/assistant-scale.ron")).unwrap();
    let text = text
        .replace("../models/scale/", &format!("{}/", models.display()))
        .replace("[1, 128, 768]", "[1, 16, 64]");
    let workload = dir.join("assistant-scale.ron");
    std::fs::write(&workload, text).unwrap();
    Some((workload, reply, encoded))
}

fn demo_inputs(workload: &Path) -> Values {
    let models = workload.parent().unwrap().join("models");
    let prompt = std::fs::read_to_string(models.join("prompt.tokens")).unwrap();
    let ids = prompt
        .trim()
        .split(',')
        .map(|t| t.parse().unwrap())
        .collect();
    Values::from([
        (
            "features".to_string(),
            read_value(&models.join("features.npy")).unwrap(),
        ),
        ("prompt".to_string(), Value::Tokens(ids)),
    ])
}

/// (reply ids, encoded bits) of one turn.
fn turn(e: &Engine, workload: &Path) -> (Vec<u32>, Vec<f32>) {
    let out = e.run("turn", demo_inputs(workload)).expect("turn").outputs;
    let reply = match out.get("reply") {
        Some(Value::Tokens(t)) => t.clone(),
        other => panic!("no reply: {other:?}"),
    };
    let encoded = match out.get("encoded") {
        Some(Value::Tensor(t)) => t.to_f32().unwrap(),
        other => panic!("no encoded: {other:?}"),
    };
    (reply, encoded)
}

#[test]
fn scale_workload_matches_onnx_runtime_under_every_policy_and_cap() {
    let Some((workload, want_reply, want_encoded)) = setup_in("tiny") else {
        return;
    };
    let min = Engine::open(&workload, opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes;
    let resident = Engine::open(&workload, opts(Some(1 << 40), Policy::Preload)).expect("open");
    // Preload's atlas takes exactly the slots the weights need.
    let weights = u64::from(resident.stats().slots) * resident.stats().page_bytes;
    let (reply, encoded) = turn(&resident, &workload);
    assert_eq!(reply, want_reply, "preload: reply against ONNX Runtime");
    let range = want_encoded
        .iter()
        .fold((f32::MAX, f32::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
    let worst = encoded
        .iter()
        .zip(&want_encoded)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(
        worst <= 1e-2 * (range.1 - range.0),
        "encoders: {worst} from ONNX Runtime over a range of {range:?}"
    );

    for policy in [
        Policy::ReloadPerModel,
        Policy::OnDemand,
        Policy::Lru,
        Policy::Planned,
    ] {
        for cap in [min, min + weights / 2] {
            let e = Engine::open(&workload, opts(Some(cap), policy)).expect("open");
            // Two turns: the second starts with the first one's pages in place.
            for round in 0..2 {
                let got = turn(&e, &workload);
                assert_eq!(got.0, reply, "{policy:?} at {cap} B, turn {round}: reply");
                assert!(
                    got.1
                        .iter()
                        .map(|x| x.to_bits())
                        .eq(encoded.iter().map(|x| x.to_bits())),
                    "{policy:?} at {cap} B, turn {round}: encoders not bit-identical to preload"
                );
            }
            assert_cap_held(&e, &format!("{policy:?} at {cap} B"));
        }
    }

    // A GPU has 2048 array layers, fewer than a GB-scale model's pages: the atlas then stacks
    // pages in each layer. The same on a device that admits 2 layers, resident and streamed.
    for (policy, cap) in [
        (Policy::Preload, 1 << 40),
        (Policy::Planned, min + weights / 2),
    ] {
        let mut o = opts(Some(cap), policy);
        o.device.max_array_layers = Some(2);
        let e = Engine::open(&workload, o).expect("open with 2 layers");
        let got = turn(&e, &workload);
        assert_eq!(got.0, reply, "{policy:?}, 2 layers: reply");
        assert!(
            got.1
                .iter()
                .map(|x| x.to_bits())
                .eq(encoded.iter().map(|x| x.to_bits())),
            "{policy:?}, 2 layers: encoders not bit-identical"
        );
        assert_cap_held(&e, &format!("{policy:?}, 2 layers"));
    }
}

/// Heads 128 wide (the 1.3b and 2.7b sizes') take the attention kernel's wide variant: greedy
/// decoding still equals ONNX Runtime's, resident and streamed at the minimum cap.
#[test]
fn a_decoder_with_128_wide_heads_matches_onnx_runtime() {
    let Some((workload, want_reply, _)) = setup_decoder_in("d128", "tiny-d128") else {
        return;
    };
    let min = Engine::open(&workload, opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes;
    for (policy, cap) in [(Policy::Preload, 1 << 40), (Policy::Planned, min)] {
        let e = Engine::open(&workload, opts(Some(cap), policy)).expect("open");
        let (reply, _) = turn(&e, &workload);
        assert_eq!(
            reply, want_reply,
            "{policy:?} at {cap} B: reply against ONNX Runtime"
        );
        assert_cap_held(&e, &format!("{policy:?} at {cap} B"));
    }
}

/// `texstream run --cold` drops the packed models from the page cache before each policy and
/// reports its start from disk beside its warm requests; the outputs still agree.
#[test]
fn cold_start_is_reported_per_policy() {
    let Some((workload, _, _)) = setup_in("cold") else {
        return;
    };
    let out = Command::new(env!("CARGO_BIN_EXE_texstream"))
        .arg("run")
        .arg(&workload)
        .args([
            "--all-policies",
            "--cap",
            "64MiB",
            "--iterations",
            "3",
            "--cold",
        ])
        .output()
        .expect("run texstream");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for policy in ["preload", "reload-per-model", "on-demand", "lru", "planned"] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("cold start ({policy}):")))
            .unwrap_or_else(|| panic!("no cold start line for {policy}:\n{text}"));
        assert!(
            line.contains("MiB on disk") && line.contains("warm request"),
            "{line}"
        );
        // The disk's rate, probed on the largest packed file, and every byte read once at it.
        let rate: f64 = line
            .split("the disk reads at ")
            .nth(1)
            .and_then(|r| r.split(" MB/s").next())
            .and_then(|r| r.trim().parse().ok())
            .unwrap_or_else(|| panic!("no disk rate: {line}"));
        assert!(rate > 0.0 && rate.is_finite(), "{line}");
        assert!(line.contains("every byte once in"), "{line}");
        // The first request as the engine planned it from disk at that rate: a prediction at
        // or above its lower bound, and the integrated latency over that bound.
        let field = |name: &str, end: &str| -> f64 {
            line.split(name)
                .nth(1)
                .and_then(|r| r.split(end).next())
                .and_then(|r| r.trim().parse().ok())
                .unwrap_or_else(|| panic!("no `{name}`: {line}"))
        };
        let predicted = field("planned from disk: predicted ", " ms");
        let lower_bound = field("lower bound ", " ms");
        let over = field("÷ the first's LB ", ";");
        assert!(
            lower_bound > 0.0 && predicted >= lower_bound * (1.0 - 1e-9),
            "{line}"
        );
        assert!(over > 0.0 && over.is_finite(), "{line}");
    }
    assert!(
        text.contains("integrated ms")
            && text.contains("disk read ms")
            && text.contains("integ/LB"),
        "{text}"
    );
}

/// `workloads/camera-plus-scale.ron` at the CI size: camera frames (the real OCR models) and a
/// turn of the scale pipeline (the tiny generated models) interleaved under one cap at the
/// workload's minimum. Every request's outputs are what preload gives, and the cap holds.
#[test]
fn camera_frames_and_a_scale_turn_share_one_cap() {
    let needed = ["models/ocr/det.onnx", "models/images/page.png"];
    if let Some(m) = needed.iter().find(|m| !root().join(m).exists()) {
        eprintln!("SKIPPED: {m} missing (scripts/fetch_models.py)");
        return;
    }
    let Some((scale, _, _)) = setup_in("camera") else {
        return;
    };
    let dir = scale.parent().unwrap();
    let models = dir.join("models");
    let text = std::fs::read_to_string(root().join("workloads/camera-plus-scale.ron")).unwrap();
    let text = text
        .replace("../models/scale/", &format!("{}/", models.display()))
        .replace("../models/", &format!("{}/models/", root().display()))
        .replace("[1, 128, 768]", "[1, 16, 64]");
    let workload = dir.join("camera-plus-scale.ron");
    std::fs::write(&workload, text).unwrap();

    let png = std::fs::read(root().join("models/images/page.png")).unwrap();
    let frame = Values::from([(
        "camera".to_string(),
        Value::Image(texstream::Image::decode(&png).unwrap()),
    )]);
    let requests = [
        ("frame", frame.clone()),
        ("turn", demo_inputs(&scale)),
        ("frame", frame),
    ];
    let run_all = |e: &Engine| -> Vec<String> {
        requests
            .iter()
            .map(|(p, inputs)| {
                let out = e.run(p, inputs.clone()).expect(p).outputs;
                format!("{p}: {out:?}")
            })
            .collect()
    };
    let e = Engine::open(&workload, opts(Some(1 << 40), Policy::Preload)).expect("open");
    let want = run_all(&e);
    assert!(want[0].contains("text"), "{}", want[0]);
    drop(e);
    let min = Engine::open(&workload, opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes;
    for policy in [Policy::Lru, Policy::Planned] {
        let e = Engine::open(&workload, opts(Some(min), policy)).expect("open");
        let got = run_all(&e);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{policy:?}: request {i} differs from preload");
        }
        let s = e.stats();
        assert!(s.evictions > 0, "{policy:?}: the minimum cap must stream");
        assert_cap_held(&e, &format!("{policy:?} at the minimum {min} B"));
    }
}
