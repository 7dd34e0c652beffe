#!/usr/bin/env bash
# H200 session 25, run 9: the tensor-core MatMul with four K groups (512 invocations; run 8's
# kg4 summed only two of its groups' tiles, fixed here) and its default minimum of tiles at one
# per eight multiprocessors (16 on the H200), against base.xz (7d0d67d's kernels). vk-backend's
# kernel_matmul tests; the 1.34 B decoder's 128-token prefill profiled with both, logits
# compared; then, where the pieces stash.sh left in /tmp are still there, the real assistant
# under every policy (its Whisper encoder's projections now take the new kernel).
# Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
source measurements/h200-2026-12-04-s23/scripts/setup.sh > /tmp/setup.log 2>&1 || true
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
for b in base texstream kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 60 /tmp/bin/kernel_matmul --test-threads=1) > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt
timeout 60 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/base compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
save
run() { timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
run base base; run texstream new; run base base2; run texstream new2
$PY -c "
import numpy as np; a=np.load('/tmp/p-base/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('prefill logits base vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax rows equal', int((a.argmax(-1)==b.argmax(-1)).sum()), 'of', a.shape[1])
" > $W/compare.txt 2>&1
save
if grep -q OK $W/xfer.txt 2>/dev/null; then
  timeout 200 /tmp/bin/texstream run workloads/assistant.ron --resident-reference --iterations 6 \
    --all-policies --metrics-json $W/all.json > $W/all.txt 2>&1; echo "rc $?" >> $W/all.txt
else
  echo "no stash on this machine: assistant not run" > $W/all.txt
fi
save
grep -E "test result|^rc|panicked" $W/kernel_matmul.txt
cat $W/compare.txt
for n in base new base2 new2; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; grep -E '^MatMul |^Gemm |^Attention ' $W/$n.txt; grep -A8 "by op and shape" $W/$n.txt | grep -E "MatMul|Gemm" | head -5; done
grep -E "transcript|reply\`|^rc|not run|model asr_encoder|^(resident|on-demand|lru|planned) " $W/all.txt | head -20
echo "elapsed $(( $(date +%s) - T0 )) s"
