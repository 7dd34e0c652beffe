#!/usr/bin/env bash
# Session 35, run 1 (.devbin14/ts.xz: texstream at 6866782): where the tensor-core MatMul's
# weight_finish sits, measured with TEXSTREAM_SHADER_DIR against the build, alternating:
#   fin   = s34 patches/finish_at_store.patch on every matmul_const_coop* kernel;
#   nofin = no weight_finish at all (patches/no_finish.patch; exact for resident fp16, where no
#           page is unmapped or compensated);
#   cfin  = s34 patches/conv_finish_at_store.patch on conv2d_coop*.
# Whisper-tiny and BERT-base encoders, ResNet-50 (conv), then the 1.34 B prefill if time is left.
# `texstream infer MODEL --precision f16 --repeat 20 --profile 3`, resident.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s); left() { echo $(( 570 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d1; mkdir -p /tmp/bin $W /tmp/tv
xz -dc .devbin14/ts.xz > /tmp/bin/ts; chmod +x /tmp/bin/ts
SD=$PWD/.devbin14/sd
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
(timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
(timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1) &
TW=$!
E=/tmp/enc; (timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1) &
GE=$!
(timeout 120 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50 --iters 3 > $W/torch_resnet.txt 2>&1) &
TR=$!
inf() { # stem variant model args...
  local s=$1 v=$2; shift 2
  local e=X=1; [ $v = base ] || e=TEXSTREAM_SHADER_DIR=$SD/$v
  env $e timeout 60 /tmp/bin/ts infer "$@" --precision f16 --profile 3 -o /tmp/o1-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt
}
wait $TW $GE $TR
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
RN="/tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy --repeat 20"
inf warm base $WH; inf warm2 fin $BE
for r in 1 2; do
  for v in base fin nofin; do inf whisper_${v}_$r $v $WH; inf bert_${v}_$r $v $BE; done
  for v in base cfin; do inf resnet_${v}_$r $v $RN; done
  save
done
wait
if [ $(left) -gt 120 ]; then
  timeout 100 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
    --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 > $W/prefill-compile.txt 2>&1
  for r in 1 2; do for v in base fin nofin; do
    [ $(left) -gt 30 ] || break
    inf prefill_${v}_$r $v /tmp/prefill.tspk --fill-missing 1 --repeat 10
  done; save; done
fi
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m, vs in [("whisper", ["fin", "nofin"]), ("bert", ["fin", "nofin"]), ("resnet", ["cfin"]), ("prefill", ["fin", "nofin"])]:
    for f in sorted(glob.glob(f"/tmp/o1-{m}_base_1/*.npy")):
        for v in vs:
            g = f.replace("_base_1", f"_{v}_1")
            if os.path.exists(g):
                a, b = np.load(f), np.load(g)
                print(m, v, os.path.basename(f), "max |base-v|", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert|resnet|prefill)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'median [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Conv " $W/$f | head -2; done
