"""Session 49: for the language model's loads in the `planned` session of a journal log (binary
with load tickets and readers): how many compute values after its reader the reader's part ended,
and how long after that part's end the copy started (20-us bins; 400 = 400 us or more).
Usage: python3 readers.py LOG."""
import sys, collections, bisect
import journal
ss = journal.sessions_split(open(sys.argv[1], errors='replace').read().splitlines())
s = [x for x in ss if x['name'].startswith('planned')][0]
loads = {l[7]: l for l in s['loads']}
parts = sorted((b for b in s['batches'] if b[6] is not None), key=lambda b: b[6])
lasts = [b[6] for b in parts]
pos = collections.Counter(); lag = collections.Counter(); issue_after = collections.Counter()
for t, l in loads.items():
    if l[0] != 3 or not l[8]: continue
    i = bisect.bisect_left(lasts, l[8])
    if i >= len(parts): continue
    R = parts[i]
    pos[min(R[6] - l[8], 16)] += 1
    # copy start minus reader part end (us)
    d = (l[3] - R[2]) * 1e6
    lag[min(int(d // 20) * 20, 400) if d >= 0 else -1] += 1
print('reader part end - reader (values):', sorted(pos.items()))
print('copy start - reader part end (us, 20-us bins; -1 = before):', sorted(lag.items()))
