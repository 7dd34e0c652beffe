"""Reads a `texstream run` log with `RUST_LOG=texstream::stream_journal=trace` and tells, for
each streamed session in it (the events' clock restarts with each), how the copy queue and the
compute queue shared the time: both busy, only copies, only compute, neither; and the gaps the
copy queue left. Usage: python3 journal.py LOG [SESSION_INDEX]."""
import re
import sys

LOAD = re.compile(r"Load \{ model: (\d+), page: (\d+), slot: (\d+), start_s: ([-\d.e]+), end_s: ([-\d.e]+) \}")
COMP = re.compile(r"Compute \{ model: (?:Some\((\d+)\)|None), start_s: ([-\d.e]+), end_s: ([-\d.e]+), stall_s: ([-\d.e]+), steps: (\d+) \}")


def union(spans):
    spans = sorted(spans)
    merged = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return merged


def length(spans):
    return sum(b - a for a, b in spans)


def intersect(x, y):
    i = j = 0
    out = []
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if a < b:
            out.append([a, b])
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def report(s, name):
    copies = union({(l[3], l[4]) for l in s["loads"]})
    comp = union([(b[1], b[2]) for b in s["batches"]])
    if not comp:
        return
    t0 = min(comp[0][0], copies[0][0] if copies else comp[0][0])
    t1 = max(comp[-1][1], copies[-1][1] if copies else comp[-1][1])
    both = length(intersect(copies, comp))
    cb, kb = length(copies), length(comp)
    span = t1 - t0
    neither = span - (cb + kb - both)
    subs = len({(l[3], l[4]) for l in s["loads"]})
    untimed = sum(1 for l in s["loads"] if l[4] <= l[3])
    print(f"{name}: {span*1e3:.1f} ms on the GPU clock, {len(s['loads'])} loads in {subs} copy submissions, {len(s['batches'])} compute batches; {untimed} loads in untimed submissions (placed when seen done)")
    print(f"  copy busy {cb*1e3:.1f} ms, compute busy {kb*1e3:.1f} ms, both {both*1e3:.1f}, copies only {(cb-both)*1e3:.1f}, compute only {(kb-both)*1e3:.1f}, neither {neither*1e3:.1f}")
    stall = sum(b[3] for b in s["batches"])
    print(f"  batches' stall (waiting for pages) {stall*1e3:.1f} ms")
    # Gaps between copy submissions, by size.
    gaps = [copies[i + 1][0] - copies[i][1] for i in range(len(copies) - 1)]
    if gaps:
        buckets = [(0, 5e-6), (5e-6, 20e-6), (20e-6, 100e-6), (100e-6, 1e-3), (1e-3, 1e9)]
        row = []
        for a, b in buckets:
            g = [x for x in gaps if a <= x < b]
            label = f"[{a*1e6:.0f},{b*1e6:.0f}) µs" if b < 1 else f">= {a*1e6:.0f} µs"
            row.append(f"{label}: {len(g)} gaps, {sum(g)*1e3:.1f} ms")
        print("  copy-queue gaps " + "; ".join(row))
    # Per copy submission: pages and span.
    per = {}
    for l in s["loads"]:
        per.setdefault((l[3], l[4]), 0)
        per[(l[3], l[4])] += 1
    if per:
        n = sorted(per.values())
        timed = sum(1 for l in s["loads"] if l[4] > l[3])
        mean_us = cb / max(timed, 1) * 1e6
        print(f"  pages per copy submission: median {n[len(n)//2]}, mean {sum(n)/len(n):.2f}; busy per timed page {mean_us:.1f} µs")
    # Neither busy: gaps in the union of both queues, by size.
    allq = union([tuple(x) for x in copies] + [tuple(x) for x in comp])
    idle = [allq[i + 1][0] - allq[i][1] for i in range(len(allq) - 1)]
    big = sorted(idle, reverse=True)
    print(f"  both idle: {len(idle)} gaps, {sum(idle)*1e3:.1f} ms; over 1 ms: {sum(x for x in idle if x > 1e-3)*1e3:.1f} ms in {sum(1 for x in idle if x > 1e-3)}; largest {[round(x*1e3,2) for x in big[:5]]} ms")


def main():
    lines = open(sys.argv[1], errors="replace").read().splitlines()
    ss = sessions_split(lines)
    pick = int(sys.argv[2]) if len(sys.argv) > 2 else None
    for i, s in enumerate(ss):
        if pick is None or pick == i:
            report(s, f"session {i}")


def sessions_split(lines):
    """One session per run of events whose clock does not jump back by more than a second."""
    ss = []
    cur = None
    last = None
    for line in lines:
        if "stream_journal" not in line:
            continue
        m = LOAD.search(line)
        c = COMP.search(line) if not m else None
        if not (m or c):
            continue
        t = float(m[4]) if m else float(c[2])
        if cur is None or (last is not None and t < last - 1.0):
            cur = {"loads": [], "batches": []}
            ss.append(cur)
            last = None
        if m:
            cur["loads"].append((int(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5])))
        else:
            cur["batches"].append((c[1], float(c[2]), float(c[3]), float(c[4]), int(c[5])))
        last = t if last is None else max(last, t)
    return ss


if __name__ == "__main__":
    main()
