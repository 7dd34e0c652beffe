#!/usr/bin/env bash
# H200 session 17, run 1: the 1.34 B scale decoder resident, before and after this session's
# kernels (the GEMV with its weight loads in flight together and its columns spread over more
# workgroups; attention fused for head dim 128; the tied head in 8 pieces, not 393),
# and cold starts with packed files opened lazily.
#   .devbin/old.xz  the binary at the start of the session;  .devbin/texstream.xz  the new one.
# Per binary: `texstream check` (compiles the workload's models for that binary's compiler
# revision), `texstream infer decoder.tspk --fill-missing 1 --repeat 20 --profile 5` (GPU time by
# op for one decode step, every input 1: all 64 cache positions unmasked) and `texstream run
# workloads/assistant-scale.ron --policy preload --cap 3GiB --iterations 4` (the decode call's p50
# inside the workload). Then the new binary's cold starts (preload at 3 GiB, planned at 693 MiB)
# planned at a quarter (693 MiB) with 8 and 64 page copies a transfer submission, and PyTorch
# fp16 on the same weights (scripts/torch_baseline.py), each part only while the call's time
# allows (`left`). Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/old.xz > /tmp/bin/old && xz -dc .devbin/texstream.xz > /tmp/bin/new
chmod +x /tmp/bin/*
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > $W/gpu.txt
nproc >> $W/gpu.txt; free -g >> $W/gpu.txt
S=$(date +%s%3N)
$PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
echo "generate: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/gen.txt
save() { tar czf $OUT/d.tgz -C $W .; }
for b in old new; do
  S=$(date +%s%3N)
  /tmp/bin/$b check workloads/assistant-scale.ron > $W/check-$b.txt 2>&1
  echo "check: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/check-$b.txt
  # The new binary also with TEXSTREAM_GEMV_SPREAD=4 (16 columns a GEMV workgroup, as before).
  for sp in "" $([ $b = new ] && echo 4); do
    TEXSTREAM_GEMV_SPREAD=$sp timeout 120 /tmp/bin/$b infer models/scale/lm/decoder.tspk \
      --fill-missing 1 --repeat 20 --profile 5 -o /tmp/p-$b$sp > $W/profile-$b$sp.txt 2>&1
    echo "rc $?" >> $W/profile-$b$sp.txt
  done
  timeout 150 /tmp/bin/$b run workloads/assistant-scale.ron --policy preload --cap 3GiB \
    --iterations 4 > $W/resident-$b.txt 2>&1; echo "rc $?" >> $W/resident-$b.txt
  save
done
$PY -c "
import numpy as np; a=np.load('/tmp/p-old/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('logits old vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax', int(a.argmax()), int(b.argmax()))
" > $W/compare.txt 2>&1
for spec in preload:3GiB planned:693MiB; do
  p=${spec%%:*}; c=${spec#*:}
  [ $(left) -gt 120 ] || break
  timeout 110 /tmp/bin/new run workloads/assistant-scale.ron --policy $p --cap $c \
    --iterations 3 --cold > $W/cold-$p.txt 2>&1; echo "rc $?" >> $W/cold-$p.txt
  save
done
for lps in 8 64; do
  [ $(left) -gt 100 ] || break
  timeout 90 /tmp/bin/new run workloads/assistant-scale.ron --policy planned --cap 693MiB \
    --iterations 4 --loads-per-submit $lps > $W/lps$lps.txt 2>&1; echo "rc $?" >> $W/lps$lps.txt
  save
done
if [ $(left) -gt 60 ]; then
  PYTHONUNBUFFERED=1 timeout $(( $(left) - 15 )) $PY scripts/torch_baseline.py $W/torch.json \
    --smollm2 models/scale/lm --no-compile --time-limit-s $(( $(left) - 25 )) > $W/torch.txt 2>&1
  echo "rc $?" >> $W/torch.txt
fi
save
cat $W/compare.txt
for b in old new new4; do echo "== $b"; sed -n 4,22p $W/profile-$b.txt; grep -E "model lm|pipeline turn" $W/resident-$b.txt; done
grep -h -E "^cold start|^host mirror|^rc|pipeline turn" $W/cold-*.txt
grep -h -E "pipeline turn|model lm|^GPU stall|^measured|^model runs|^rc" $W/lps*.txt
tail -5 $W/torch.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
