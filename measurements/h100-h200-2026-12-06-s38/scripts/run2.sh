#!/usr/bin/env bash
# Session 38, run 2: the attention's packed stores walking rows (.dev38/new2.xz) against run 1's
# (.dev38/new.xz) and 3157ceb (.dev38/base.xz); the packed norm from registers (PACKED_REGS,
# shader variant sd/ln_regs) against through shared memory; the packed norm off; the kernel
# tests of both on this card; `bench commands` (a dispatch's floor); which profilers exist.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
for b in base new new2 t_norm t_attention2; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
(ls -d /usr/local/cuda*/bin /opt/nvidia* 2>&1; which ncu nsys nvprof 2>&1; $PY -c "import torch, os; print(os.path.dirname(torch.__file__))"; ls /opt/torch/.venv/lib/python3*/site-packages/nvidia 2>&1) > $W/profilers.txt
( TEXSTREAM_SHADER_DIR=.dev38/sd/ln_regs timeout 150 /tmp/bin/t_norm packed --test-threads 1 > $W/t_norm_regs.txt 2>&1; echo "rc $?" >> $W/t_norm_regs.txt ) &
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
wait
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for b in base new new2; do inf warm_w_$b $b $WH; inf warm_b_$b $b $BE; done
for r in 1 2; do
  for b in base new new2; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; done
  TEXSTREAM_SHADER_DIR=.dev38/sd/ln_regs inf whisper_regs_$r new2 $WH
  TEXSTREAM_NORM_PACKED_OUT=0 inf whisper_nonorm_$r new2 $WH
done; save
timeout 200 /tmp/bin/t_attention2 --test-threads 1 > $W/t_attention2.txt 2>&1; echo "rc $?" >> $W/t_attention2.txt
timeout 60 /tmp/bin/new2 bench commands > $W/bench_commands.txt 2>&1; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
b = np.load("/tmp/o-whisper_base_1/last_hidden_state.npy").reshape(-1)
for s in ("base_1", "new_1", "new2_1", "regs_1", "nonorm_1"):
    try:
        a = np.load(f"/tmp/o-whisper_{s}/last_hidden_state.npy").reshape(-1)
        print("whisper", s, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()), "vs base", float(np.abs(a - b).max()))
    except Exception as e:
        print(s, e)
for s in ("new_1", "new2_1"):
    try:
        a, c = np.load(f"/tmp/o-bert_{s}/y.npy"), np.load("/tmp/o-bert_base_1/y.npy")
        print("bert", s, "vs base", float(np.abs(a - c).max()))
    except Exception as e:
        print(s, e)
PY
save; cat $W/compare.txt $W/profilers.txt; grep -E '"ms_median"' $W/torch_whisper.txt; tail -12 $W/bench_commands.txt
grep -hE "^test result|FAILED|panicked|^rc" $W/t_*.txt
for f in $(ls $W | grep -E '^(whisper|bert)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^(MatMul|Attention|LayerNormalization|Conv) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
