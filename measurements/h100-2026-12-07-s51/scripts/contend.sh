#!/usr/bin/env bash
# Session 51: is the streamed host's slow recording the copies' traffic? (1) The machine's
# topology. (2) The resident run (nothing streams) alone, beside another process that copies
# pinned host memory to the GPU as fast as it can (PyTorch), beside four processes that only
# copy host memory, and beside twelve that only spin (`hog.py copy|memory|spin`): if the resident recording slows like
# a streamed one beside the copies, the cost is the traffic, not our streaming code. (3) What
# time is left: `planned` with its resident reference, by default, with recorded steps as
# command buffers of their own (`--step-buffers on`: no commands emitted again), in batches of
# 32 steps, and with copies in fewer submissions (`--loads-per-submit 32`), in turn.
set -u
source "$(dirname "$0")/../../h100-2026-12-07-s50/scripts/setup.sh"
S=measurements/h100-2026-12-07-s51/scripts
{ lscpu; echo; ls /sys/devices/system/node; for d in /sys/bus/pci/devices/*; do
    [ "$(cat $d/vendor 2>/dev/null)" = 0x10de ] && echo "$d numa_node $(cat $d/numa_node) class $(cat $d/class)"; done
  nvidia-smi topo -m; free -g; } > $W/topology.txt 2>&1
resident() {  # $1: file tag. Cores 0-3 for the engine, 4-15 for the neighbours.
  local f=$W/resident-$1.txt
  local before; before=$(grep '^cpu ' /proc/stat)
  taskset -c 0-3 /tmp/bin/ts run workloads/assistant.ron --policy preload --cap 4GiB --iterations 5 > $f 2>&1
  echo "rc $?" >> $f
  { echo "proc/stat before: $before"; echo "proc/stat after:  $(grep '^cpu ' /proc/stat)"; } >> $f
  echo "== resident, $1"; grep -E "by phase|host time|threads \(CPU" $f | cut -c1-400
}
stop_hogs() { pkill -f "$S/hog.py"; wait; }
for k in 1; do
  [ $(left) -lt 100 ] && break
  resident alone$k
  taskset -c 4-15 $PY $S/hog.py copy 40 > $W/hog_copy$k.txt 2>&1 &
  sleep 8; resident copies$k; stop_hogs; cat $W/hog_copy$k.txt
  for c in 4 5 6 7; do taskset -c $c $PY $S/hog.py memory 40 > $W/hog_memory$k-$c.txt 2>&1 & done
  sleep 3; resident memory$k; stop_hogs; cat $W/hog_memory$k-*.txt
  for c in $(seq 4 15); do taskset -c $c $PY $S/hog.py spin 40 > $W/hog_spin$k-$c.txt 2>&1 & done
  sleep 1; resident spin$k; stop_hogs; cat $W/hog_spin$k-4.txt
  save
done
i=0
while [ $(left) -gt 40 ]; do
  i=$((i + 1))
  for v in default step-buffers batch32 loads32; do
    [ $(left) -lt 40 ] && break
    case $v in
      default) a="" ;; step-buffers) a="--step-buffers on" ;;
      batch32) a="--steps-per-batch 32" ;; loads32) a="--loads-per-submit 32" ;;
    esac
    f=$W/planned$i-$v.txt
    before=$(grep '^cpu ' /proc/stat)
    timeout $(( $(left) - 5 )) /tmp/bin/ts run workloads/assistant.ron --policy planned --resident-reference \
      --iterations 5 --cap 80MiB $a > $f 2>&1
    echo "rc $?" >> $f
    # The machine's CPU ticks (user nice system idle iowait irq softirq steal): steal is time
    # the hypervisor gave a vCPU's core to someone else.
    { echo "proc/stat before: $before"; echo "proc/stat after:  $(grep '^cpu ' /proc/stat)"; } >> $f
    echo "== planned $i, $v"
    grep -E "by phase|runs/LB|host time|threads \(CPU" $f | cut -c1-400
    save
  done
done
save
echo "elapsed $(( $(date +%s) - T0 )) s"
