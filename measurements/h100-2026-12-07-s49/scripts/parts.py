"""Emulates the stream engine's part boundaries over a plan written by `texstream plan
--schedule-json FILE` (session 48): walks the steps as `StreamExec::run_model` does (ops a step
waits for, then every op whose reader is recorded; a batch of 16 steps, flushed at each model
run's end), gives each load a ticket and the compute value of its slot's (and its page's) last
reader, and cuts a part where `StreamEngine::cut_part_before` would: forced where the step needs
a load at or after the first one that waits for the open part, else once the part has
PER_PART steps and a newer page or a waiting copy (every page taken as not landed yet). It
leaves out what only the runtime has: lookups into the lookup slot, re-plans and the pages they
keep, the GPU's progress. Usage: python3 parts.py FILE [PER_PART]."""
import json, collections, sys
d = json.load(open(sys.argv[1]))
per_part = int(sys.argv[2]) if len(sys.argv) > 2 else 4
ops = d['ops']; sw = d['step_wait']; steps = d['steps']
def op_fields(o):
    k = next(iter(o)); v = o[k]; return k, v['page'], v['slot'], v['after_step']
ops = [op_fields(o) for o in ops]
next_op = 0; ticket = 1; value = 1; submitted = 0
slot_last = collections.defaultdict(int); page_ticket = {}
open_batch = None  # dict(steps, part)
forced = collections.Counter(); worth = collections.Counter(); parts = collections.Counter()
forced_info = collections.Counter()
issued_at = {}
slot_of = {}
page_last = {}
def new_part():
    return {'key': value, 'steps': 0, 'wait': 0, 'awaited': None}
def flush():
    global open_batch, submitted
    if open_batch is not None:
        submitted = value - 1
        open_batch = None
def issue(o, j):
    global ticket
    k, page, slot, after = o
    if k == 'Load':
        w = max(slot_last[slot], page_last.get(page, 0))
        if w > submitted and open_batch is not None and w >= open_batch['part']['key']:
            if open_batch['part']['awaited'] is None:
                open_batch['part']['awaited'] = ticket
        page_ticket[page] = ticket; issued_at[ticket] = j; slot_of[page] = slot
        ticket += 1
def issue_ready(j):
    global next_op
    while next_op < len(ops):
        o = ops[next_op]
        if o[3] is not None and o[3] >= j: break
        issue(o, j); next_op += 1
prev = None
for j, s in enumerate(steps):
    key = (s['model'], s['rep'], s['stage'], s['run'])
    if prev is not None and (s['step'] == 0 or key != prev):
        issue_ready(j); flush()
    prev = key
    w = sw[j]
    if w is not None:
        while next_op <= w:
            issue(ops[next_op], j); next_op += 1
    issue_ready(j)
    pages = s['pages']
    wait = max((page_ticket.get(p, 0) for p in pages), default=0)
    if open_batch is None:
        open_batch = {'steps': 0, 'part': new_part()}
    p = open_batch['part']
    needed = p['awaited'] is not None and p['awaited'] <= wait
    wth = p['steps'] >= per_part and (wait > p['wait'] or p['awaited'] is not None)
    if p['steps'] > 0 and (needed or wth):
        m = s['model']
        if needed:
            forced[m] += 1
            # which page: the newest
            newest = max(pages, key=lambda q: page_ticket.get(q, 0))
            forced_info[(m, 'ago', min(ticket - wait, 64), 'steps_since_issue', min(j - issued_at.get(wait, j), 64))] += 1
        else:
            worth[m] += 1
        parts[m] += 1
        open_batch['part'] = new_part()
    p = open_batch['part']
    p['steps'] += 1; p['wait'] = max(p['wait'], wait)
    for q in pages:
        slot_last[slot_of[q]] = value
        page_last[q] = value
    value += 1
    open_batch['steps'] += 1
    if open_batch['steps'] >= 16:
        flush()
print('per_part', per_part, 'forced', dict(forced), 'worth', dict(worth))

tot=collections.Counter()
for k,v in forced_info.items(): tot[(k[0],k[2],k[4])]+=v
print('forced LM by (loads ago, steps since issue):', sorted(((k[1],k[2]),v) for k,v in tot.items() if k[0]==3)[:30])
lm_steps=sum(1 for s in steps if s['model']==3)
print('LM steps', lm_steps)
