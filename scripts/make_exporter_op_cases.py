#!/usr/bin/env python3
"""Conformance cases for the ops and forms the exporter sweep (scripts/export_sweep.py) needed:
IsNaN (the exporters' guard after a masked softmax), GatherND with constant indices (dynamo's
Hugging Face padding mask) and GlobalAveragePool of rank 3 and 5 (TorchScript's
AdaptiveAvgPool1d in Hugging Face Swin).

Each case is a folder like a sweep entry: model.onnx, inputs/<name>.npy and ONNX Runtime's
outputs in ort/<name>.npy. tests/exporter_sweep.rs runs them on texstream.

Usage: make_exporter_op_cases.py [OUT]   (default tests/data/exporter_sweep/ops)
"""
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

OPSET = 18


def save_case(out, name, graph, inputs):
    d = os.path.join(out, name)
    os.makedirs(os.path.join(d, "inputs"), exist_ok=True)
    os.makedirs(os.path.join(d, "ort"), exist_ok=True)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    path = os.path.join(d, "model.onnx")
    onnx.save(model, path)
    for k, v in inputs.items():
        np.save(os.path.join(d, "inputs", k + ".npy"), v)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for o, v in zip(sess.get_outputs(), sess.run(None, inputs)):
        np.save(os.path.join(d, "ort", o.name + ".npy"), v)
    print(f"{name}: {[o.name for o in sess.get_outputs()]}")


def f32(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def is_nan(out, rng):
    x = rng.standard_normal((2, 3, 8)).astype(np.float32)
    x.reshape(-1)[::5] = np.nan
    nodes = [
        helper.make_node("IsNaN", ["x"], ["nan"]),
        helper.make_node("Constant", [], ["zero"], value=numpy_helper.from_array(np.zeros((), np.float32))),
        helper.make_node("Where", ["nan", "zero", "x"], ["guarded"]),
        helper.make_node("Cast", ["nan"], ["mask"], to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(nodes, "is_nan", [f32("x", [2, 3, 8])], [f32("guarded", [2, 3, 8]), f32("mask", [2, 3, 8])])
    save_case(out, "is_nan", g, {"x": x})


def gather_nd(out, rng):
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    pairs = numpy_helper.from_array(np.array([[0, 1], [1, -1]], np.int64), "pairs")
    triples = numpy_helper.from_array(np.array([[[1, 2, 3]], [[0, 0, -4]]], np.int64), "triples")
    # Hugging Face's padding mask through dynamo: mask[batch_idx, kv_idx] as a [1, 1, 1, 16, 2] table.
    kv = np.stack([np.zeros(16, np.int64), np.arange(16)], axis=-1).reshape(1, 1, 1, 16, 2)
    table = numpy_helper.from_array(kv, "mask_index")
    mask = np.ones((1, 16), np.int64)
    mask[0, -4:] = 0
    nodes = [
        helper.make_node("GatherND", ["x", "pairs"], ["rows"]),
        helper.make_node("GatherND", ["x", "triples"], ["points"]),
        helper.make_node("Cast", ["attention_mask"], ["mask_b"], to=TensorProto.BOOL),
        helper.make_node("GatherND", ["mask_b", "mask_index"], ["mask_g"]),
        helper.make_node("Cast", ["mask_g"], ["mask_f"], to=TensorProto.FLOAT),
    ]
    g = helper.make_graph(
        nodes,
        "gather_nd",
        [f32("x", [2, 3, 4]), helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, 16])],
        [f32("rows", [2, 4]), f32("points", [2, 1]), f32("mask_f", [1, 1, 1, 16])],
        initializer=[pairs, triples, table],
    )
    save_case(out, "gather_nd", g, {"x": x, "attention_mask": mask})


def global_average_pool(out, rng):
    a = rng.standard_normal((1, 6, 10)).astype(np.float32)
    b = rng.standard_normal((1, 3, 2, 3, 4)).astype(np.float32)
    nodes = [
        helper.make_node("GlobalAveragePool", ["a"], ["pooled_1d"]),
        helper.make_node("GlobalAveragePool", ["b"], ["pooled_3d"]),
    ]
    g = helper.make_graph(
        nodes,
        "global_average_pool",
        [f32("a", [1, 6, 10]), f32("b", [1, 3, 2, 3, 4])],
        [f32("pooled_1d", [1, 6, 1]), f32("pooled_3d", [1, 3, 1, 1, 1])],
    )
    save_case(out, "global_average_pool", g, {"a": a, "b": b})


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "tests/data/exporter_sweep/ops")
    rng = np.random.default_rng(12)
    is_nan(out, rng)
    gather_nd(out, rng)
    global_average_pool(out, rng)


if __name__ == "__main__":
    main()
