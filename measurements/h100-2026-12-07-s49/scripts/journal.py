"""(Session 49: also parses the loads' ticket, reader and issue time and the parts' wait_ticket, for stalls.py.)
Reads a `texstream run` log with `RUST_LOG=texstream::stream_journal=trace` and tells, for
each streamed session in it (the events' clock restarts with each), how the copy queue and the
compute queue shared the time: both busy, only copies, only compute, neither; and the gaps the
copy queue left. Session 48: compute events carry `submitted_s` (when the host submitted the
batch); each model's gaps between compute batches are split into the host's (the batch was
submitted after the previous one ended) and the pages' (a stalled batch) and the rest (a
semaphore hand-off or the queue). Usage: python3 journal.py LOG [SESSION_INDEX]."""
import re
import sys

LOAD = re.compile(r"Load \{ model: (\d+), page: (\d+), slot: (\d+), start_s: ([-\d.e]+), end_s: ([-\d.e]+)(?:, submitted_s: ([-\d.e]+), after_value: (\d+))?(?:, ticket: (\d+), reader: (\d+), issued_s: ([-\d.e]+))? \}")
COMP = re.compile(r"Compute \{ model: (?:Some\((\d+)\)|None), start_s: ([-\d.e]+), end_s: ([-\d.e]+), stall_s: ([-\d.e]+), steps: (\d+)(?:, submitted_s: ([-\d.e]+), last_value: (\d+))?(?:, wait_ticket: (\d+))? \}")


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
    gap_split(s)
    copy_split(s)


def copy_split(s):
    """The copy queue's gaps (after the previous copy submission ended), each put on what its
    next submission waited for last: the transfer thread's submission (the host), the end of
    the compute part holding its slot's last reader, or neither (the hand-off itself)."""
    subs = {}
    for l in s["loads"]:
        if len(l) < 7 or l[5] is None or l[4] <= l[3]:
            continue
        k = (l[3], l[4])
        subs.setdefault(k, [l[3], l[4], l[5], l[6], 0])[4] += 1
    if not subs:
        return
    ends = sorted((b[6], b[2]) for b in s["batches"] if b[6] is not None)
    import bisect
    keys = [e[0] for e in ends]
    order = sorted(subs.values())
    tot = {"host": [0, 0.0], "compute": [0, 0.0], "handoff": [0, 0.0]}
    late = {"host": 0.0, "compute": 0.0}
    for prev, cur in zip(order, order[1:]):
        gap = cur[0] - prev[1]
        if gap <= 0:
            continue
        dep = 0.0
        if cur[3]:
            i = bisect.bisect_left(keys, cur[3])
            if i < len(ends):
                dep = ends[i][1]
        ready = max(prev[1], cur[2], dep)
        why = "handoff" if ready <= prev[1] else ("host" if cur[2] >= dep else "compute")
        tot[why][0] += 1
        tot[why][1] += gap
        if why != "handoff":
            late[why] += ready - prev[1]
    print("  copy-queue gaps by what the next submission waited for: " + "; ".join(
        f"{k} {v[0]} gaps {v[1]*1e3:.1f} ms" for k, v in tot.items())
        + f" (of which waiting itself: host {late['host']*1e3:.1f} ms, compute {late['compute']*1e3:.1f} ms)")


def gap_split(s):
    """Per model: compute busy, and the gaps before its batches (under 1 ms: within runs) split
    into the host's (submitted after the previous batch ended), the pages' (stalled) and the
    rest."""
    bs = sorted(s["batches"], key=lambda b: b[1])
    if not bs or bs[0][5] is None:
        return
    agg = {}
    prev = None
    for b in bs:
        a = agg.setdefault(b[0], [0.0, 0.0, 0.0, 0.0, 0, 0])
        a[0] += b[2] - b[1]
        a[4] += 1
        a[5] += b[4]
        if prev is not None:
            gap = b[1] - prev
            if 0 < gap < 1e-3:
                host = min(max(b[5] - prev, 0.0), gap)
                pages = min(b[3], gap - host)
                a[1] += host
                a[2] += pages
                a[3] += gap - host - pages
        prev = b[2]
    for m, a in sorted(agg.items(), key=lambda kv: str(kv[0])):
        print(f"  model {m}: {a[4]} batches, {a[5]} steps, busy {a[0]*1e3:.1f} ms; gaps under 1 ms: host {a[1]*1e3:.1f}, pages {a[2]*1e3:.1f}, other {a[3]*1e3:.1f} ms")


def main():
    lines = open(sys.argv[1], errors="replace").read().splitlines()
    ss = sessions_split(lines)
    pick = int(sys.argv[2]) if len(sys.argv) > 2 else None
    for i, s in enumerate(ss):
        if pick is None or pick == i:
            report(s, f"session {i} ({s['name']})")


def sessions_split(lines):
    """One session per engine: each begins at its progress line (`NAME: request 1/N`, e.g.
    `resident reference: request 1/5` or `planned: request 1/5`); events before any such line
    form one more. (Session 47 split where the clock jumped back; the events of one request
    are logged kind by kind, so it also split inside engines.)"""
    ss = []
    cur = None
    start = re.compile(r"^([\w -]+): request 1/\d+")
    for line in lines:
        m0 = start.match(line)
        if m0:
            cur = {"name": m0[1], "loads": [], "batches": []}
            ss.append(cur)
            continue
        if "stream_journal" not in line:
            continue
        m = LOAD.search(line)
        c = COMP.search(line) if not m else None
        if not (m or c):
            continue
        if cur is None:
            cur = {"name": "first", "loads": [], "batches": []}
            ss.append(cur)
        if m:
            extra = (float(m[6]), int(m[7])) if m[6] is not None else (None, None)
            # Session 49: the load's ticket, its own reader and when the engine issued it.
            more = (int(m[8]), int(m[9]), float(m[10])) if m[8] is not None else (None, None, None)
            cur["loads"].append((int(m[1]), int(m[2]), int(m[3]), float(m[4]), float(m[5])) + extra + more)
        else:
            sub = float(c[6]) if c[6] is not None else None
            last = int(c[7]) if c[7] is not None else None
            wt = int(c[8]) if c[8] is not None else None
            cur["batches"].append((c[1], float(c[2]), float(c[3]), float(c[4]), int(c[5]), sub, last, wt))
    return ss


if __name__ == "__main__":
    main()
