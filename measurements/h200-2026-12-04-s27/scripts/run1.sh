#!/usr/bin/env bash
# H200 session 27, run 1: the tensor-core attention with its keys split into spans over
# workgroups (attention_coop_split.comp + attention_combine.comp) and the pipelines specialized
# for unfolded operands (4ebe2d6), against v1.xz (93f23bf: neither). kernel_attention and
# kernel_matmul with the new kernels. The 1.34 B prefill and the Whisper-tiny encoder profiled
# with v1, the new binary unsplit (TEXSTREAM_ATTENTION_SPLITS=1), by shape, and 2/4/8 spans;
# outputs compared; the BERT-base-shaped encoder with v1 and new (by shape and unsplit), each
# against ONNX Runtime. Then assistant-scale.ron's cold start, every policy at a quarter with a
# resident reference (first request beside its plan and lower bound). Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d1; mkdir -p /tmp/bin $W
for b in v1 new kernel_attention kernel_matmul; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
for t in kernel_attention kernel_matmul; do
  (cd vk-backend && timeout 120 /tmp/bin/$t --test-threads=1) > $W/$t.txt 2>&1; echo "rc $?" >> $W/$t.txt
done
save
timeout 120 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/new compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
M=/tmp/wenc; timeout 200 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 120 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
save
pv() { # binary label [env]
  env $3 timeout 40 /tmp/bin/$1 infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/p-$2 > $W/prefill_$2.txt 2>&1; echo "rc $?" >> $W/prefill_$2.txt
  env $3 timeout 60 /tmp/bin/$1 infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$2 > $W/whisper_$2.txt 2>&1; echo "rc $?" >> $W/whisper_$2.txt
}
pv v1 v1 X=1; pv new s1 TEXSTREAM_ATTENTION_SPLITS=1; pv new shape X=1
pv new s2 TEXSTREAM_ATTENTION_SPLITS=2; pv new s4 TEXSTREAM_ATTENTION_SPLITS=4; pv new s8 TEXSTREAM_ATTENTION_SPLITS=8
pv v1 v1b X=1; pv new shapeb X=1
save
for v in v1:X=1 s1:TEXSTREAM_ATTENTION_SPLITS=1 shape:X=1; do
  n=${v%%:*}; e=${v#*:}; b=new; [ $n = v1 ] && b=v1
  env $e timeout 60 /tmp/bin/$b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc_$n > $W/bert_$n.txt 2>&1; echo "rc $?" >> $W/bert_$n.txt
done
$PY - <<'PY' > $W/accuracy.txt 2>&1
import glob, numpy as np
for name, ref, pat in (("bert", "/tmp/enc/enc_out.npy", "/tmp/enc_%s/*.npy"), ("whisper", "/tmp/wenc/ort.npy", "/tmp/wh-%s/*.npy")):
    r = np.load(ref).astype(np.float64)
    for b in ("v1", "s1", "shape", "s2", "s4", "s8"):
        f = glob.glob(pat % b)
        if f:
            x = np.load(f[0]).astype(np.float64)
            print(name, b, "max diff / ORT range", float(abs(x - r).max() / (r.max() - r.min())))
a = np.load('/tmp/p-v1/logits.npy')
for b in ("s1", "shape", "s2", "s4", "s8"):
    try:
        x = np.load('/tmp/p-%s/logits.npy' % b)
        print("prefill v1 vs", b, "max diff", float(abs(a - x).max()), "range", float(a.max() - a.min()), "argmax equal", int((a.argmax(-1) == x.argmax(-1)).sum()), "of", a.shape[1])
    except Exception as e:
        print("prefill", b, e)
PY
save
timeout 90 /tmp/bin/new check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
[ $(left) -gt 120 ] && timeout $(( $(left) - 15 )) /tmp/bin/new run workloads/assistant-scale.ron --all-policies \
  --resident-reference --cap 693MiB --iterations 3 --cold > $W/cold.txt 2>&1; echo "rc $?" >> $W/cold.txt
save
grep -E "test result|^rc|panicked" $W/kernel_*.txt
cat $W/accuracy.txt
for n in v1 s1 shape s2 s4 s8 v1b shapeb; do echo "== $n"; grep -E "^(Attention|MatMul) |repeat runs" $W/prefill_$n.txt $W/whisper_$n.txt; done
for n in v1 s1 shape; do grep -E "repeat runs|^Attention " $W/bert_$n.txt; done
tail -25 $W/cold.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
