//! The assistant pipeline (voice in, answer out) through the engine: Silero VAD chunk by chunk,
//! Whisper's encoder and its decoder with the cache on the device, then a language model's
//! reply, all four models streamed through one atlas. Its segments, transcript and reply equal
//! the same pipeline under ONNX Runtime (scripts/assistant_reference.py) under every policy,
//! and the cap holds. `workloads/assistant-tiny.ron` (random-weight models) always runs;
//! `workloads/assistant.ron` (Whisper tiny.en and SmolLM2) with TEXSTREAM_BIG_MODELS=1.
mod common;
use common::{assert_cap_held, python, root};
use std::path::{Path, PathBuf};
use std::process::Command;

use texstream::{Audio, Engine, EngineOptions, Policy, Value, Values};

/// ORT's run of the pipeline: (segment lengths, transcript, reply ids).
struct Reference {
    segment_lengths: Vec<usize>,
    transcript: String,
    reply_ids: Vec<u32>,
}

fn reference(args: &[&Path], extra: &[&str], tag: &str) -> Option<Reference> {
    let py = python()?;
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("assistant-{tag}.json"));
    let st = Command::new(py)
        .arg(root().join("scripts/assistant_reference.py"))
        .args(args)
        .arg(&out)
        .args(extra)
        .output()
        .expect("run assistant_reference.py");
    assert!(
        st.status.success(),
        "assistant_reference.py: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ids = |k: &str| -> Vec<u32> {
        v[k].as_array()
            .unwrap_or(&Vec::new())
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    Some(Reference {
        segment_lengths: v["segments"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| (s[1].as_u64().unwrap() - s[0].as_u64().unwrap()) as usize)
            .collect(),
        transcript: v["transcript"].as_str().unwrap_or("").to_string(),
        reply_ids: ids("reply_ids"),
    })
}

fn speech() -> Values {
    let wav = root().join("tests/data/speech/jfk.wav");
    let audio = Audio::decode_wav(&std::fs::read(wav).unwrap()).unwrap();
    Values::from([("speech".to_string(), Value::Audio(audio))])
}

/// Runs one turn under every policy (at the workload's minimum cap, `preload` uncapped) and
/// checks it against `want`.
fn every_policy_matches(workload: &Path, want: &Reference) {
    let opts = |cap: Option<u64>, policy: Policy| EngineOptions {
        cap,
        policy: Some(policy),
        calibrate_after: 0,
        ..EngineOptions::from_env()
    };
    let min = Engine::open(workload, opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes;
    for policy in [
        Policy::Preload,
        Policy::OnDemand,
        Policy::Lru,
        Policy::Planned,
    ] {
        // `None` would mean the workload's own cap, which preload does not fit under: give it
        // room for every weight (the atlas takes only the slots the weights need).
        let cap = if policy == Policy::Preload {
            1 << 40
        } else {
            min
        };
        let cap = Some(cap);
        let e = Engine::open(workload, opts(cap, policy)).expect("open");
        let out = e.run("turn", speech()).expect("turn").outputs;
        let segments: Vec<usize> = match out.get("segments") {
            Some(Value::List(l)) => l
                .iter()
                .map(|a| match a {
                    Value::Audio(a) => a.samples.len(),
                    other => panic!("a segment is {other:?}"),
                })
                .collect(),
            other => panic!("no segments: {other:?}"),
        };
        assert_eq!(segments, want.segment_lengths, "{policy:?}: VAD segments");
        match out.get("transcript") {
            Some(Value::Text(t)) => assert_eq!(t, &want.transcript, "{policy:?}: transcript"),
            other => panic!("{policy:?}: no transcript: {other:?}"),
        }
        match out.get("reply_ids") {
            Some(Value::Tokens(t)) => assert_eq!(t, &want.reply_ids, "{policy:?}: reply"),
            other => panic!("{policy:?}: no reply: {other:?}"),
        }
        assert_cap_held(&e, &format!("{policy:?}"));
    }
}

#[test]
fn tiny_assistant_answers_like_onnx_runtime_under_every_policy() {
    let vad = root().join("models/vad/silero_vad.onnx");
    if !vad.exists() {
        eprintln!("SKIPPED: models/vad missing; run scripts/fetch_models.py");
        return;
    }
    let tok = root().join("tests/data/tiny_whisper/tokenizer.json");
    let tok = tok.to_str().unwrap();
    let Some(want) = reference(
        &[
            &vad,
            &root().join("tests/data/tiny_whisper"),
            &root().join("tests/data/tiny_llama/decoder.onnx"),
            &root().join("tests/data/speech/jfk.wav"),
        ],
        &[
            "--lm-tokenizer",
            tok,
            "--asr-max",
            "24",
            "--reply-tokens",
            "16",
        ],
        "tiny",
    ) else {
        return;
    };
    assert!(!want.segment_lengths.is_empty(), "the clip has speech");
    every_policy_matches(&root().join("workloads/assistant-tiny.ron"), &want);
}

#[test]
fn assistant_answers_a_real_recording_like_onnx_runtime() {
    let models = [
        "models/vad/silero_vad.onnx",
        "models/whisper/decoder.onnx",
        "models/smollm2/decoder.onnx",
    ];
    if let Some(m) = models.iter().find(|m| !root().join(m).exists()) {
        eprintln!("SKIPPED: {m} missing (scripts/fetch_models.py, convert_whisper.py, convert_smollm2.py)");
        return;
    }
    if std::env::var_os("TEXSTREAM_BIG_MODELS").is_none() {
        eprintln!(
            "SKIPPED: set TEXSTREAM_BIG_MODELS=1 to run the real assistant (slow on a CPU driver)"
        );
        return;
    }
    let Some(want) = reference(
        &[
            &root().join(models[0]),
            &root().join("models/whisper"),
            &root().join(models[2]),
            &root().join("tests/data/speech/jfk.wav"),
        ],
        &[
            "--system",
            "You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        ],
        "real",
    ) else {
        return;
    };
    eprintln!("ORT transcript: {:?}", want.transcript);
    every_policy_matches(&root().join("workloads/assistant.ron"), &want);
}
