#!/usr/bin/env bash
# H200 session 23, shared set-up (as in session 21), sourced by each run script: the Vulkan loader (.gl), the
# binary built on the CPU machine (.devbin), and the real assistant's wheels and the OCR and VAD
# models, which exceed what one call carries beside the working tree (64 MiB in all): the calls
# before a run each carry one piece of one sha256-checked tar (.whl/xfer3/pN, kept in /tmp on the
# held machine by stash.sh); this joins them and converts the models with the project's scripts.
# Defines W (the output folder), PY, left() (seconds left of the call) and save().
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
bash measurements/h200-2026-12-04-s23/scripts/stash.sh > $W/stash.txt 2>&1
cat $(ls /tmp/xfer/p* | sort -V) > /tmp/xfer.tar
echo "31b8b3f7d3da9ef040d121c1c0386602ba82ce6c27d298a99f0f263f85ff1b70  /tmp/xfer.tar" | sha256sum -c > $W/xfer.txt 2>&1
mkdir -p /tmp/xf .whl models/ocr models/vad && tar xf /tmp/xfer.tar -C /tmp/xf
mv /tmp/xf/*.whl .whl/; mv /tmp/xf/silero_vad.onnx models/vad/; mv /tmp/xf/*.onnx models/ocr/
if ! $PY -c "import gguf" 2>/dev/null; then
  mkdir -p /tmp/pylib && $PY -m zipfile -e .whl/gguf-0.19.0-py3-none-any.whl /tmp/pylib
  export PYTHONPATH=/tmp/pylib
fi
$PY scripts/convert_whisper.py models/whisper > $W/convert_whisper.txt 2>&1; echo "rc $?" >> $W/convert_whisper.txt
$PY scripts/convert_smollm2.py models/smollm2 > $W/convert_smollm2.txt 2>&1; echo "rc $?" >> $W/convert_smollm2.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/xfer.txt
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
