"""Session 52: one row per `texstream run` output in the given directories: runs/LB (resident
reference, then the policy), the GPU thread's CPU ms, last core, run-queue wait and moves, the
copy thread's CPU ms and core, record+submit CPU, and the machine's /proc/stat ticks around it.

    python3 threads_table.py run1-contend run2-pinned run3-irq
"""
import glob
import re
import sys

for d in sys.argv[1:]:
    for f in sorted(glob.glob(d + '/planned*.txt') + glob.glob(d + '/resident*.txt')):
        t = open(f).read()
        lb = re.findall(r'model runs/LB ([\d.]+)', t)
        gpu = re.findall(r'texstream-gpu (\d+) ms on core (\d+) \(waited ([\d.]+) ms, (\d+) mov', t)
        tr = re.findall(r'texstream-trans (\d+) ms on core (\d+)', t)
        ps = re.findall(r'proc/stat (?:before|after):\s+cpu\s+(.*)', t)
        ticks = ''
        if len(ps) == 2:
            a = list(map(int, ps[0].split()))
            b = list(map(int, ps[1].split()))
            dd = [y - x for x, y in zip(a, b)]
            ticks = 'user %d sys %d idle %d softirq %d steal %d' % (dd[0], dd[2], dd[3], dd[6], dd[7])
        rs = re.findall(r'record\+submit ([\d.]+) ms \(thread CPU ([\d.]+)', t)
        print(f.split('/')[-2], f.split('/')[-1][:-4].ljust(24), 'runs/LB', lb, 'gpu', gpu[-1:],
              'copy', tr[-1:], 'record+submit CPU', [r[1] for r in rs], ticks)
