#!/usr/bin/env python3
"""Runs the default models (models/, from scripts/fetch_models.py) with ONNX Runtime at the input
shapes the tests use and records the shape of every graph output (reference_shapes.json) and of
every main-graph node output (reference_all_shapes.json) in tests/data/import/. The importer's
inferred shapes are checked against these. Needs onnx, onnxruntime and numpy.
"""
import json
import os

import numpy as np
import onnx
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
    every = {}
    rng = np.random.default_rng(0)
    for path, shapes, binds in CASES:
        sess = ort.InferenceSession(os.path.join(ROOT, path), providers=["CPUExecutionProvider"])
        feed = {k: rng.standard_normal(v).astype(np.float32) for k, v in shapes.items()}
        feed.update({k: np.array(v, dtype=np.int64) for k, v in binds.items()})
        names = [o.name for o in sess.get_outputs()]
        res = sess.run(None, feed)
        out[path] = {n: list(r.shape) for n, r in zip(names, res)}
        print(path, out[path])
        # Expose every main-graph node output as a graph output and record its shape.
        m = onnx.load(os.path.join(ROOT, path))
        have = {o.name for o in m.graph.output}
        for n in m.graph.node:
            for o in n.output:
                if o and o not in have:
                    m.graph.output.append(onnx.ValueInfoProto(name=o))
                    have.add(o)
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        names = [o.name for o in sess.get_outputs()]
        res = sess.run(None, feed)
        every[path] = {n: list(np.shape(r)) for n, r in zip(names, res)}
    dest = os.path.join(ROOT, "tests", "data", "import", "reference_shapes.json")
    with open(dest, "w") as f:
        json.dump(out, f, indent=1)
    print("wrote", dest)
    with open(os.path.join(ROOT, "tests", "data", "import", "reference_all_shapes.json"), "w") as f:
        json.dump(every, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
