#!/usr/bin/env python3
"""How much fp16 weight rounding alone moves a model's output, in ONNX Runtime (fp32 compute).

Rounds the model's float initializers (more than one value) to fp16 and back, runs ONNX Runtime
CPU and prints the max abs error relative to the fp32 output's range: all rounded, and with the
tensors of at most N values kept exact (what `texstream compile --compensate-max-values N` stores
compensated). Independent of texstream: it shows what fp16 weight storage costs a model.

    .venv/bin/python scripts/fp16_weight_sensitivity.py models/ocr/det.onnx \
        target/real_models/det/in_0.npy [--keep 256 1024 4096]
"""
import argparse

import numpy as np
import onnx
import onnxruntime as ort
from onnx import numpy_helper


def run(model, feeds):
    s = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)[0]


def rounded(model, keep_at_most):
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for init in m.graph.initializer:
        a = numpy_helper.to_array(init)
        if a.dtype == np.float32 and keep_at_most < a.size:
            init.CopyFrom(numpy_helper.from_array(a.astype(np.float16).astype(np.float32), init.name))
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("input", help=".npy for the model's first input")
    ap.add_argument("--keep", type=int, nargs="*", default=[256, 1024, 4096])
    a = ap.parse_args()
    model = onnx.load(a.model)
    feeds = {model.graph.input[0].name: np.load(a.input)}
    want = run(model, feeds)
    span = float(want.max() - want.min()) or 1.0
    sizes = [numpy_helper.to_array(i).size for i in model.graph.initializer
             if numpy_helper.to_array(i).dtype == np.float32 and numpy_helper.to_array(i).size > 1]
    total = sum(sizes)
    print(f"{a.model}: {len(sizes)} float tensors, {total} values")
    for keep in [1] + a.keep:
        err = np.abs(run(rounded(model, keep), feeds) - want).max() / span
        kept = [s for s in sizes if s <= keep]
        label = "all rounded" if keep == 1 else f"<= {keep} values exact"
        print(f"  {label:22s} max err / range {err:.3e}  ({len(kept)} tensors, "
              f"{sum(kept) / total:.2%} of values exact)")


if __name__ == "__main__":
    main()
