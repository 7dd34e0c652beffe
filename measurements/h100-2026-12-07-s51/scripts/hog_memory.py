# Session 51: copies 1 GiB of host memory into another over and over for argv[1] seconds (or
# until interrupted) and prints the rate: memory traffic without PCIe.
import signal, sys, time
import numpy as np
a = np.ones(1 << 28, np.float32)
b = np.empty_like(a)


def stop(*_):
    raise KeyboardInterrupt


# A background job of a script ignores SIGINT: the script stops it with SIGTERM.
signal.signal(signal.SIGTERM, stop)
t0, n = time.time(), 0
try:
    while time.time() - t0 < float(sys.argv[1]):
        np.copyto(b, a)
        n += 1
except KeyboardInterrupt:
    pass
t = time.time() - t0
print(f"copied {n:.0f} GiB in {t:.1f} s: {n / t:.1f} GiB/s")
