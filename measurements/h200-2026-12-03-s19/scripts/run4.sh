#!/usr/bin/env bash
# H200 session 19, run 4: the real assistant (workloads/assistant.ron: Silero VAD, Whisper
# tiny.en, SmolLM2-135M on tests/data/speech/jfk.wav) and the mixed workload (the camera OCR
# pipeline with the assistant) under every policy, with this session's kernels. The wheels and the
# OCR and VAD models came over in earlier calls (stash.sh, one tar in pieces); this call joins them, checks the tar's sha256,
# converts the models with the project's scripts (sha256-checked wheels) and runs. Then, while
# time is left: vk-backend's kernel_matmul tests (B stored by rows on the tensor cores too), and
# the 1.34 B decoder's 128-token prefill with the tensor-core MatMul at its default minimum of
# output tiles (one a streaming multiprocessor) against TEXSTREAM_COOP_MIN_TILES=16 (every
# prefill projection on the tensor cores).
# Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
left() { echo $(( 580 - ($(date +%s) - T0) )); }
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
bash measurements/h200-2026-12-03-s19/scripts/stash.sh > $W/stash.txt 2>&1
cat /tmp/xfer/p0 /tmp/xfer/p1 /tmp/xfer/p2 /tmp/xfer/p3 /tmp/xfer/p4 /tmp/xfer/p5 > /tmp/xfer.tar
echo "82b133f9c15ac5f61279c1dd3cbe17e150a07570396e7594ec9b95b2cfcffdc7  /tmp/xfer.tar" | sha256sum -c > $W/xfer.txt 2>&1
mkdir -p /tmp/xf .whl models/ocr models/vad && tar xf /tmp/xfer.tar -C /tmp/xf
mv /tmp/xf/*.whl .whl/; mv /tmp/xf/silero_vad.onnx models/vad/; mv /tmp/xf/*.onnx models/ocr/
ls -la .whl models/* >> $W/xfer.txt
if ! $PY -c "import gguf" 2>/dev/null; then
  mkdir -p /tmp/pylib && $PY -m zipfile -e .whl/gguf-0.19.0-py3-none-any.whl /tmp/pylib
  export PYTHONPATH=/tmp/pylib
fi
$PY scripts/convert_whisper.py models/whisper > $W/convert_whisper.txt 2>&1; echo "rc $?" >> $W/convert_whisper.txt
$PY scripts/convert_smollm2.py models/smollm2 > $W/convert_smollm2.txt 2>&1; echo "rc $?" >> $W/convert_smollm2.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/xfer.txt
save
/tmp/bin/ts check workloads/assistant.ron > $W/check_assistant.txt 2>&1; echo "rc $?" >> $W/check_assistant.txt
timeout $(( $(left) - 280 )) /tmp/bin/ts run workloads/assistant.ron --all-policies --resident-reference \
  --iterations 3 --metrics-json $W/assistant.json > $W/assistant.txt 2>&1; echo "rc $?" >> $W/assistant.txt
save
timeout $(( $(left) - 140 )) /tmp/bin/ts run workloads/mixed.ron --all-policies --resident-reference \
  --iterations 3 --metrics-json $W/mixed.json > $W/mixed.txt 2>&1; echo "rc $?" >> $W/mixed.txt
save
xz -dc .devbin/kernel_matmul.xz > /tmp/bin/kernel_matmul && chmod +x /tmp/bin/kernel_matmul
(cd vk-backend && timeout 60 /tmp/bin/kernel_matmul --test-threads=1) > $W/kernel_matmul.txt 2>&1
echo "rc $?" >> $W/kernel_matmul.txt
save
if [ $(left) -gt 75 ]; then
  timeout 45 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
  timeout 40 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
    --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
    > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
  for t in default 16; do
    [ $(left) -gt 15 ] || break
    TEXSTREAM_COOP_MIN_TILES=$([ $t = default ] || echo $t) timeout $(( $(left) - 5 )) /tmp/bin/ts \
      infer /tmp/prefill.tspk --fill-missing 1 --repeat 6 --profile 2 -o /tmp/pp-$t \
      > $W/prefill-$t.txt 2>&1; echo "rc $?" >> $W/prefill-$t.txt
  done
fi
save
tail -3 $W/xfer.txt; grep -E "^rc|wrote" $W/convert_*.txt | tail -6
grep -E "policy|measured|p50|LB|peak|transcript|reply|^rc" $W/assistant.txt | head -40
grep -E "policy|measured|p50|LB|peak|^rc" $W/mixed.txt | head -40
grep -E "test result|^rc" $W/kernel_matmul.txt
for f in $W/prefill-default.txt $W/prefill-16.txt; do echo "== $f"; grep -E "repeat runs|^MatMul |^Gemm |^rc" $f; grep -A7 "by op and shape" $f | tail -6; done
echo "elapsed $(( $(date +%s) - T0 )) s"
