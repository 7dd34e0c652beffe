#!/usr/bin/env python3
"""Talks to a running `texstream serve` (tests/data/serve/tiny.ron) with Triton's own HTTP
client, `tritonclient[http]`: server and model metadata, readiness, and inference on every
model and pipeline with binary and with JSON tensors. Writes each output as OUT/NAME.npy for
tests/serve.rs to compare bit for bit with the library call and `texstream infer`, and checks
the models' outputs against ONNX Runtime within fp32 tolerance.

usage: serve_client.py HOST:PORT TOKEN DATA_DIR IMAGE OUT_DIR
"""
import os
import sys

import numpy as np
import onnxruntime as ort
import tritonclient.http as http


def check(cond, what):
    if not cond:
        raise SystemExit(f"serve_client: FAILED: {what}")


def infer(client, model, inputs, headers, binary):
    ins = []
    for name, array, datatype in inputs:
        i = http.InferInput(name, list(array.shape), datatype)
        # An encoded image is not UTF-8, so JSON cannot carry it: BYTES go binary always.
        i.set_data_from_numpy(array, binary_data=binary or datatype == "BYTES")
        ins.append(i)
    # infer() writes Inference-Header-Content-Length into the headers it is given: a copy each.
    if binary:
        return client.infer(model, ins, headers=dict(headers))
    meta = client.get_model_metadata(model, headers=dict(headers))
    outs = [http.InferRequestedOutput(o["name"], binary_data=False) for o in meta["outputs"]]
    return client.infer(model, ins, outputs=outs, headers=dict(headers))


def main():
    url, token, data, image, out = sys.argv[1:6]
    headers = {"Authorization": f"Bearer {token}"}
    client = http.InferenceServerClient(url=url)
    check(client.is_server_live(), "server live")
    check(client.is_server_ready(), "server ready")
    meta = client.get_server_metadata(headers=headers)
    check(meta["name"] == "texstream" and "binary_tensor_data" in meta["extensions"], f"server metadata {meta}")

    want = {
        "conv": ([("x", "FP32", [1, 3, 8, 8])], [("y", "FP32", [1, 16])]),
        "mlp": ([("x", "FP32", [1, 16])], [("y", "FP32", [1, 10])]),
        "chain": ([("pixels", "FP32", [1, 3, 8, 8])], [("probs", "FP32", [1, 10])]),
        "classify": ([("camera", "BYTES", [1])], [("probs", "FP32", [1, 10])]),
    }
    for model, (ins, outs) in want.items():
        check(client.is_model_ready(model, headers=headers), f"{model} ready")
        m = client.get_model_metadata(model, headers=headers)
        got_in = [(t["name"], t["datatype"], t["shape"]) for t in m["inputs"]]
        got_out = [(t["name"], t["datatype"], t["shape"]) for t in m["outputs"]]
        check(got_in == ins and got_out == outs, f"{model} metadata {m}")
    check(not client.is_model_ready("nope", headers=headers), "unknown model not ready")

    pixels = np.load(os.path.join(data, "pixels.npy"))
    feat = np.load(os.path.join(data, "feat.npy"))
    with open(image, "rb") as f:
        png = np.array([f.read()], dtype=np.object_)
    requests = {
        "conv": ([("x", pixels, "FP32")], "y"),
        "mlp": ([("x", feat, "FP32")], "y"),
        "chain": ([("pixels", pixels, "FP32")], "probs"),
        "classify": ([("camera", png, "BYTES")], "probs"),
    }
    for model, (inputs, output) in requests.items():
        for binary in (True, False):
            r = infer(client, model, inputs, headers, binary)
            y = r.as_numpy(output)
            check(y is not None and y.dtype == np.float32, f"{model} output {output}")
            np.save(os.path.join(out, f"{model}_{'bin' if binary else 'json'}.npy"), y)

    # ONNX Runtime on the same inputs (the image pipeline's preprocessing is RapidOCR's, not
    # a model, so it is compared with the library call only).
    sess = {m: ort.InferenceSession(os.path.join(data, f"{m}.onnx")) for m in ("conv", "mlp")}
    ref_conv = sess["conv"].run(None, {"x": pixels})[0]
    ref = {
        "conv": ref_conv,
        "mlp": sess["mlp"].run(None, {"x": feat})[0],
        "chain": sess["mlp"].run(None, {"x": ref_conv})[0],
    }
    for model, r in ref.items():
        y = np.load(os.path.join(out, f"{model}_bin.npy"))
        err = float(np.max(np.abs(y - r)))
        check(np.allclose(y, r, rtol=1e-3, atol=1e-4), f"{model} vs ONNX Runtime: max |diff| {err}")
        print(f"serve_client: {model} matches ONNX Runtime (max |diff| {err:.2e})")
    print("serve_client: ok")


if __name__ == "__main__":
    main()
