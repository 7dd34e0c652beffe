"""Session 49: for the language model's compute parts in the `planned` session of a journal log
(binary with load tickets and readers), how many steps lie between the reader of the newest
load a part waited for and the part's first and last step; and the parts' step counts. A copy
whose reader is only a few steps before the part that needs it has little compute to hide
behind. Usage: python3 distances.py LOG."""
import sys, collections, bisect
import journal
ss = journal.sessions_split(open(sys.argv[1], errors='replace').read().splitlines())
s = [x for x in ss if x['name'].startswith('planned')][0]
loads = {l[7]: l for l in s['loads']}
parts = sorted((b for b in s['batches'] if b[6] is not None), key=lambda b: b[6])
prev = 0; c_first = collections.Counter(); c_last = collections.Counter(); steps = collections.Counter()
for b in parts:
    first = prev + 1; prev = b[6]
    if b[0] != '3': continue
    steps[min(b[4], 20)] += 1
    w = b[7]
    if not w or w not in loads or not loads[w][8]: continue
    r = loads[w][8]
    c_first[min((first - r)//4*4, 80)] += 1
    c_last[min((b[6] - r)//4*4, 80)] += 1
print('LM parts by steps', sorted(steps.items()))
print('part first - reader of its newest load', sorted(c_first.items()))
print('part last - reader of its newest load', sorted(c_last.items()))
