//! The `Generate` step through the engine: a decoder with its key/value cache on the device,
//! one token per call, planned like a fan-out. Its reply equals ONNX Runtime's greedy decoding
//! (scripts/lm_reference.py, real growing shapes) under every policy, at caps down to the
//! workload's minimum, and the cap holds; a stop token ends the reply early and the plan
//! follows the shorter request; sampling with a seed repeats itself.
mod common;
use common::{assert_cap_held, opts, python, root};
use std::path::PathBuf;
use std::process::Command;

use texstream::{Engine, Policy, Value, Values};

const PROMPT: [u32; 5] = [1, 17, 42, 99, 200];

/// ORT's 64 greedy tokens after PROMPT; None without the venv.
fn ort_reply() -> Option<Vec<u32>> {
    let py = python()?;
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generate_ref.json");
    let st = Command::new(py)
        .arg(root().join("scripts/lm_reference.py"))
        .arg(root().join("tests/data/tiny_llama/decoder.onnx"))
        .arg(&out)
        .args(["--prompt-ids", "1,17,42,99,200", "--steps", "64"])
        .output()
        .expect("run lm_reference.py");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    Some(
        v["generated_ids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect(),
    )
}

fn workload() -> PathBuf {
    root().join("tests/data/tiny_llama/tiny-lm.ron")
}

fn prompt() -> Values {
    let mut v = Values::new();
    v.insert("prompt".into(), Value::Tokens(PROMPT.to_vec()));
    v
}

fn reply(e: &Engine) -> Vec<u32> {
    match e
        .run("reply", prompt())
        .expect("reply")
        .outputs
        .get("reply")
    {
        Some(Value::Tokens(t)) => t.clone(),
        other => panic!("no reply: {other:?}"),
    }
}

#[test]
fn replies_match_onnx_runtime_under_every_policy_and_the_cap_holds() {
    let Some(want) = ort_reply() else { return };
    let min = Engine::open(workload(), opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes;
    for policy in [
        Policy::Preload,
        Policy::OnDemand,
        Policy::Lru,
        Policy::Planned,
    ] {
        let cap = if policy == Policy::Preload {
            None
        } else {
            Some(min)
        };
        let e = Engine::open(workload(), opts(cap, policy)).expect("open");
        // Two requests: the second starts over at position 0 over the first one's cache.
        for round in 0..2 {
            assert_eq!(
                reply(&e),
                want,
                "{policy:?} round {round}: texstream vs ORT"
            );
        }
        assert_cap_held(&e, &format!("{policy:?}"));
    }
}

/// ORT's replies to two turns of one conversation on one growing cache: PROMPT, then TURN_2
/// after the first reply (16 tokens each).
fn ort_conversation() -> Option<(Vec<u32>, Vec<u32>)> {
    let py = python()?;
    let out = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("generate_chat_ref.json");
    let st = Command::new(py)
        .arg(root().join("scripts/lm_reference.py"))
        .arg(root().join("tests/data/tiny_llama/decoder.onnx"))
        .arg(&out)
        .args(["--prompt-ids", "1,17,42,99,200", "--steps", "16"])
        .args(["--then-prompt-ids", "5,6,7,8"])
        .output()
        .expect("run lm_reference.py");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
    let ids = |k: &str| -> Vec<u32> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    Some((ids("generated_ids"), ids("then_generated_ids")))
}

#[test]
fn a_conversation_continues_on_its_cache_and_survives_other_requests() {
    let Some((first, second)) = ort_conversation() else {
        return;
    };
    let w = root().join("tests/data/tiny_llama/tiny-chat.ron");
    let ask = |e: &Engine, pipeline: &str, prompt: &[u32]| -> Vec<u32> {
        let mut v = Values::new();
        v.insert("prompt".into(), Value::Tokens(prompt.to_vec()));
        match e.run(pipeline, v).expect(pipeline).outputs.get("reply") {
            Some(Value::Tokens(t)) => t.clone(),
            other => panic!("no reply: {other:?}"),
        }
    };
    let min = Engine::open(&w, opts(None, Policy::Planned))
        .expect("open")
        .stats()
        .min_cap_bytes;
    for (policy, cap) in [(Policy::Preload, None), (Policy::Planned, Some(min))] {
        let e = Engine::open(&w, opts(cap, policy)).expect("open");
        assert_eq!(ask(&e, "chat", &PROMPT), first, "{policy:?}: first turn");
        assert_eq!(
            ask(&e, "chat", &[5, 6, 7, 8]),
            second,
            "{policy:?}: second turn"
        );
        // A new conversation after a reply that overwrote the cache: the history is fed again.
        let e = Engine::open(&w, opts(cap, policy)).expect("open");
        assert_eq!(
            ask(&e, "chat", &PROMPT),
            first,
            "{policy:?}: first turn again"
        );
        ask(&e, "reply", &[3, 1, 4, 1, 5]);
        assert_eq!(
            ask(&e, "chat", &[5, 6, 7, 8]),
            second,
            "{policy:?}: second turn after another request"
        );
        let s = e.stats();
        assert!(
            s.peak_device_bytes <= s.cap_bytes,
            "{policy:?}: over the cap"
        );
    }
}
