#!/usr/bin/env bash
# H200, for the session after 28 (no machine was lent in session 28): the encoders before and
# after a3cacef (a Reshape copy folded into the Transpose copy that reads it; Q/K scalar factors
# joined to attention's scale; GELU in the dynamo and tanh forms). .devbin/tsold.xz: main at
# af77f98; .devbin/ts.xz: main. The Whisper-tiny encoder as Hugging Face exports it (the one
# session 27 measured: 25 copies, 8 scale Muls) and the BERT-base-shaped encoder (72 copies),
# resident, fp16, 30 repeats and a 3-run profile each; outputs compared between the two builds
# (copies move values exactly: they must be equal up to the fp16 rounding of the folded
# scale). Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in ts tsold; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
M=/tmp/wenc; timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for b in tsold ts; do
  timeout 60 /tmp/bin/$b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 30 --profile 3 -o /tmp/wh-$b > $W/whisper_$b.txt 2>&1; echo "rc $?" >> $W/whisper_$b.txt
  timeout 60 /tmp/bin/$b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc-$b > $W/bert_$b.txt 2>&1; echo "rc $?" >> $W/bert_$b.txt
  save
done
$PY -c "
import numpy as np
for a, b in (('/tmp/wh-ts/last_hidden_state.npy', '/tmp/wh-tsold/last_hidden_state.npy'), ('/tmp/enc-ts/y.npy', '/tmp/enc-tsold/y.npy')):
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
" > $W/compare.txt 2>&1
save
for b in tsold ts; do echo "== $b"; grep -hE "layout transforms|repeat runs|^Reshape |^Transpose |^Binary |^Attention " $W/whisper_$b.txt $W/bert_$b.txt; done
cat $W/compare.txt
