#!/usr/bin/env python3
"""Whisper's audio front end in numpy: the reference the Rust front end is checked against.

    whisper_logmel.py IN.wav OUT.npy      writes the log-mel spectrogram as float32 [1, 80, 3000]

Follows openai-whisper's `pad_or_trim` + `log_mel_spectrogram` (whisper/audio.py):
  1. read a PCM WAV (8/16/24/32-bit integer; module `wave`), samples / 2^(bits-1) (16-bit: / 32768,
     as whisper's ffmpeg s16le path), channels averaged to mono (what ffmpeg's `-ac 1` downmix does
     for stereo);
  2. only if the rate is not 16 kHz: resample() below (a Kaiser-windowed sinc interpolator; ffmpeg's
     resampler is a different filter, so a clip at 16 kHz is the exact case);
  3. pad with zeros / trim to 30 s = 480000 samples;
  4. STFT as torch.stft(n_fft=400, hop_length=160, window=torch.hann_window(400), center=True,
     pad_mode="reflect"): 200 samples reflect-padded each side (numpy "reflect": the edge sample
     is not repeated), frame f covers padded[160 f : 160 f + 400], periodic Hann window
     w[n] = 0.5 - 0.5 cos(2 pi n / 400), one-sided DFT (201 bins), |X|^2; 3001 frames, the last
     dropped -> 3000;
  5. mel = filterbank [80, 201] @ power [201, 3000], filterbank = librosa.filters.mel(sr=16000,
     n_fft=400, n_mels=80) (htk=False: Slaney's mel scale, norm="slaney"), implemented below in
     float64 and rounded to float32 like librosa's (it matches whisper's assets/mel_filters.npz);
  6. log10(max(mel, 1e-10)); max(x, x.max() - 8); (x + 4) / 4.
The STFT and the mel product are computed in float64 and the result is rounded to float32 (whisper
computes in float32; the two agree to about 1e-5 after the log).
"""
import argparse
import sys
import wave

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
CHUNK_LENGTH = 30
N_SAMPLES = CHUNK_LENGTH * SAMPLE_RATE  # 480000
N_FRAMES = N_SAMPLES // HOP_LENGTH      # 3000
N_MELS = 80

# resample(): sinc half-width in zero crossings of the (lower) cutoff, cutoff as a fraction of the
# lower Nyquist frequency, and the Kaiser window's beta.
RESAMPLE_ZEROS = 16
RESAMPLE_ROLLOFF = 0.945
RESAMPLE_BETA = 8.555


def read_wav(path):
    """Returns (samples float32 mono in [-1, 1), sample_rate)."""
    with wave.open(path, "rb") as w:
        ch, width, rate, n = w.getnchannels(), w.getsampwidth(), w.getframerate(), w.getnframes()
        raw = w.readframes(n)
    if width == 1:  # 8-bit WAV is unsigned
        x = (np.frombuffer(raw, np.uint8).astype(np.float32) - 128.0) / 128.0
    elif width == 2:
        x = np.frombuffer(raw, "<i2").astype(np.float32) / 32768.0
    elif width == 3:
        b = np.frombuffer(raw, np.uint8).reshape(-1, 3).astype(np.int32)
        v = b[:, 0] | (b[:, 1] << 8) | (b[:, 2] << 16)
        v = np.where(v >= 1 << 23, v - (1 << 24), v)
        x = v.astype(np.float32) / float(1 << 23)
    elif width == 4:
        x = (np.frombuffer(raw, "<i4").astype(np.float64) / float(1 << 31)).astype(np.float32)
    else:
        raise ValueError(f"{path}: {8 * width}-bit samples are not supported")
    x = x.reshape(-1, ch)
    x = x[:, 0] if ch == 1 else x.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(x), rate


def resample(x, rate_in, rate_out=SAMPLE_RATE):
    """Band-limited resampling by direct windowed-sinc interpolation (float64 inside).

    Output sample n sits at input time t = n * rate_in / rate_out (in input samples) and is
        y[n] = sum_k x[k] * r * sinc(r * (k - t)) * kaiser((k - t) / half), |k - t| < half,
    with r = ROLLOFF * min(1, rate_out / rate_in) (the cutoff in cycles per input sample, times 2),
    half = ZEROS / r input samples, kaiser(u) = I0(BETA * sqrt(1 - u^2)) / I0(BETA), x = 0 outside
    the signal. Output length ceil(len(x) * rate_out / rate_in)."""
    if rate_in == rate_out:
        return np.asarray(x, dtype=np.float32)
    x = np.asarray(x, dtype=np.float64)
    n_in = len(x)
    n_out = -(-n_in * rate_out // rate_in)
    r = RESAMPLE_ROLLOFF * min(1.0, rate_out / rate_in)
    half = RESAMPLE_ZEROS / r
    taps = int(np.ceil(half)) * 2 + 2
    i0_beta = np.i0(RESAMPLE_BETA)
    y = np.empty(n_out, dtype=np.float64)
    xp = np.concatenate([np.zeros(taps), x, np.zeros(taps)])
    step = 8192
    for s in range(0, n_out, step):
        n = np.arange(s, min(s + step, n_out), dtype=np.int64)
        base = (n * rate_in) // rate_out            # floor(t), exact in integers
        frac = ((n * rate_in) % rate_out) / rate_out
        k = base[:, None] + np.arange(-taps // 2 + 1, taps // 2 + 1)[None, :]
        d = k - (base + frac)[:, None]
        u = d / half
        win = np.where(np.abs(u) < 1.0,
                       np.i0(RESAMPLE_BETA * np.sqrt(np.clip(1.0 - u * u, 0.0, None))) / i0_beta, 0.0)
        h = r * np.sinc(r * d) * win
        y[s:s + len(n)] = np.sum(xp[k + taps] * h, axis=1)
    return y.astype(np.float32)


def pad_or_trim(x, length=N_SAMPLES):
    if len(x) >= length:
        return x[:length]
    return np.concatenate([x, np.zeros(length - len(x), dtype=x.dtype)])


# --- librosa.filters.mel, Slaney flavour (htk=False, norm="slaney") ---------------------------------

def hz_to_mel(f):
    f = np.asarray(f, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = f / f_sp
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-300) / min_log_hz) / logstep,
                    mels)


def mel_to_hz(m):
    m = np.asarray(m, dtype=np.float64)
    f_sp = 200.0 / 3
    freqs = f_sp * m
    min_log_hz = 1000.0
    min_log_mel = min_log_hz / f_sp
    logstep = np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


def mel_filterbank(sr=SAMPLE_RATE, n_fft=N_FFT, n_mels=N_MELS, fmin=0.0, fmax=None):
    """[n_mels, 1 + n_fft // 2] float32, as librosa.filters.mel(sr, n_fft, n_mels) (Slaney)."""
    fmax = sr / 2.0 if fmax is None else fmax
    fftfreqs = np.linspace(0.0, sr / 2.0, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(fmin), hz_to_mel(fmax), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = mel_f[:, None] - fftfreqs[None, :]
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float64)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0.0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2:n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, None]
    return weights.astype(np.float32)


def hann_window(n=N_FFT):
    """torch.hann_window(n) (periodic=True)."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n, dtype=np.float64) / n)


def power_spectrogram(audio):
    """|STFT|^2 as torch.stft(center=True, reflect), last frame dropped: [201, n_frames]."""
    x = np.asarray(audio, dtype=np.float64)
    pad = N_FFT // 2
    xp = np.pad(x, (pad, pad), mode="reflect")
    n_frames = 1 + (len(xp) - N_FFT) // HOP_LENGTH
    idx = np.arange(N_FFT)[None, :] + HOP_LENGTH * np.arange(n_frames)[:, None]
    frames = xp[idx] * hann_window()[None, :]
    spec = np.fft.rfft(frames, n=N_FFT, axis=1)          # [n_frames, 201]
    power = spec.real ** 2 + spec.imag ** 2
    return power[:-1].T                                   # [201, n_frames - 1]


def log_mel_spectrogram(audio, n_mels=N_MELS):
    """audio: float 16 kHz samples (already padded/trimmed). Returns float32 [n_mels, frames]."""
    mel = mel_filterbank(n_mels=n_mels).astype(np.float64) @ power_spectrogram(audio)
    log_spec = np.log10(np.maximum(mel, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    return ((log_spec + 4.0) / 4.0).astype(np.float32)


def wav_to_features(path):
    """WAV file -> float32 [1, 80, 3000], the encoder's input_features."""
    x, rate = read_wav(path)
    x = resample(x, rate, SAMPLE_RATE)
    return log_mel_spectrogram(pad_or_trim(x))[None]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("wav")
    ap.add_argument("out_npy")
    args = ap.parse_args()
    feats = wav_to_features(args.wav)
    np.save(args.out_npy, feats)
    x, rate = read_wav(args.wav)
    print(f"{args.wav}: {len(x)} samples at {rate} Hz ({len(x) / rate:.2f} s) -> {args.out_npy} "
          f"{list(feats.shape)} min {feats.min():.4f} max {feats.max():.4f}", file=sys.stderr)


if __name__ == "__main__":
    main()
