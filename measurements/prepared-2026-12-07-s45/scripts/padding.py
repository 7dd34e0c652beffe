#!/usr/bin/env python3
"""Session 44: splits a run's device bytes by model and by image from its debug log.

Reads the log of `RUST_LOG=texstream_vk::image=debug,texstream::engine::session=info texstream
run ...` (one line per image or buffer with the bytes the driver asked for and the bytes of its
texels; one line per model after it is placed). Prints, per model, what its own allocations and
its arena images asked for against their texels, and the images with the most padding."""
import re
import sys
from collections import defaultdict

img = re.compile(r"image `(.*)` (\d+)x(\d+)x(\d+) (\w+): (\d+) B for (\d+) B of texels, alignment (\d+), (own allocation|shared)")
buf = re.compile(r"buffer `(.*)` (\d+) B (\w+): (\d+) B, alignment (\d+)")
placed = re.compile(r"model `(.*)`: (\d+) device bytes outside the activation arena")
arena = re.compile(r"model `(.*)`: activation arena (\d+) bytes")

pending = []  # images and buffers since the last model line
rows = []  # (phase, kind, name, extent, asked, texels)
phase = "before the models"
for line in open(sys.argv[1], errors="replace"):
    if m := img.search(line):
        n, w, h, l, fmt, asked, tex, al, where = m.groups()
        pending.append(("own image" if where == "own allocation" else "arena image", n, f"{w}x{h}x{l}", int(asked), int(tex)))
    elif m := buf.search(line):
        n, size, loc, asked, al = m.groups()
        pending.append((f"buffer {loc}", n, size, int(asked), int(size)))
    elif m := placed.search(line):
        rows += [(f"placing `{m.group(1)}`", *p) for p in pending]
        pending = []
        print(line.strip().split("] ")[-1])
    elif m := arena.search(line):
        print(line.strip().split("] ")[-1])
        phase = "after placing (arena, warm-up, staging)"
rows += [(phase, *p) for p in pending]

tot = defaultdict(lambda: [0, 0, 0])
for ph, kind, n, ext, asked, tex in rows:
    t = tot[(ph, kind)]
    t[0] += 1
    t[1] += asked
    t[2] += tex
print(f"\n{'phase':<48} {'kind':<20} {'count':>6} {'asked MB':>10} {'texels MB':>10} {'ratio':>6}")
for (ph, kind), (c, a, t) in tot.items():
    print(f"{ph:<48} {kind:<20} {c:>6} {a/1e6:>10.2f} {t/1e6:>10.2f} {a/max(t,1):>6.2f}")

print("\nimages with the most padding (asked - texels):")
img_rows = sorted((r for r in rows if "image" in r[1]), key=lambda r: r[4] - r[5], reverse=True)
for ph, kind, n, ext, asked, tex in img_rows[:40]:
    print(f"{asked - tex:>10} {asked:>10} {tex:>10} {ext:>14} {kind:<12} {ph:<24} {n[:70]}")

# Padding by extent shape class: what a fold rule would have to fix.
by_h = defaultdict(lambda: [0, 0, 0])
for ph, kind, n, ext, asked, tex in img_rows:
    w, h, l = map(int, ext.split("x"))
    key = f"h={h}" if h < 8 else ("h<64" if h < 64 else "h>=64")
    b = by_h[(kind, key)]
    b[0] += 1; b[1] += asked; b[2] += tex
print("\nby height:")
for (kind, key), (c, a, t) in sorted(by_h.items()):
    print(f"{kind:<12} {key:<6} {c:>6} {a/1e6:>10.2f} {t/1e6:>10.2f} {a/max(t,1):>6.2f}")
