#!/usr/bin/env python3
"""PyTorch fp16 batch-1 baselines for the kernel table (issue 14), on the same models texstream
runs: torchvision classifiers with seeded random weights, exported to ONNX from the very module
that is timed, so both engines run the same weights and shapes.

    kernel_baseline.py OUTDIR [--models resnet18,resnet50,mobilenet_v3_large,densenet121]
                       [--iters N] [--size 224]

Needs PyTorch with CUDA and torchvision (the device's /opt/torch/.venv). Writes per model
OUTDIR/NAME.onnx (TorchScript exporter, opset 17) and OUTDIR/NAME.input.npy, and
OUTDIR/torch.json: per model the median ms of eager fp16 and of a CUDA graph replay of the fp16
forward (torch.cuda.CUDAGraph), each over N timed iterations after warm-up, with a device sync
around each iteration; with --compile also torch.compile(mode="reduce-overhead")
(scripts/torch_compiled.py).
"""
import argparse
import json
import os
import time

import numpy as np
import torch
import torchvision.models as tvm
from torch_compiled import captured


def median_ms(fn, iters):
    times = []
    for _ in range(iters):
        torch.cuda.synchronize()
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t) * 1e3)
    return sorted(times)[len(times) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v3_large,densenet121")
    ap.add_argument("--iters", type=int, default=50)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile(mode=\"reduce-overhead\")")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    result = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "models": {}}
    for name in a.models.split(","):
        torch.manual_seed(0)
        model = getattr(tvm, name)(weights=None).eval()
        x = torch.from_numpy(
            np.random.default_rng(0).uniform(-1, 1, (1, 3, a.size, a.size)).astype(np.float32))
        np.save(os.path.join(a.out, f"{name}.input.npy"), x.numpy())
        torch.onnx.export(model, (x,), os.path.join(a.out, f"{name}.onnx"), input_names=["input"],
                          output_names=["logits"], opset_version=17, dynamo=False)
        row = {}
        m = model.half().cuda()
        xg = x.half().cuda()
        with torch.inference_mode():
            for _ in range(10):
                m(xg)
            row["eager_fp16_ms"] = median_ms(lambda: m(xg), a.iters)
            try:
                g, _ = captured(torch, m, xg)
                for _ in range(10):
                    g.replay()
                row["cuda_graph_fp16_ms"] = median_ms(g.replay, a.iters)
            except Exception as e:  # recorded, the other numbers still stand
                row["cuda_graph_error"] = repr(e)[-300:]
        if a.compile:
            from torch_compiled import compiled_ms
            row["compiled_fp16_ms"], row["compile_s"] = compiled_ms(
                torch, m, xg, median_ms, a.iters)
        result["models"][name] = row
        print(name, row, flush=True)
        with open(os.path.join(a.out, "torch.json"), "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
