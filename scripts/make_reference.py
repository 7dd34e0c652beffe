#!/usr/bin/env python3
"""Runs the default models (models/, from scripts/fetch_models.py) with ONNX Runtime at the input
shapes the tests use and records every output's shape in tests/data/import/reference_shapes.json.
The importer's inferred output shapes are checked against these. Needs onnxruntime and numpy.
"""
import json
import os

import numpy as np
import onnxruntime as ort

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# (model, {input: shape}, {input: bound scalar value}) — keep in sync with tests/import_models.rs.
CASES = [
    ("models/ocr/det.onnx", {"x": [1, 3, 640, 640]}, {}),
    ("models/ocr/rec.onnx", {"x": [1, 3, 48, 320]}, {}),
    ("models/ocr/cls.onnx", {"x": [1, 3, 48, 192]}, {}),
    ("models/vad/silero_vad.onnx", {"input": [1, 576], "state": [2, 1, 128]}, {"sr": 16000}),
]


def main():
    out = {}
    rng = np.random.default_rng(0)
    for path, shapes, binds in CASES:
        sess = ort.InferenceSession(os.path.join(ROOT, path), providers=["CPUExecutionProvider"])
        feed = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
        feed.update({k: np.array(v, dtype=np.int64) for k, v in binds.items()})
        names = [o.name for o in sess.get_outputs()]
        res = sess.run(None, feed)
        out[path] = {n: list(r.shape) for n, r in zip(names, res)}
        print(path, out[path])
    dest = os.path.join(ROOT, "tests", "data", "import", "reference_shapes.json")
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", dest)


if __name__ == "__main__":
    main()
