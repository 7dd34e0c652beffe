//! Audio steps: a request's audio as the pipeline's value, sample-rate conversion and Whisper's
//! log-mel front end (the signal processing is in [`crate::audio`]).
use std::sync::Arc;

use crate::audio::{LogMelError, ResampleError, SegmentRules, WHISPER_FRAMES};
use crate::pipeline::value::{Audio, Tensor, TensorData, TensorError, Value};

/// Why an audio step failed on the audio it was given.
#[derive(Debug, thiserror::Error)]
pub enum AudioStepError {
    #[error("the audio's sample rate is 0 Hz")]
    ZeroRate,
    #[error("audio sample {index} is {value} (samples must be finite)")]
    NotFinite { index: usize, value: f32 },
    #[error(transparent)]
    Resample(#[from] ResampleError),
    #[error(transparent)]
    LogMel(#[from] LogMelError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error(
        "{probs} speech probabilities for {samples} samples in chunks of {chunk}: they need \
         {need} (one per chunk)"
    )]
    ProbCount {
        probs: usize,
        samples: usize,
        chunk: usize,
        need: usize,
    },
}

/// The request's audio, checked: a sample rate and finite samples.
pub fn audio_load(a: &Audio) -> Result<Audio, AudioStepError> {
    if a.sample_rate == 0 {
        return Err(AudioStepError::ZeroRate);
    }
    if let Some((index, &value)) = a.samples.iter().enumerate().find(|(_, s)| !s.is_finite()) {
        return Err(AudioStepError::NotFinite { index, value });
    }
    Ok(a.clone())
}

/// `a` at `to_hz` (the same samples when it is already at that rate).
pub fn resample(a: &Audio, to_hz: u32) -> Result<Audio, AudioStepError> {
    if a.sample_rate == to_hz {
        return Ok(a.clone());
    }
    Ok(Audio {
        samples: Arc::new(crate::audio::resample(&a.samples, a.sample_rate, to_hz)?),
        sample_rate: to_hz,
    })
}

/// Whisper's log-mel spectrogram of `a` as a tensor `[1, n_mels, 3000]`.
pub fn log_mel(a: &Audio, n_mels: usize) -> Result<Tensor, AudioStepError> {
    let mel = crate::audio::log_mel(&a.samples, a.sample_rate, n_mels)?;
    Ok(Tensor::f32(vec![1, n_mels, WHISPER_FRAMES], mel)?)
}

/// The speech segments of `a` from its per-chunk probabilities `probs`: the list of segment
/// audio, then the `[segments, 2]` tensor of their `[start, end)` samples.
pub fn vad_segments(
    probs: &Tensor,
    a: &Audio,
    chunk: usize,
    rules: &SegmentRules,
) -> Result<Vec<Value>, AudioStepError> {
    let p = probs.to_f32()?;
    let need = a.samples.len().div_ceil(chunk);
    if p.len() != need {
        return Err(AudioStepError::ProbCount {
            probs: p.len(),
            samples: a.samples.len(),
            chunk,
            need,
        });
    }
    let segs = crate::audio::speech_segments(&p, chunk, a.samples.len(), a.sample_rate, rules);
    let audio = segs
        .iter()
        .map(|&(s, e)| {
            Value::Audio(Audio {
                samples: Arc::new(a.samples[s..e].to_vec()),
                sample_rate: a.sample_rate,
            })
        })
        .collect();
    let bounds = segs
        .iter()
        .flat_map(|&(s, e)| [s as i64, e as i64])
        .collect();
    Ok(vec![
        Value::List(audio),
        Value::Tensor(Tensor::new(vec![segs.len(), 2], TensorData::I64(bounds))?),
    ])
}
