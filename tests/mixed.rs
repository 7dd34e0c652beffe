//! Two apps under one cap (`workloads/mixed-tiny.ron`): the camera OCR pipeline and the assistant
//! in one workload, seven distinct models in one atlas, requests interleaved (two frames, a
//! turn, two frames: the workload's ten to one takes too long on a CPU driver). Every policy at the workload's minimum cap gives exactly what `preload` (everything
//! resident, no cap) gives, the cap holds, and the plan follows the mix.
mod common;
use common::{assert_cap_held, opts, root};

use texstream::{Audio, Engine, Image, Policy, Value, Values};

fn requests() -> Vec<(&'static str, Values)> {
    let png = std::fs::read(root().join("models/images/page.png")).unwrap();
    let wav = std::fs::read(root().join("tests/data/speech/jfk.wav")).unwrap();
    let frame = Values::from([(
        "camera".to_string(),
        Value::Image(Image::decode(&png).unwrap()),
    )]);
    let turn = Values::from([(
        "speech".to_string(),
        Value::Audio(Audio::decode_wav(&wav).unwrap()),
    )]);
    let mut v: Vec<(&str, Values)> = (0..4).map(|_| ("frame", frame.clone())).collect();
    v.insert(2, ("turn", turn));
    v
}

/// Each request's outputs, printed (`Value` holds floats; their Debug form is exact enough to
/// tell two runs apart bit for bit, and says what differs).
fn run_all(e: &Engine) -> Vec<String> {
    requests()
        .into_iter()
        .map(|(pipeline, inputs)| {
            let out = e.run(pipeline, inputs).expect(pipeline).outputs;
            format!("{pipeline}: {out:?}")
        })
        .collect()
}

#[test]
fn camera_and_assistant_interleaved_under_one_cap_match_preload() {
    let needed = [
        "models/ocr/det.onnx",
        "models/vad/silero_vad.onnx",
        "models/images/page.png",
    ];
    if let Some(m) = needed.iter().find(|m| !root().join(m).exists()) {
        eprintln!("SKIPPED: {m} missing (scripts/fetch_models.py)");
        return;
    }
    let w = root().join("workloads/mixed-tiny.ron");
    let e = Engine::open(&w, opts(None, Policy::Preload)).expect("open");
    let want = run_all(&e);
    let min = e.stats().min_cap_bytes;
    drop(e);
    for policy in [Policy::OnDemand, Policy::Lru, Policy::Planned] {
        let e = Engine::open(&w, opts(Some(min), policy)).expect("open");
        let got = run_all(&e);
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g, w, "{policy:?}: request {i} differs from preload");
        }
        assert_cap_held(&e, &format!("{policy:?}"));
    }
}
