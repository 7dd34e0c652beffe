#!/usr/bin/env bash
# Session 37, run 10: run 9's LayerNorm by coordinates again, now on the pipeline specialized for
# unfolded tensors (the norm's launch passes `unfolded`, so coord_at's run-time test is compiled
# out): .dev37/ts5.xz against .dev37/ts4.xz (75c8357), Whisper-tiny's encoder and the
# BERT-base-shaped encoder (norms forced into row groups too), two rounds, outputs compared.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d; mkdir -p /tmp/bin $W
xz -dc .dev37/ts4.xz > /tmp/bin/old; xz -dc .dev37/ts5.xz > /tmp/bin/new; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
timeout 100 $PY scripts/whisper_encoder_baseline.py /tmp/wenc --iters 1 > $W/gen_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
WH="/tmp/wenc/encoder.onnx --input input_features=/tmp/wenc/input.npy --repeat 20"
BE="$E/enc.onnx --input x=$E/features.npy --repeat 20"
inf() { local s=$1 b=$2; shift 2; timeout 60 /tmp/bin/$b infer "$@" --precision f16 --profile 3 -o /tmp/o-$s > $W/$s.txt 2>&1; echo "rc $?" >> $W/$s.txt; }
inf warm old $WH; inf warm2 new $WH
for r in 1 2; do for b in old new; do inf whisper_${b}_$r $b $WH; TEXSTREAM_NORM_ROW_GROUPS=1 inf bertrg_${b}_$r $b $BE; done; done; save
$PY - > $W/compare.txt 2>&1 <<'PY'
import numpy as np
for m, f in (("whisper", "last_hidden_state.npy"), ("bertrg", "y.npy")):
    a, b = np.load(f"/tmp/o-{m}_old_1/{f}"), np.load(f"/tmp/o-{m}_new_1/{f}")
    print(m, "old new max diff", float(np.abs(a - b).max()))
PY
save; cat $W/compare.txt
for f in $(ls $W | grep -E '^(whisper|bert)' | sort); do
  echo "== $f $(grep -o 'GPU [0-9.]* ms' $W/$f | head -1) $(grep -hE '^LayerNormalization ' $W/$f | tr -s ' ') $(grep -hE '^rc [1-9]' $W/$f)"; done
