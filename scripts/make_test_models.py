#!/usr/bin/env python3
"""Writes the small ONNX fixtures used by tests/import_*.rs into tests/data/import/ and the
ONNX Runtime reference for tiny_conv (tests/data/import/tiny_conv_ref.json).

Needs `pip install onnx onnxruntime numpy`. The outputs are committed; rerun only to change them.
"""
import json
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "import")
rng = np.random.default_rng(7)


def save(model, name, **kw):
    onnx.checker.check_model(model) if not kw.get("nocheck") else None
    onnx.save(model, os.path.join(OUT, name))


def tiny_conv(opset=13):
    """Conv+bias -> BN -> Relu -> reshape via a Shape subgraph -> MatMul(const) -> Softmax."""
    rng = np.random.default_rng(11)
    w = rng.standard_normal((8, 3, 3, 3)).astype(np.float32) * 0.3
    b = rng.standard_normal(8).astype(np.float32) * 0.1
    scale = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    shift = rng.standard_normal(8).astype(np.float32) * 0.1
    mean = rng.standard_normal(8).astype(np.float32) * 0.1
    var = rng.uniform(0.5, 1.5, 8).astype(np.float32)
    fc = rng.standard_normal((8 * 4 * 4, 5)).astype(np.float32) * 0.1
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (w, "w"), (b, "b"), (scale, "bn_s"), (shift, "bn_b"), (mean, "bn_m"), (var, "bn_v"), (fc, "fc"),
        (np.array([0], np.int64), "zero"), (np.array([-1], np.int64), "minus1"),
    ]]
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], name="conv", pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("BatchNormalization", ["c", "bn_s", "bn_b", "bn_m", "bn_v"], ["bn"], name="bn", epsilon=1e-5),
        helper.make_node("Relu", ["bn"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["shp"], name="shape"),
        helper.make_node("Gather", ["shp", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Concat", ["n", "minus1"], ["newshape"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "newshape"], ["flat"], name="reshape"),
        helper.make_node("MatMul", ["flat", "fc"], ["logits"], name="fc"),
        helper.make_node("Softmax", ["logits"], ["y"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(
        nodes, "tiny_conv",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])],
        inits,
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    m.metadata_props.add(key="character", value="a\nb\nc")
    return m


def main():
    os.makedirs(OUT, exist_ok=True)
    m = tiny_conv()
    save(m, "tiny_conv.onnx")

    import onnxruntime as ort
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    sess = ort.InferenceSession(os.path.join(OUT, "tiny_conv.onnx"), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"x": x})[0]
    with open(os.path.join(OUT, "tiny_conv_ref.json"), "w") as f:
        json.dump({"x_shape": list(x.shape), "x": x.ravel().tolist(), "y_shape": list(y.shape), "y": y.ravel().tolist()}, f)

    # Same model with every initializer in an external data file.
    m = tiny_conv()
    # onnx appends to an existing external data file, so start from scratch.
    if os.path.exists(os.path.join(OUT, "external.bin")):
        os.remove(os.path.join(OUT, "external.bin"))
    onnx.save_model(m, os.path.join(OUT, "external.onnx"), save_as_external_data=True, all_tensors_to_one_file=True,
                    location="external.bin", size_threshold=0)

    # Unknown op.
    g = helper.make_graph([helper.make_node("FancyOp", ["x"], ["y"], name="my_fancy_node")], "unknown",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "unknown_op.onnx", nocheck=True)

    # Opset 9 (unsupported).
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "old",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)]), "opset9.onnx")

    # Initializer without data.
    t = TensorProto(name="bias_without_data", data_type=TensorProto.FLOAT, dims=[4])
    g = helper.make_graph([helper.make_node("Add", ["x", "bias_without_data"], ["y"], name="add_bias")], "nodata",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [t])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "missing_data.onnx", nocheck=True)

    # Unsupported dtype (uint16 initializer).
    t = numpy_helper.from_array(np.arange(4, dtype=np.uint16), "u16_const")
    g = helper.make_graph([helper.make_node("Add", ["x", "u16_const"], ["y"], name="add_u16")], "u16",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [t])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "bad_dtype.onnx", nocheck=True)

    # If on a run-time condition.
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4])])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4])])
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], name="sum", keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["cond"], name="gt"),
        helper.make_node("If", ["cond"], ["y"], name="dynamic_if", then_branch=then_g, else_branch=else_g),
    ]
    g = helper.make_graph(nodes, "dyn_if", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                          [numpy_helper.from_array(np.array(0, np.float32), "zero")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "dynamic_if.onnx")

    # If on a constant-foldable condition (a bound scalar input), plus Transpose->MatMul and views.
    then_g = helper.make_graph([helper.make_node("Relu", ["a"], ["t"], name="then_relu")], "then", [],
                               [helper.make_tensor_value_info("t", TensorProto.FLOAT, [1, 4, 6])])
    else_g = helper.make_graph([helper.make_node("Neg", ["a"], ["e"], name="else_neg")], "else", [],
                               [helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 4, 6])])
    nodes = [
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"], name="eq"),
        helper.make_node("If", ["is16k"], ["a_act"], name="static_if", then_branch=then_g, else_branch=else_g),
        helper.make_node("Transpose", ["a_act"], ["at"], name="tr", perm=[0, 2, 1]),
        helper.make_node("MatMul", ["at", "b"], ["mm"], name="mm"),
        helper.make_node("Unsqueeze", ["mm", "ax0"], ["y"], name="unsq"),
    ]
    g = helper.make_graph(
        nodes, "static_if",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, 4, 6]), helper.make_tensor_value_info("sr", TensorProto.INT64, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 6, 3])],
        [numpy_helper.from_array(np.array(16000, np.int64), "sr16k"),
         numpy_helper.from_array(rng.standard_normal((4, 3)).astype(np.float32), "b"),
         numpy_helper.from_array(np.array([0], np.int64), "ax0")])
    save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), "static_if.onnx")
    # Decomposed LayerNorm (opset 11 style), erf-GELU and x*clip(x+3,0,6)/6, with the ORT reference.
    r2 = np.random.default_rng(3)
    gamma = r2.uniform(0.5, 1.5, 6).astype(np.float32)
    beta = r2.standard_normal(6).astype(np.float32) * 0.1
    c = lambda v, n: numpy_helper.from_array(np.array(v, np.float32), n)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["m"], name="ln_mean", axes=[-1]),
        helper.make_node("Sub", ["x", "m"], ["d"], name="ln_sub"),
        helper.make_node("Pow", ["d", "two"], ["p"], name="ln_pow"),
        helper.make_node("ReduceMean", ["p"], ["v"], name="ln_var", axes=[-1]),
        helper.make_node("Add", ["v", "eps"], ["ve"], name="ln_add_eps"),
        helper.make_node("Sqrt", ["ve"], ["sd"], name="ln_sqrt"),
        helper.make_node("Div", ["d", "sd"], ["n"], name="ln_div"),
        helper.make_node("Mul", ["n", "gamma"], ["ng"], name="ln_gamma"),
        helper.make_node("Add", ["ng", "beta"], ["ln"], name="ln_beta"),
        helper.make_node("Div", ["ln", "sqrt2"], ["g0"], name="gelu_div"),
        helper.make_node("Erf", ["g0"], ["g1"], name="gelu_erf"),
        helper.make_node("Add", ["g1", "one"], ["g2"], name="gelu_add"),
        helper.make_node("Mul", ["ln", "g2"], ["g3"], name="gelu_mul"),
        helper.make_node("Mul", ["g3", "half"], ["gl"], name="gelu_half"),
        helper.make_node("Add", ["gl", "three"], ["h0"], name="hs_add"),
        helper.make_node("Clip", ["h0", "zero", "six"], ["h1"], name="hs_clip"),
        helper.make_node("Mul", ["gl", "h1"], ["h2"], name="hs_mul"),
        helper.make_node("Div", ["h2", "six"], ["y"], name="hs_div"),
    ]
    g = helper.make_graph(nodes, "patterns", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4, 6])],
                          [c(2.0, "two"), c(1e-5, "eps"), c(gamma, "gamma"), c(beta, "beta"), c(1.4142135381698608, "sqrt2"),
                           c(1.0, "one"), c(0.5, "half"), c(3.0, "three"), c(0.0, "zero"), c(6.0, "six")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])
    m.ir_version = 7
    save(m, "patterns.onnx")
    x = r2.standard_normal((2, 4, 6)).astype(np.float32)
    sess = ort.InferenceSession(os.path.join(OUT, "patterns.onnx"), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"x": x})[0]
    with open(os.path.join(OUT, "patterns_ref.json"), "w") as f:
        json.dump({"x": x.ravel().tolist(), "y": y.ravel().tolist()}, f)
    print("wrote fixtures to", OUT)


if __name__ == "__main__":
    main()
