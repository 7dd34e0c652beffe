//! Whisper's log-mel front end, as openai-whisper's `log_mel_spectrogram` computes it on audio
//! padded or trimmed to 30 s:
//!
//! - a short-time Fourier transform with `n_fft` 400, hop 160 and a periodic Hann window,
//!   centred frames (the signal reflect-padded by 200 samples at each end), the last frame
//!   dropped: 3000 frames;
//! - the power spectrum |X|², through an 80-band (or 128-band) mel filterbank built with
//!   librosa's formula (`htk=False`: the Slaney mel scale; `norm="slaney"`: each band divided by
//!   its width; float32 weights);
//! - log10(max(x, 1e-10)), then clamped to 8 below its maximum, then (x + 4) / 4.
//!
//! The FFTs are realfft's; everything is computed in f64 and returned as f32.
use realfft::RealFftPlanner;

/// The sample rate the front end takes.
pub const WHISPER_RATE: u32 = 16_000;
/// The audio length it looks at: 30 s.
pub const WHISPER_SAMPLES: usize = 30 * WHISPER_RATE as usize;
/// Frames of the output: 30 s at a hop of 160 samples.
pub const WHISPER_FRAMES: usize = WHISPER_SAMPLES / HOP;
const N_FFT: usize = 400;
const HOP: usize = 160;
const BINS: usize = N_FFT / 2 + 1;

/// Why the front end cannot take the audio.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum LogMelError {
    #[error(
        "the audio is at {0} Hz; Whisper's front end takes {WHISPER_RATE} Hz (add a \
         `Resample(to_hz: 16000)` step before it)"
    )]
    Rate(u32),
    #[error("{0} mel bands: Whisper's models use 80 or 128")]
    Bands(usize),
    #[error("FFT: {0}")]
    Fft(String),
}

/// Slaney's mel scale (librosa `hz_to_mel`, `htk=False`): linear below 1 kHz, logarithmic
/// above.
fn hz_to_mel(f: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    let min_log_mel = 1000.0 / F_SP;
    let logstep = 6.4f64.ln() / 27.0;
    if f >= 1000.0 {
        min_log_mel + (f / 1000.0).ln() / logstep
    } else {
        f / F_SP
    }
}

fn mel_to_hz(m: f64) -> f64 {
    const F_SP: f64 = 200.0 / 3.0;
    let min_log_mel = 1000.0 / F_SP;
    let logstep = 6.4f64.ln() / 27.0;
    if m >= min_log_mel {
        1000.0 * (logstep * (m - min_log_mel)).exp()
    } else {
        F_SP * m
    }
}

/// librosa's `filters.mel(sr=16000, n_fft=400, n_mels)` with `htk=False`, `norm="slaney"` and
/// float32 weights: `n_mels` rows of 201 FFT-bin weights, row-major.
pub fn mel_filters(n_mels: usize) -> Vec<f32> {
    let sr = WHISPER_RATE as f64;
    let fft_freq = |k: usize| k as f64 * (sr / 2.0) / (BINS - 1) as f64;
    let (lo, hi) = (hz_to_mel(0.0), hz_to_mel(sr / 2.0));
    let mel_f: Vec<f64> = (0..n_mels + 2)
        .map(|i| mel_to_hz(lo + (hi - lo) * i as f64 / (n_mels + 1) as f64))
        .collect();
    let mut w = vec![0f32; n_mels * BINS];
    for i in 0..n_mels {
        let (d0, d1) = (mel_f[i + 1] - mel_f[i], mel_f[i + 2] - mel_f[i + 1]);
        let enorm = 2.0 / (mel_f[i + 2] - mel_f[i]);
        for k in 0..BINS {
            let lower = -(mel_f[i] - fft_freq(k)) / d0;
            let upper = (mel_f[i + 2] - fft_freq(k)) / d1;
            // Rounded to f32 twice, as librosa's float32 array stores the triangle and then
            // the normalized weight.
            let tri = lower.min(upper).max(0.0) as f32;
            w[i * BINS + k] = (tri as f64 * enorm) as f32;
        }
    }
    w
}

/// Whisper's log-mel spectrogram of mono `samples` at `rate` Hz: `n_mels` × 3000 values,
/// row-major (band-major), from the audio padded with zeros or trimmed to 30 s.
pub fn log_mel(samples: &[f32], rate: u32, n_mels: usize) -> Result<Vec<f32>, LogMelError> {
    if rate != WHISPER_RATE {
        return Err(LogMelError::Rate(rate));
    }
    if n_mels != 80 && n_mels != 128 {
        return Err(LogMelError::Bands(n_mels));
    }
    // pad_or_trim, then the centred STFT's reflect padding (numpy/torch "reflect": the edge
    // sample is not repeated).
    let mut audio: Vec<f64> = samples
        .iter()
        .take(WHISPER_SAMPLES)
        .map(|&s| s as f64)
        .collect();
    audio.resize(WHISPER_SAMPLES, 0.0);
    let half = N_FFT / 2;
    let mut padded = Vec::with_capacity(WHISPER_SAMPLES + N_FFT);
    padded.extend((1..=half).rev().map(|i| audio[i]));
    padded.extend_from_slice(&audio);
    let n = audio.len();
    padded.extend((1..=half).map(|i| audio[n - 1 - i]));

    let window: Vec<f64> = (0..N_FFT)
        .map(|k| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * k as f64 / N_FFT as f64).cos())
        .collect();
    let filters: Vec<f64> = mel_filters(n_mels).into_iter().map(f64::from).collect();
    let fft = RealFftPlanner::<f64>::new().plan_fft_forward(N_FFT);
    let mut frame = fft.make_input_vec();
    let mut spectrum = fft.make_output_vec();
    let mut scratch = fft.make_scratch_vec();
    let mut power = [0f64; BINS];
    let mut mel = vec![0f64; n_mels * WHISPER_FRAMES];
    for t in 0..WHISPER_FRAMES {
        let start = t * HOP;
        for (k, x) in frame.iter_mut().enumerate() {
            *x = padded[start + k] * window[k];
        }
        fft.process_with_scratch(&mut frame, &mut spectrum, &mut scratch)
            .map_err(|e| LogMelError::Fft(e.to_string()))?;
        for (p, c) in power.iter_mut().zip(&spectrum) {
            *p = c.norm_sqr();
        }
        for m in 0..n_mels {
            let row = &filters[m * BINS..(m + 1) * BINS];
            let e: f64 = row.iter().zip(&power).map(|(w, p)| w * p).sum();
            mel[m * WHISPER_FRAMES + t] = e.max(1e-10).log10();
        }
    }
    let top = mel.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Ok(mel
        .into_iter()
        .map(|x| ((x.max(top - 8.0) + 4.0) / 4.0) as f32)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filterbank_is_slaney_normalized() {
        let w = mel_filters(80);
        assert_eq!(w.len(), 80 * BINS);
        // Each band is a triangle of area ~1 in Hz·(2/width) terms: its peak is 2/width.
        assert!(w.iter().all(|&x| (0.0..0.03).contains(&x)));
        // The DC bin and the Nyquist bin belong to no band's interior.
        assert_eq!(w[0], 0.0);
        // Bands are ordered: each one's centre is above the previous one's.
        let peak = |m: usize| {
            (0..BINS)
                .max_by(|&a, &b| w[m * BINS + a].total_cmp(&w[m * BINS + b]))
                .unwrap()
        };
        assert!((1..80).all(|m| peak(m) >= peak(m - 1)));
    }

    #[test]
    fn silence_is_the_floor_and_rates_are_checked() {
        let mel = log_mel(&[0.0; 1600], 16_000, 80).unwrap();
        assert_eq!(mel.len(), 80 * 3000);
        // log10(1e-10) = -10 everywhere, so the max clamp keeps it: (-10 + 4) / 4.
        assert!(mel.iter().all(|&x| x == -1.5));
        assert_eq!(log_mel(&[0.0], 8000, 80), Err(LogMelError::Rate(8000)));
        assert_eq!(log_mel(&[0.0], 16_000, 64), Err(LogMelError::Bands(64)));
    }
}
