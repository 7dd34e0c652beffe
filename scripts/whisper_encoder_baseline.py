#!/usr/bin/env python3
"""A Whisper-tiny encoder (Hugging Face's WhisperEncoder in tiny's shapes: 80 mels x 3000 frames,
4 layers, 384 wide, 6 heads; random weights, seeded) exported to ONNX with PyTorch's TorchScript
exporter (opset 17), its ONNX Runtime CPU fp32 output, and PyTorch fp16 timings on the same
module (eager, and one forward captured in a CUDA graph and replayed).

    whisper_encoder_baseline.py OUT_DIR [--iters 30]

Writes OUT_DIR/encoder.onnx, input.npy ([1, 80, 3000] float32, seeded), ort.npy and torch.json
(times and the fp16 outputs' distance from ORT's, as the largest difference over ORT's range).
Run texstream on the same file: `texstream infer OUT_DIR/encoder.onnx --input
input_features=OUT_DIR/input.npy --precision f16 --repeat 30`.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no scripts/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from encoder_baseline import bench, rel  # noqa: E402  (the same timing and distance)
from torch_compiled import add_compiled, captured  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--compile", action="store_true",
                    help="also time torch.compile(mode=\"reduce-overhead\")")
    args = ap.parse_args()
    import onnxruntime as ort
    import torch
    import transformers as tf

    os.makedirs(args.out_dir, exist_ok=True)
    torch.manual_seed(0)
    cfg = tf.WhisperConfig(num_mel_bins=80, d_model=384, encoder_layers=4,
                           encoder_attention_heads=6, encoder_ffn_dim=1536,
                           max_source_positions=1500)

    class Encoder(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = tf.WhisperForConditionalGeneration(cfg).model.encoder

        def forward(self, input_features):
            return self.encoder(input_features).last_hidden_state

    model = Encoder().eval()
    x = np.random.default_rng(0).standard_normal((1, 80, 3000), dtype=np.float32)
    np.save(os.path.join(args.out_dir, "input.npy"), x)
    path = os.path.join(args.out_dir, "encoder.onnx")
    with torch.no_grad():
        torch.onnx.export(model, (torch.from_numpy(x),), path, opset_version=17,
                          input_names=["input_features"], output_names=["last_hidden_state"],
                          dynamo=False, do_constant_folding=True)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"input_features": x})[0]
    np.save(os.path.join(args.out_dir, "ort.npy"), ref)
    report = {"config": {"mels": 80, "frames": 3000, "layers": 4, "d_model": 384, "heads": 6},
              "parameters": int(sum(p.numel() for p in model.parameters()))}
    dev = torch.device("cuda")
    m16 = model.to(dev).half()
    xin = torch.from_numpy(x).to(dev).half()
    with torch.no_grad():
        report["torch_fp16_vs_ort"] = rel(m16(xin).float().cpu().numpy(), ref)
        report["eager"] = bench(torch, lambda: m16(xin), args.iters)
        g, out = captured(torch, m16, xin)
        report["cuda_graph_vs_ort"] = rel(out.float().cpu().numpy(), ref)
        report["cuda_graph"] = bench(torch, g.replay, args.iters)
    if args.compile:
        add_compiled(report, torch, m16, xin, bench, args.iters)
    report["gpu"] = torch.cuda.get_device_name(0)
    report["torch"] = torch.__version__
    report["transformers"] = tf.__version__
    with open(os.path.join(args.out_dir, "torch.json"), "w") as f:
        json.dump(report, f, indent=1)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
