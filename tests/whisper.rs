//! Whisper-style speech recognition on the texture path: the encoder (log-mel in, each decoder
//! layer's cross-attention keys and values out) once, then the decoder one token per call with
//! its self-attention cache in place on the GPU (`Compiler::kv_cache`), against ONNX Runtime's
//! greedy decoding with real growing shapes (scripts/whisper_reference.py). The random-weight
//! model in tests/data/tiny_whisper always runs; the real tiny.en (scripts/convert_whisper.py
//! models/whisper) when it is there, on a real recording (tests/data/speech/jfk.wav).
mod common;
use common::{python, root};
use std::path::{Path, PathBuf};
use std::process::Command;

use texstream::compile::Compiler;
use texstream::packed::Precision;
use texstream::runtime::npy::read_npy;
use texstream::runtime::{Executable, HostTensor};

struct Reference {
    mel: HostTensor,
    prompt: Vec<i64>,
    generated: Vec<i64>,
    text: String,
}

/// ORT's transcription of `wav` (and the log-mel it used); None without the venv.
fn reference(model_dir: &Path, wav: &Path, steps: usize, tag: &str) -> Option<Reference> {
    let py = python()?;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("whisper");
    std::fs::create_dir_all(&dir).unwrap();
    let (json, mel) = (
        dir.join(format!("{tag}.json")),
        dir.join(format!("{tag}.npy")),
    );
    let st = Command::new(py)
        .arg(root().join("scripts/whisper_reference.py"))
        .arg(model_dir)
        .arg(wav)
        .arg(&json)
        .args(["--no-stop", "--steps", &steps.to_string(), "--mel"])
        .arg(&mel)
        .output()
        .expect("run whisper_reference.py");
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let ids = |k: &str| -> Vec<i64> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_i64().unwrap())
            .collect()
    };
    Some(Reference {
        mel: read_npy(&mel).expect("mel npy"),
        prompt: ids("prompt_ids"),
        generated: ids("generated_ids"),
        text: v["text"].as_str().unwrap_or("").to_string(),
    })
}

fn ints(shape: Vec<usize>, v: &[i64]) -> HostTensor {
    let mut t = HostTensor::new(shape, v.iter().map(|&x| x as f32).collect());
    t.integer = true;
    t
}

fn executable(model: &Path, precision: Precision, cache: Option<usize>) -> Executable {
    let mut c = Compiler::new(model).precision(precision);
    c = match cache {
        Some(len) => c
            .kv_cache(len, "position_ids")
            .input_shape("input_ids", vec![1, 1])
            .input_shape("position_ids", vec![1, 1])
            .input_shape("attention_mask", vec![1, len]),
        None => c,
    };
    let packed = c.compile().expect("compile").packed;
    let device = vk_backend::testing::device();
    Executable::with_activations(&device, &packed.header, &packed, vk_backend::Precision::F32)
        .expect("build executable")
}

/// Encoder once, then greedy decoding of `steps` tokens after the prompt.
fn transcribe(dir: &Path, r: &Reference, steps: usize, cache: usize, p: Precision) -> Vec<i64> {
    let mut enc = executable(&dir.join("encoder.onnx"), p, None);
    let outs = enc
        .run(&[("input_features".to_string(), r.mel.clone())])
        .expect("encoder");
    let cross: Vec<(String, HostTensor)> = outs
        .into_iter()
        .filter(|(n, _)| n.starts_with("cross_"))
        .collect();
    let mut dec = executable(&dir.join("decoder.onnx"), p, Some(cache));
    let mask = ints(vec![1, cache], &vec![1; cache]);
    let mut got = Vec::new();
    let mut next = r.prompt[0];
    for pos in 0..r.prompt.len() + steps - 1 {
        let token = if pos < r.prompt.len() {
            r.prompt[pos]
        } else {
            next
        };
        let mut feeds = vec![
            ("input_ids".to_string(), ints(vec![1, 1], &[token])),
            ("position_ids".to_string(), ints(vec![1, 1], &[pos as i64])),
            ("attention_mask".to_string(), mask.clone()),
        ];
        feeds.extend(cross.iter().cloned());
        let res = dec.run(&feeds).expect("decoder");
        let logits = &res.iter().find(|(n, _)| n == "logits").expect("logits").1;
        if pos + 1 >= r.prompt.len() {
            next = texstream::pipeline::generate::argmax(&logits.data) as i64;
            got.push(next);
        }
    }
    vk_backend::testing::assert_no_validation_messages(dec.device());
    got
}

#[test]
fn tiny_whisper_transcribes_like_onnx_runtime() {
    let dir = root().join("tests/data/tiny_whisper");
    let wav = root().join("tests/data/speech/jfk.wav");
    let Some(r) = reference(&dir, &wav, 24, "tiny") else {
        return;
    };
    let got = transcribe(&dir, &r, 24, 64, Precision::F32);
    assert_eq!(got, r.generated, "texstream (left) vs ONNX Runtime (right)");
}

#[test]
fn whisper_tiny_en_transcribes_a_real_recording_like_onnx_runtime() {
    let dir = root().join("models/whisper");
    if !dir.join("decoder.onnx").exists() {
        eprintln!("SKIPPED: models/whisper missing; run scripts/convert_whisper.py models/whisper");
        return;
    }
    // 39 M parameters over 1500 audio positions: minutes on lavapipe, milliseconds on a GPU.
    if std::env::var_os("TEXSTREAM_BIG_MODELS").is_none() {
        eprintln!(
            "SKIPPED: set TEXSTREAM_BIG_MODELS=1 to run Whisper tiny.en (slow on a CPU driver)"
        );
        return;
    }
    let wav = root().join("tests/data/speech/jfk.wav");
    let Some(r) = reference(&dir, &wav, 32, "tiny_en") else {
        return;
    };
    eprintln!("ORT: {:?}", r.text);
    let precision = match std::env::var("TEXSTREAM_WHISPER_PRECISION").as_deref() {
        Ok("f32") => Precision::F32,
        _ => Precision::F16,
    };
    let got = transcribe(&dir, &r, 32, 64, precision);
    assert_eq!(got, r.generated, "texstream (left) vs ONNX Runtime (right)");
}
