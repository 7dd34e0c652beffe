#!/usr/bin/env python3
"""One-MatMul models for session 38's sweep: x [1, M, K] @ W [K, N] + b (a linear layer, seeded
random weights), for (M, N) in (1500, 384) (Whisper-tiny's projections) and (128, 768)
(BERT-base's), K in 64..1536. Writes OUT/mm_M_N_K.onnx and OUT/x_M_K.npy."""
import os, sys
import numpy as np
import onnx
from onnx import helper, numpy_helper, TensorProto

out = sys.argv[1]
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(0)
for m, n in ((1500, 384), (128, 768)):
    for k in (64, 128, 256, 384, 768, 1536):
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        b = rng.standard_normal(n).astype(np.float32) * 0.1
        g = helper.make_graph(
            [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["y"])],
            "mm",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, m, k])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, m, n])],
            [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")],
        )
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
        onnx.save(model, f"{out}/mm_{m}_{n}_{k}.onnx")
        np.save(f"{out}/x_{m}_{k}.npy", rng.standard_normal((1, m, k)).astype(np.float32))
