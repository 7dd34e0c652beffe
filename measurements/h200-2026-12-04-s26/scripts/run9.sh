#!/usr/bin/env bash
# H200 session 26, run 9: coord_at as a branch ([[dont_flatten]]) rather than a select (branch.xz), against
# v1.xz (93f23bf); run 8 measured coord_at without the fold at all. kernel_attention and kernel_matmul
# with branch.xz's kernels. The 1.34 B prefill and the Whisper-tiny encoder, profiled; outputs compared.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d9; mkdir -p /tmp/bin $W
for b in v1 branch kernel_attention kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
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
M=/tmp/wenc; [ -f $M/encoder.onnx ] || timeout 200 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
for b in v1 branch; do
  timeout 40 /tmp/bin/$b infer /tmp/prefill.tspk --fill-missing 1 --repeat 5 --profile 3 -o /tmp/p-$b > $W/prefill_$b.txt 2>&1; echo "rc $?" >> $W/prefill_$b.txt
  timeout 60 /tmp/bin/$b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --profile 3 -o /tmp/whp_$b > $W/whisper_$b.txt 2>&1; echo "rc $?" >> $W/whisper_$b.txt
done
$PY -c "
import numpy as np, glob
a=np.load('/tmp/p-v1/logits.npy')
for n in ['branch']:
    b=np.load('/tmp/p-%s/logits.npy'%n); print('prefill v1 vs',n,float(abs(a-b).max()))
    x=np.load(glob.glob('/tmp/whp_v1/*.npy')[0]); y=np.load(glob.glob('/tmp/whp_%s/*.npy'%n)[0]); print('whisper v1 vs',n,float(abs(x-y).max()))
" > $W/compare.txt 2>&1
save
grep -E "test result|^rc|panicked" $W/kernel_*.txt
cat $W/compare.txt
for n in v1 branch; do echo "== $n"; grep -E "^(Attention|MatMul|Gemm|LayerNorm|Binary|Rope|KvWrite) " $W/prefill_$n.txt $W/whisper_$n.txt; grep -E "repeat runs" $W/prefill_$n.txt; done
echo "elapsed $(( $(date +%s) - T0 )) s"
