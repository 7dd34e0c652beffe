#!/usr/bin/env bash
# H200 session 25, run 6: main's binary at 7d0d67d. The GPU's clocks and performance state
# sampled by nvidia-smi (every 100 ms) while the engine replays the 1.34 B decoder's 128-token
# prefill 300 times, and while PyTorch runs fp16 matrix products for five seconds (is the
# Vulkan path clocked as CUDA is?); then the prefill profiled. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi -q -d CLOCK,PERFORMANCE,POWER > $W/smi-idle.txt 2>&1
timeout 60 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
Q=timestamp,clocks.sm,clocks.max.sm,clocks.mem,pstate,power.draw,utilization.gpu,clocks_throttle_reasons.active
nvidia-smi --query-gpu=$Q --format=csv -lms 100 > $W/smi-vulkan.csv 2>&1 &
P=$!
timeout 60 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 300 -o /tmp/pp > $W/prefill300.txt 2>&1
echo "rc $?" >> $W/prefill300.txt
nvidia-smi -q -d CLOCK,PERFORMANCE > $W/smi-after-vulkan.txt 2>&1
kill $P
nvidia-smi --query-gpu=$Q --format=csv -lms 100 > $W/smi-cuda.csv 2>&1 &
P=$!
timeout 30 $PY -c "
import torch, time
a = torch.randn(128, 2048, device='cuda', dtype=torch.float16); b = torch.randn(2048, 6656, device='cuda', dtype=torch.float16)
torch.cuda.synchronize(); t = time.time(); n = 0
while time.time() - t < 5:
    for _ in range(100): c = a @ b
    torch.cuda.synchronize(); n += 100
print('torch [128,2048]x[2048,6656] fp16: %.1f us each over %d' % ((time.time() - t) / n * 1e6, n))
" > $W/torch-mm.txt 2>&1
kill $P
save
timeout 60 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp > $W/prefill.txt 2>&1
echo "rc $?" >> $W/prefill.txt
save
grep -E "repeat runs" $W/prefill300.txt
cat $W/torch-mm.txt
echo "--- vulkan"; sed -n '1p;10,14p;40,44p' $W/smi-vulkan.csv; awk -F, 'NR>1{print $2,$5}' $W/smi-vulkan.csv | sort | uniq -c | sort -rn | head -5
echo "--- cuda"; awk -F, 'NR>1{print $2,$5}' $W/smi-cuda.csv | sort | uniq -c | sort -rn | head -5
grep -iE "clocks event|throttle|Applications|Default Applications|SM  |Max Clocks" -A0 $W/smi-after-vulkan.txt | head -20
grep -E "repeat runs|^Attention |^MatMul |^Gemm " $W/prefill.txt
grep -A8 "by op and shape" $W/prefill.txt | tail -7
echo "elapsed $(( $(date +%s) - T0 )) s"
