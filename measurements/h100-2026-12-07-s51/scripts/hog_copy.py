# Session 51: copies 512 MiB of pinned host memory to the GPU over and over for argv[1]
# seconds (or until interrupted) and prints the rate: the host-to-device traffic a streamed
# run makes, without its process.
import signal, sys, time, torch
h = torch.empty(512 << 20, dtype=torch.uint8).pin_memory()
d = torch.empty_like(h, device="cuda")


def stop(*_):
    raise KeyboardInterrupt


# A background job of a script ignores SIGINT: the script stops it with SIGTERM.
signal.signal(signal.SIGTERM, stop)
t0, n = time.time(), 0
try:
    while time.time() - t0 < float(sys.argv[1]):
        d.copy_(h, non_blocking=True)
        n += 1
        if n % 4 == 0:
            torch.cuda.synchronize()
except KeyboardInterrupt:
    pass
torch.cuda.synchronize()
t = time.time() - t0
print(f"copied {n * 0.5:.1f} GiB in {t:.1f} s: {n * 0.5 / t:.1f} GiB/s")
