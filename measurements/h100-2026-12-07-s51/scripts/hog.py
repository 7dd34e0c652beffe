# Session 51: a busy neighbour process for `contend.sh`, for argv[2] seconds (or until it gets
# SIGTERM), printing how much it did:
#   copy    copies 512 MiB of pinned host memory to the GPU over and over (PyTorch): the
#           host-to-device traffic a streamed run makes, without its process;
#   memory  copies 1 GiB of host memory into another: memory traffic without PCIe;
#   spin    spins without touching memory: a neighbour that shares only the core's host
#           (SMT siblings, the hypervisor).
import signal, sys, time


def stop(*_):
    raise KeyboardInterrupt


kind, seconds = sys.argv[1], float(sys.argv[2])
if kind == "copy":
    import torch

    src = torch.empty(512 << 20, dtype=torch.uint8).pin_memory()
    dst = torch.empty_like(src, device="cuda")

    def once():
        dst.copy_(src, non_blocking=True)

    unit, per = "GiB", 0.5
elif kind == "memory":
    import numpy as np

    src = np.ones(1 << 28, np.float32)
    dst = np.empty_like(src)

    def once():
        np.copyto(dst, src)

    unit, per = "GiB", 1.0
elif kind == "spin":

    def once():
        pass

    unit, per = "loops", 1.0
else:
    sys.exit(f"unknown kind {kind!r} (copy, memory, spin)")
# A background job of a script ignores SIGINT: the script stops it with SIGTERM (once set up).
signal.signal(signal.SIGTERM, stop)
t0, n = time.time(), 0
try:
    while time.time() - t0 < seconds:
        once()
        n += 1
        if kind == "copy" and n % 4 == 0:
            torch.cuda.synchronize()
except KeyboardInterrupt:
    pass
if kind == "copy":
    torch.cuda.synchronize()
t = time.time() - t0
print(f"{kind}: {n * per:.1f} {unit} in {t:.1f} s, {n * per / t:.1f} {unit}/s")
