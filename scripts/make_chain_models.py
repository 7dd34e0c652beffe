#!/usr/bin/env python3
"""Writes a weight-heavy three-model chain (an assistant-like encoder -> mid -> lm with random
weights) as ONNX files plus the demo input, for `workloads/assistant-chain.ron`.

usage: make_chain_models.py OUTDIR [--seq 256] [--dim 1024] [--layers 6,8,10] [--vocab 4096]

Each model maps x [1, seq, dim] through `layers` blocks of MatMul (He-initialised [dim, dim]) +
bias + Relu; the last one ends in a [dim, vocab] head and a Softmax. Unlike the OCR models, whose
activations outweigh their weights, these are dominated by weights: the case weight streaming is
for. Deterministic (seeded); the files are generated, never committed.
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def model(name, seq, dim, layers, vocab, rng):
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((dim, dim)) * np.sqrt(2.0 / dim)).astype(np.float32)
        b = (rng.standard_normal(dim) * 0.01).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        nodes += [
            helper.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            helper.make_node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            helper.make_node("Relu", [f"a{i}"], [f"h{i}"]),
        ]
        x = f"h{i}"
    out_dim = dim
    if vocab:
        w = (rng.standard_normal((dim, vocab)) / np.sqrt(dim)).astype(np.float32)
        inits.append(numpy_helper.from_array(w, "head"))
        nodes += [
            helper.make_node("MatMul", [x, "head"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["y"], axis=-1),
        ]
        out_dim = vocab
    else:
        nodes.append(helper.make_node("Identity", [x], ["y"]))
    g = helper.make_graph(
        nodes,
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, seq, dim])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, seq, out_dim])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(m)
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", default="6,8,10")
    ap.add_argument("--vocab", type=int, default=4096)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    rng = np.random.default_rng(2026)
    layers = [int(v) for v in a.layers.split(",")]
    names = ["enc", "mid", "lm"]
    for i, (name, n) in enumerate(zip(names, layers)):
        vocab = a.vocab if i == len(layers) - 1 else 0
        onnx.save(model(name, a.seq, a.dim, n, vocab, rng), os.path.join(a.outdir, f"{name}.onnx"))
    x = rng.standard_normal((1, a.seq, a.dim)).astype(np.float32)
    np.save(os.path.join(a.outdir, "input.npy"), x)
    print(f"wrote {', '.join(names)}.onnx and input.npy to {a.outdir} (seq {a.seq}, dim {a.dim}, layers {layers})")


if __name__ == "__main__":
    main()
