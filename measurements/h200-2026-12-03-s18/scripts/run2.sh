#!/usr/bin/env bash
# H200 session 18, run 2: the 1.34 B scale decoder's step after run 1, with the decode attention's
# loads batched per grouping case and the GEMV variant picked by shape (deep where K >= 2 N),
# against the GEMV as run 1 ran it by default (TEXSTREAM_GEMV_DEEP=0); the 128-token prefill;
# the workload resident; every policy at a quarter (693 MiB). Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
S=$(date +%s%3N)
$PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
echo "generate: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/gen.txt
/tmp/bin/ts check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
for v in shape:"" run1:0; do
  n=${v%%:*}; deep=${v#*:}
  TEXSTREAM_GEMV_DEEP=$deep timeout 100 /tmp/bin/ts infer models/scale/lm/decoder.tspk \
    --fill-missing 1 --repeat 20 --profile 5 -o /tmp/p-$n > $W/decode-$n.txt 2>&1
  echo "rc $?" >> $W/decode-$n.txt
done
save
timeout 90 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
timeout 90 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 \
  -o /tmp/pp > $W/prefill.txt 2>&1; echo "rc $?" >> $W/prefill.txt
timeout 100 /tmp/bin/ts run workloads/assistant-scale.ron --policy preload --cap 3GiB \
  --iterations 4 > $W/resident.txt 2>&1; echo "rc $?" >> $W/resident.txt
save
if [ $(left) -gt 150 ]; then
  timeout $(( $(left) - 40 )) /tmp/bin/ts run workloads/assistant-scale.ron --all-policies \
    --resident-reference --cap 693MiB --iterations 4 --metrics-json $W/quarter.json \
    > $W/quarter.txt 2>&1; echo "rc $?" >> $W/quarter.txt
fi
save
$PY -c "
import numpy as np; a=np.load('/tmp/p-shape/logits.npy'); b=np.load('/tmp/p-run1/logits.npy')
print('logits by shape vs run-1 GEMV: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
save
cat $W/compare.txt
for n in shape run1; do echo "== $n"; sed -n 5,30p $W/decode-$n.txt; done
echo "== prefill"; sed -n 4,12p $W/prefill.txt
grep -h -E "model lm|pipeline turn|^rc" $W/resident.txt
tail -8 $W/quarter.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
