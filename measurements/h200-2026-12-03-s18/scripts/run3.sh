#!/usr/bin/env bash
# H200 session 18, run 3: the 1.34 B decoder's step with the decode attention loading its keys
# and values at (layer, y, x) without fold_coord's divisions (.devbin/texstream.xz) against run 2's
# binary with run 1's GEMV (.devbin/old.xz at TEXSTREAM_GEMV_DEEP=0: main's kernels otherwise),
# alternating, twice each. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/new && xz -dc .devbin/old.xz > /tmp/bin/old && chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
$PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
/tmp/bin/new check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
for i in 1 2; do
  for b in old new; do
    TEXSTREAM_GEMV_DEEP=0 timeout 100 /tmp/bin/$b infer models/scale/lm/decoder.tspk \
      --fill-missing 1 --repeat 20 --profile 5 -o /tmp/p-$b > $W/decode-$b$i.txt 2>&1
    echo "rc $?" >> $W/decode-$b$i.txt
  done
  save
done
$PY -c "
import numpy as np; a=np.load('/tmp/p-old/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('logits old vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
save
cat $W/compare.txt
for i in 1 2; do for b in old new; do echo "== $b$i"; grep -E "repeat runs|^Attention|^MatMul|Attention  " $W/decode-$b$i.txt; done; done
echo "elapsed $(( $(date +%s) - T0 )) s"
