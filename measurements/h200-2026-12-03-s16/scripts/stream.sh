#!/usr/bin/env bash
# H200 session 16: workloads/assistant-scale.ron with the 1.34 B decoder under a cap, the
# streaming pipeline's settings one against another (`texstream run --staging-pages N
# --io-threads N --loads-per-submit N --host-mirror on|off`), and every policy.
#   [SIZE=1.3b] [ITER=5] stream.sh CAP "NAME[@CAP]:FLAGS" ...
#   e.g. stream.sh 693MiB "ring6:--policy planned --staging-pages 6" "all@1386MiB:--all-policies"
# Generates the models on the device (scripts/make_scale_models.py) unless they are there,
# compiles them (`texstream check`), then runs `texstream run ... --resident-reference
# --iterations $ITER FLAGS` per spec (at its own cap where it names one). Carries .gl and
# .devbin/texstream.xz. Outputs: $OUT/s.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/w; rm -rf $W; mkdir -p /tmp/bin $W
xz -dc .devbin/texstream.xz > /tmp/bin/texstream && chmod +x /tmp/bin/texstream
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv > $W/gpu.txt
nproc >> $W/gpu.txt; free -g >> $W/gpu.txt
if [ "$(cat models/scale/size 2>/dev/null)" != "${SIZE:-1.3b}" ]; then
  rm -rf models/scale
  S=$(date +%s%3N)
  $PY scripts/make_scale_models.py models/scale --decoder ${SIZE:-1.3b} > $W/gen.txt 2>&1
  echo "generate: rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/gen.txt
  echo "${SIZE:-1.3b}" > models/scale/size
fi
S=$(date +%s%3N)
/tmp/bin/texstream check workloads/assistant-scale.ron > $W/check.txt 2>&1
echo "check (compile): rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/check.txt
cap=$1; shift
for spec in "$@"; do
  name=${spec%%:*}; flags=${spec#*:}; c=$cap
  case $name in *@*) c=${name#*@}; name=${name%@*};; esac
  S=$(date +%s%3N)
  timeout 280 /tmp/bin/texstream run workloads/assistant-scale.ron --cap $c $flags \
    --iterations ${ITER:-5} --resident-reference --metrics-json $W/$name.json \
    > $W/$name.txt 2>&1
  echo "rc $? in $(( $(date +%s%3N) - S )) ms" >> $W/$name.txt
  tar czf $OUT/s.tgz -C $W .
done
tail -1 $W/check.txt
for spec in "$@"; do
  name=${spec%%:*}; echo "== $name: ${spec#*:}"; name=${name%@*}
  grep -E "^workload|pipeline turn|model lm|^GPU stall|^staging ring|^host mirror|^measured|^model runs|^peak" \
    $W/$name.txt | grep -v "^workload.*preload"
  tail -1 $W/$name.txt
done
