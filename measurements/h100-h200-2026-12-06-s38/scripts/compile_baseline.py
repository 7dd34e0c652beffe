#!/usr/bin/env python3
"""Session 38, run 14: torch.compile (inductor, mode "reduce-overhead", which replays CUDA graphs) of
torchvision's ResNet-50 and MobileNetV3-Large in fp16 at batch 1 with seeded random weights, beside
the same model's plain CUDA-graph replay, each the median of 50 timed calls. Prints JSON."""
import json, sys, time
import torch, torchvision.models as tvm

def median_ms(fn, iters=50):
    ts = []
    for _ in range(iters):
        torch.cuda.synchronize(); t = time.perf_counter(); fn(); torch.cuda.synchronize()
        ts.append((time.perf_counter() - t) * 1e3)
    ts.sort(); return ts[len(ts) // 2]

out = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0), "models": {}}
for name in sys.argv[1:] or ["resnet50", "mobilenet_v3_large"]:
    torch.manual_seed(0)
    m = getattr(tvm, name)(weights=None).eval().cuda().half()
    x = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half)
    r = {}
    with torch.no_grad():
        t0 = time.perf_counter()
        c = torch.compile(m, mode="reduce-overhead")
        for _ in range(5):
            c(x)
        r["compile_s"] = time.perf_counter() - t0
        r["compiled_reduce_overhead_ms"] = median_ms(lambda: c(x))
        g = torch.cuda.CUDAGraph()
        s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                m(x)
        torch.cuda.current_stream().wait_stream(s)
        with torch.cuda.graph(g):
            m(x)
        r["cuda_graph_ms"] = median_ms(g.replay)
    out["models"][name] = r
    print(json.dumps(out), flush=True)
