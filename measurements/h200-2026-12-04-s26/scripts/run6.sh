#!/usr/bin/env bash
# H200 session 26, run 6: the tensor-core MatMul reading A packed along K (each MatMul first
# packs its [.., M, K] A, one value a texel, into [L, K, 1, M], four k a texel) (texstream.xz),
# against v1.xz (93f23bf). kernel_matmul with the new kernels; the 1.34 B decoder's 128-token
# prefill with both, twice, logits compared; the BERT-base-shaped encoder of
# assistant-scale.ron (make_scale_models.py --decoder 125m) and a Whisper-tiny encoder on 30 s
# (scripts/whisper_encoder_baseline.py) resident with both (`infer --precision f16 --repeat 30`,
# fp16 activations), each against ONNX Runtime, beside PyTorch fp16 eager and CUDA graph.
# Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d6; mkdir -p /tmp/bin $W
for b in v1 texstream kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 90 /tmp/bin/kernel_matmul --test-threads=1) > $W/kernel_matmul.txt 2>&1; echo "rc $?" >> $W/kernel_matmul.txt
if [ ! -f /tmp/prefill.tspk ]; then
timeout 90 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/v1 compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
fi
save
run() { timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/p-$2 > $W/$2.txt 2>&1; echo "rc $?" >> $W/$2.txt; }
run v1 base; run texstream new; run v1 base2; run texstream new2
$PY -c "
import numpy as np; a=np.load('/tmp/p-base/logits.npy'); b=np.load('/tmp/p-new/logits.npy')
print('prefill logits base vs new: max diff', float(abs(a-b).max()), 'range', float(a.max()-a.min()), 'argmax rows equal', int((a.argmax(-1)==b.argmax(-1)).sum()), 'of', a.shape[1])
" > $W/compare.txt 2>&1
save
E=/tmp/enc; timeout 120 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
M=/tmp/wenc; timeout 200 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1; echo "rc $?" >> $W/torch_whisper.txt
for b in v1 texstream; do
  timeout 60 /tmp/bin/$b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 -o /tmp/enc_$b > $W/bert_$b.txt 2>&1; echo "rc $?" >> $W/bert_$b.txt
  timeout 60 /tmp/bin/$b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --profile 3 -o /tmp/encp_$b > $W/bert_profile_$b.txt 2>&1
  timeout 60 /tmp/bin/$b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 30 -o /tmp/wh_$b > $W/whisper_$b.txt 2>&1; echo "rc $?" >> $W/whisper_$b.txt
  timeout 60 /tmp/bin/$b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --profile 3 -o /tmp/whp_$b > $W/whisper_profile_$b.txt 2>&1
done
timeout 200 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_enc.json \
  --ort-output $E/enc_out.npy --texstream-output /tmp/enc_texstream/y.npy > $W/torch_enc.txt 2>&1; echo "rc $?" >> $W/torch_enc.txt
$PY - <<'PY' > $W/accuracy.txt 2>&1
import glob, numpy as np
for name, ref, pat in (("bert", "/tmp/enc/enc_out.npy", "/tmp/enc_%s/*.npy"), ("whisper", "/tmp/wenc/ort.npy", "/tmp/wh_%s/*.npy")):
    r = np.load(ref).astype(np.float64)
    for b in ("v1", "texstream"):
        f = glob.glob(pat % b)
        if f:
            y = np.load(f[0]).astype(np.float64)
            print(f"{name} {b}: max |diff| / range vs ORT = {np.abs(y - r).max() / (r.max() - r.min()):.2e}")
PY
save
grep -E "test result|^rc|panicked" $W/kernel_matmul.txt
cat $W/compare.txt $W/accuracy.txt
for n in base new base2 new2; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; grep -E '^MatMul |^Gemm |^Copy |^Attention ' $W/$n.txt; done
for n in bert_v1 bert_texstream whisper_v1 whisper_texstream; do echo "== $n: $(grep -E 'repeat runs' $W/$n.txt)"; done
for n in bert_profile_v1 bert_profile_texstream whisper_profile_v1 whisper_profile_texstream; do echo "== $n"; grep -A6 "^op " $W/$n.txt | head -7; done
grep -iE "eager|graph|compile" $W/torch_enc.txt $W/torch_whisper.txt | head -12
echo "elapsed $(( $(date +%s) - T0 )) s"
