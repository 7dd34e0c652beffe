#!/usr/bin/env bash
# H200 session 27, run 2: the tensor-core attention reading a key/value texel as it is where no
# heads are grouped across texels, staging without divisions by the head dims, both softmax
# passes on all 32 invocations of a subgroup (opt.xz), and with a kernel sized for head dims up
# to 64 (d64.xz: Whisper's, BERT's), against run 1's new.xz (split keys by shape); splits by
# shape now aim at 8 workgroups a multiprocessor, spans of at least 2 key blocks.
# kernel_attention with d64's kernels. Prefill, Whisper-tiny encoder and BERT-base-shaped
# encoder profiled with each, outputs compared with ONNX Runtime / each other. Then the
# planner on assistant-scale.ron at a quarter (`texstream plan --bench`, `--candidates`) with
# run 1's measured page time, hand-off and batch lag. Outputs: $OUT/d.tgz.
set -u
cd "$(dirname "$0")/../../.."
T0=$(date +%s)
left() { echo $(( 560 - ($(date +%s) - T0) )); }
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
PY=/opt/torch/.venv/bin/python3
W=/tmp/d2; mkdir -p /tmp/bin $W
for b in new opt d64 kernel_attention; do xz -dc .devbin/$b.xz > /tmp/bin/$b; done; chmod +x /tmp/bin/*
save() { tar czf $OUT/d.tgz -C $W .; }
(cd vk-backend && timeout 120 /tmp/bin/kernel_attention --test-threads=1) > $W/kernel_attention.txt 2>&1; echo "rc $?" >> $W/kernel_attention.txt
save
timeout 120 $PY scripts/make_scale_models.py models/scale --decoder 1.3b > $W/gen.txt 2>&1
timeout 60 /tmp/bin/new compile models/scale/lm/decoder.onnx -o /tmp/prefill.tspk --kv-cache 128 \
  --shape input_ids=1x128 --shape position_ids=1x128 --shape attention_mask=1x128 \
  > $W/prefill-compile.txt 2>&1; echo "rc $?" >> $W/prefill-compile.txt
M=/tmp/wenc; timeout 200 $PY scripts/whisper_encoder_baseline.py $M > $W/torch_whisper.txt 2>&1
E=/tmp/enc; timeout 120 $PY scripts/make_scale_models.py $E --decoder 125m --reference > $W/gen_enc.txt 2>&1
echo "setup $(( $(date +%s) - T0 )) s" >> $W/gen.txt
save
for r in 1 2; do for b in new opt d64; do
  timeout 40 /tmp/bin/$b infer /tmp/prefill.tspk --fill-missing 1 --repeat 10 --profile 3 -o /tmp/p-$b > $W/prefill_$b$r.txt 2>&1; echo "rc $?" >> $W/prefill_$b$r.txt
  timeout 60 /tmp/bin/$b infer $M/encoder.onnx --input input_features=$M/input.npy --precision f16 --repeat 20 --profile 3 -o /tmp/wh-$b > $W/whisper_$b$r.txt 2>&1; echo "rc $?" >> $W/whisper_$b$r.txt
  timeout 60 /tmp/bin/$b infer $E/enc.onnx --input x=$E/features.npy --precision f16 --repeat 30 --profile 3 -o /tmp/enc_$b > $W/bert_$b$r.txt 2>&1; echo "rc $?" >> $W/bert_$b$r.txt
done; done
timeout 200 $PY scripts/encoder_baseline.py $E/enc.onnx $E/features.npy $W/torch_enc.json \
  --ort-output $E/enc_out.npy --texstream-output /tmp/enc_d64/y.npy > $W/torch_enc.txt 2>&1; echo "rc $?" >> $W/torch_enc.txt
$PY - <<'PY' > $W/accuracy.txt 2>&1
import glob, numpy as np
for name, ref, pat in (("bert", "/tmp/enc/enc_out.npy", "/tmp/enc_%s/*.npy"), ("whisper", "/tmp/wenc/ort.npy", "/tmp/wh-%s/*.npy")):
    r = np.load(ref).astype(np.float64)
    for b in ("new", "opt", "d64"):
        f = glob.glob(pat % b)
        if f:
            x = np.load(f[0]).astype(np.float64)
            print(name, b, "max diff / ORT range", float(abs(x - r).max() / (r.max() - r.min())))
a = np.load('/tmp/p-new/logits.npy')
for b in ("opt", "d64"):
    x = np.load('/tmp/p-%s/logits.npy' % b)
    print("prefill new vs", b, "max diff", float(abs(a - x).max()), "range", float(a.max() - a.min()), "argmax equal", int((a.argmax(-1) == x.argmax(-1)).sum()), "of", a.shape[1])
PY
save
timeout 120 /tmp/bin/d64 check workloads/assistant-scale.ron > $W/check-scale.txt 2>&1; echo "rc $?" >> $W/check-scale.txt
P="workloads/assistant-scale.ron --cap 693MiB --page-time 33.8us --handoff 13.6us --reuse-lag 15"
[ $(left) -gt 100 ] && { /usr/bin/time -f "wall %e s, max rss %M KiB" timeout $(( $(left) - 60 )) /tmp/bin/d64 plan $P --policy planned --candidates > $W/plan-candidates.txt 2>&1; echo "rc $?" >> $W/plan-candidates.txt; }
save
[ $(left) -gt 60 ] && { timeout $(( $(left) - 10 )) /tmp/bin/d64 plan $P --bench > $W/plan-bench.txt 2>&1; echo "rc $?" >> $W/plan-bench.txt; }
save
grep -E "test result|^rc|panicked" $W/kernel_attention.txt
cat $W/accuracy.txt; tail -3 $W/torch_enc.txt
for r in 1 2; do for b in new opt d64; do echo "== $b$r"; grep -hE "^Attention |repeat runs" $W/prefill_$b$r.txt $W/whisper_$b$r.txt $W/bert_$b$r.txt; done; done
tail -30 $W/plan-candidates.txt; tail -20 $W/plan-bench.txt
echo "elapsed $(( $(date +%s) - T0 )) s"
