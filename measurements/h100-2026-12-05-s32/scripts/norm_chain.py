"""Writes a chain of residual LayerNorms, the shape of a transformer's residual stream with every
sublayer taken out: s_0 = x, n_i = LayerNorm_i(s_{i-1}), s_i = s_{i-1} + n_i, output s_N. The
importer fuses each Add into the norm after it, so the chain runs N norms of residual sums:
a micro-benchmark for the norm kernels by row shape (`texstream infer chain.onnx --profile`),
with ONNX Runtime's output beside it.

    python norm_chain.py OUT_DIR ROWS WIDTH NORMS
writes OUT_DIR/chain.onnx, OUT_DIR/x.npy and OUT_DIR/ort_y.npy (ORT CPU fp32).
"""
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    out, rows, width, norms = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    nodes, inits = [], []
    prev = "x"
    for i in range(norms):
        inits.append(numpy_helper.from_array(rng.uniform(0.5, 1.5, width).astype(np.float32), f"scale{i}"))
        inits.append(numpy_helper.from_array(rng.uniform(-0.5, 0.5, width).astype(np.float32), f"bias{i}"))
        nodes.append(helper.make_node("LayerNormalization", [prev, f"scale{i}", f"bias{i}"], [f"n{i}"], axis=-1, epsilon=1e-5))
        nodes.append(helper.make_node("Add", [prev, f"n{i}"], [f"s{i}" if i + 1 < norms else "y"]))
        prev = f"s{i}"
    graph = helper.make_graph(
        nodes, "norm_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, rows, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, rows, width])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    # IR 9: the ONNX Runtime on the device reads at most 13; this onnx writes 14 by default.
    model.ir_version = 9
    onnx.checker.check_model(model)
    onnx.save(model, out / "chain.onnx")
    x = rng.uniform(-2, 2, (1, rows, width)).astype(np.float32)
    np.save(out / "x.npy", x)
    try:
        import onnxruntime as ort
        y = ort.InferenceSession(str(out / "chain.onnx"), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
        np.save(out / "ort_y.npy", y)
    except ImportError:
        pass


if __name__ == "__main__":
    main()
