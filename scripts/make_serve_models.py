#!/usr/bin/env python3
"""Writes the tiny workload's models for tests/serve.rs into tests/data/serve/: `conv.onnx`
(x [1,3,8,8] -> Conv 8x3x3 stride 2 + Relu -> flatten -> MatMul [128,16] + bias -> y [1,16]),
`mlp.onnx` (x [1,16] -> MatMul [16,32] + bias -> Relu -> MatMul [32,10] + bias -> Softmax -> y
[1,10]), `mlp_b.onnx` (the same with other weights: the model file a reload swaps in), and the
inputs `pixels.npy` ([1,3,8,8]) and `feat.npy` ([1,16]). A few KB in all; seeded, committed.

Needs the venv's `onnx` and `numpy`.
"""
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "serve")


def model(name, nodes, inputs, outputs, inits):
    g = helper.make_graph(nodes, name, inputs, outputs, [numpy_helper.from_array(a, n) for n, a in inits])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    onnx.save(m, os.path.join(OUT, f"{name}.onnx"))


def conv(rng):
    inits = [
        ("w", rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.4),
        ("b", rng.standard_normal(8).astype(np.float32) * 0.1),
        ("shape", np.array([1, -1], np.int64)),
        ("fc", rng.standard_normal((128, 16)).astype(np.float32) * 0.2),
        ("fc_b", rng.standard_normal(16).astype(np.float32) * 0.1),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("Reshape", ["r", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "fc"], ["m"]),
        helper.make_node("Add", ["m", "fc_b"], ["y"]),
    ]
    model("conv", nodes,
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])], inits)


def mlp(rng, name):
    inits = [
        ("w1", rng.standard_normal((16, 32)).astype(np.float32) * 0.3),
        ("b1", rng.standard_normal(32).astype(np.float32) * 0.1),
        ("w2", rng.standard_normal((32, 10)).astype(np.float32) * 0.3),
        ("b2", rng.standard_normal(10).astype(np.float32) * 0.1),
    ]
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h"]),
        helper.make_node("Add", ["h", "b1"], ["hb"]),
        helper.make_node("Relu", ["hb"], ["r"]),
        helper.make_node("MatMul", ["r", "w2"], ["l"]),
        helper.make_node("Add", ["l", "b2"], ["lb"]),
        helper.make_node("Softmax", ["lb"], ["y"], axis=-1),
    ]
    model(name, nodes,
          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16])],
          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])], inits)


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(2026)
    conv(rng)
    mlp(rng, "mlp")
    mlp(rng, "mlp_b")
    np.save(os.path.join(OUT, "pixels.npy"), rng.uniform(-1, 1, (1, 3, 8, 8)).astype(np.float32))
    np.save(os.path.join(OUT, "feat.npy"), rng.standard_normal((1, 16)).astype(np.float32))


if __name__ == "__main__":
    main()
