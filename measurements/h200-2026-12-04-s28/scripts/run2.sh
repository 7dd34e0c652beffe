#!/usr/bin/env bash
# H200, for the session after 28 (no machine was lent in session 28): the encoders before and
# after a3cacef (a Reshape copy folded into the Transpose copy that reads it; Q/K scalar factors
# joined to attention's scale; GELU in the dynamo and tanh forms) and b6842a5 (attention reads
# Q, K and V from the projections' rows). .devbin/tsold.xz: main at af77f98; .devbin/ts.xz:
# main. Three ways: `old`, `rows` (main) and `copies` (main with
# TEXSTREAM_ATTENTION_HEAD_COPIES=1: the split operands copied into heads before the kernel,
# one copy each instead of reading the rows: which is faster on the tensor-core kernel is the
# question). The Whisper-tiny encoder as Hugging Face exports it (the one session 27 measured:
# 25 copies, 8 scale Muls) and the BERT-base-shaped encoder (72 copies), resident, fp16, 30
# repeats and a 3-run profile each; outputs compared with `old`'s (equal up to the fp16
# rounding of the folded scale). First the kernel_attention test binary (.devbin/katt.xz, built
# from main by `cargo test --release -p texstream-vk --test kernel_attention --no-run`).
# Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in ts tsold katt; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
# kernel_attention from main (.devbin/katt.xz): the tensor-core kernels reading split rows
# (lavapipe has no cooperative matrices, so only this machine runs those paths).
(cd vk-backend && timeout 120 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
M=/tmp/wenc; timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for v in old:tsold:X=1 rows:ts:X=1 copies:ts:TEXSTREAM_ATTENTION_HEAD_COPIES=1; do
  n=${v%%:*}; r=${v#*:}; b=${r%%:*}; e=${r#*:}
  env $e timeout 60 /tmp/bin/$b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 30 --profile 3 -o /tmp/wh-$n > $W/whisper_$n.txt 2>&1; echo "rc $?" >> $W/whisper_$n.txt
  env $e timeout 60 /tmp/bin/$b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc-$n > $W/bert_$n.txt 2>&1; echo "rc $?" >> $W/bert_$n.txt
  save
done
$PY -c "
import numpy as np
for n in ('rows', 'copies'):
  for a, b in ((f'/tmp/wh-{n}/last_hidden_state.npy', '/tmp/wh-old/last_hidden_state.npy'), (f'/tmp/enc-{n}/y.npy', '/tmp/enc-old/y.npy')):
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
" > $W/compare.txt 2>&1
save
for n in old rows copies; do echo "== $n"; grep -hE "layout transforms|repeat runs|^Reshape |^Transpose |^Binary |^Attention " $W/whisper_$n.txt $W/bert_$n.txt; done
cat $W/compare.txt
tail -4 $W/kernel_attention.txt
