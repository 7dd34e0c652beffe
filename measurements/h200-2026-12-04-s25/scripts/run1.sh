#!/usr/bin/env bash
# H200 session 25, run 1: attention on the tensor cores (attention_coop.comp). vk-backend's
# kernel_attention tests built here and run there (the fp16 prefill cases then take the new
# kernel); the 1.34 B scale decoder's 128-token prefill with it (default) and with every
# tensor-core kernel off (TEXSTREAM_NO_COOPMAT=1), profiled, and their logits compared;
# PyTorch's CUDA graph and eager prefill on the same weights. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && xz -dc .devbin/kernel_attention.xz > /tmp/bin/kernel_attention && chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 120 /tmp/bin/kernel_attention --test-threads=1 --nocapture) > $W/kernel_attention.txt 2>&1
echo "rc $?" >> $W/kernel_attention.txt
save
timeout 60 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
save
for i in 1 2; do
  timeout 60 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 \
    -o /tmp/pp > $W/prefill$i.txt 2>&1; echo "rc $?" >> $W/prefill$i.txt
done
TEXSTREAM_NO_COOPMAT=1 timeout 90 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 6 --profile 2 \
  -o /tmp/pp-portable > $W/prefill-portable.txt 2>&1; echo "rc $?" >> $W/prefill-portable.txt
$PY -c "
import numpy as np; a=np.load('/tmp/pp-portable/logits.npy'); b=np.load('/tmp/pp/logits.npy')
print('prefill logits, portable vs tensor cores: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()),
      'argmax rows equal', int((a.argmax(-1)==b.argmax(-1)).sum()), 'of', a.shape[1])
" > $W/compare.txt 2>&1
save
PYTHONUNBUFFERED=1 timeout 150 $PY scripts/torch_baseline.py $W/torch.json --smollm2 models/scale/lm \
  --no-compile --time-limit-s 120 > $W/torch.txt 2>&1
echo "rc $?" >> $W/torch.txt
save
grep -E "test |test result|^rc|panicked" $W/kernel_attention.txt | head -20
cat $W/compare.txt
for f in $W/prefill1.txt $W/prefill2.txt $W/prefill-portable.txt; do echo "== $f"; grep -E "repeat runs|^Attention |^MatMul |^Gemm |^rc" $f; done
grep -A8 "by op and shape" $W/prefill1.txt | tail -7
grep -iE "graph|eager|prefill|decode" $W/torch.txt | head
echo "elapsed $(( $(date +%s) - T0 )) s"
