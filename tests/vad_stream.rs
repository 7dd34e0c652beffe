//! Silero VAD streamed over audio chunks (`StreamChunks`) on the Vulkan device, against ONNX
//! Runtime running the silero-vad package's chunk loop (`scripts/vad_reference.py`) on the same
//! WAV file: every chunk's speech probability within 1e-4 (fp32 weights). Then the speech
//! segments (`VadSegments`) against the silero-vad wheel's own `get_speech_timestamps_from_probs`
//! on ORT's probabilities: the same sample boundaries.
//!
//! The audio is made here: syllable-like voiced bursts (a pitch-modulated harmonic series
//! under three formants) between stretches of faint noise, so the probabilities rise and fall.
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use texstream::runtime::npy::read_npy;
use texstream::{Audio, Engine, EngineOptions, Value, Values};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn python() -> Option<PathBuf> {
    let p = std::env::var_os("TEXSTREAM_PYTHON")
        .map(PathBuf::from)
        .unwrap_or_else(|| root().join(".venv/bin/python"));
    p.exists().then_some(p)
}

const RATE: u32 = 16_000;

/// Uniform noise in [-1, 1] from a 64-bit LCG.
fn noise(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// `seconds` of a voiced sound at pitch `f0` (±8% at 3 Hz) under formants at 700, 1200 and
/// 2600 Hz, in 4 Hz syllables.
fn vowel(seconds: f64, f0: f64) -> Vec<f64> {
    let n = (seconds * RATE as f64) as usize;
    let mut phase = 0.0;
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let t = i as f64 / RATE as f64;
        let f = f0 * (1.0 + 0.08 * (2.0 * std::f64::consts::PI * 3.0 * t).sin());
        phase += 2.0 * std::f64::consts::PI * f / RATE as f64;
        let mut v = 0.0;
        for h in 1..40 {
            let fh = h as f64 * f;
            let env: f64 = [
                (700.0, 130.0, 1.0),
                (1200.0, 150.0, 0.6),
                (2600.0, 200.0, 0.3),
            ]
            .iter()
            .map(|(c, bw, a)| a * (-((fh - c) / bw).powi(2)).exp())
            .sum();
            v += env * (h as f64 * phase).sin();
        }
        let syllable = 0.5 * (1.0 - (2.0 * std::f64::consts::PI * 4.0 * t).cos());
        out.push(v * syllable);
    }
    let peak = out.iter().fold(0f64, |m, v| m.max(v.abs()));
    out.iter().map(|v| 0.3 * v / peak).collect()
}

/// Faint noise, speech, noise, speech at a higher pitch, noise: 5.3 s.
fn speechlike() -> Vec<f64> {
    let mut r = noise(3);
    let mut quiet = |s: f64| -> Vec<f64> {
        (0..(s * RATE as f64) as usize)
            .map(|_| 0.002 * r())
            .collect()
    };
    let mut x = quiet(0.8);
    x.extend(vowel(1.2, 120.0));
    x.extend(quiet(0.7));
    x.extend(vowel(2.0, 120.0));
    x.extend(quiet(0.6));
    x
}

/// Writes 16-bit PCM; returns the samples as the decoder reads them back.
fn write_wav(path: &Path, x: &[f64]) -> Vec<f32> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: RATE,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let mut w = hound::WavWriter::create(path, spec).unwrap();
    let mut back = Vec::new();
    for &v in x {
        let s = (v * 32767.0).round().clamp(-32768.0, 32767.0) as i16;
        w.write_sample(s).unwrap();
        back.push(s as f32 / 32768.0);
    }
    w.finalize().unwrap();
    back
}

fn audio_input(samples: Vec<f32>) -> Values {
    let mut v = Values::new();
    v.insert(
        "audio_in".into(),
        Value::Audio(Audio {
            samples: Arc::new(samples),
            sample_rate: RATE,
        }),
    );
    v
}

#[test]
fn chunked_vad_probabilities_match_onnx_runtime() {
    let model = root().join("models/vad/silero_vad.onnx");
    if !model.exists() {
        eprintln!(
            "SKIPPED: {} missing; run scripts/fetch_models.py",
            model.display()
        );
        return;
    }
    let Some(py) = python() else {
        eprintln!("SKIPPED: no python venv (.venv/bin/python or TEXSTREAM_PYTHON)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("texstream-vad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let wav = dir.join("speech.wav");
    let samples = write_wav(&wav, &speechlike());
    let o = Command::new(&py)
        .arg(root().join("scripts/vad_reference.py"))
        .arg(&model)
        .arg(&wav)
        .arg(&dir)
        .args(["--threshold", "0.35"])
        .output()
        .expect("run vad_reference.py");
    assert!(
        o.status.success(),
        "vad_reference.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let want = read_npy(&dir.join("probs.npy")).unwrap().data;

    let engine = Engine::open(
        root().join("tests/data/audio/vad.ron"),
        EngineOptions::from_env(),
    )
    .expect("open the VAD workload");
    let r = engine
        .run("speech", audio_input(samples.clone()))
        .expect("run");
    let Some(Value::Tensor(t)) = r.outputs.get("probs") else {
        panic!("no probs: {:?}", r.outputs.keys());
    };
    let chunks = samples.len().div_ceil(512);
    assert_eq!(t.shape(), [chunks, 1, 1]);
    let got = t.as_f32().unwrap();
    assert_eq!(got.len(), want.len());
    let d = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    let (lo, hi) = want
        .iter()
        .fold((1f32, 0f32), |(l, h), &p| (l.min(p), h.max(p)));
    eprintln!(
        "VAD over {chunks} chunks: probabilities {lo:.3}..{hi:.3}, max |texstream - ORT| = {d:.2e}"
    );
    assert!(
        hi > 0.6 && lo < 0.1,
        "the audio should read as speech and as silence"
    );
    assert!(d <= 1e-4, "probabilities differ by {d}");
    let want_segs: Vec<[i64; 2]> =
        serde_json::from_str(&std::fs::read_to_string(dir.join("segments.json")).unwrap()).unwrap();
    let Some(Value::Tensor(b)) = r.outputs.get("bounds") else {
        panic!("no bounds");
    };
    let got_segs: Vec<[i64; 2]> = match b.data() {
        texstream::TensorData::I64(v) => v.chunks(2).map(|c| [c[0], c[1]]).collect(),
        other => panic!("bounds are {other:?}"),
    };
    eprintln!("segments: {got_segs:?} (silero-vad: {want_segs:?})");
    assert!(
        !want_segs.is_empty(),
        "the audio should have speech segments"
    );
    assert_eq!(got_segs, want_segs);
    let Some(Value::List(segs)) = r.outputs.get("segments") else {
        panic!("no segments");
    };
    for (s, [a, e]) in segs.iter().zip(&got_segs) {
        let Value::Audio(s) = s else { panic!("{s:?}") };
        assert_eq!(*s.samples, samples[*a as usize..*e as usize]);
    }
    // Speech: the gated front end ran. Silence: no segments, so it did not.
    assert!(matches!(r.outputs.get("mel"), Some(Value::Tensor(m)) if m.shape() == [1, 80, 3000]));
    let quiet = engine
        .run("speech", audio_input(vec![0.0; 16_000]))
        .expect("run");
    assert!(matches!(quiet.outputs.get("segments"), Some(Value::List(l)) if l.is_empty()));
    assert!(
        !quiet.outputs.contains_key("mel"),
        "{:?}",
        quiet.outputs.keys()
    );
    // 166 chunks where the workload expected 94: the plan followed the real count.
    assert!(engine.stats().replans.fan_out >= 1);

    // Audio longer than `max` chunks is refused before any model run, with the bound.
    let e = engine
        .run("speech", audio_input(vec![0.0; 1875 * 512 + 1]))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("more than the step's max of 1875") && e.contains("60.0 s"),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
