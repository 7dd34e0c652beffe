#!/usr/bin/env bash
# Session 38, run 13: the Whisper-tiny encoder streamed under caps below its weights plus its
# activations (scripts/whisper-stream.ron), every policy (`run --all-policies`, which checks that
# every policy's outputs are bit for bit the same), on the session's end (.dev38/final5.xz): the
# norms' and the split attention's packed outputs under streaming and step reuse on a GPU.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d13; mkdir -p /tmp/bin $W
xz -dc .dev38/final5.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 1 > $W/gen.txt 2>&1
WL=measurements/h100-h200-2026-12-06-s38/scripts/whisper-stream.ron
for cap in 64MiB 70MiB 76MiB; do
  timeout 150 /tmp/bin/ts run $WL --all-policies --iterations 3 --cap $cap > $W/stream_$cap.txt 2>&1; echo "rc $?" >> $W/stream_$cap.txt
done; save
for f in $W/stream_*.txt; do echo "== $f"; grep -vE "^\s*$" $f | tail -22; done
