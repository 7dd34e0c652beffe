#!/usr/bin/env python3
"""PyTorch fp16 CUDA baseline for the BERT-style encoders that scripts/make_scale_models.py
writes (enc.onnx: 12 layers, 768 wide, 128 tokens, BERT-base's encoder stack), on the same
weights, beside texstream's `infer` on the same file.

    encoder_baseline.py MODEL.onnx FEATURES.npy OUT.json [--iters 30] [--ort-output Y.npy]
                        [--texstream-output Y.npy]

The ONNX initializers ("encoder.layer.{i}.attention.query.weight" stored [in, out] for MatMul,
its ".bias", "...norm.gamma/.beta", "encoder.layer.{i}.intermediate/.output") are loaded into a
plain PyTorch module of the same structure: post-LayerNorm blocks, scaled dot-product attention
(F.scaled_dot_product_attention, no mask) and exact (erf) GELU. Correctness: its fp32 output
against ONNX Runtime's (--ort-output, or computed here), and texstream's output
(--texstream-output, from `texstream infer`) against the same. Timing, fp16, batch 1: eager and
one forward captured in a torch.cuda.CUDAGraph and replayed; median and min of --iters runs of
wall time around torch.cuda.synchronize(), after warm-up.
"""
import argparse
import json
import re
import statistics
import time

import numpy as np
import onnx
from onnx import numpy_helper


def load_weights(path):
    model = onnx.load(path, load_external_data=True)
    return {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}


def layer_count(w):
    return 1 + max(int(m.group(1)) for k in w for m in [re.match(r"encoder\.layer\.(\d+)\.", k)]
                   if m)


def build(torch, w):
    nn, F = torch.nn, torch.nn.functional
    L = layer_count(w)
    H = w["encoder.layer.0.attention.query.weight"].shape[0]
    # const_scale = 1/sqrt(head_dim), stored with shape [1].
    head_dim = int(round(1.0 / float(np.ravel(w["const_scale"])[0]) ** 2))
    heads = H // head_dim

    class Block(nn.Module):
        def __init__(self, i):
            super().__init__()
            p = f"encoder.layer.{i}"
            self.lin = nn.ParameterDict()
            for name in ("attention.query", "attention.key", "attention.value", "attention.output",
                         "intermediate", "output"):
                key = name.replace(".", "_")
                self.lin[key + "_w"] = nn.Parameter(torch.from_numpy(w[f"{p}.{name}.weight"].copy()))
                self.lin[key + "_b"] = nn.Parameter(torch.from_numpy(w[f"{p}.{name}.bias"].copy()))
            self.ln1 = nn.LayerNorm(H, eps=1e-12)
            self.ln2 = nn.LayerNorm(H, eps=1e-12)
            for ln, name in ((self.ln1, "attention.norm"), (self.ln2, "output.norm")):
                ln.weight.data = torch.from_numpy(w[f"{p}.{name}.gamma"].copy())
                ln.bias.data = torch.from_numpy(w[f"{p}.{name}.beta"].copy())

        def dense(self, x, key):
            return x @ self.lin[key + "_w"] + self.lin[key + "_b"]

        def forward(self, x):
            s = x.shape[1]
            split = lambda t: t.view(1, s, heads, H // heads).transpose(1, 2)  # noqa: E731
            q = split(self.dense(x, "attention_query"))
            k = split(self.dense(x, "attention_key"))
            v = split(self.dense(x, "attention_value"))
            a = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(1, s, H)
            x = self.ln1(self.dense(a, "attention_output") + x)
            m = self.dense(F.gelu(self.dense(x, "intermediate")), "output")
            return self.ln2(m + x)

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList(Block(i) for i in range(L))

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return x

    return Encoder().eval(), dict(layers=L, hidden=H, heads=heads)


def bench(torch, fn, iters, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        t = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t) * 1e3)
    return {"ms_median": round(statistics.median(ms), 4), "ms_min": round(min(ms), 4),
            "runs": iters}


def rel(a, b):
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.abs(a - b).max() / (b.max() - b.min()))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("features")
    ap.add_argument("out_json")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--ort-output")
    ap.add_argument("--texstream-output")
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile(mode=\"reduce-overhead\")")
    args = ap.parse_args()
    import torch

    x = np.load(args.features)
    w = load_weights(args.model)
    model, cfg = build(torch, w)
    report = {"model": args.model, "config": cfg,
              "parameters": int(sum(p.numel() for p in model.parameters()))}
    if args.ort_output:
        ref = np.load(args.ort_output)
    else:
        import onnxruntime as ort
        sess = ort.InferenceSession(args.model, providers=["CPUExecutionProvider"])
        ref = sess.run(["y"], {"x": x})[0]
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = False
    m32 = model.to(dev)
    with torch.no_grad():
        y32 = m32(torch.from_numpy(x).to(dev)).cpu().numpy()
    report["torch_fp32_vs_ort"] = rel(y32, ref)
    m16 = m32.half()
    xin = torch.from_numpy(x).to(dev).half()
    with torch.no_grad():
        y16 = m16(xin).float().cpu().numpy()
        report["torch_fp16_vs_ort"] = rel(y16, ref)
        report["eager"] = bench(torch, lambda: m16(xin), args.iters)
        static = xin.clone()
        for _ in range(3):  # warm up on a side stream, as CUDA graph capture requires
            m16(static)
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = m16(static)
        g.replay()
        torch.cuda.synchronize()
        report["cuda_graph_vs_eager"] = rel(out.float().cpu().numpy(), y16)
        report["cuda_graph"] = bench(torch, g.replay, args.iters)
    if args.compile:
        from torch_compiled import add_compiled
        add_compiled(report, torch, m16, xin, bench, args.iters)
    if args.texstream_output:
        report["texstream_vs_ort"] = rel(np.load(args.texstream_output), ref)
    report["gpu"] = torch.cuda.get_device_name(0)
    report["torch"] = torch.__version__
    with open(args.out_json, "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
