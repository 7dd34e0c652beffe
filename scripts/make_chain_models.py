#!/usr/bin/env python3
"""Writes a weight-heavy three-model chain (an assistant-like encoder -> mid -> lm with random
weights) as ONNX files plus the demo input, for `workloads/assistant-chain.ron`.

usage: make_chain_models.py OUTDIR [--batch 4] [--seq 64] [--dim 1024] [--layers 8,10,12] [--vocab 2048]

Each model maps x [batch, seq, dim] through `layers` blocks of MatMul (He-initialised [dim, dim]) +
bias + Relu; the last one ends in a [dim, vocab] head and a Softmax. Unlike the OCR models, whose
activations outweigh their weights, these are dominated by weights: the case weight streaming is
for. A request is `batch` sequences: under texstream's rank rule the leading axis of a rank-3
tensor is the one packed four to a texel (C4), so batch 4 fills every texel, where a
[1, seq, dim] tensor would hold one value per texel. Deterministic (seeded); the files are generated, never committed.

Needs only numpy: the ONNX protobuf is written directly (a few message types), so the script also
runs where the `onnx` package is not installed; where it is, the result is checked with it.
"""
import argparse
import os

import numpy as np

FLOAT = 1  # TensorProto.FLOAT
ATTR_INT = 2  # AttributeProto.INT


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def field(num, wire, payload):
    key = varint(num << 3 | wire)
    if wire == 0:
        return key + varint(payload)
    return key + varint(len(payload)) + payload


def s(num, text):
    return field(num, 2, text.encode())


def tensor(name, a):
    dims = b"".join(field(1, 0, d) for d in a.shape)
    return dims + field(2, 0, FLOAT) + s(8, name) + field(9, 2, a.astype("<f4").tobytes())


def node(op, inputs, outputs, **ints):
    body = b"".join(s(1, i) for i in inputs) + b"".join(s(2, o) for o in outputs)
    body += s(3, f"{op}_{outputs[0]}") + s(4, op)
    for k, v in ints.items():
        body += field(5, 2, s(1, k) + field(3, 0, v & (2**64 - 1)) + field(20, 0, ATTR_INT))
    return body


def value_info(name, shape):
    dims = b"".join(field(1, 2, field(1, 0, d)) for d in shape)
    tensor_type = field(1, 0, FLOAT) + field(2, 2, dims)
    return s(1, name) + field(2, 2, field(1, 2, tensor_type))


def model(name, batch, seq, dim, layers, vocab, rng):
    nodes, inits = [], []
    x = "x"
    for i in range(layers):
        w = (rng.standard_normal((dim, dim)) * np.sqrt(2.0 / dim)).astype(np.float32)
        b = (rng.standard_normal(dim) * 0.01).astype(np.float32)
        inits += [tensor(f"w{i}", w), tensor(f"b{i}", b)]
        nodes += [
            node("MatMul", [x, f"w{i}"], [f"m{i}"]),
            node("Add", [f"m{i}", f"b{i}"], [f"a{i}"]),
            node("Relu", [f"a{i}"], [f"h{i}"]),
        ]
        x = f"h{i}"
    out_dim = dim
    if vocab:
        w = (rng.standard_normal((dim, vocab)) / np.sqrt(dim)).astype(np.float32)
        inits.append(tensor("head", w))
        nodes += [node("MatMul", [x, "head"], ["logits"]), node("Softmax", ["logits"], ["y"], axis=-1)]
        out_dim = vocab
    else:
        nodes.append(node("Identity", [x], ["y"]))
    graph = b"".join(field(1, 2, n) for n in nodes) + s(2, name)
    graph += b"".join(field(5, 2, t) for t in inits)
    graph += field(11, 2, value_info("x", [batch, seq, dim])) + field(12, 2, value_info("y", [batch, seq, out_dim]))
    opset = s(1, "") + field(2, 0, 17)
    return field(1, 0, 8) + s(2, "make_chain_models.py") + field(7, 2, graph) + field(8, 2, opset)


def save(data, path):
    with open(path, "wb") as f:
        f.write(data)
    try:
        import onnx
    except ImportError:
        return
    onnx.checker.check_model(onnx.load(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=64)
    ap.add_argument("--dim", type=int, default=1024)
    ap.add_argument("--layers", default="8,10,12")
    ap.add_argument("--vocab", type=int, default=2048)
    a = ap.parse_args()
    os.makedirs(a.outdir, exist_ok=True)
    rng = np.random.default_rng(2026)
    layers = [int(v) for v in a.layers.split(",")]
    names = ["enc", "mid", "lm"]
    for i, (name, n) in enumerate(zip(names, layers)):
        vocab = a.vocab if i == len(layers) - 1 else 0
        save(model(name, a.batch, a.seq, a.dim, n, vocab, rng), os.path.join(a.outdir, f"{name}.onnx"))
    x = rng.standard_normal((a.batch, a.seq, a.dim)).astype(np.float32)
    np.save(os.path.join(a.outdir, "input.npy"), x)
    print(f"wrote {', '.join(names)}.onnx and input.npy to {a.outdir} (batch {a.batch}, seq {a.seq}, dim {a.dim}, layers {layers})")


if __name__ == "__main__":
    main()
