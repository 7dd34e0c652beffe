#!/usr/bin/env bash
# H200 session 29, run 2: the tensor-core attention with four blocks of 16 query rows a head
# lane (attention_coop_wide.comp, TEXSTREAM_ATTENTION_QUERY_BLOCKS=4, head dims up to 64: each
# staged key/value block serves 64 rows, a workgroup's barriers 16 subgroups) against one block
# (attention_coop.comp, the default). First the kernel_attention test binary both ways (its
# prefill test also runs each case with four blocks and three spans). Then the Whisper-tiny
# encoder (scripts/whisper_encoder_baseline.py) and the BERT-base-shaped encoder
# (make_scale_models.py --decoder 125m), resident, fp16, 30 repeats and a 3-run profile: wide
# one block, four (spans by shape), and four over 3 and 12 key spans; outputs compared with the
# one-block run's. Then the tensor-core MatMul on 32x128 tiles (matmul_const_coop_n128.comp,
# TEXSTREAM_COOP_WIDE_TILES=1: a fifth fewer texel loads a step for the same outputs): the
# kernel_matmul test binary (its constant-B cases also run all on 32x128 tiles), and the 1.34 B
# 128-token prefill and the BERT-base-shaped encoder three ways: tiles by shape, 32-row tiles
# 128 wide (`n128`), and every MatMul on 32x128 tiles (`all128`: the gate/up projections too);
# logits and outputs compared with the by-shape run's. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in ts katt kmat; do xz -dc .devbin/$b.xz > /tmp/bin/$b; chmod +x /tmp/bin/$b; done
save() { tar czf $OUT/d.tgz -C $W .; }
# The 1.34 B scale decoder (about 100 s of numpy) while the kernels' tests run.
( [ -f models/scale/lm/decoder.onnx.data ] || timeout 200 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1 ) &
GEN=$!
for v in wide:TEXSTREAM_ATTENTION_QUERY_BLOCKS=4 one:X=1; do
  n=${v%%:*}; e=${v#*:}
  (cd vk-backend && env $e timeout 150 /tmp/bin/katt > $W/kernel_attention_$n.txt 2>&1; echo "rc $?" >> $W/kernel_attention_$n.txt)
done
(cd vk-backend && timeout 150 /tmp/bin/kmat > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt)
save
M=/tmp/wenc; timeout 100 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 60 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
for v in one:X=1 wide:TEXSTREAM_ATTENTION_QUERY_BLOCKS=4 wide3:TEXSTREAM_ATTENTION_QUERY_BLOCKS=4:TEXSTREAM_ATTENTION_SPLITS=3 wide12:TEXSTREAM_ATTENTION_QUERY_BLOCKS=4:TEXSTREAM_ATTENTION_SPLITS=12; do
  n=${v%%:*}; e=${v#*:}; e=${e/:/ }
  env $e timeout 60 /tmp/bin/ts infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 30 --profile 3 -o /tmp/wh-$n > $W/whisper_$n.txt 2>&1; echo "rc $?" >> $W/whisper_$n.txt
  case $n in one|wide) env $e timeout 60 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc-$n > $W/bert_$n.txt 2>&1; echo "rc $?" >> $W/bert_$n.txt;; esac
  save
done
wait $GEN
timeout 90 /tmp/bin/ts compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
for v in shape:X=1 n128:TEXSTREAM_COOP_WIDE_TILES=1 all128:TEXSTREAM_COOP_WIDE_TILES=1:TEXSTREAM_COOP_ROWS=32; do
  n=${v%%:*}; e=${v#*:}; e=${e/:/ }
  env $e timeout 40 /tmp/bin/ts infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/pp-$n > $W/prefill_$n.txt 2>&1; echo "rc $?" >> $W/prefill_$n.txt
  env $e timeout 60 /tmp/bin/ts infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/encm-$n > $W/bertm_$n.txt 2>&1; echo "rc $?" >> $W/bertm_$n.txt
  save
done
$PY - > $W/compare.txt 2>&1 <<'PYEOF'
import numpy as np
pairs = [(f'/tmp/wh-{n}/last_hidden_state.npy', '/tmp/wh-one/last_hidden_state.npy') for n in ('wide', 'wide3', 'wide12')]
pairs.append(('/tmp/enc-wide/y.npy', '/tmp/enc-one/y.npy'))
for n in ('n128', 'all128'):
    pairs.append((f'/tmp/pp-{n}/logits.npy', '/tmp/pp-shape/logits.npy'))
    pairs.append((f'/tmp/encm-{n}/y.npy', '/tmp/encm-shape/y.npy'))
for a, b in pairs:
    try:
        x, y = np.load(a), np.load(b); print(a, 'vs', b, 'max diff', float(abs(x - y).max()), 'range', float(y.max() - y.min()))
    except Exception as e:
        print(a, b, 'not compared:', e)
PYEOF
save
for n in wide one; do echo "== katt $n"; grep -E "test result|panicked|FAILED" $W/kernel_attention_$n.txt | head -5; done
grep -E "test result|panicked|FAILED" $W/kernel_matmul.txt | head -5
for n in one wide wide3 wide12; do echo "== $n"; grep -hE "repeat runs|^Attention " $W/whisper_$n.txt $W/bert_$n.txt 2>/dev/null; done
for n in shape n128 all128; do echo "== $n"; grep -hE "repeat runs|^MatMul |^Gemm " $W/prefill_$n.txt $W/bertm_$n.txt 2>/dev/null; done
grep -A3 '"cuda_graph"' $W/torch_whisper.txt
cat $W/compare.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
