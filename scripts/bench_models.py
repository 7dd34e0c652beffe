#!/usr/bin/env python3
"""Per-model latency of the OCR models: texstream (Vulkan, fp16 and fp32) beside ONNX Runtime (CPU)
on the same machine in the same run, with the layout transforms left per model.

usage: bench_models.py [--texstream BIN] [--repeat N] [--json FILE]

Inputs are deterministic random tensors of the workload's shapes (latency does not depend on the
values). texstream's time is `texstream infer --repeat N`'s median (record + GPU + readback of one
whole-graph submission, weights preloaded); ORT's is the median of N runs after one warm-up with
its default CPU threads.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (name, model file, input name, shape): the shapes of workloads/camera-ocr.ron.
MODELS = [
    ("det", "models/ocr/det.onnx", "x", [1, 3, 384, 768]),
    ("cls", "models/ocr/cls.onnx", "x", [1, 3, 48, 192]),
    ("rec", "models/ocr/rec.onnx", "x", [1, 3, 48, 768]),
]


def ort_ms(path, name, x, repeat):
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    sess.run(None, {name: x})
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        sess.run(None, {name: x})
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def texstream_ms(binary, path, name, npy, precision, repeat, out):
    cmd = [binary, "infer", path, "--input", f"{name}={npy}", "--out", out,
           "--precision", precision, "--repeat", str(repeat)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    text = r.stdout + r.stderr
    med = re.search(r"repeat runs: median ([0-9.]+) ms", text)
    lt = re.search(r"layout transforms \(real copies\): (\d+)", text)
    dev = re.search(r"device: (.*)", text)
    if not med:
        raise SystemExit(f"no timing in the output of {' '.join(cmd)}:\n{text}")
    return float(med.group(1)), int(lt.group(1)) if lt else -1, dev.group(1) if dev else "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--texstream", default=os.path.join(ROOT, "target/release/texstream"))
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    device = "?"
    with tempfile.TemporaryDirectory() as tmp:
        rng = np.random.default_rng(0)
        for name, rel, inp, shape in MODELS:
            path = os.path.join(ROOT, rel)
            if not os.path.exists(path):
                sys.exit(f"{path} missing: run scripts/fetch_models.py")
            x = rng.uniform(-1, 1, size=shape).astype(np.float32)
            npy = os.path.join(tmp, f"{name}.npy")
            np.save(npy, x)
            ref = ort_ms(path, inp, x, a.repeat)
            row = {"model": name, "shape": shape, "ort_cpu_ms": ref}
            for prec in ["f16", "f32"]:
                ms, lt, device = texstream_ms(a.texstream, path, inp, npy, prec, a.repeat, tmp)
                row[f"texstream_{prec}_ms"] = ms
                row["layout_transforms"] = lt
            rows.append(row)
    print(f"device: {device}; ONNX Runtime {ort.__version__} CPU ({os.cpu_count()} cores); median of {a.repeat}")
    print(f"{'model':<6} {'input':<16} {'ours f16 ms':>12} {'ours f32 ms':>12} {'ORT CPU ms':>11} {'ORT/ours f16':>13} {'layout copies':>14}")
    for r in rows:
        print(f"{r['model']:<6} {'x'.join(map(str, r['shape'])):<16} {r['texstream_f16_ms']:>12.2f} "
              f"{r['texstream_f32_ms']:>12.2f} {r['ort_cpu_ms']:>11.2f} "
              f"{r['ort_cpu_ms'] / r['texstream_f16_ms']:>13.2f} {r['layout_transforms']:>14}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": device, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
