//! Gated steps: `Gate(when: .., step: ..)` runs its step only when the condition holds, and a
//! skipped model run is planned like a fan-out of 0 (the engine re-plans when it differs from
//! the plan). On `tests/data/serve/gated.ron` (two tiny fp32 models, nothing to fetch): the
//! gated head runs (its output bit-identical to the same models run ungated) and is skipped
//! (no output under its name); a gate on a value of the wrong type fails at load with its
//! `file:line:col`.
use std::path::{Path, PathBuf};
use std::process::Command;

use texstream::pipeline::io::read_value;
use texstream::{Engine, EngineOptions, Tensor, Value, Values};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn inputs(gate: Option<f32>) -> Values {
    let mut v = Values::new();
    let px = read_value(&root().join("tests/data/serve/pixels.npy")).unwrap();
    v.insert("pixels".into(), px);
    if let Some(g) = gate {
        v.insert(
            "gate".into(),
            Value::Tensor(Tensor::f32(vec![1], vec![g]).unwrap()),
        );
    }
    v
}

#[test]
fn a_gated_model_run_is_skipped_or_run_and_planned() {
    let engine = Engine::open(
        root().join("tests/data/serve/gated.ron"),
        EngineOptions::from_env(),
    )
    .expect("open gated.ron");
    // A few requests first, so the step costs are calibrated (a calibration re-plan would
    // hide the ones this test looks for).
    for _ in 0..4 {
        let run = engine.run("maybe", inputs(Some(0.9))).unwrap().outputs;
        assert!(run.contains_key("feat") && run.contains_key("probs"));
    }
    let replans = || {
        let r = engine.stats().replans;
        r.fan_out + r.unpredicted_request
    };
    let before = replans();
    let skip = engine.run("maybe", inputs(Some(0.1))).unwrap().outputs;
    assert!(skip.contains_key("feat"));
    assert!(!skip.contains_key("probs"), "skipped: {:?}", skip.keys());
    // The plan assumed the head runs (as the last request did), so the skip re-plans (at the
    // next model run, the next request's first); skipped again, the head is predicted
    // skipped and nothing re-plans.
    let again = engine.run("maybe", inputs(Some(0.2))).unwrap().outputs;
    assert!(!again.contains_key("probs"));
    let after = replans();
    assert!(after > before, "a skip re-plans: {before} -> {after}");
    engine.run("maybe", inputs(Some(0.3))).unwrap();
    engine.run("maybe", inputs(Some(0.3))).unwrap();
    assert_eq!(replans(), after, "skips were predicted");
    let runs = engine.run("maybe", inputs(Some(0.7))).unwrap().outputs;
    assert!(replans() > after, "running again re-plans");
    let always = engine.run("always", inputs(None)).unwrap().outputs;
    assert!(
        runs["probs"].bit_eq(&always["probs"]),
        "the gated head computes what the ungated one does"
    );
}

fn texstream_check(w: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_texstream"))
        .args(["check", w.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap()
}

#[test]
fn a_gate_on_a_value_of_the_wrong_type_fails_at_its_location() {
    let src = root().join("tests/data/serve/gated.ron");
    let dir = std::env::temp_dir().join(format!("texstream-gate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for f in ["conv.onnx", "mlp.onnx"] {
        std::fs::copy(root().join("tests/data/serve").join(f), dir.join(f)).unwrap();
    }
    let text = std::fs::read_to_string(&src).unwrap();
    let from = r#"when: Above(value: "gate", threshold: 0.5),"#;
    assert!(text.contains(from), "the fixture changed: update this test");
    let bad_text = text
        .replace(from, r#"when: NonEmpty("feat"),"#)
        .replace(r#"inputs: ["pixels", "gate"],"#, r#"inputs: ["pixels"],"#);
    let bad = dir.join("bad.ron");
    std::fs::write(&bad, &bad_text).unwrap();
    let o = texstream_check(&bad);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    let at = bad_text.find("Gate(").unwrap();
    let line = bad_text[..at].matches('\n').count() + 1;
    let col = at - bad_text[..at].rfind('\n').unwrap();
    for want in [
        format!("{}:{line}:{col}: ", bad.display()),
        "pipeline `maybe` step 1 (Run(mlp)): the gate NonEmpty on `feat` needs a list, text, \
         token ids, audio, boxes or text lines, but `feat` is tensor (written by step 0 \
         (Run(conv)))"
            .to_string(),
    ] {
        assert!(stderr.contains(&want), "no `{want}` in {stderr}");
    }
    // The good file checks.
    let o = texstream_check(&src);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::remove_dir_all(&dir).unwrap();
}
