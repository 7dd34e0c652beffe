#!/usr/bin/env python3
"""Copies the exporter-sweep files that CI keeps from a whole sweep (scripts/export_sweep.py's
output) into tests/data/exporter_sweep, with a trimmed sweep.json that lists every entry.

The repo keeps about 14 MB: every model's TorchScript and dynamo exports at opset 18, and the
TorchScript opset-14 export of the small ones (LayerNormalization decomposed, axes as
attributes). Left out: resnet18 and squeezenet1_1 (45 and 3 MB a file), and the dynamo exports
of mobilenet_v2 and deeplabv3 (their ops are covered by the others). Their results come from a
run over the whole sweep (TEXSTREAM_SWEEP_DIR, see tests/exporter_sweep.rs).

Usage: sweep_keep.py SWEEP_DIR [DEST]
"""
import json
import os
import shutil
import sys

LEFT_OUT = {"resnet18", "squeezenet1_1"}
NO_DYNAMO = {"mobilenet_v2", "deeplabv3_mobilenet_v3"}
# TorchScript at opset 14 where it is cheap (the transformers and the two smallest CNNs).
OPSET14 = {"bert", "distilbert", "gpt2", "llama", "whisper_encoder", "vit", "vit_tv", "shufflenet_v2", "convnext"}
# Entry fields the test and the table read.
FIELDS = ("model", "exporter", "opset", "stage", "error", "plain_export_error", "export_mode", "export_notes",
          "ops", "nodes", "opset_imports", "bytes", "torch_vs_ort")


def kept(e):
    m, ex, op = e["model"], e["exporter"], e["opset"]
    if e.get("error") or m in LEFT_OUT:
        return False
    if ex == "dynamo":
        return op == 18 and m not in NO_DYNAMO
    return op == 18 or (op == 14 and m in OPSET14)


def main():
    src = sys.argv[1]
    dst = sys.argv[2] if len(sys.argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "tests/data/exporter_sweep")
    sweep = json.load(open(os.path.join(src, "sweep.json")))
    total = 0
    models = set()
    for e in sweep["entries"]:
        if not kept(e):
            continue
        rel = os.path.join(e["model"], f"{e['exporter']}-op{e['opset']}")
        d = os.path.join(dst, rel)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        shutil.copy(os.path.join(src, rel, "model.onnx"), d)
        shutil.copytree(os.path.join(src, rel, "ort"), os.path.join(d, "ort"))
        total += os.path.getsize(os.path.join(d, "model.onnx"))
        models.add(e["model"])
    for m in sorted(models):
        shutil.rmtree(os.path.join(dst, m, "inputs"), ignore_errors=True)
        shutil.copytree(os.path.join(src, m, "inputs"), os.path.join(dst, m, "inputs"))
    entries = [{k: e[k] for k in FIELDS if k in e} for e in sweep["entries"]]
    with open(os.path.join(dst, "sweep.json"), "w") as f:
        json.dump({"versions": sweep["versions"], "entries": entries}, f, indent=1)
    print(f"kept {total / 1e6:.1f} MB of ONNX files for {len(models)} models in {dst}")


if __name__ == "__main__":
    main()
