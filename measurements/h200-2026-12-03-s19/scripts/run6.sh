#!/usr/bin/env bash
# H200 session 19, run 6: the 1.34 B decoder's step with main's final binary (the pack and
# unpack without a thread start, fdd8296, and everything before it), twice. Outputs: $OUT/d.tgz.
set -u
T0=$(date +%s)
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d6; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/ts && chmod +x /tmp/bin/ts
save() { tar czf $OUT/d.tgz -C $W .; }
timeout 60 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/ts check workloads/assistant-scale.ron > $W/check.txt 2>&1; echo "rc $?" >> $W/check.txt
for i in 1 2; do
  timeout 40 /tmp/bin/ts infer models/scale/lm/decoder.tspk --fill-missing 1 --repeat 40 \
    -o /tmp/p6 > $W/decode$i.txt 2>&1; echo "rc $?" >> $W/decode$i.txt
  save
done
grep -h -E "repeat runs|^rc" $W/decode*.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
