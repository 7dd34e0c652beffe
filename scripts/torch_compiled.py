"""torch.compile timing shared by the PyTorch baselines (whisper_encoder_baseline.py,
encoder_baseline.py, kernel_baseline.py, onnx_torch_baseline.py): inductor with
mode="reduce-overhead", which replays CUDA graphs, so the figure is PyTorch's best at batch 1
when it beats a plain CUDA graph. A failure is returned as an error string, not raised, so the
other figures of a run still stand."""
import time


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
