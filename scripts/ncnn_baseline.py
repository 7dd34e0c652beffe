#!/usr/bin/env python3
"""ncnn-Vulkan peer for the kernel table (issue 14): the same ONNX files texstream runs, converted
by the pnnx wheel's bundled binary and timed with the ncnn wheel on a Vulkan device.

    ncnn_baseline.py convert OUTDIR NAME=MODEL.onnx:1x3x224x224 [...]
    ncnn_baseline.py run OUTDIR [--iters N] [--device I] [--cpu] [--fp32] [--reference]
                     [--only NAME]

`convert` needs only the pnnx wheel (no PyTorch): it writes OUTDIR/NAME.ncnn.{param,bin} and a
seeded input OUTDIR/NAME.input.npy (uniform in [-1, 1), the shape given). `run` needs the ncnn
wheel: per model it loads the converted files on Vulkan device I (fp16 storage and arithmetic, as
ncnn picks by default on a GPU that has them), runs the input once to warm up, then N timed runs
(a fresh extractor each, the usual ncnn pattern: input upload, every layer, output download), and
prints one line per model with the median and minimum wall time in ms. --fp32 turns ncnn's fp16
storage and arithmetic off. With --reference it also
runs the ONNX file with ONNX Runtime (CPU) and prints the largest difference over the output's
range, so a wrong conversion shows instead of being timed (where the ONNX file it was converted
from is still at its path). --only runs one model (one process per model lets a sampler of device
memory attribute its peak). Writes OUTDIR/ncnn.json.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np


def convert(out, specs):
    os.makedirs(out, exist_ok=True)
    pnnx = shutil.which("pnnx") or os.path.join(os.path.dirname(sys.executable), "pnnx")
    for spec in specs:
        name, rest = spec.split("=", 1)
        model, shape = rest.rsplit(":", 1)
        dims = [int(d) for d in shape.split("x")]
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, name + ".onnx")
            shutil.copy(model, src)
            log = subprocess.run(
                [pnnx, src, "inputshape=[%s]" % ",".join(map(str, dims))],
                cwd=tmp, capture_output=True, text=True)
            if log.returncode != 0:
                sys.exit(f"pnnx failed on {model}:\n{log.stdout[-2000:]}{log.stderr[-2000:]}")
            for ext in ("param", "bin"):
                shutil.copy(os.path.join(tmp, f"{name}.ncnn.{ext}"), os.path.join(out, f"{name}.ncnn.{ext}"))
        rng = np.random.default_rng(0)
        np.save(os.path.join(out, name + ".input.npy"), rng.uniform(-1, 1, dims).astype(np.float32))
        with open(os.path.join(out, name + ".source"), "w") as f:
            f.write(os.path.abspath(model) + "\n")
        print(f"{name}: {model} {dims} -> {out}/{name}.ncnn.param")


def run(out, iters, device, cpu, fp32, reference, only):
    import ncnn

    results = {}
    names = sorted(f[: -len(".ncnn.param")] for f in os.listdir(out) if f.endswith(".ncnn.param"))
    if only:
        names = [n for n in names if n == only]
    for name in names:
        x = np.load(os.path.join(out, name + ".input.npy"))
        net = ncnn.Net()
        net.opt.use_vulkan_compute = not cpu
        if fp32:
            for opt in ("use_fp16_packed", "use_fp16_storage", "use_fp16_arithmetic"):
                setattr(net.opt, opt, False)
        if not cpu:
            net.set_vulkan_device(device)
        net.load_param(os.path.join(out, name + ".ncnn.param"))
        net.load_model(os.path.join(out, name + ".ncnn.bin"))
        inp = ncnn.Mat(np.ascontiguousarray(x[0])).clone()

        def once():
            with net.create_extractor() as ex:
                ex.input("in0", inp)
                _, y = ex.extract("out0")
                return np.array(y)

        y = once()
        times = []
        for _ in range(iters):
            t = time.perf_counter()
            once()
            times.append((time.perf_counter() - t) * 1e3)
        times.sort()
        row = {"median_ms": times[len(times) // 2], "min_ms": times[0], "iters": iters,
               "backend": ("cpu" if cpu else f"vulkan:{device}") + (" fp32" if fp32 else "")}
        src = open(os.path.join(out, name + ".source")).read().strip()
        if reference and os.path.exists(src):
            import onnxruntime as ort

            sess = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
            want = sess.run(None, {sess.get_inputs()[0].name: x})[0].astype(np.float64)
            got = y.astype(np.float64).reshape(-1)
            want = want.reshape(-1)
            if got.size != want.size:
                row["error"] = f"output has {got.size} values, ONNX Runtime {want.size}"
            else:
                span = float(want.max() - want.min()) or 1.0
                row["max_diff_over_range"] = float(np.abs(got - want).max()) / span
        results[name] = row
        extra = "".join(f" {k} {v:.3g}" if isinstance(v, float) else f" {k} {v}"
                        for k, v in row.items() if k in ("max_diff_over_range", "error"))
        print(f"ncnn {name}: median {row['median_ms']:.3f} ms, min {row['min_ms']:.3f} ms "
              f"over {iters} runs ({row['backend']}){extra}", flush=True)
        net.clear()
    tag = (".fp32" if fp32 else "") + (f".{only}" if only else "")
    with open(os.path.join(out, f"ncnn{tag}.json"), "w") as f:
        json.dump(results, f, indent=1)


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("convert")
    c.add_argument("out")
    c.add_argument("models", nargs="+")
    r = sub.add_parser("run")
    r.add_argument("out")
    r.add_argument("--iters", type=int, default=30)
    r.add_argument("--device", type=int, default=0)
    r.add_argument("--cpu", action="store_true")
    r.add_argument("--fp32", action="store_true")
    r.add_argument("--reference", action="store_true")
    r.add_argument("--only")
    a = ap.parse_args()
    if a.cmd == "convert":
        convert(a.out, a.models)
    else:
        run(a.out, a.iters, a.device, a.cpu, a.fp32, a.reference, a.only)


if __name__ == "__main__":
    main()
