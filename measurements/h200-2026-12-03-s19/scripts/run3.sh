#!/usr/bin/env bash
# H200 session 19, run 3: matmul_const_coop.comp taking K 64 at a time with the next step's loads
# in flight (.devbin/texstream.xz) against run 2's binary (.devbin/old.xz), on the 128-token
# prefill (alternating, twice each) and the decode step; and vk-backend's kernel_matmul tests
# built here (.devbin/kernel_matmul.xz), which check the tensor-core MatMul against a CPU
# reference on the H200. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
for b in texstream old kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
mv /tmp/bin/texstream /tmp/bin/new
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 120 /tmp/bin/kernel_matmul --test-threads=1 --nocapture) > $W/kernel_matmul.txt 2>&1
echo "rc $?" >> $W/kernel_matmul.txt
save
$PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
/tmp/bin/new check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
timeout 90 /tmp/bin/new compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
for i in 1 2; do
  for b in old new; do
    timeout 90 /tmp/bin/$b infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 \
      -o /tmp/pp-$b > $W/prefill-$b$i.txt 2>&1; echo "rc $?" >> $W/prefill-$b$i.txt
  done
  save
done
$PY -c "
import numpy as np; a=np.load('/tmp/pp-old/logits.npy'); b=np.load('/tmp/pp-new/logits.npy')
print('prefill logits old vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax rows equal', int((a.reshape(-1,a.shape[-1]).argmax(-1)==b.reshape(-1,b.shape[-1]).argmax(-1)).sum()), 'of', a.reshape(-1,a.shape[-1]).shape[0])
" > $W/compare.txt 2>&1
timeout 100 /tmp/bin/new infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20 \
  --profile 5 -o /tmp/p-new > $W/decode-new.txt 2>&1; echo "rc $?" >> $W/decode-new.txt
save
grep -E "test result|panicked|coop=|^rc" $W/kernel_matmul.txt
cat $W/compare.txt
for f in $W/prefill-*.txt; do echo "== $f"; grep -E "repeat runs|^MatMul |^Attention |^Gemm " $f; grep -A6 "by op and shape" $f | tail -5; done
grep -E "repeat runs|^MatMul |^Attention " $W/decode-new.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
