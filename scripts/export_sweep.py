#!/usr/bin/env python3
"""The exporter sweep of issue 12: small, randomly initialised torchvision and Hugging Face models
exported by both PyTorch exporters (TorchScript, `dynamo=False`, and dynamo, `dynamo=True`) at
several opsets, each with a fixed input and ONNX Runtime's output on it.

Needs PyTorch, torchvision, transformers, onnx and onnxruntime (the device machine has them, with
no network: every model is built from a small config with random weights). Each export is a
plain `torch.onnx.export` call, as users write it; where that fails it is tried again under
`torch.no_grad()`, and both are recorded. Writes, under OUT:

    <model>/inputs/<name>.npy              the fixed inputs, shared by every export of the model
    <model>/<exporter>-op<opset>/model.onnx
    <model>/<exporter>-op<opset>/ort/<output>.npy
    <model>/<exporter>-op<opset>/meta.json  exporter, opset (asked, and the file's), ops, error,
                                            the exporter's logged fallbacks, torch vs ORT
    sweep.json                              every entry's meta, plus the versions used

`scripts/sweep_keep.py` copies the files CI keeps into tests/data/exporter_sweep, and
`tests/exporter_sweep.rs` runs them (or a whole sweep, TEXSTREAM_SWEEP_DIR) on texstream against
the stored ORT outputs and writes the tables of BENCHMARKS.md's "Exporter sweep".

Weights are random, then rounded to a power-of-two grid a few steps per standard deviation: still
random, but the files compress well (git stores them compressed, and the device's files come back
compressed). Batch-norm statistics, norm affines and zero-initialised tensors are randomised, so
that folding them is tested and no output is constant.

Usage: export_sweep.py OUT [--jobs N] [--models a,b] [--opsets 14,17,18] [--deadline SECONDS]
(about 70 s for the 114 entries on 15 cores)
"""
import argparse
import json
import os
import sys
import time
import traceback

import numpy as np

SEQ = 16
DEC_SEQ = 8

# name -> (family, input specs). An input spec is (name, kind, shape): kind "image"/"float" is
# N(0, 1) float32, "ids" token ids below 256, "mask" an attention mask, "types" token types.
MODELS = {
    # torchvision classification
    "resnet18": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "mobilenet_v2": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "mobilenet_v3_small": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "efficientnet_b0": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "shufflenet_v2": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "squeezenet1_1": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "convnext": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "vit_tv": ("torchvision", [("input", "image", [1, 3, 32, 32])]),
    "swin_tv": ("torchvision", [("input", "image", [1, 3, 32, 32])]),
    # torchvision segmentation
    "lraspp_mobilenet_v3": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    "deeplabv3_mobilenet_v3": ("torchvision", [("input", "image", [1, 3, 64, 64])]),
    # Hugging Face
    "bert": (
        "hf",
        [
            ("input_ids", "ids", [1, SEQ]),
            ("attention_mask", "mask", [1, SEQ]),
            ("token_type_ids", "types", [1, SEQ]),
        ],
    ),
    "distilbert": ("hf", [("input_ids", "ids", [1, SEQ]), ("attention_mask", "mask", [1, SEQ])]),
    "gpt2": ("hf", [("input_ids", "ids", [1, SEQ]), ("attention_mask", "ones", [1, SEQ])]),
    "llama": ("hf", [("input_ids", "ids", [1, SEQ]), ("attention_mask", "ones", [1, SEQ])]),
    "whisper_encoder": ("hf", [("input_features", "float", [1, 16, 32])]),
    "whisper_decoder": (
        "hf",
        [("decoder_input_ids", "ids", [1, DEC_SEQ]), ("encoder_hidden_states", "float", [1, 16, 32])],
    ),
    "vit": ("hf", [("pixel_values", "image", [1, 3, 32, 32])]),
    "swin": ("hf", [("pixel_values", "image", [1, 3, 32, 32])]),
}



def make_inputs(name, specs, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for n, kind, shape in specs:
        if kind in ("image", "float"):
            out[n] = rng.standard_normal(shape).astype(np.float32)
        elif kind == "ids":
            out[n] = rng.integers(4, 256, size=shape).astype(np.int64)
        elif kind == "mask":
            m = np.ones(shape, dtype=np.int64)
            m[..., -4:] = 0  # right padding, so the mask path is exercised
            out[n] = m
        elif kind == "ones":
            out[n] = np.ones(shape, dtype=np.int64)
        elif kind == "types":
            t = np.zeros(shape, dtype=np.int64)
            t[..., shape[-1] // 2 :] = 1
            out[n] = t
        else:
            raise ValueError(kind)
    return out


# ---------------------------------------------------------------- models (in the worker) ----


def build(name):
    """The model (eval mode) and its output names."""
    import torch
    from torch import nn

    if MODELS[name][0] == "torchvision":
        import torchvision.models as tvm

        if name == "resnet18":
            m = tvm.resnet18(num_classes=10)
        elif name == "mobilenet_v2":
            # Its inverted-residual layout with one block per stage, at a quarter of the widths.
            setting = [[1, 16, 1, 1], [6, 24, 1, 2], [6, 32, 1, 2], [6, 64, 1, 2], [6, 96, 1, 1], [6, 160, 1, 2], [6, 320, 1, 1]]
            m = tvm.mobilenet_v2(width_mult=0.25, num_classes=10, inverted_residual_setting=setting)
        elif name == "mobilenet_v3_small":
            m = tvm.mobilenet_v3_small(width_mult=0.25, num_classes=10)
        elif name == "efficientnet_b0":
            from torchvision.models.efficientnet import EfficientNet, _efficientnet_conf

            setting, last = _efficientnet_conf("efficientnet_b0", width_mult=0.25, depth_mult=0.25)
            m = EfficientNet(setting, dropout=0.2, last_channel=last, num_classes=10)
        elif name == "shufflenet_v2":
            from torchvision.models.shufflenetv2 import ShuffleNetV2

            # shufflenet_v2_x0_5's layout at a third of its widths, one unit per stage.
            m = ShuffleNetV2([1, 1, 1], [8, 16, 32, 64, 128], num_classes=10)
        elif name == "squeezenet1_1":
            m = tvm.squeezenet1_1(num_classes=10)
        elif name == "convnext":
            from torchvision.models.convnext import CNBlockConfig, ConvNeXt

            m = ConvNeXt([CNBlockConfig(16, 32, 1), CNBlockConfig(32, None, 1)], num_classes=10)
        elif name == "vit_tv":
            from torchvision.models.vision_transformer import VisionTransformer

            m = VisionTransformer(
                image_size=32, patch_size=8, num_layers=2, num_heads=2, hidden_dim=32, mlp_dim=64, num_classes=10
            )
        elif name == "swin_tv":
            from torchvision.models.swin_transformer import SwinTransformer

            m = SwinTransformer(
                patch_size=[4, 4], embed_dim=16, depths=[2, 2], num_heads=[1, 2], window_size=[4, 4], num_classes=10
            )
        elif name == "lraspp_mobilenet_v3":
            from torchvision.models.segmentation.lraspp import LRASPPHead, _lraspp_mobilenetv3

            m = _lraspp_mobilenetv3(tvm.mobilenet_v3_large(width_mult=0.25, reduced_tail=True, dilated=True), 3)
            # LRASPPHead with 16 inner channels instead of 128 (the file stays small).
            low, high = m.classifier.low_classifier.in_channels, m.classifier.cbr[0].in_channels
            m.classifier = LRASPPHead(low, high, 3, 16)
        elif name == "deeplabv3_mobilenet_v3":
            from torchvision.models.segmentation.deeplabv3 import ASPP, _deeplabv3_mobilenetv3

            m = _deeplabv3_mobilenetv3(
                tvm.mobilenet_v3_large(width_mult=0.25, reduced_tail=True, dilated=True), 3, False
            )
            cin = m.classifier[0].convs[0][0].in_channels
            # DeepLabHead's layers with 16 channels instead of 256 (the file stays small).
            m.classifier = nn.Sequential(
                ASPP(cin, [12, 24, 36], 16),
                nn.Conv2d(16, 16, 3, padding=1, bias=False),
                nn.BatchNorm2d(16),
                nn.ReLU(),
                nn.Conv2d(16, 3, 1),
            )
        else:
            raise KeyError(name)
        outs = ["out"] if "lraspp" in name or "deeplab" in name else ["logits"]
        if outs == ["out"]:
            m = SegOut(m)
        return m.eval(), outs

    import transformers as tf

    names = [n for n, _, _ in MODELS[name][1]]
    if name == "bert":
        cfg = tf.BertConfig(
            hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
            vocab_size=256, max_position_embeddings=64, type_vocab_size=2,
        )
        return Pick(names, tf.BertModel(cfg), ["last_hidden_state", "pooler_output"]).eval(), [
            "last_hidden_state", "pooler_output"]
    if name == "distilbert":
        cfg = tf.DistilBertConfig(dim=32, n_layers=2, n_heads=2, hidden_dim=64, vocab_size=256, max_position_embeddings=64)
        return Pick(names, tf.DistilBertModel(cfg), ["last_hidden_state"]).eval(), ["last_hidden_state"]
    if name == "gpt2":
        cfg = tf.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=256, n_positions=64, use_cache=False)
        return Pick(names, tf.GPT2LMHeadModel(cfg), ["logits"], use_cache=False).eval(), ["logits"]
    if name == "llama":
        cfg = tf.LlamaConfig(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
            num_key_value_heads=2, vocab_size=256, max_position_embeddings=64, tie_word_embeddings=True,
            use_cache=False,
        )
        return Pick(names, tf.LlamaForCausalLM(cfg), ["logits"], use_cache=False).eval(), ["logits"]
    if name in ("whisper_encoder", "whisper_decoder"):
        cfg = tf.WhisperConfig(
            vocab_size=256, num_mel_bins=16, d_model=32, encoder_layers=2, decoder_layers=2,
            encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
            max_source_positions=16, max_target_positions=32, use_cache=False, pad_token_id=1,
            bos_token_id=2, eos_token_id=2, decoder_start_token_id=3, suppress_tokens=None,
            begin_suppress_tokens=None,
        )
        full = tf.WhisperForConditionalGeneration(cfg)
        if name == "whisper_encoder":
            return Pick(names, full.model.encoder, ["last_hidden_state"]).eval(), ["last_hidden_state"]
        return WhisperDecoder(full).eval(), ["logits"]
    if name == "vit":
        cfg = tf.ViTConfig(
            image_size=32, patch_size=8, num_channels=3, hidden_size=32, num_hidden_layers=2,
            num_attention_heads=2, intermediate_size=64, num_labels=10,
        )
        return Pick(names, tf.ViTForImageClassification(cfg), ["logits"]).eval(), ["logits"]
    if name == "swin":
        cfg = tf.SwinConfig(
            image_size=32, patch_size=2, num_channels=3, embed_dim=16, depths=[2, 2], num_heads=[1, 2],
            window_size=4, num_labels=10,
        )
        return Pick(names, tf.SwinForImageClassification(cfg), ["logits"]).eval(), ["logits"]
    raise KeyError(name)


def _module_classes():
    from torch import nn

    class Pick(nn.Module):
        """A Hugging Face model with positional inputs and a tuple of the named outputs."""

        def __init__(self, names, inner, keys, **kw):
            super().__init__()
            self.inner, self.names, self.keys, self.kw = inner, names, keys, kw

        def forward(self, *args):
            out = self.inner(**dict(zip(self.names, args)), **self.kw)
            return tuple(getattr(out, k) for k in self.keys)

    class SegOut(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, x):
            return self.inner(x)["out"]

    class WhisperDecoder(nn.Module):
        """The decoder with its projection to logits, without past (one full-prefix call)."""

        def __init__(self, full):
            super().__init__()
            self.decoder, self.proj = full.model.decoder, full.proj_out

        def forward(self, ids, enc):
            h = self.decoder(input_ids=ids, encoder_hidden_states=enc, use_cache=False).last_hidden_state
            return self.proj(h)

    return Pick, SegOut, WhisperDecoder


def randomize(model, seed):
    """Random norm statistics and affines, non-zero biases, then weights on a power-of-two grid."""
    import torch
    from torch import nn

    g = torch.Generator().manual_seed(seed)

    def rn(t, s):
        return torch.randn(t.shape, generator=g, dtype=t.dtype) * s

    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, nn.modules.batchnorm._BatchNorm):
                mod.running_mean.copy_(rn(mod.running_mean, 0.1))
                mod.running_var.copy_(torch.rand(mod.running_var.shape, generator=g) + 0.5)
            cls = type(mod).__name__
            if isinstance(mod, nn.modules.batchnorm._BatchNorm) or "Norm" in cls:
                w, b = getattr(mod, "weight", None), getattr(mod, "bias", None)
                if isinstance(w, torch.Tensor) and w.is_floating_point():
                    w.copy_(torch.rand(w.shape, generator=g) * 0.5 + 0.75)
                if isinstance(b, torch.Tensor) and b.is_floating_point():
                    b.copy_(rn(b, 0.1))
        for pname, p in model.named_parameters():
            # Zero-initialised tensors (biases; torchvision ViT's head) would hide wrong kernels.
            if float(p.abs().max()) == 0.0:
                p.copy_(rn(p, 0.02))
        for p in model.parameters():
            std = float(p.float().std()) if p.numel() > 1 else float(p.abs().max())
            if std > 0:
                step = 2.0 ** np.floor(np.log2(std / 4))
                p.copy_(torch.round(p / step) * step)


# ------------------------------------------------------------------------- the worker ----


def short_error(e):
    """The exception's type and first line, plus torch.export's one-line exception summary."""
    text = f"{type(e).__name__}: {e}".strip()
    first = text.splitlines()[0][:300]
    for line in text.splitlines():
        if line.startswith("<class "):
            return f"{first} [{line[:300]}]"
    return first


class LogCapture:
    """The exporter's logged version-converter failures (dynamo falls back to opset 18)."""

    def __init__(self):
        import logging

        self.lines = []
        cap = self

        class H(logging.Handler):
            def emit(self, record):
                text = record.getMessage()
                if record.exc_info and record.exc_info[1] is not None:
                    text += " | " + str(record.exc_info[1]).strip().splitlines()[-1]
                cap.lines.append(text)

        self.handler = H(logging.WARNING)
        logging.getLogger().addHandler(self.handler)

    def close(self):
        import logging

        logging.getLogger().removeHandler(self.handler)
        keep = ("convert", "Assertion", "version", "adapter", "Adapter")
        return [l[:400] for l in self.lines if any(k in l for k in keep)]



def export_one(task):
    name, exporter, opset, out_dir = task
    import torch

    torch.set_num_threads(1)
    global Pick, SegOut, WhisperDecoder
    Pick, SegOut, WhisperDecoder = _module_classes()
    entry_dir = os.path.join(out_dir, name, f"{exporter}-op{opset}")
    os.makedirs(entry_dir, exist_ok=True)
    meta = {"model": name, "exporter": exporter, "opset": opset, "stage": "build"}
    t0 = time.time()
    try:
        torch.manual_seed(0)
        model, out_names = build(name)
        randomize(model, 1)
        in_names = [n for n, _, _ in MODELS[name][1]]
        inputs = {n: np.load(os.path.join(out_dir, name, "inputs", n + ".npy")) for n in in_names}
        args = tuple(torch.from_numpy(inputs[n]) for n in in_names)
        with torch.no_grad():
            ref = model(*args)
        ref = [r.numpy() for r in (ref if isinstance(ref, (tuple, list)) else (ref,))]
        meta["stage"] = "export"
        path = os.path.join(entry_dir, "model.onnx")
        kw = dict(opset_version=opset, input_names=in_names, output_names=out_names)
        if exporter == "dynamo":
            kw.update(dynamo=True, external_data=False)
        else:
            kw.update(dynamo=False, do_constant_folding=True)
        # A plain export call first, as users write it (grad on); where that fails, again under
        # torch.no_grad(). They differ: under no_grad nn.MultiheadAttention takes a fused fast
        # path the TorchScript exporter cannot export, and dynamo decomposes differently.
        log = LogCapture()
        try:
            try:
                torch.onnx.export(model, args, path, **kw)
                meta["export_mode"] = "plain"
            except Exception as e:  # noqa: BLE001
                meta["plain_export_error"] = short_error(e)
                with torch.no_grad():
                    torch.onnx.export(model, args, path, **kw)
                meta["export_mode"] = "no_grad"
        finally:
            notes = log.close()
            if notes:
                meta["export_notes"] = notes
        meta["export_s"] = round(time.time() - t0, 2)
        meta["stage"] = "onnx"
        import onnx

        m = onnx.load(path)
        ops = {}
        for node in m.graph.node:
            key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"
            ops[key] = ops.get(key, 0) + 1
        meta["ops"] = dict(sorted(ops.items()))
        meta["nodes"] = len(m.graph.node)
        meta["functions"] = [f.name for f in m.functions]
        meta["opset_imports"] = {o.domain or "ai.onnx": o.version for o in m.opset_import}
        meta["bytes"] = os.path.getsize(path)
        meta["graph_inputs"] = [i.name for i in m.graph.input]
        meta["graph_outputs"] = [o.name for o in m.graph.output]
        meta["stage"] = "ort"
        import onnxruntime as ort

        so = ort.SessionOptions()
        so.intra_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        feeds = {i.name: inputs[i.name] for i in sess.get_inputs()}
        meta["ort_inputs"] = [i.name for i in sess.get_inputs()]
        got = sess.run(None, feeds)
        os.makedirs(os.path.join(entry_dir, "ort"), exist_ok=True)
        outs = []
        for o, v in zip(sess.get_outputs(), got):
            np.save(os.path.join(entry_dir, "ort", o.name + ".npy"), np.ascontiguousarray(v))
            outs.append([o.name, list(v.shape), str(v.dtype)])
        meta["outputs"] = outs
        # Exporter fidelity (not the test's reference): ORT against eager PyTorch.
        errs = []
        for r, v in zip(ref, got):
            rng = float(r.max() - r.min()) if r.size > 1 else float(abs(r).max())
            errs.append(float(np.abs(r.astype(np.float64) - v).max() / max(rng, 1e-6)))
        meta["torch_vs_ort"] = errs
        meta["stage"] = "done"
        meta["error"] = None
    except Exception as e:  # recorded per entry; the sweep goes on
        meta["error"] = short_error(e)
        meta["error_full"] = f"{type(e).__name__}: {e}"[:4000]
        meta["traceback"] = traceback.format_exc()[-6000:]
    meta["seconds"] = round(time.time() - t0, 2)
    with open(os.path.join(entry_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    return meta


# --------------------------------------------------------------------------- main ----


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) - 1))
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--opsets", default="14,17,18")
    ap.add_argument("--exporters", default="torchscript,dynamo")
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds; unfinished entries are recorded as such")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    models = [m for m in a.models.split(",") if m]
    for i, name in enumerate(models):
        d = os.path.join(a.out, name, "inputs")
        os.makedirs(d, exist_ok=True)
        for n, v in make_inputs(name, MODELS[name][1], 100 + i).items():
            np.save(os.path.join(d, n + ".npy"), v)
    tasks = [
        (m, e, int(o), a.out)
        for m in models
        for e in a.exporters.split(",")
        for o in a.opsets.split(",")
    ]
    # Slow exports first, so the deadline cuts the fewest.
    tasks.sort(key=lambda t: (t[1] != "dynamo", "swin" not in t[0], t[0]))
    import multiprocessing as mp

    t0 = time.time()
    results = {}
    ctx = mp.get_context("forkserver")
    with ctx.Pool(a.jobs, maxtasksperchild=6) as pool:
        pending = {t[:3]: pool.apply_async(export_one, (t,)) for t in tasks}
        while pending and time.time() - t0 < a.deadline:
            for k in [k for k, r in pending.items() if r.ready()]:
                try:
                    results[k] = pending.pop(k).get()
                except Exception as e:  # a worker died
                    results[k] = {"model": k[0], "exporter": k[1], "opset": k[2], "error": f"worker: {e}"}
                r = results[k]
                print(f"[{time.time() - t0:6.1f}s] {k[0]:24} {k[1]:11} op{k[2]}: "
                      f"{'ok' if not r.get('error') else r['error'][:150]}", flush=True)
            time.sleep(0.2)
        for k in pending:
            results[k] = {"model": k[0], "exporter": k[1], "opset": k[2],
                          "error": f"not finished within the sweep's {a.deadline:.0f} s deadline"}
        pool.terminate()
    import importlib

    versions = {}
    for mod in ("torch", "torchvision", "transformers", "onnx", "onnxruntime", "onnxscript", "numpy"):
        try:
            versions[mod] = importlib.import_module(mod).__version__
        except Exception as e:  # noqa: BLE001
            versions[mod] = f"missing: {e}"
    entries = [results[k] for k in sorted(results)]
    for e in entries:
        e.pop("traceback", None) if not e.get("error") else None
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump({"versions": versions, "seconds": round(time.time() - t0, 1), "entries": entries}, f, indent=1)
    ok = sum(1 for e in entries if not e.get("error"))
    print(f"{ok}/{len(entries)} exported and run on ORT in {time.time() - t0:.0f} s; versions {versions}")


if __name__ == "__main__":
    sys.exit(main())
