#!/usr/bin/env python3
"""Silero VAD's chunk loop under ONNX Runtime, the reference for texstream's `StreamChunks` and
`VadSegments` steps (the Rust code is not consulted).

    vad_reference.py MODEL.onnx IN.wav OUTDIR [--threshold 0.5] [--min-speech-ms 250]
                     [--min-silence-ms 100] [--speech-pad-ms 30]

IN.wav is 16-bit PCM at 16 kHz. The loop is the silero-vad package's (`OnnxWrapper.__call__`
as `get_speech_timestamps` drives it): chunks of 512 samples, the last one zero-padded; each
run's `input` is the previous run's last 64 input samples (zeros first) followed by the chunk;
`state` [2, 1, 128] starts at zeros and takes each run's `stateN`; `sr` is 16000.

OUTDIR gets probs.npy (float32 [chunks], each run's `output`) and segments.json (the speech
segments as [start, end] sample pairs). The segments come from the silero-vad wheel's own
`get_speech_timestamps_from_probs` (pure Python), read out of
.whl/silero_vad-6.2.3-py3-none-any.whl (scripts/fetch_models.py keeps it there) without
importing the package (which needs torch).
"""
import ast
import json
import os
import sys
import typing
import wave
import zipfile

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEEL = os.path.join(ROOT, ".whl", "silero_vad-6.2.3-py3-none-any.whl")
RATE, CHUNK, CONTEXT = 16000, 512, 64


def read_wav(path):
    with wave.open(path, "rb") as w:
        if w.getsampwidth() != 2 or w.getframerate() != RATE:
            sys.exit(f"{path}: 16-bit PCM at {RATE} Hz only")
        ch = w.getnchannels()
        pcm = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32)
    return (pcm.reshape(-1, ch).mean(axis=1) / 32768.0).astype(np.float32)


def speech_probs(model, audio):
    opts = ort.SessionOptions()
    opts.inter_op_num_threads = 1
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(model, sess_options=opts, providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    context = np.zeros((1, CONTEXT), np.float32)
    probs = []
    for start in range(0, len(audio), CHUNK):
        chunk = audio[start : start + CHUNK]
        chunk = np.pad(chunk, (0, CHUNK - len(chunk)))[None]
        x = np.concatenate([context, chunk], axis=1)
        out, state = sess.run(None, {"input": x, "state": state, "sr": np.array(RATE, np.int64)})
        probs.append(out.item())
        context = x[:, -CONTEXT:]
    return np.array(probs, np.float32)


def silero_rules():
    """`get_speech_timestamps_from_probs` from the wheel's utils_vad.py, compiled on its own."""
    with zipfile.ZipFile(WHEEL) as z:
        src = z.read("silero_vad/utils_vad.py").decode()
    tree = ast.parse(src)
    fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_speech_timestamps_from_probs")
    ns = {"List": typing.List, "Callable": typing.Callable}
    exec(compile(ast.Module(body=[fn], type_ignores=[]), "utils_vad.py", "exec"), ns)
    return ns["get_speech_timestamps_from_probs"]


def main():
    args = sys.argv[1:]
    opts = {"--threshold": "0.5", "--min-speech-ms": "250", "--min-silence-ms": "100", "--speech-pad-ms": "30"}
    for key in list(opts):
        if key in args:
            k = args.index(key)
            opts[key] = args[k + 1]
            del args[k : k + 2]
    if len(args) != 3:
        sys.exit(__doc__)
    model, wav, out = args
    os.makedirs(out, exist_ok=True)
    audio = read_wav(wav)
    probs = speech_probs(model, audio)
    np.save(os.path.join(out, "probs.npy"), probs)
    if not os.path.exists(WHEEL):
        sys.exit(f"{WHEEL} is missing: run scripts/fetch_models.py")
    segments = silero_rules()(
        [float(p) for p in probs],
        sampling_rate=RATE,
        threshold=float(opts["--threshold"]),
        min_speech_duration_ms=int(opts["--min-speech-ms"]),
        min_silence_duration_ms=int(opts["--min-silence-ms"]),
        speech_pad_ms=int(opts["--speech-pad-ms"]),
        audio_length_samples=len(audio),
    )
    with open(os.path.join(out, "segments.json"), "w") as f:
        json.dump([[s["start"], s["end"]] for s in segments], f)


if __name__ == "__main__":
    main()
