#!/usr/bin/env bash
# H200 session 26, run 2: three tensor-core MatMuls on the 1.34 B decoder's 128-token prefill.
# base.xz: session 25's kernels (33761b9). v1.xz: the same kernel with 32-row tiles where the
# 64-row ones are fewer than the multiprocessors (run 1's 32-row tiles without its two-deep
# prefetch). texstream.xz: v1 staging four fp16 values a 64-bit shared-memory store (A as quads
# of four k, B's texel whole; the shared tiles' orientation follows the texels), by shape and
# with every tile 64 rows (TEXSTREAM_COOP_ROWS=64). kernel_matmul with texstream.xz's kernels;
# logits compared. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
for b in base v1 texstream kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 90 /tmp/bin/kernel_matmul --test-threads=1) > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt
if [ ! -f /tmp/prefill.tspk ]; then
timeout 90 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/base compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
fi
save
run() { env $3 timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
run base base X=1; run v1 v1 X=1; run texstream v2 X=1; run texstream v2r64 TEXSTREAM_COOP_ROWS=64
run base base2 X=1; run v1 v1b X=1; run texstream v2b X=1
$PY -c "
import numpy as np; a=np.load('/tmp/p-base/logits.npy')
for n in ['v1','v2','v2r64']:
    b=np.load('/tmp/p-%s/logits.npy'%n)
    print('prefill logits base vs',n,': max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax rows equal', int((a.argmax(-1)==b.argmax(-1)).sum()), 'of', a.shape[1])
" > $W/compare.txt 2>&1
save
grep -E "test result|^rc|panicked|FAIL|assert" $W/kernel_matmul.txt | head
cat $W/compare.txt
for n in base v1 v2 v2r64 base2 v1b v2b; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; grep -E '^MatMul |^Gemm ' $W/$n.txt; grep -A8 "by op and shape" $W/$n.txt | grep -E "MatMul|Gemm" | head -5; done
echo "elapsed $(( $(date +%s) - T0 )) s"
