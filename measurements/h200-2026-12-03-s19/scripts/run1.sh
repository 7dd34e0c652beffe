#!/usr/bin/env bash
# H200 session 19, run 1: the 1.34 B decoder's step with the head splits read by RoPE and the
# cache write (.devbin/texstream.xz, compiler revision 17) against session 18's final binary
# (.devbin/old.xz, revision 16), alternating; then where the decode attention's 50 us go: the
# new binary with parts of attention_decode.comp skipped (TEXSTREAM_ATTN_SKIP, an experiment
# build's flag bits 4-7: 1 no key loads, 2 no value loads, 4 no exp, 8 no key loop at all; the
# outputs are then wrong by design); the 128-token prefill; PyTorch's CUDA graph on the same
# weights. Outputs: $OUT/d.tgz.
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
/tmp/bin/old check workloads/assistant-scale.ron > $W/check-old.txt 2>&1; echo "rc $?" >> $W/check-old.txt
cp models/scale/lm/decoder.tspk /tmp/old.tspk
/tmp/bin/new check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
cp models/scale/lm/decoder.tspk /tmp/new.tspk
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
for i in 1 2; do
  for b in old new; do
    timeout 100 /tmp/bin/$b infer /tmp/$b.tspk --fill-missing 1 --repeat 20 --profile 5 \
      -o /tmp/p-$b > $W/decode-$b$i.txt 2>&1
    echo "rc $?" >> $W/decode-$b$i.txt
  done
  save
done
$PY -c "
import numpy as np; a=np.load('/tmp/p-old/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('logits old vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
for skip in 1 2 4 3 7 8; do
  TEXSTREAM_ATTN_SKIP=$skip timeout 100 /tmp/bin/new infer /tmp/new.tspk --fill-missing 1 \
    --repeat 10 --profile 5 -o /tmp/p-skip > $W/skip$skip.txt 2>&1
  echo "rc $?" >> $W/skip$skip.txt
done
save
timeout 90 /tmp/bin/new compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
timeout 90 /tmp/bin/new infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 \
  -o /tmp/pp > $W/prefill.txt 2>&1; echo "rc $?" >> $W/prefill.txt
save
PYTHONUNBUFFERED=1 timeout 150 $PY scripts/torch_baseline.py $W/torch.json --smollm2 models/scale/lm \
  --no-compile --time-limit-s 130 > $W/torch.txt 2>&1
echo "rc $?" >> $W/torch.txt
save
cat $W/compare.txt
for f in $W/decode-*.txt; do echo "== $f"; grep -E "repeat runs|^Attention |^Transpose |^Reshape |^Rope |^KvWrite " $f; done
for f in $W/skip*.txt; do echo "== $f"; grep -E "repeat runs|^Attention " $f; done
grep -E "repeat runs|^Attention |^MatMul " $W/prefill.txt
grep -iE "graph|eager|prefill|decode" $W/torch.txt | head
echo "elapsed $(( $(date +%s) - T0 )) s"
