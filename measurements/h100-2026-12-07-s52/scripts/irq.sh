#!/usr/bin/env bash
# Session 52: session 51's scripts, run at the start of this session, found the streamed host
# slow exactly when its GPU thread ran on vCPU 14 (and its copy thread's CPU five times its usual
# when that one ran there). Is vCPU 14 slow by itself (a host-side neighbour) or only while the
# GPU streams (the device's interrupts)? (1) Interrupt counts and affinities, per-vCPU ticks. (2)
# Each vCPU's single-thread speed, idle. (3) `planned` with the GPU thread pinned to the
# interrupts' vCPU and the copy thread elsewhere, the other way round, and with the GPU thread
# kept off the interrupts' vCPUs (allowed every other one), each with the interrupt counts and
# per-vCPU ticks around it. (4) Each vCPU's speed while a `planned` run streams. The binary
# keeps its threads off the device's interrupt cores by default (`vk_backend::placement`, built
# this session): every run but `auto` sets TEXSTREAM_THREADS_ANYWHERE=1 to turn that off.
set -u
source "$(dirname "$0")/../../h100-2026-12-07-s50/scripts/setup.sh"
speed() {  # $1: tag. Seconds for a fixed Python loop on each vCPU, in turn.
  for c in $(seq 0 15); do
    printf "%s cpu%d %s\n" $1 $c "$(taskset -c $c $PY -c 'import time
t=time.perf_counter(); s=0
for i in range(2_000_000): s+=i
print(round(time.perf_counter()-t,4))')"
  done
}
snap() { cat /proc/interrupts > $W/$1-interrupts.txt; grep '^cpu' /proc/stat > $W/$1-stat.txt; }
pin() {  # $1: pid; $2: GPU thread's cores; $3: copy thread's cores ("-": leave it)
  while kill -0 $1 2>/dev/null; do
    for t in $(for p in $1 $(pgrep -P $1); do echo /proc/$p/task/*; done); do
      case "$(cat $t/comm 2>/dev/null)" in
        texstream-gpu) [ "$2" != - ] && taskset -p -c $2 $(basename $t) > /dev/null 2>&1 ;;
        texstream-trans) [ "$3" != - ] && taskset -p -c $3 $(basename $t) > /dev/null 2>&1 ;;
      esac
    done
    sleep 0.2
  done
}
planned() {  # $1: tag, $2 $3: pin() cores, $4: "auto" for the engine's own placement
  local f=$W/planned-$1.txt
  snap before-$1
  if [ "${4:-}" = auto ]; then unset TEXSTREAM_THREADS_ANYWHERE; else export TEXSTREAM_THREADS_ANYWHERE=1; fi
  timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
    --iterations 5 --cap 80MiB > $f 2>&1 &
  local ts=$!
  [ "$2$3" != -- ] && { pin $ts $2 $3 & }
  wait $ts; echo "rc $?" >> $f; wait
  snap after-$1
  echo "== planned, $1"; grep -E "runs/LB|threads \(CPU|host threads" $f | cut -c1-300
  save
}
{ for d in /sys/bus/pci/devices/*; do [ -d $d/msi_irqs ] && echo "$d $(cat $d/vendor) msi: $(ls $d/msi_irqs | tr '\n' ' ')"; done
  for i in /proc/irq/*/; do echo "$i $(cat $i/smp_affinity_list 2>/dev/null) $(cat $i/effective_affinity_list 2>/dev/null) $(ls $i | grep -v -e smp -e affinity -e node -e spurious | tr '\n' ' ')"; done; } > $W/irq-affinity.txt
/tmp/bin/ts devices > $W/devices.txt 2>&1; grep -E 'PCI|^#' $W/devices.txt
snap start
speed idle > $W/speed-idle.txt; speed idle2 >> $W/speed-idle.txt; cat $W/speed-idle.txt | sort -k3 -n | tail -4
planned free - -
# The vCPUs that took the device's interrupts during that run.
IRQ=$($PY - $W/before-free-interrupts.txt $W/after-free-interrupts.txt <<'PY'
import sys
def rd(p):
    rows = {}
    lines = open(p).read().splitlines()
    n = len(lines[0].split())
    for l in lines[1:]:
        parts = l.split()
        if len(parts) > n and parts[0].endswith(':') and parts[0][:-1].isdigit():
            rows[parts[0]] = ([int(x) for x in parts[1:n + 1]], ' '.join(parts[n + 1:]))
    return rows
a, b = rd(sys.argv[1]), rd(sys.argv[2])
hot = set()
for k, (v, name) in b.items():
    d = [y - x for x, y in zip(a.get(k, ([0] * len(v), ''))[0], v)]
    if sum(d) > 1000:
        print(k, name, d, file=sys.stderr)
        hot |= {i for i, x in enumerate(d) if x > 0.2 * sum(d)}
print(','.join(map(str, sorted(hot))) or '14')
PY
)
echo "interrupt vCPUs: $IRQ"
REST=$($PY -c "import sys; h={int(x) for x in sys.argv[1].split(',')}; print(','.join(str(c) for c in range(16) if c not in h))" $IRQ)
FIRST=${IRQ%%,*}
echo "irq $IRQ rest $REST first $FIRST" > $W/irq-cores.txt
for k in 1 2 3 4 5; do
  [ $(left) -lt 60 ] && break
  planned auto$k - - auto
  [ $(left) -lt 40 ] && break
  planned gpu-on-irq$k $FIRST 3
  [ $(left) -lt 40 ] && break
  planned copy-on-irq$k 3 $FIRST
  [ $(left) -lt 40 ] && break
  planned free$k - -
done
# Each vCPU's speed while a planned run streams (the engine's own threads left free).
if [ $(left) -gt 40 ]; then
  TEXSTREAM_THREADS_ANYWHERE=1 timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --iterations 5 --cap 80MiB > $W/planned-under-speed.txt 2>&1 &
  sleep 4; speed busy > $W/speed-busy.txt; wait
  sort -k3 -n $W/speed-busy.txt | tail -4
fi
snap end
save
echo "elapsed $(( $(date +%s) - T0 )) s"
