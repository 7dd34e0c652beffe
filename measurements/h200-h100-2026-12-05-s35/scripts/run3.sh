#!/usr/bin/env bash
# Session 35, run 3: the tensor-core MatMul without weight_finish, built in (.devbin15: ts at
# this session's change, and its kernel_matmul test binary), against the binary before it
# (.devbin14, 6866782), alternating: the Whisper-tiny and BERT-base encoders and the 1.34 B
# prefill, `texstream infer MODEL --precision f16 --repeat 20 --profile 3` (prefill --repeat 10),
# resident, outputs compared. First the MatMul kernel tests against their CPU reference on this
# card's tensor cores (the compensated-B case among them). Then, with the new binary, two more
# kernels without weight_finish from TEXSTREAM_SHADER_DIR against the build: the GEMV
# (patches/gemv_no_finish.patch) on the 1.34 B decode step, the large convolution tile
# (patches/conv_no_finish.patch) on ResNet-50; and the one-pass wide attention with the next
# key/value block's loads in flight (patches/attention_prefetch.patch) on the Whisper encoder.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s); left() { echo $(( 150 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3; mkdir -p /tmp/bin $W
xz -dc .devbin14/ts.xz > /tmp/bin/old; xz -dc .devbin15/ts.xz > /tmp/bin/new; xz -dc .devbin15/kernel_matmul.xz > /tmp/bin/km; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
[ -e models/scale/lm/decoder.onnx ] || (timeout 170 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1; echo "rc $?" >> $W/gen.txt) &
mkdir -p /tmp/tv; (timeout 120 $PY scripts/kernel_baseline.py /tmp/tv --models resnet50 --iters 3 > $W/torch_resnet.txt 2>&1) &
(cd vk-backend && timeout 120 /tmp/bin/km --test-threads 1 > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
[ -e /tmp/wenc/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 3 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -e $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
inf() { local s=$1 b=$2 e=X=1; shift 2
  case $b in new-*) e=TEXSTREAM_SHADER_DIR=$PWD/.devbin15/sd/${b#new-}; b=new;; esac
  env $e timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o3-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf warm old $WH; inf warm2 new $BE
for r in 1 2; do for b in old new; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; done
  inf whisper_new-apf_$r new-apf $WH; save; done
wait
timeout 100 /tmp/bin/new compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 > $W/prefill-compile.txt 2>&1
for r in 1 2; do for b in old new; do
  [ $(left) -gt 30 ] || break
  inf prefill_${b}_$r $b /tmp/prefill.tspk --fill-missing 1 --repeat 10
done; save; done
rm -f models/scale/lm/decoder.tspk
timeout 100 /tmp/bin/new check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1
RN="/tmp/tv/resnet50.onnx --input input=/tmp/tv/resnet50.input.npy --repeat 20"
for r in 1 2; do for b in new new-gnofin; do
  [ $(left) -gt 20 ] || break
  inf decode_${b}_$r $b models/scale/lm/decoder.tspk --fill-missing 1 --repeat 20
done; for b in new new-cnofin; do
  [ $(left) -gt 20 ] || break
  inf resnet_${b}_$r $b $RN
done; save; done
$PY - > $W/compare.txt 2>&1 <<'PY'
import glob, os, numpy as np
for m, x, y in [("whisper", "old", "new"), ("bert", "old", "new"), ("prefill", "old", "new"),
                ("decode", "new", "new-gnofin"), ("whisper", "new", "new-apf"), ("resnet", "new", "new-cnofin")]:
    for f in sorted(glob.glob(f"/tmp/o3-{m}_{x}_1/*.npy")):
        g = f.replace(f"_{x}_1", f"_{y}_1")
        if os.path.exists(g):
            a, b = np.load(f), np.load(g)
            print(m, x, y, os.path.basename(f), "max diff", float(np.abs(a - b).max()), "range", float(a.max() - a.min()))
PY
save
grep -E "test result|FAILED|panicked|^rc" $W/kernel_matmul.txt
cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert|prefill|decode|resnet)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'median [0-9.]* ms' $W/$f | head -1)"; grep -hE "^MatMul |^Conv |^Attention " $W/$f | head -2; done
