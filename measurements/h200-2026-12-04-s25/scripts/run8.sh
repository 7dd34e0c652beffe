#!/usr/bin/env bash
# H200 session 25, run 8: the tensor-core MatMul with its workgroup split into K groups (each
# takes part of every K step into its own accumulators; the tiles summed through shared memory
# at the end): kg2.xz (two groups, 256 invocations), kg4.xz (four, 512), against base.xz (7d0d67d's
# kernels: one group of 128). vk-backend's kernel_matmul tests of each new build; the 1.34 B
# decoder's 128-token prefill profiled with each binary (twice, alternating) and every
# projection on the tensor cores once (TEXSTREAM_COOP_MIN_TILES=16); logits compared.
# Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
for b in base kg2 kg4 km_kg2 km_kg4; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
for k in km_kg2 km_kg4; do
  (cd vk-backend && timeout 60 /tmp/bin/$k --test-threads=1) > $W/$k.txt 2>&1; echo "rc $?" >> $W/$k.txt
done
timeout 60 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/base compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
save
run() { timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 5 --profile 2 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
run base base; run kg2 kg2; run kg4 kg4; run base base2; run kg2 kg2b; run kg4 kg4b
TEXSTREAM_COOP_MIN_TILES=16 run kg2 kg2-min16; TEXSTREAM_COOP_MIN_TILES=16 run kg4 kg4-min16
save
$PY -c "
import numpy as np; a=np.load('/tmp/p-base/logits.npy')
for n in ['kg2','kg4','kg2-min16','kg4-min16']:
    b=np.load('/tmp/p-'+n+'/logits.npy')
    print('prefill logits base vs', n, ': max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax rows equal', int((a.argmax(-1)==b.argmax(-1)).sum()), 'of', a.shape[1])
" > $W/compare.txt 2>&1
save
grep -E "test result|^rc|panicked" $W/km_kg2.txt $W/km_kg4.txt
cat $W/compare.txt
for n in base kg2 kg4 base2 kg2b kg4b kg2-min16 kg4-min16; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt | cut -c1-50)"; grep -E '^MatMul |^Gemm |^Attention ' $W/$n.txt; grep -A8 "by op and shape" $W/$n.txt | grep -E "MatMul|Gemm" | head -5; done
echo "elapsed $(( $(date +%s) - T0 )) s"
