#!/usr/bin/env bash
# H200 session 26, run 5: the tensor-core attention staging keys, values, queries and the mask
# in batches of eight loads an invocation issued before any is stored (the mask a block at a
# time in shared memory, not 16 loads in turn per row) (texstream.xz), against v1.xz (93f23bf:
# the 32-row MatMul tiles). kernel_attention and kernel_matmul with the new kernels; the 1.34 B
# decoder's 128-token prefill profiled with both, twice, logits compared. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d5; mkdir -p /tmp/bin $W
for b in v1 texstream kernel_attention kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
for t in kernel_attention kernel_matmul; do
  (cd vk-backend && timeout 90 /tmp/bin/$t --test-threads=1) > $W/$t.txt 2>&1; echo "rc $?" >> $W/$t.txt
done
if [ ! -f /tmp/prefill.tspk ]; then
timeout 90 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/v1 compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
fi
save
run() { env $3 timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
run v1 base X=1; run texstream new X=1; run v1 base2 X=1; run texstream new2 X=1
$PY -c "
import numpy as np; a=np.load('/tmp/p-base/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('prefill logits base vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax rows equal', int((a.argmax(-1)==b.argmax(-1)).sum()), 'of', a.shape[1])
" > $W/compare.txt 2>&1
save
grep -E "test result|^rc|panicked" $W/kernel_*.txt
cat $W/compare.txt
for n in base new base2 new2; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; grep -E '^MatMul |^Gemm |^Attention ' $W/$n.txt; done
echo "elapsed $(( $(date +%s) - T0 )) s"
