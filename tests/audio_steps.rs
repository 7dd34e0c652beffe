//! The audio steps against independent references: Whisper's log-mel front end (`LogMel`)
//! against `scripts/logmel_reference.py` (numpy, written from openai-whisper's
//! `log_mel_spectrogram`), on WAV files made here with hound: a chirp plus noise at 16 kHz
//! (compared tightly), and a chirp at 22050 Hz through `Resample` (rubato's sinc resampler,
//! compared loosely against numpy's band-limited FFT resampling).
//!
//! Runs `tests/data/audio/whisper-frontend.ron` through the pipeline executor; it has no model,
//! so no device is needed.
mod common;
use common::{python, root};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use texstream::pipeline::{execute, ModelCall, ModelRunner, PipelineGraph};
use texstream::runtime::npy::read_npy;
use texstream::workload::load_workload;
use texstream::{Audio, Tensor, Value};

/// A pipeline without model runs needs no runner.
struct NoModels;

impl ModelRunner for NoModels {
    fn run_model(
        &mut self,
        _: ModelCall<'_>,
    ) -> Result<Vec<Tensor>, Box<dyn std::error::Error + Send + Sync>> {
        Err("this pipeline runs no model".into())
    }
}

/// A deterministic uniform noise source in [-1, 1] (a 64-bit LCG's top bits).
fn noise(seed: u64) -> impl FnMut() -> f64 {
    let mut s = seed;
    move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

/// `seconds` of a linear chirp from `f0` to `f1` Hz at amplitude 0.4, plus `noise_level` of
/// uniform noise, at `rate` Hz.
fn chirp(rate: u32, seconds: f64, f0: f64, f1: f64, noise_level: f64) -> Vec<f64> {
    let n = (rate as f64 * seconds) as usize;
    let mut r = noise(7);
    (0..n)
        .map(|i| {
            let t = i as f64 / rate as f64;
            let phase = 2.0 * std::f64::consts::PI * (f0 * t + (f1 - f0) * t * t / (2.0 * seconds));
            0.4 * phase.sin() + noise_level * r()
        })
        .collect()
}

/// Writes 16-bit PCM; returns the samples as the WAV decoder gives them back.
fn write_wav(path: &Path, rate: u32, x: &[f64]) -> Vec<f32> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
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

/// The numpy reference's log-mel of `wav` (and its 16 kHz signal when it resampled).
fn reference(py: &Path, wav: &Path) -> (Vec<f32>, Vec<f32>) {
    let mel = wav.with_extension("mel.npy");
    let sig = wav.with_extension("16k.npy");
    let o = Command::new(py)
        .arg(root().join("scripts/logmel_reference.py"))
        .arg(wav)
        .arg(&mel)
        .arg("--resampled")
        .arg(&sig)
        .output()
        .expect("run logmel_reference.py");
    assert!(
        o.status.success(),
        "logmel_reference.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let m = read_npy(&mel).unwrap();
    assert_eq!(m.shape, [1, 80, 3000]);
    (m.data, read_npy(&sig).unwrap().data)
}

/// The front-end workload's `mel` for the WAV file's audio.
fn pipeline_mel(wav: &Path) -> Vec<f32> {
    let w = load_workload(&root().join("tests/data/audio/whisper-frontend.ron")).unwrap();
    let g = PipelineGraph::build(&w, &w.spec.pipelines[0], &[]).unwrap();
    let audio = Audio::decode_wav(&std::fs::read(wav).unwrap()).unwrap();
    let inputs = BTreeMap::from([("speech".to_string(), Value::Audio(audio))]);
    let ex = execute(&g, inputs, &mut NoModels, &|| None).unwrap();
    let Some(Value::Tensor(t)) = ex.outputs.get("mel") else {
        panic!("no mel tensor: {:?}", ex.outputs.keys());
    };
    assert_eq!(t.shape(), [1, 80, 3000]);
    t.as_f32().unwrap().to_vec()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f64 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (*x as f64 - *y as f64).abs())
        .fold(0.0, f64::max)
}

fn scratch(case: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("texstream-audio-{}-{case}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn log_mel_matches_whisper_numpy_reference_at_16k() {
    let Some(py) = python() else {
        return;
    };
    let dir = scratch("16k");
    let wav = dir.join("chirp.wav");
    // 12 s: the front end pads it to 30 s, so frames of signal, of its edge and of silence.
    write_wav(&wav, 16_000, &chirp(16_000, 12.0, 80.0, 7_000.0, 0.05));
    let (want, _) = reference(&py, &wav);
    let got = pipeline_mel(&wav);
    let (lo, hi) = want
        .iter()
        .fold((f32::MAX, f32::MIN), |(l, h), &v| (l.min(v), h.max(v)));
    assert!(hi - lo > 1.0, "the reference is flat: {lo}..{hi}");
    let d = max_abs_diff(&got, &want);
    eprintln!("log-mel at 16 kHz: max |rust - numpy| = {d:.3e}");
    assert!(d <= 1e-3, "log-mel differs by {d}");
    // The other numpy front end (scripts/whisper_logmel.py, written separately), when present.
    let other = root().join("scripts/whisper_logmel.py");
    if other.exists() {
        let out = dir.join("other.npy");
        let o = Command::new(&py)
            .arg(&other)
            .arg(&wav)
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let d2 = max_abs_diff(&got, &read_npy(&out).unwrap().data);
        eprintln!("log-mel at 16 kHz: max |rust - whisper_logmel.py| = {d2:.3e}");
        assert!(d2 <= 1e-3, "log-mel differs from whisper_logmel.py by {d2}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn resampled_log_mel_is_close_to_numpy_fft_resampling() {
    let Some(py) = python() else {
        return;
    };
    let dir = scratch("22k");
    let wav = dir.join("chirp22.wav");
    // Below 6 kHz, so the sinc filter's transition band and numpy's brick wall agree.
    let x = write_wav(&wav, 22_050, &chirp(22_050, 6.0, 100.0, 6_000.0, 0.0));
    let (want_mel, want_sig) = reference(&py, &wav);
    let got_sig = texstream::audio::resample(&x, 22_050, 16_000).unwrap();
    assert_eq!(got_sig.len(), want_sig.len());
    // Away from the ends (numpy's resampling is periodic), the signals agree closely.
    let edge = 1_600;
    let n = got_sig.len();
    let d_sig = max_abs_diff(&got_sig[edge..n - edge], &want_sig[edge..n - edge]);
    let got = pipeline_mel(&wav);
    // Log-mel frames away from the ends (10 ms each).
    let frames = |m: &[f32]| -> Vec<f32> {
        (0..80)
            .flat_map(|b| m[b * 3000 + 20..b * 3000 + 580].to_vec())
            .collect()
    };
    let d_mel = max_abs_diff(&frames(&got), &frames(&want_mel));
    let mean: f64 = frames(&got)
        .iter()
        .zip(frames(&want_mel))
        .map(|(a, b)| (*a as f64 - b as f64).abs())
        .sum::<f64>()
        / (80.0 * 560.0);
    eprintln!(
        "22050 -> 16000 Hz: signal max diff {d_sig:.3e}; log-mel max diff {d_mel:.3e}, mean {mean:.3e}"
    );
    // The sinc resampler leads by 1/128 input sample (see `audio::resample`): 6e-3 at 6 kHz.
    assert!(d_sig <= 7e-3, "resampled signal differs by {d_sig}");
    assert!(
        d_mel <= 2e-3 && mean <= 1e-4,
        "log-mel: max {d_mel}, mean {mean}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_rate_other_than_16k_is_a_request_error_that_names_the_fix() {
    let a = Audio {
        samples: Arc::new(vec![0.0; 100]),
        sample_rate: 8_000,
    };
    let e = texstream::pipeline::steps::audio::log_mel(&a, 80).unwrap_err();
    assert!(e.to_string().contains("Resample(to_hz: 16000)"), "{e}");
    let nan = Audio {
        samples: Arc::new(vec![0.0, f32::NAN]),
        sample_rate: 16_000,
    };
    let e = texstream::pipeline::steps::audio::audio_load(&nan).unwrap_err();
    assert!(e.to_string().contains("sample 1 is NaN"), "{e}");
}
