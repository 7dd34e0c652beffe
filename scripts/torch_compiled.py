"""CUDA-graph capture and torch.compile timing shared by the PyTorch baselines
(whisper_encoder_baseline.py, encoder_baseline.py, kernel_baseline.py, onnx_torch_baseline.py).
torch.compile runs inductor with mode="reduce-overhead", which replays CUDA graphs, so its figure
is PyTorch's best at batch 1 when it beats a plain CUDA graph. A compile failure is returned as
an error string, not raised, so the other figures of a run still stand."""
import time


def captured(torch, module, x):
    """(graph, output): module(x) warmed up on a side stream, as capture requires, then captured
    into a torch.cuda.CUDAGraph over a copy of x and replayed once."""
    static = x.clone()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            module(static)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = module(static)
    graph.replay()
    torch.cuda.synchronize()
    return graph, out


def add_compiled(report, torch, module, x, bench, iters):
    """Sets report["compiled"] and report["compile_s"] from compiled_ms, `bench(torch, fn, n)`
    timing the calls."""
    report["compiled"], report["compile_s"] = compiled_ms(
        torch, module, x, lambda fn, n: bench(torch, fn, n), iters)


def compiled_ms(torch, module, x, bench, iters):
    """(median-ms report from `bench`, compile seconds) or (None, error) for module(x) compiled."""
    try:
        start = time.perf_counter()
        compiled = torch.compile(module, mode="reduce-overhead")
        with torch.no_grad():
            for _ in range(5):  # the first calls compile, record and warm the graphs
                compiled(x)
            torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            return bench(lambda: compiled(x), iters), round(seconds, 1)
    except Exception as e:  # inductor failures are recorded beside the other figures
        return None, repr(e)[-300:]
