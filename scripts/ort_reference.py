#!/usr/bin/env python3
"""Writes real-model inputs and ONNX Runtime (CPU) outputs as .npy for texstream's comparison tests.

usage: ort_reference.py CASE OUTDIR      CASE: cls | rec | det | det320 | det384x768 | vad

Inputs come from real images (models/images/page.png, tests/data/ocr/page_crop0.png) preprocessed
like RapidOCR; the VAD input is a deterministic synthetic 16 kHz signal. OUTDIR gets
in_<i>.npy, out_<i>.npy and meta.json: {"model", "inputs": [[name, file]], "outputs": [[name,
file]], "ort_ms"} (median of 3 timed runs after a warm-up).
"""
import json
import os
import sys
import time

import numpy as np
import onnxruntime as ort
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def rgb_to_bgr_chw(img):
    a = np.asarray(img.convert("RGB"), dtype=np.float32)[:, :, ::-1]
    return a.transpose(2, 0, 1)


def cls_input():
    img = Image.open(os.path.join(ROOT, "tests/data/ocr/page_crop0.png")).resize((192, 48), Image.BILINEAR)
    x = (rgb_to_bgr_chw(img) / 255.0 - 0.5) / 0.5
    return {"x": x[None].astype(np.float32)}


def rec_input():
    img = Image.open(os.path.join(ROOT, "tests/data/ocr/page_crop0.png"))
    w = min(320, int(round(48 * img.width / img.height)))
    x = (rgb_to_bgr_chw(img.resize((w, 48), Image.BILINEAR)) / 255.0 - 0.5) / 0.5
    out = np.zeros((1, 3, 48, 320), np.float32)
    out[0, :, :, :w] = x
    return {"x": out}


def det_input(size, width=None):
    width = width or size
    img = Image.open(os.path.join(ROOT, "models/images/page.png")).resize((width, size), Image.BILINEAR)
    x = rgb_to_bgr_chw(img) / 255.0
    mean = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
    std = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]
    return {"x": ((x - mean) / std)[None].astype(np.float32)}


def vad_input():
    t = np.arange(576, dtype=np.float64) / 16000.0
    rng = np.random.default_rng(7)
    sig = 0.3 * np.sin(2 * np.pi * 220 * t) * np.sin(2 * np.pi * 3 * t) + 0.05 * rng.standard_normal(576)
    return {
        "input": sig[None].astype(np.float32),
        "state": np.zeros((2, 1, 128), np.float32),
        "sr": np.array(16000, dtype=np.int64),
    }


CASES = {
    "cls": ("models/ocr/cls.onnx", cls_input),
    "rec": ("models/ocr/rec.onnx", rec_input),
    "det": ("models/ocr/det.onnx", lambda: det_input(640)),
    "det320": ("models/ocr/det.onnx", lambda: det_input(320)),
    "det384x768": ("models/ocr/det.onnx", lambda: det_input(384, 768)),
    "vad": ("models/vad/silero_vad.onnx", vad_input),
}


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in CASES:
        sys.exit(f"usage: {sys.argv[0]} {{{'|'.join(CASES)}}} OUTDIR")
    model, make = CASES[sys.argv[1]]
    out_dir = sys.argv[2]
    os.makedirs(out_dir, exist_ok=True)
    feeds = make()
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    sess = ort.InferenceSession(os.path.join(ROOT, model), opts, providers=["CPUExecutionProvider"])
    outs = sess.run(None, feeds)
    times = []
    for _ in range(3):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1000)
    meta = {"model": model, "inputs": [], "outputs": [], "ort_ms": sorted(times)[1]}
    for i, (name, v) in enumerate(feeds.items()):
        f = f"in_{i}.npy"
        np.save(os.path.join(out_dir, f), v)
        meta["inputs"].append([name, f])
    for i, (o, v) in enumerate(zip(sess.get_outputs(), outs)):
        f = f"out_{i}.npy"
        np.save(os.path.join(out_dir, f), np.asarray(v))
        meta["outputs"].append([o.name, f])
    with open(os.path.join(out_dir, "meta.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
