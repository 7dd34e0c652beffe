#!/usr/bin/env python3
"""Writes the models of `workloads/assistant-scale.ron` with random weights: a BERT-style encoder,
a Llama-style decoder in the "with_past" form from 125 M to 2.7 B parameters, and a small
encoder, as ONNX files with external data, plus the demo inputs.

    make_scale_models.py OUT_DIR [--decoder 1.3b] [--seed 0] [--reference]

--decoder picks the decoder's size: tiny or tiny-d128 (the CI sizes: every model a few hundred
kB; tiny-d128 has 128-wide heads), 125m, 350m, 760m, 1.3b (the default) or 2.7b. The encoders
are BERT-base-shaped (12 layers, 768 wide, 128 tokens) and 4 layers of the same, except with the
tiny sizes. --reference runs ONNX Runtime (CPU) on both
encoders with the demo input and writes enc_out.npy and post_out.npy beside them; the decoder's
reference is scripts/lm_reference.py on OUT_DIR/lm.

Written to OUT_DIR: enc.onnx, post.onnx and lm/decoder.onnx (each with a `.data` file holding
every tensor of 4 kB or more, at 4 kB-aligned offsets, so no file is bound by protobuf's 2 GB),
lm/config.json, features.npy ([1, seq, 768] float32) and prompt.tokens (8 token ids). The decoder
is scripts/convert_smollm2.py's graph (RMSNorm, RoPE, grouped-query attention, SiLU MLP, tied
head), so it imports through the same path as the real SmolLM2. Weights are drawn tensor by
tensor from a generator seeded by (seed, tensor name) and written as they are made: a 2.7 B
model never holds more than one tensor in memory. Needs only numpy and onnx (no PyTorch).
"""
import argparse
import json
import os
import sys
import zlib

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_smollm2 as llama  # noqa: E402  (the decoder's graph and its tiny config)

OPSET = 17
ALIGN = 4096
INLINE_BELOW = 4096
VOCAB = 50304  # GPT-2's 50257, rounded up to a multiple of 64 as GPT-NeoX does

# Llama-style decoders at GPT-Neo/OPT sizes (125 M, 350 M, 757 M, 1.34 B, 2.71 B parameters with
# the tied embedding): (layers, hidden, heads, kv_heads, intermediate). Grouped-query attention
# with 4 key/value heads keeps the cache small; the MLP is widened to make up the count.
DECODERS = {
    "125m": (12, 768, 12, 4, 2432),
    "350m": (24, 1024, 16, 4, 3200),
    "760m": (24, 1536, 16, 4, 4864),
    "1.3b": (24, 2048, 16, 4, 6656),
    "2.7b": (32, 2560, 20, 4, 8448),
}
# BERT-style encoders: (layers, hidden, heads, intermediate, seq).
ENCODERS = {
    "enc": (12, 768, 12, 3072, 128),
    "post": (4, 768, 12, 3072, 128),
}
TINY_ENCODERS = {
    "enc": (2, 64, 4, 128, 16),
    "post": (1, 64, 4, 128, 16),
}
PROMPT = [1, 4093, 198, 1780, 314, 260, 3575, 282]


class ExternalBuilder(llama.Builder):
    """convert_smollm2's graph builder, but every tensor of INLINE_BELOW bytes or more goes
    straight to one data file (4 kB-aligned), so the model never holds its weights."""

    def __init__(self, data_path):
        super().__init__()
        self.data_path = data_path
        self.location = os.path.basename(data_path)
        self.data = open(data_path, "wb")

    def init(self, name, array):
        a = np.ascontiguousarray(array)
        if a.nbytes < INLINE_BELOW:
            return super().init(name, a)
        offset = self.data.tell()
        pad = -offset % ALIGN
        if pad:
            self.data.write(b"\0" * pad)
            offset += pad
        self.data.write(a.tobytes())
        t = TensorProto()
        t.name = name
        t.dims.extend(a.shape)
        t.data_type = helper.np_dtype_to_tensor_dtype(a.dtype)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", self.location), ("offset", str(offset)),
                           ("length", str(a.nbytes))):
            e = t.external_data.add()
            e.key, e.value = key, value
        self.inits.append(t)
        return name

    def close(self):
        self.data.close()


class RandomWeights:
    """A mapping from a tensor's name to random float32 weights, made when it is read:
    `shape_of(name)` gives the shape; linear layers are scaled by 1/sqrt(fan-in), norm gains
    are near 1. The same (seed, name) always gives the same tensor."""

    def __init__(self, seed, shape_of):
        self.seed = seed
        self.shape_of = shape_of
        self.count = 0

    def __getitem__(self, name):
        rng = np.random.default_rng([self.seed, zlib.crc32(name.encode())])
        shape = self.shape_of(name)
        if name.endswith(("norm.weight", ".gamma")):
            a = 1.0 + 0.1 * rng.standard_normal(shape, dtype=np.float32)
        elif name.endswith((".bias", ".beta")):
            a = 0.02 * rng.standard_normal(shape, dtype=np.float32)
        elif name == "model.embed_tokens.weight":
            a = rng.standard_normal(shape, dtype=np.float32)
        else:
            a = rng.standard_normal(shape, dtype=np.float32)
            a *= np.float32(1.0 / np.sqrt(shape[1]))
        self.count += a.size
        return a


# Tiny decoders for CI, each a few hundred kB: "tiny" is convert_smollm2's, "tiny-d128" the same
# with 128-wide heads (four query heads on two key/value heads), the head width of the 1.3b and
# 2.7b sizes, which takes the attention kernel's wide variant.
TINY_DECODERS = {
    "tiny": dict(llama.TINY_CONFIG, name="tiny random llama"),
    "tiny-d128": dict(llama.TINY_CONFIG, hidden=256, heads=4, kv_heads=2, head_dim=128,
                      name="tiny random llama, 128-wide heads"),
}


def decoder_config(size):
    if size in TINY_DECODERS:
        return dict(TINY_DECODERS[size])
    L, H, nh, nkv, inter = DECODERS[size]
    return dict(layers=L, hidden=H, heads=nh, kv_heads=nkv, head_dim=H // nh,
                intermediate=inter, vocab=VOCAB, max_positions=2048, rope_theta=10000.0,
                rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
                name=f"{size} random llama")


def decoder_shapes(cfg):
    H, nh, nkv, hd, inter, V = (cfg[k] for k in ("hidden", "heads", "kv_heads", "head_dim",
                                                 "intermediate", "vocab"))
    proj = {"q": (nh * hd, H), "k": (nkv * hd, H), "v": (nkv * hd, H), "o": (H, nh * hd),
            "gate": (inter, H), "up": (inter, H), "down": (H, inter)}

    def shape_of(name):
        if name == "model.embed_tokens.weight":
            return (V, H)
        if name.endswith("norm.weight"):
            return (H,)
        return proj[name.split(".")[-2].replace("_proj", "")]
    return shape_of


def write_decoder(out_dir, size, seed):
    os.makedirs(out_dir, exist_ok=True)
    cfg = decoder_config(size)
    onnx_path = os.path.join(out_dir, "decoder.onnx")
    if size in TINY_DECODERS:
        # convert_smollm2's tiny weights (with its residual gain, so the reply depends on the
        # context and the cache is exercised).
        weights = llama.tiny_weights(cfg, seed)
        n_params = sum(int(w.size) for w in weights.values())
    else:
        weights = RandomWeights(seed, decoder_shapes(cfg))
    b = ExternalBuilder(onnx_path + ".data")
    model = build_with(b, lambda: llama.build_graph(cfg, weights, builder=b))
    if size not in TINY_DECODERS:
        n_params = weights.count
    onnx.save(model, onnx_path)
    onnx.checker.check_model(onnx_path)
    with open(os.path.join(out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(llama.config_json(cfg), f, indent=2)
        f.write("\n")
    return cfg, n_params


def build_with(builder, build):
    try:
        return build()
    finally:
        builder.close()


def encoder_graph(b, cfg, weights, graph_name):
    """A BERT-style (post-LayerNorm) encoder over x [1, seq, hidden], in the ops PyTorch's
    exporter emits for it: MatMul + Add projections, scaled dot-product attention without a
    mask, LayerNormalization and an Erf GELU."""
    L, H, nh, inter, S = cfg
    hd = H // nh
    c_heads = b.const_i64("const_heads_shape", [1, -1, nh, hd])
    c_merge = b.const_i64("const_merge_shape", [1, -1, H])
    c_scale = b.init("const_scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    c_sqrt2 = b.init("const_sqrt2", np.array(np.sqrt(2.0), dtype=np.float32))
    c_one = b.init("const_one_f", np.array(1.0, dtype=np.float32))
    c_half = b.init("const_half", np.array(0.5, dtype=np.float32))

    def dense(x, name, fan_in, fan_out, prefix):
        w = b.init(f"{name}.weight", weights(f"{name}.weight", (fan_out, fan_in)).T)
        bias = b.init(f"{name}.bias", weights(f"{name}.bias", (fan_out,)))
        y = b.op("MatMul", [x, w], name=f"{prefix}/MatMul")
        return b.op("Add", [bias, y], name=f"{prefix}/Add")

    def layer_norm(x, name, prefix):
        g = b.init(f"{name}.gamma", weights(f"{name}.gamma", (H,)))
        beta = b.init(f"{name}.beta", weights(f"{name}.beta", (H,)))
        return b.op("LayerNormalization", [x, g, beta], name=f"{prefix}/LayerNormalization",
                    axis=-1, epsilon=1e-12)

    h = "x"
    for i in range(L):
        w, p = f"encoder.layer.{i}", f"/encoder/layer.{i}"
        a = f"{p}/attention"
        q = dense(h, f"{w}.attention.query", H, H, f"{a}/query")
        k = dense(h, f"{w}.attention.key", H, H, f"{a}/key")
        v = dense(h, f"{w}.attention.value", H, H, f"{a}/value")
        q = b.op("Transpose", [b.op("Reshape", [q, c_heads], name=f"{a}/Reshape")],
                 name=f"{a}/Transpose", perm=[0, 2, 1, 3])
        k = b.op("Transpose", [b.op("Reshape", [k, c_heads], name=f"{a}/Reshape_1")],
                 name=f"{a}/Transpose_1", perm=[0, 2, 3, 1])
        v = b.op("Transpose", [b.op("Reshape", [v, c_heads], name=f"{a}/Reshape_2")],
                 name=f"{a}/Transpose_2", perm=[0, 2, 1, 3])
        s = b.op("MatMul", [q, k], name=f"{a}/MatMul")
        s = b.op("Mul", [s, c_scale], name=f"{a}/Mul")
        s = b.op("Softmax", [s], name=f"{a}/Softmax", axis=-1)
        o = b.op("MatMul", [s, v], name=f"{a}/MatMul_1")
        o = b.op("Transpose", [o], name=f"{a}/Transpose_3", perm=[0, 2, 1, 3])
        o = b.op("Reshape", [o, c_merge], name=f"{a}/Reshape_3")
        o = dense(o, f"{w}.attention.output", H, H, f"{a}/output")
        h = layer_norm(b.op("Add", [o, h], name=f"{a}/Add"), f"{w}.attention.norm", f"{a}/norm")
        m = f"{p}/mlp"
        u = dense(h, f"{w}.intermediate", H, inter, f"{m}/intermediate")
        g = b.op("Erf", [b.op("Div", [u, c_sqrt2], name=f"{m}/Div")], name=f"{m}/Erf")
        g = b.op("Mul", [b.op("Mul", [u, b.op("Add", [g, c_one], name=f"{m}/Add")],
                              name=f"{m}/Mul"), c_half], name=f"{m}/Mul_1")
        d = dense(g, f"{w}.output", inter, H, f"{m}/output")
        h = layer_norm(b.op("Add", [d, h], name=f"{m}/Add_1"), f"{w}.output.norm", f"{m}/norm")
    b.op("Identity", [h], name="/output/Identity", outputs=["y"])
    graph = helper.make_graph(
        b.nodes, graph_name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, S, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, S, H])],
        initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="texstream make_scale_models.py")
    model.ir_version = 8
    return model


def write_encoder(out_dir, name, cfg, seed):
    path = os.path.join(out_dir, f"{name}.onnx")
    draw = RandomWeights(seed, None)

    def weights(tensor, shape):
        draw.shape_of = lambda _n: shape
        return draw[tensor]
    b = ExternalBuilder(path + ".data")
    model = build_with(b, lambda: encoder_graph(b, cfg, weights, f"{name}_encoder"))
    onnx.save(model, path)
    onnx.checker.check_model(path)
    return draw.count


def run_reference(out_dir, features):
    import onnxruntime as ort
    x = features
    for name in ("enc", "post"):
        sess = ort.InferenceSession(os.path.join(out_dir, f"{name}.onnx"),
                                    providers=["CPUExecutionProvider"])
        y = sess.run(["y"], {"x": x})[0]
        np.save(os.path.join(out_dir, f"{name}_out.npy"), y)
        print(f"reference  {name}_out.npy {y.shape}, range [{y.min():.4f}, {y.max():.4f}]")
        x = y


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--decoder", default="1.3b", choices=[*TINY_DECODERS, *DECODERS])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reference", action="store_true",
                    help="write ONNX Runtime's encoder outputs (enc_out.npy, post_out.npy)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    encoders = TINY_ENCODERS if args.decoder in TINY_DECODERS else ENCODERS

    total = 0
    for i, (name, cfg) in enumerate(encoders.items()):
        n = write_encoder(args.out_dir, name, cfg, args.seed + 1 + i)
        total += n
        print(f"encoder    {name}: layers={cfg[0]} hidden={cfg[1]} heads={cfg[2]} "
              f"intermediate={cfg[3]} seq={cfg[4]}; {n:,} parameters")
    cfg, n = write_decoder(os.path.join(args.out_dir, "lm"), args.decoder, args.seed)
    total += n
    print(f"decoder    {cfg['name']}: layers={cfg['layers']} hidden={cfg['hidden']} "
          f"heads={cfg['heads']} kv_heads={cfg['kv_heads']} intermediate={cfg['intermediate']} "
          f"vocab={cfg['vocab']}; {n:,} parameters (tied embedding stored once)")
    print(f"total      {total:,} parameters, {2 * total / 2**20:,.0f} MiB as fp16")

    seq, hidden = encoders["enc"][4], encoders["enc"][1]
    features = np.random.default_rng(args.seed).standard_normal((1, seq, hidden),
                                                                dtype=np.float32)
    np.save(os.path.join(args.out_dir, "features.npy"), features)
    prompt = [t % cfg["vocab"] for t in PROMPT]
    with open(os.path.join(args.out_dir, "prompt.tokens"), "w") as f:
        f.write(",".join(map(str, prompt)) + "\n")
    if args.reference:
        run_reference(args.out_dir, features)
    for root, _dirs, files in os.walk(args.out_dir):
        for f in sorted(files):
            p = os.path.join(root, f)
            print(f"wrote      {p} ({os.path.getsize(p):,} bytes)")


if __name__ == "__main__":
    main()
