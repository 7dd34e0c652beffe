# Session 51: spins on one core for argv[1] seconds (or until stopped) without touching
# memory: a busy neighbour that shares nothing but the core's host (SMT siblings, the
# hypervisor).
import signal, sys, time


def stop(*_):
    raise KeyboardInterrupt


signal.signal(signal.SIGTERM, stop)
t0, n = time.time(), 0
try:
    while time.time() - t0 < float(sys.argv[1]):
        n += 1
except KeyboardInterrupt:
    pass
print(f"spun {n} times in {time.time() - t0:.1f} s")
