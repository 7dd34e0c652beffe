#!/usr/bin/env bash
# H200 session 19, run 2: the 1.34 B decoder's step with the decode attention split over key
# spans (flash-decoding: attention_decode_split.comp then attention_combine.comp, the exps taken
# once a key) in .devbin/texstream.xz against run 1's binary (.devbin/old.xz: the head splits
# read in place, the earlier decode attention), alternating, twice each; the 128-token prefill;
# the assistant-scale workload resident (the decoder call's p50). Outputs: $OUT/d.tgz.
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
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
for i in 1 2; do
  for b in old new; do
    timeout 100 /tmp/bin/$b infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 \
      --profile 5 -o /tmp/p-$b > $W/decode-$b$i.txt 2>&1
    echo "rc $?" >> $W/decode-$b$i.txt
  done
  save
done
$PY -c "
import numpy as np; a=np.load('/tmp/p-old/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('logits old vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
timeout 90 /tmp/bin/new compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
timeout 90 /tmp/bin/new infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 \
  -o /tmp/pp > $W/prefill.txt 2>&1; echo "rc $?" >> $W/prefill.txt
save
timeout 100 /tmp/bin/new run workloads/assistant-scale.ron --policy preload --cap 3GiB \
  --iterations 4 > $W/resident.txt 2>&1; echo "rc $?" >> $W/resident.txt
save
cat $W/compare.txt
for f in $W/decode-*.txt; do echo "== $f"; grep -E "repeat runs|^Attention |^MatMul |^LayerNorm" $f; grep -A16 "by op and shape" $f | head -8; done
grep -E "repeat runs|^Attention |^MatMul " $W/prefill.txt
grep -h -E "model lm|pipeline turn|^rc" $W/resident.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
