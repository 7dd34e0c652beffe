#!/usr/bin/env bash
# Session 38, run 3: the session's build (.dev38/final.xz: norms writing their MatMuls' packed A
# from registers, the split attention's merge writing it, the convolution's 96-channel large
# tile) against 3157ceb (.dev38/base.xz) on one card: the Whisper-tiny encoder, the
# BERT-base-shaped encoder and the PP-OCRv6 detector at 384x768 (five of its convolutions take
# the new tile; also forced back to the 64-channel one), a warm-up of each binary and two rounds;
# outputs against the base and ONNX Runtime; the kernel tests of the packed outputs.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
for b in base final t_norm t_attention; do xz -dc .dev38/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
xz -dc .dev38/det.onnx.xz > /tmp/det.onnx
save() { tar czf $OUT/d.tgz -C $W .; }
nvidia-smi --query-gpu=name,driver_version --format=csv > $W/gpu.txt 2>&1
( timeout 150 /tmp/bin/t_norm --test-threads 1 > $W/t_norm.txt 2>&1; echo "rc $?" >> $W/t_norm.txt
  timeout 200 /tmp/bin/t_attention --test-threads 1 > $W/t_attention.txt 2>&1; echo "rc $?" >> $W/t_attention.txt ) &
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 10 > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
$PY -c "import numpy as np; np.save('/tmp/det.input.npy', np.random.default_rng(0).uniform(-1, 1, [1, 3, 384, 768]).astype(np.float32))"
wait
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
DE="/tmp/det.onnx --input x=/tmp/det.input.npy --repeat 20"
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
for b in base final; do inf warm_w_$b $b $WH; inf warm_b_$b $b $BE; inf warm_d_$b $b $DE; done
for r in 1 2; do
  for b in base final; do inf whisper_${b}_$r $b $WH; inf bert_${b}_$r $b $BE; inf det_${b}_$r $b $DE; done
  TEXSTREAM_COOP_CONV_TILE=large inf det_large_$r final $DE
done; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np, glob
ref = np.load("/tmp/wenc/ort.npy").reshape(-1)
b = np.load("/tmp/o-whisper_base_1/last_hidden_state.npy").reshape(-1)
for s in ("base_1", "final_1"):
    a = np.load(f"/tmp/o-whisper_{s}/last_hidden_state.npy").reshape(-1)
    print("whisper", s, "vs ORT max diff", float(np.abs(a - ref).max()), "range", float(ref.max() - ref.min()), "vs base", float(np.abs(a - b).max()))
a, c = np.load("/tmp/o-bert_final_1/y.npy"), np.load("/tmp/o-bert_base_1/y.npy")
print("bert final vs base", float(np.abs(a - c).max()))
for f in sorted(glob.glob("/tmp/o-det_base_1/*.npy")):
    x, y, z = np.load(f), np.load(f.replace("det_base_1", "det_final_1")), np.load(f.replace("det_base_1", "det_large_1"))
    print("det", f.split("/")[-1], "final vs base", float(np.abs(x - y).max()), "large vs base", float(np.abs(x - z).max()), "range", float(x.max() - x.min()))
PY
save; cat $W/compare.txt; grep -E '"ms_median"' $W/torch_whisper.txt
grep -hE "^test result|FAILED|panicked|^rc" $W/t_*.txt
for f in $(ls $W | grep -E '^(whisper|bert|det)_' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -o 'replayed commands: [0-9]* dispatches' $W/$f) $(grep -hE '^(MatMul|Attention|LayerNormalization|Conv) ' $W/$f | tr -s ' ' | tr '\n' ';') $(grep -hE '^rc [1-9]' $W/$f)"; done
