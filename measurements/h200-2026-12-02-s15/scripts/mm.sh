#!/usr/bin/env bash
# H200 session 15: constant-B MatMuls on tensor cores only with a 64x64 output tile per SM.
# vk-backend's kernel_matmul test (the new rule; without the validation layer, for the call's size), then the
# BERT-base-shaped encoder and the OCR recognizer and classifier (the detector is left out for the call's size), fp16, resident, replayed
# (`texstream infer --precision f16 --repeat 30`), with the binary before the change
# (texstream.xz) and after it (texstream_mm.xz), each output against ONNX Runtime CPU fp32.
# Carries .gl (the loader debs) and .devbin (both binaries, kernel_matmul.xz,
# ocr/rec and ocr/cls xz-compressed). Outputs: $OUT/m.tgz.
set -u
cd "$(dirname "$0")/../../.."
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
B=$PWD/.devbin; PY=/opt/torch/.venv/bin/python3
W=/tmp/w; rm -rf $W; mkdir -p $W /tmp/bin /tmp/in
for b in texstream texstream_mm kernel_matmul; do xz -dc $B/$b.xz > /tmp/bin/$b; done
chmod +x /tmp/bin/*
timeout 150 /tmp/bin/kernel_matmul --test-threads=1 > $W/kernel_matmul.txt 2>&1
echo "rc $?" >> $W/kernel_matmul.txt
M=/tmp/enc; rm -rf $M
$PY scripts/make_scale_models.py $M --decoder 125m --reference > $W/gen.txt 2>&1
mkdir -p /tmp/ocr; for m in cls rec; do xz -dc $B/ocr/$m.onnx.xz > /tmp/ocr/$m.onnx; done
$PY - <<'PY'
import numpy as np, onnxruntime as ort
rng = np.random.default_rng(0)
for name, shape in [("cls", [1, 3, 48, 192]), ("rec", [1, 3, 48, 768])]:
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    np.save(f"/tmp/in/{name}.npy", x)
    s = ort.InferenceSession(f"/tmp/ocr/{name}.onnx", providers=["CPUExecutionProvider"])
    np.save(f"/tmp/in/{name}.ref.npy", s.run(None, {s.get_inputs()[0].name: x})[0])
PY
cp $M/features.npy /tmp/in/enc.npy; cp $M/enc_out.npy /tmp/in/enc.ref.npy
for round in 1 2; do
  for bin in texstream texstream_mm; do
    for m in enc rec cls; do
      case $m in enc) f=$M/enc.onnx ;; *) f=/tmp/ocr/$m.onnx ;; esac
      timeout 100 /tmp/bin/$bin infer $f --input x=/tmp/in/$m.npy --precision f16 --repeat 30 \
        -o $W/o_${bin}_$m > $W/${m}_${bin}_r$round.txt 2>&1
    done
  done
done
$PY - <<'PY' > $W/summary.txt
import glob, os, re, numpy as np
for m in ("enc", "rec", "cls"):
    ref = np.load(f"/tmp/in/{m}.ref.npy").astype(np.float64)
    for b in ("texstream", "texstream_mm"):
        y = np.load(glob.glob(f"/tmp/w/o_{b}_{m}/*.npy")[0]).astype(np.float64)
        err = np.abs(y - ref).max() / (ref.max() - ref.min())
        times = []
        for r in (1, 2):
            t = open(f"/tmp/w/{m}_{b}_r{r}.txt").read()
            g = re.search(r"median ([0-9.]+) ms .*GPU ([0-9.]+) ms", t)
            times.append(f"{g.group(1)}/{g.group(2)}" if g else "-")
        print(f"{m:4s} {b:13s} whole/GPU ms r1 {times[0]:>16s} r2 {times[1]:>16s}  vs ORT {err:.2e}")
PY
rm -rf $W/o_*
tar czf $OUT/m.tgz -C $W .
tail -3 $W/kernel_matmul.txt; cat $W/summary.txt
