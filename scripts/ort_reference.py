#!/usr/bin/env python3
"""Writes real-model inputs and ONNX Runtime (CPU) outputs as .npy for texstream's comparison tests.

usage: ort_reference.py CASE OUTDIR      CASE: cls | rec | det | det320 | det384x768 | det256noise | vad

Inputs come from real images (models/images/page.png, tests/data/ocr/page_crop0.png) preprocessed
like RapidOCR; the VAD input is a deterministic synthetic 16 kHz signal. OUTDIR gets
in_<i>.npy, out_<i>.npy and meta.json: {"model", "inputs": [[name, file]], "outputs": [[name,
file]], "ort_ms"} (median of 3 timed runs after a warm-up).

det256noise feeds the detector standard normal noise (seed 0), where every probability is below
3e-3. ONNX Runtime's Sigmoid is a fast approximation, 4e-4 relative (5e-5 of this output's range)
off for such small values, so this case also writes `exact_0.npy`: the logistic of ORT's own
pre-sigmoid logits in float64 (meta "exact"), the reference fp32 should be held to.
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


def det_noise_input(size):
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((1, 3, size, size)).astype(np.float32)}


def exact_sigmoid_output(model_path, feeds):
    """The model's last node must be a Sigmoid: its input (ORT's logits) through a float64
    logistic."""
    import tempfile

    import onnx

    last = onnx.load(model_path).graph.node[-1]
    assert last.op_type == "Sigmoid", last.op_type
    with tempfile.TemporaryDirectory() as tmp:
        cut = os.path.join(tmp, "logits.onnx")
        onnx.utils.extract_model(model_path, cut, list(feeds), [last.input[0]])
        logits = ort.InferenceSession(cut, providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    return 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))


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
    "det256noise": ("models/ocr/det.onnx", lambda: det_noise_input(256)),
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
    if sys.argv[1] == "det256noise":
        np.save(os.path.join(out_dir, "exact_0.npy"), exact_sigmoid_output(os.path.join(ROOT, model), feeds))
        meta["exact"] = [[sess.get_outputs()[0].name, "exact_0.npy"]]
    with open(os.path.join(out_dir, "meta.json"), "w") as fh:
        json.dump(meta, fh, indent=1)
    print(json.dumps(meta))


if __name__ == "__main__":
    main()
