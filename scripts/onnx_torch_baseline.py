#!/usr/bin/env python3
"""PyTorch fp16 batch-1 baseline of an ONNX model that torchvision or transformers do not build
(the OCR models): the file converted to a torch.nn.Module by the pure-Python onnx2torch wheel,
then timed as the other baselines are (scripts/encoder_baseline.py's bench): eager, a CUDA graph
replay, and with --compile torch.compile(mode="reduce-overhead").

    onnx_torch_baseline.py MODEL.onnx OUT.json --shape 1,3,384,768 [--input-npy X.npy]
                           [--save-input X.npy] [--iters N] [--compile]

The input is seeded uniform [-1, 1) of --shape unless --input-npy gives it; --save-input writes it
so that texstream runs the same values. The fp32 conversion is checked against ONNX Runtime CPU
on that input first (max |difference| over the output's range), so a wrong conversion shows
beside its times. Before converting, the file is normalized into the forms onnx2torch reads
(`normalize`): the input's shape fixed to --shape, Constant nodes made initializers, and
auto_pad SAME_UPPER/SAME_LOWER written out as explicit pads from the inferred shapes, then ONNX
Runtime's basic optimizations fold what the fixed shape makes constant. Needs PyTorch with CUDA, onnx, onnxruntime and onnx2torch (the device's
/opt/torch/.venv plus the carried wheel on PYTHONPATH).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from encoder_baseline import bench, rel  # noqa: E402  (the same timing and distance)
from torch_compiled import add_compiled, captured  # noqa: E402


def normalize(model, shape):
    """The model with its first input fixed to `shape`, Constant nodes as initializers and
    auto_pad written out as pads (onnx2torch reads neither of the latter two)."""
    import onnx
    from onnx import helper, numpy_helper, shape_inference

    g = model.graph
    dims = g.input[0].type.tensor_type.shape.dim
    for d, v in zip(dims, shape):
        d.ClearField("dim_param")
        d.dim_value = v
    kept = []
    for n in g.node:
        value = next((a for a in n.attribute if a.name == "value"), None)
        if n.op_type == "Constant" and value is not None and len(n.attribute) == 1:
            t = onnx.TensorProto()
            t.CopyFrom(value.t)
            t.name = n.output[0]
            g.initializer.append(t)
        else:
            kept.append(n)
    del g.node[:]
    g.node.extend(kept)
    inferred = shape_inference.infer_shapes(model)
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
              for v in list(inferred.graph.value_info) + list(inferred.graph.input)}
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        pad = next((a for a in n.attribute if a.name == "auto_pad"), None)
        if pad is None or pad.s not in (b"SAME_UPPER", b"SAME_LOWER"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in n.attribute}
        spatial = shapes[n.input[0]][2:]
        if n.op_type in ("Conv", "ConvTranspose"):
            kernel = attrs.get("kernel_shape") or list(inits[n.input[1]].shape[2:])
        else:
            kernel = attrs["kernel_shape"]
        strides = attrs.get("strides", [1] * len(spatial))
        dilations = attrs.get("dilations", [1] * len(spatial))
        begin, end = [], []
        for size, k, s, d in zip(spatial, kernel, strides, dilations):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small = total // 2
            upper = pad.s == b"SAME_UPPER"
            begin.append(small if upper else total - small)
            end.append(total - small if upper else small)
        rest = [a for a in n.attribute if a.name not in ("auto_pad", "pads")]
        del n.attribute[:]
        n.attribute.extend(rest + [helper.make_attribute("pads", begin + end)])
    return fold_constants(model)


def fold_constants(model):
    """The model after ONNX Runtime's basic graph optimizations (constant folding, the input's
    shape now fixed: Shape/Slice/Reshape chains become constants that a CUDA graph can hold),
    saved in standard ONNX ops."""
    import tempfile

    import onnx
    import onnxruntime as ort

    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "folded.onnx")
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        so.optimized_model_filepath = path
        ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        return onnx.load(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("out_json")
    ap.add_argument("--shape", required=True)
    ap.add_argument("--input-npy")
    ap.add_argument("--save-input")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    import onnx
    import onnxruntime as ort
    import torch
    from onnx2torch import convert

    shape = [int(v) for v in args.shape.split(",")]
    if args.input_npy:
        x = np.load(args.input_npy).astype(np.float32)
    else:
        x = np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)
    if args.save_input:
        np.save(args.save_input, x)
    sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
    name = sess.get_inputs()[0].name
    ref = sess.run(None, {name: x})[0]
    report = {"model": os.path.basename(args.model), "input": name, "shape": shape}
    normalized = normalize(onnx.load(args.model), shape)
    # The normalized file must compute what the original does before it stands for it.
    check = ort.InferenceSession(normalized.SerializeToString(), providers=["CPUExecutionProvider"])
    report["normalized_vs_ort"] = rel(check.run(None, {name: x})[0], ref)
    model = convert(normalized).eval()
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    m32 = model.to(dev)
    with torch.no_grad():
        y32 = m32(torch.from_numpy(x).to(dev))
        y32 = (y32[0] if isinstance(y32, (list, tuple)) else y32).float().cpu().numpy()
    report["torch_fp32_vs_ort"] = rel(y32, ref)
    m16 = m32.half()
    xin = torch.from_numpy(x).to(dev).half()
    with torch.no_grad():
        report["eager"] = bench(torch, lambda: m16(xin), args.iters)
        try:
            g, out = captured(torch, m16, xin)
            out = out[0] if isinstance(out, (list, tuple)) else out
            report["cuda_graph"] = bench(torch, g.replay, args.iters)
        except Exception as e:  # a converted op that syncs with the host cannot be captured
            report["cuda_graph_error"] = repr(e)[-300:]
            torch.cuda.synchronize()
            out = m16(xin)
            out = out[0] if isinstance(out, (list, tuple)) else out
        report["torch_fp16_vs_ort"] = rel(out.float().cpu().numpy(), ref)
    if args.compile:
        add_compiled(report, torch, m16, xin, bench, args.iters)
    report["gpu"] = torch.cuda.get_device_name(0)
    report["torch"] = torch.__version__
    with open(args.out_json, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
