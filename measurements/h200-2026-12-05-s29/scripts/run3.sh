#!/usr/bin/env bash
# H200 session 29, run 3: the wide tensor-core attention picked by shape (head dims up to 64 and
# at least 256 query rows; key spans aiming at 2.75 wide workgroups a multiprocessor, 8 for the
# Whisper-tiny encoder), with the 32x128 MatMul tiles of run 2 removed. The kernel_attention and
# kernel_matmul test binaries of this build; the Whisper-tiny encoder by shape (`shape`) and with
# one query block (`one`, TEXSTREAM_ATTENTION_QUERY_BLOCKS=1), outputs compared; the
# BERT-base-shaped encoder by shape (one block there). Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d3; mkdir -p /tmp/bin $W
for b in ts katt kmat; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 150 /tmp/bin/katt > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt)
(cd vk-backend && timeout 150 /tmp/bin/kmat > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
save
M=/tmp/wenc; [ -f $M/encoder.onnx ] || timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; [ -f $E/enc.onnx ] || timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for v in shape:X=1 one:TEXSTREAM_ATTENTION_QUERY_BLOCKS=1 shape2:X=1; do
  n=${v%%:*}; e=${v#*:}
  env $e timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 30 --profile 3 -o /tmp/wh-$n > $W/whisper_$n.txt 2>&1; echo "rc $?" >> $W/whisper_$n.txt
done
timeout 60 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc-shape > $W/bert_shape.txt 2>&1; echo "rc $?" >> $W/bert_shape.txt
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
for a, b in (('/tmp/wh-shape/last_hidden_state.npy', '/tmp/wh-one/last_hidden_state.npy'),):
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
PYEOF
save
for t in attention matmul; do grep -E "test result|panicked" $W/kernel_$t.txt | head -3; done
for n in shape one shape2; do echo "== $n"; grep -hE "repeat runs|^Attention " $W/whisper_$n.txt; done
echo "== bert"; grep -hE "repeat runs|^Attention " $W/bert_shape.txt
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
