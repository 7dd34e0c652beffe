#!/usr/bin/env bash
# H200 session 18, run 1: the 1.34 B scale decoder resident with this session's kernels (attention
# for a few query rows with its threads over the keys, RMSNorm's row held in registers, the SiLU
# gate in its projection, the heads merged in the attention store), the deep GEMV (TEXSTREAM_GEMV_DEEP=1) against the default, a 128-token
# prefill, the workload resident, cold starts (the host mirror filled behind the first request),
# then every policy at a half (1386 MiB) and an eighth (346 MiB) of the weights, and PyTorch fp16
# on the same weights while time allows. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > $W/gpu.txt
S=$(date +%s%3N)
$PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
echo "generate: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/gen.txt
/tmp/bin/ts check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
for deep in 0 1; do
  TEXSTREAM_GEMV_DEEP=$deep timeout 100 /tmp/bin/ts infer models/scale/lm/decoder.tspk \
    --fill-missing 1 --repeat 20 --profile 5 -o /tmp/p-$deep > $W/decode-deep$deep.txt 2>&1
  echo "rc $?" >> $W/decode-deep$deep.txt
done
save
timeout 90 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
timeout 90 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 \
  -o /tmp/pp > $W/prefill.txt 2>&1; echo "rc $?" >> $W/prefill.txt
save
timeout 100 /tmp/bin/ts run workloads/assistant-scale.ron --policy preload --cap 3GiB \
  --iterations 4 > $W/resident.txt 2>&1; echo "rc $?" >> $W/resident.txt
save
# Cold starts with the host mirror filled behind the first request (packed files dropped from
# the page cache before each policy).
for spec in preload:3GiB planned:693MiB; do
  p=${spec%%:*}; c=${spec#*:}
  [ $(left) -gt 200 ] || break
  timeout 100 /tmp/bin/ts run workloads/assistant-scale.ron --policy $p --cap $c \
    --iterations 3 --cold > $W/cold-$p.txt 2>&1; echo "rc $?" >> $W/cold-$p.txt
  save
done
for spec in half:1386MiB eighth:346MiB; do
  n=${spec%%:*}; c=${spec#*:}
  [ $(left) -gt 150 ] || break
  timeout $(( $(left) - 60 )) /tmp/bin/ts run workloads/assistant-scale.ron --all-policies \
    --resident-reference --cap $c --iterations 4 --metrics-json $W/$n.json > $W/$n.txt 2>&1
  echo "rc $?" >> $W/$n.txt
  save
done
if [ $(left) -gt 70 ]; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 15 )) $PY scripts/torch_baseline.py $W/torch.json \
    --smollm2 models/scale/lm --no-compile --time-limit-s $(( $(left) - 25 )) > $W/torch.txt 2>&1
  echo "rc $?" >> $W/torch.txt
fi
save
$PY -c "
import numpy as np; a=np.load('/tmp/p-0/logits.npy'); b=np.load('/tmp/p-1/logits.npy')
print('logits default vs deep: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
save
cat $W/compare.txt
for deep in 0 1; do echo "== deep $deep"; sed -n 4,32p $W/decode-deep$deep.txt; done
echo "== prefill"; sed -n 1,24p $W/prefill.txt | grep -v "^  input\|^  output"
grep -h -E "model lm|pipeline turn|^rc" $W/resident.txt
grep -h -E "^cold start|^host mirror|^rc" $W/cold-*.txt
for n in half eighth; do echo "== $n"; tail -9 $W/$n.txt 2>/dev/null; done
tail -6 $W/torch.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
