#!/usr/bin/env bash
# H200 session 17, run 2: the 1.34 B scale decoder resident, run 1's binary (.devbin/old.xz)
# against the next one (.devbin/texstream.xz): the GEMV stages A's whole row and keeps its next
# batch's page-table reads in flight behind the current batch's atlas loads, and LayerNorm /
# RMSNorm takes 256 invocations a row. Per binary `texstream infer decoder.tspk --fill-missing 1
# --repeat 20 --profile 5` (the new one also at TEXSTREAM_GEMV_SPREAD=4), then the new binary in
# the workload resident, and every policy at a quarter (693 MiB) with --resident-reference.
# Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/old.xz > /tmp/bin/old && xz -dc .devbin/texstream.xz > /tmp/bin/new
chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
S=$(date +%s%3N)
$PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
echo "generate: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/gen.txt
/tmp/bin/new check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
for v in old new new:4 new:1; do
  b=${v%%:*}; sp=${v#*:}; [ "$sp" = "$v" ] && sp=""
  TEXSTREAM_GEMV_SPREAD=$sp timeout 100 /tmp/bin/$b infer models/scale/lm/decoder.tspk \
    --fill-missing 1 --repeat 20 --profile 5 -o /tmp/p-$b$sp > $W/profile-$b$sp.txt 2>&1
  echo "rc $?" >> $W/profile-$b$sp.txt
done
save
$PY -c "
import numpy as np; a=np.load('/tmp/p-old/logits.npy')
for v in ('new', 'new4', 'new1'):
    b=np.load('/tmp/p-%s/logits.npy' % v); print(v, 'logits against run 1: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
timeout 120 /tmp/bin/new run workloads/assistant-scale.ron --policy preload --cap 3GiB \
  --iterations 4 > $W/resident.txt 2>&1; echo "rc $?" >> $W/resident.txt
save
if [ $(left) -gt 200 ]; then
  timeout $(( $(left) - 30 )) /tmp/bin/new run workloads/assistant-scale.ron --all-policies \
    --resident-reference --cap 693MiB --iterations 5 --metrics-json $W/quarter.json \
    > $W/quarter.txt 2>&1; echo "rc $?" >> $W/quarter.txt
  save
fi
cat $W/compare.txt
for v in old new new4 new1; do echo "== $v"; sed -n 5,20p $W/profile-$v.txt; done
grep -h -E "model lm|pipeline turn|^GPU stall|^measured|^model runs|^rc" $W/resident.txt
tail -8 $W/quarter.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
