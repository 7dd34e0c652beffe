#!/usr/bin/env python3
"""Whisper's log-mel front end in numpy, written from openai-whisper's `audio.py` as an independent
reference for texstream's `LogMel` step (the Rust code is not consulted).

    logmel_reference.py IN.wav OUT.npy [--n-mels 80] [--resampled OUT16K.npy]

IN.wav is 16-bit PCM (channels averaged, samples / 32768 like whisper's ffmpeg loader). At
another rate than 16 kHz it is first resampled with a band-limited FFT resampler (the spectrum
cut at 8 kHz, the signal taken as periodic: a loose reference for a streaming sinc resampler,
close away from the ends); `--resampled` saves that 16 kHz signal. OUT.npy gets float32
[1, n_mels, 3000]:

- the audio padded with zeros or trimmed to 30 s (480000 samples; `whisper.pad_or_trim`);
- `torch.stft(n_fft=400, hop_length=160, window=torch.hann_window(400), center=True,
  pad_mode="reflect")`, the last frame dropped, power |X|^2;
- librosa's mel filterbank (`librosa.filters.mel(sr=16000, n_fft=400, n_mels=80)`: Slaney mel
  scale, htk=False, norm="slaney", float32 weights);
- log10(max(x, 1e-10)), then max(x, max(x) - 8), then (x + 4) / 4.
"""
import sys
import wave

import numpy as np

SAMPLE_RATE = 16000
N_FFT = 400
HOP_LENGTH = 160
N_SAMPLES = 30 * SAMPLE_RATE
N_FRAMES = N_SAMPLES // HOP_LENGTH


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2:
            sys.exit(f"{path}: only 16-bit PCM is read here")
        rate, ch = w.getframerate(), w.getnchannels()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32)
    return (pcm.reshape(-1, ch).mean(axis=1) / 32768.0).astype(np.float32), rate


def hz_to_mel(f):
    """librosa.hz_to_mel(htk=False): linear below 1 kHz, logarithmic above (Slaney)."""
    f = np.asanyarray(f, dtype=np.float64)
    f_sp = 200.0 / 3
    mels = f / f_sp
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-300) / min_log_hz) / logstep, mels)


def mel_to_hz(m):
    m = np.asanyarray(m, dtype=np.float64)
    f_sp = 200.0 / 3
    freqs = f_sp * m
    min_log_hz, min_log_mel, logstep = 1000.0, 1000.0 / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), freqs)


def mel_filters(n_mels, sr=SAMPLE_RATE, n_fft=N_FFT):
    """librosa.filters.mel(sr, n_fft, n_mels, fmin=0, fmax=sr/2, htk=False, norm="slaney")."""
    fftfreqs = np.linspace(0, sr / 2, 1 + n_fft // 2)
    mel_f = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(sr / 2.0), n_mels + 2))
    fdiff = np.diff(mel_f)
    ramps = np.subtract.outer(mel_f, fftfreqs)
    # float32 from the start, as librosa's dtype=np.float32 makes it (each row and the
    # normalization rounded to float32).
    weights = np.zeros((n_mels, 1 + n_fft // 2), dtype=np.float32)
    for i in range(n_mels):
        lower = -ramps[i] / fdiff[i]
        upper = ramps[i + 2] / fdiff[i + 1]
        weights[i] = np.maximum(0, np.minimum(lower, upper))
    enorm = 2.0 / (mel_f[2 : n_mels + 2] - mel_f[:n_mels])
    weights *= enorm[:, None]
    return weights


def fft_resample(audio, rate, to=SAMPLE_RATE):
    n = audio.shape[0]
    m = int(np.ceil(n * to / rate))
    spec = np.fft.rfft(audio.astype(np.float64))
    keep = min(spec.shape[0], m // 2 + 1)
    out = np.zeros(m // 2 + 1, dtype=np.complex128)
    out[:keep] = spec[:keep]
    if m % 2 == 0 and keep == m // 2 + 1:
        out[-1] = out[-1].real  # the new Nyquist bin of a real signal
    return (np.fft.irfft(out, m) * (m / n)).astype(np.float32)


def pad_or_trim(audio, length=N_SAMPLES):
    if audio.shape[0] > length:
        return audio[:length]
    return np.pad(audio, (0, length - audio.shape[0]))


def log_mel_spectrogram(audio, n_mels=80):
    audio = pad_or_trim(np.asarray(audio, dtype=np.float32)).astype(np.float64)
    window = 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(N_FFT) / N_FFT)  # periodic Hann
    padded = np.pad(audio, N_FFT // 2, mode="reflect")
    n_frames = 1 + (padded.shape[0] - N_FFT) // HOP_LENGTH
    idx = np.arange(N_FFT)[None, :] + HOP_LENGTH * np.arange(n_frames)[:, None]
    spec = np.fft.rfft(padded[idx] * window, axis=1)  # [frames, 201]
    magnitudes = (np.abs(spec) ** 2)[:-1].T  # drop the last frame: [201, 3000]
    mel_spec = mel_filters(n_mels).astype(np.float64) @ magnitudes
    log_spec = np.log10(np.maximum(mel_spec, 1e-10))
    log_spec = np.maximum(log_spec, log_spec.max() - 8.0)
    log_spec = (log_spec + 4.0) / 4.0
    return log_spec.astype(np.float32)[None]


def main():
    args = sys.argv[1:]
    opts = {"--n-mels": "80", "--resampled": None}
    for key in opts:
        if key in args:
            k = args.index(key)
            opts[key] = args[k + 1]
            del args[k : k + 2]
    n_mels = int(opts["--n-mels"])
    if len(args) != 2:
        sys.exit(__doc__)
    audio, rate = read_wav(args[0])
    if rate != SAMPLE_RATE:
        audio = fft_resample(audio, rate)
    if opts["--resampled"]:
        np.save(opts["--resampled"], audio)
    mel = log_mel_spectrogram(audio, n_mels)
    assert mel.shape == (1, n_mels, N_FRAMES), mel.shape
    np.save(args[1], mel)


if __name__ == "__main__":
    main()
