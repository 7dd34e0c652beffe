"""Session 49: why the compute parts of one streamed session stalled for pages. Reads a
`texstream run` log at `texstream::stream_journal=trace` (binary with the load events' ticket,
reader and issued_s and the parts' wait_ticket). For each stalled part of MODEL (default all),
the load it waited for (`wait_ticket`), and what that copy's start waited for last:
  host     the engine issued it, or the transfer thread submitted it, after everything else
           (a copy held for its reader's batch submission counts here);
  reader   the end of the compute part holding its slot's last reader (plus a hand-off);
  queue    the copy before it on the transfer queue (copies land in ticket order): a backlog.
Also, for the stalls on the reader, how many steps the reader came before the part that
needed the copy, and for backlogs, the same for the copy that started the backlog.
Usage: python3 stalls.py LOG [SESSION_NAME_PREFIX [MODEL]]."""
import bisect
import collections
import sys

import journal

HANDOFF = 12e-6  # a wait between the queues on the card is 7-9 us; beyond this, something else


def main():
    lines = open(sys.argv[1], errors="replace").read().splitlines()
    want = sys.argv[2] if len(sys.argv) > 2 else "planned"
    model = sys.argv[3] if len(sys.argv) > 3 else None
    for s in journal.sessions_split(lines):
        if s["name"].startswith(want):
            report(s, model)


def report(s, model):
    loads = {l[7]: l for l in s["loads"] if len(l) > 7 and l[7] is not None}
    if not loads:
        print(f"{s['name']}: no load tickets in this log (an older binary)")
        return
    parts = sorted((b for b in s["batches"] if b[6] is not None), key=lambda b: b[6])
    lasts = [b[6] for b in parts]
    first = {}
    prev = 0
    for b in parts:
        first[b[6]] = prev + 1
        prev = b[6]
    # Copy submissions in ticket order: (first ticket, start, end).
    subs = {}
    for t, l in loads.items():
        k = (l[3], l[4])
        if k not in subs or t < subs[k][0]:
            subs[k] = (t, l[3], l[4])
    order = sorted(subs.values())
    sub_first = [o[0] for o in order]

    def sub_of(t):
        i = bisect.bisect_right(sub_first, t) - 1
        return i

    def part_of(v):
        i = bisect.bisect_left(lasts, v)
        return parts[i] if i < len(parts) else None

    def why(t):
        """What load t's submission waited for last, and the reader distance."""
        l = loads[t]
        i = sub_of(t)
        start = order[i][1]
        prev_end = order[i - 1][2] if i > 0 else -1.0
        host = max(l[5] or 0.0, l[9] or 0.0)
        r = part_of(l[8]) if l[8] else None
        reader_end = r[2] if r else -1.0
        cands = {"host": host, "reader": reader_end + 1e-9, "queue": prev_end}
        bound = max(cands, key=cands.get)
        return bound, start - cands[bound], i

    cat = collections.Counter()
    cat_ms = collections.Counter()
    dist = collections.Counter()
    dist_ms = collections.Counter()
    backlog_root = collections.Counter()
    stalled = 0
    for b in parts:
        if b[3] <= 0 or (model is not None and b[0] != model):
            continue
        stalled += 1
        w = b[7]
        if not w or w not in loads:
            cat["unknown"] += 1
            cat_ms["unknown"] += b[3]
            continue
        bound, _, i = why(w)
        cat[bound] += 1
        cat_ms[bound] += b[3]
        l = loads[w]
        need = first[b[6]]
        d = need - l[8] if l[8] else None
        if bound == "reader":
            key = min(d // 4 * 4, 64) if d is not None else -1
            dist[key] += 1
            dist_ms[key] += b[3]
        elif bound == "queue":
            # Walk back the backlog to the copy that began it.
            j = i
            while j > 0:
                t0 = order[j][0]
                bj, _, _ = why(t0)
                if bj != "queue":
                    backlog_root[bj] += 1
                    break
                j -= 1
    total = sum(cat_ms.values())
    print(f"{s['name']}: {stalled} stalled parts{'' if model is None else ' of model ' + model}, {total*1e3:.1f} ms stalled")
    for k in ("host", "reader", "queue", "unknown"):
        if cat[k]:
            print(f"  copy waited last for {k:<7}: {cat[k]:6d} parts, {cat_ms[k]*1e3:8.1f} ms")
    if dist:
        print("  on the reader, steps from the reader to the part that needed the copy: " + ", ".join(
            f"{k}+: {dist[k]} ({dist_ms[k]*1e3:.1f} ms)" for k in sorted(dist)))
    if backlog_root:
        print("  backlogs began with a copy that waited for: " + ", ".join(f"{k} {v}" for k, v in backlog_root.items()))
    # Host side: how long after issue the transfer thread submitted (held copies).
    held = [l[5] - l[9] for l in loads.values() if l[5] and l[9] is not None]
    if held:
        held.sort()
        print(f"  issue to submission: median {held[len(held)//2]*1e6:.0f} us, p90 {held[len(held)*9//10]*1e6:.0f} us, over 1 ms {sum(1 for h in held if h > 1e-3)}")


if __name__ == "__main__":
    main()
