#!/usr/bin/env python3
"""PyTorch (Hugging Face transformers) fp16 CUDA baseline at batch 1 on the same weights texstream
runs: SmolLM2-135M (scripts/convert_smollm2.py) and Whisper tiny.en (scripts/convert_whisper.py).

    torch_baseline.py OUT.json [--smollm2 DIR] [--whisper DIR] [--iters N]
                      [--lm-reference REF.json] [--asr-reference REF.json] [--wav IN.wav]
                      [--no-graphs] [--no-compile] [--compile-deadline-s S] [--time-limit-s S]
    torch_baseline.py --check-weights [--smollm2 DIR] [--whisper DIR]   (numpy + onnx only, no torch)

On the GPU machine (PyTorch + transformers in /opt/torch/.venv; no internet needed):

    /opt/torch/.venv/bin/python3 scripts/torch_baseline.py /tmp/torch_baseline.json \\
        --smollm2 models/smollm2 --whisper models/whisper \\
        --lm-reference LM_REF.json --asr-reference ASR_REF.json

LM_REF.json: scripts/lm_reference.py models/smollm2 LM_REF.json \\
                 --prompt-ids 1,4093,198,1780,314,260,3575,282,4649,47,2,198,1,520,9531,198
ASR_REF.json: scripts/whisper_reference.py models/whisper tests/data/speech/jfk.wav ASR_REF.json
Leave out --smollm2 or --whisper to skip that model (both default to models/<name> when present).

What it does (every measurement in its own try/except: a failure is recorded under "errors" with
the last line of its traceback, and the others still run; OUT.json is rewritten after each part):
  weights  the ONNX initializers (onnx.load(load_external_data=True) + numpy_helper.to_array) are
           mapped back to HF names: "<name>.weight.T" ([in, out], for MatMul) is transposed back to
           nn.Linear's [out, in]; other "model.*" initializers keep their names; constants
           (const_*, rope.*) are dropped. Whisper's decoder cross-attention k/v projections come from
           encoder.onnx (it outputs cross_k.{i} / cross_v.{i}), the rest of the decoder from
           decoder.onnx. Names and shapes are checked against the HF layout, then loaded with
           load_state_dict(strict=True) (the tied head lm_head / proj_out is the embedding).
  SmolLM2  LlamaForCausalLM(LlamaConfig(... from config.json, tie_word_embeddings=True)), sdpa.
           Correctness: greedy 64 tokens (no stop) from --lm-prompt-ids, first in fp32 (TF32 off)
           then in fp16, compared with --lm-reference's generated_ids.
           Timing (fp16): decode = 64 steps of one token with the KV cache after an untimed
           prefill of the prompt, ms per step (the argmax stays on the GPU, no host sync per step):
             eager       DynamicCache, a Python loop of model(input_ids=tok, past_key_values=cache)
             cuda_graph  StaticCache, one step (forward + argmax into the input) captured in a
                         torch.cuda.CUDAGraph and replayed
             compiled    StaticCache, torch.compile(model.forward, mode="reduce-overhead",
                         fullgraph=True, dynamic=False)
           prefill = one forward of 128 fixed random ids (logits for all 128 positions, as the ONNX
           graph computes them) into an empty cache: eager (DynamicCache), cuda_graph and compiled
           (StaticCache of 128).
  Whisper  WhisperForConditionalGeneration(WhisperConfig(... from config.json)), sdpa.
           Correctness: log-mel of --wav (scripts/whisper_logmel.py), encoder, greedy from the
           config's prompt_ids (tiny.en: 50257 50362) until eot (kept) or --asr-steps tokens, fp32
           and fp16, compared with --asr-reference's generated_ids; text by byte-level decoding.
           Timing (fp16, input [1, 80, 3000] = 30 s): encoder (HF's encoder alone) and
           encoder_cross (encoder + every decoder layer's cross-attention k/v projection, what
           texstream's encoder.onnx computes), eager / cuda_graph / compiled; decoder step with the
           self-attention KV cache and cached cross k/v (32 steps after an untimed prompt step),
           eager (EncoderDecoderCache of DynamicCaches) and cuda_graph (of StaticCaches).
  Times are wall clock (time.perf_counter) around torch.cuda.synchronize(), after warm-up; the
  median (and min) of --iters runs is reported. "best" picks the fastest variant that ran.
  The torch.compile variants run last, in a child process (this script with --compiled-only, which
  rebuilds the fp16 models): a crash there (inductor once segfaulted here) or a timeout loses only
  them. A compiled variant is not started after --compile-deadline-s (default 195 s) of the run,
  and the child is killed at --time-limit-s (default 240 s). On an H200 (torch 2.11, transformers
  5.17) the whole run took about 3 minutes (75 s before the child, 105 s in it, 40 s of that
  compiling SmolLM2's decode step).
"""
import argparse
import faulthandler
import json
import os
import platform
import statistics
import sys
import time
import traceback

import numpy as np

sys.dont_write_bytecode = True
SCRIPTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(SCRIPTS)
sys.path.insert(0, SCRIPTS)

DEFAULT_LM_PROMPT = [1, 4093, 198, 1780, 314, 260, 3575, 282, 4649, 47, 2, 198, 1, 520, 9531, 198]
START = time.perf_counter()


def elapsed():
    return time.perf_counter() - START


def err_line(e):
    """The last line of the exception's message (the traceback's last line)."""
    lines = traceback.format_exception_only(type(e), e)
    text = "".join(lines).strip().splitlines()
    return (text[-1] if text else type(e).__name__)[:400]


class Report:
    def __init__(self, path):
        self.path = path
        self.data = {"errors": []}

    def error(self, where, e):
        line = err_line(e)
        self.data["errors"].append({"where": where, "error": line})
        print(f"[error] {where}: {line}", flush=True)

    def save(self):
        tmp = self.path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.data, f, indent=1, ensure_ascii=False, default=str)
            f.write("\n")
        os.replace(tmp, self.path)


def attempt(report, where, fn, *args, **kwargs):
    """fn(*args) or None on an exception (recorded)."""
    try:
        return fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (every failure is recorded, the run goes on)
        report.error(where, e)
        return None


# ----------------------------------------------------------------------------------------------
# weights: ONNX initializers -> HF state dict (numpy only)

def onnx_initializers(path):
    import onnx
    from onnx import numpy_helper
    m = onnx.load(path, load_external_data=True)
    return {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}


def onnx_to_hf(inits, into=None):
    """{"X.weight.T": [in, out]} -> {"X.weight": [out, in]}; other "model.*" names as they are."""
    out = {} if into is None else into
    for name, a in inits.items():
        if not name.startswith("model."):
            continue  # const_*, rope.* tables
        if name.endswith(".weight.T"):
            hf, a = name[:-2], a.T
        else:
            hf = name
        a = np.require(a, np.float32, ["C_CONTIGUOUS", "WRITEABLE", "ALIGNED"])
        if hf in out:
            if out[hf].shape != a.shape or not np.array_equal(out[hf], a):
                raise ValueError(f"{hf}: two different initializers map to it")
            continue
        out[hf] = a
    return out


def llama_expected_shapes(c):
    """HF LlamaForCausalLM parameter shapes (without the tied lm_head.weight)."""
    H, nh, nkv, hd, I, V = (c[k] for k in ("hidden", "heads", "kv_heads", "head_dim",
                                           "intermediate", "vocab"))
    s = {"model.embed_tokens.weight": (V, H), "model.norm.weight": (H,)}
    for i in range(c["layers"]):
        p = f"model.layers.{i}"
        s[f"{p}.input_layernorm.weight"] = (H,)
        s[f"{p}.post_attention_layernorm.weight"] = (H,)
        s[f"{p}.self_attn.q_proj.weight"] = (nh * hd, H)
        s[f"{p}.self_attn.k_proj.weight"] = (nkv * hd, H)
        s[f"{p}.self_attn.v_proj.weight"] = (nkv * hd, H)
        s[f"{p}.self_attn.o_proj.weight"] = (H, nh * hd)
        s[f"{p}.mlp.gate_proj.weight"] = (I, H)
        s[f"{p}.mlp.up_proj.weight"] = (I, H)
        s[f"{p}.mlp.down_proj.weight"] = (H, I)
    return s


def whisper_expected_shapes(c):
    """HF WhisperForConditionalGeneration parameter shapes (without the tied proj_out.weight)."""
    d, f, V = c["d_model"], c["ffn"], c["vocab"]
    s = {"model.encoder.conv1.weight": (d, c["n_mels"], 3), "model.encoder.conv1.bias": (d,),
         "model.encoder.conv2.weight": (d, d, 3), "model.encoder.conv2.bias": (d,),
         "model.encoder.embed_positions.weight": (c["n_audio_ctx"], d),
         "model.encoder.layer_norm.weight": (d,), "model.encoder.layer_norm.bias": (d,),
         "model.decoder.embed_tokens.weight": (V, d),
         "model.decoder.embed_positions.weight": (c["n_text_ctx"], d),
         "model.decoder.layer_norm.weight": (d,), "model.decoder.layer_norm.bias": (d,)}

    def block(p, attns):
        for a in attns:
            s[f"{p}.{a}_layer_norm.weight"] = s[f"{p}.{a}_layer_norm.bias"] = (d,)
            for proj in ("q", "k", "v", "out"):
                s[f"{p}.{a}.{proj}_proj.weight"] = (d, d)
                if proj != "k":  # HF Whisper's k_proj has no bias
                    s[f"{p}.{a}.{proj}_proj.bias"] = (d,)
        s[f"{p}.final_layer_norm.weight"] = s[f"{p}.final_layer_norm.bias"] = (d,)
        s[f"{p}.fc1.weight"], s[f"{p}.fc1.bias"] = (f, d), (f,)
        s[f"{p}.fc2.weight"], s[f"{p}.fc2.bias"] = (d, f), (d,)

    for i in range(c["encoder_layers"]):
        block(f"model.encoder.layers.{i}", ["self_attn"])
    for i in range(c["decoder_layers"]):
        block(f"model.decoder.layers.{i}", ["self_attn", "encoder_attn"])
    return s


def check_shapes(weights, expected, what):
    missing = sorted(set(expected) - set(weights))
    extra = sorted(set(weights) - set(expected))
    if missing or extra:
        raise ValueError(f"{what}: {len(missing)} HF names missing (e.g. {missing[:3]}), "
                         f"{len(extra)} unexpected (e.g. {extra[:3]})")
    bad = [(k, tuple(weights[k].shape), v) for k, v in expected.items()
           if tuple(weights[k].shape) != tuple(v)]
    if bad:
        raise ValueError(f"{what}: {len(bad)} shape mismatches, e.g. {bad[:3]}")


def load_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def smollm2_weights(model_dir):
    cfg = load_json(os.path.join(model_dir, "config.json"))
    inits = onnx_initializers(os.path.join(model_dir, "decoder.onnx"))
    rope = {k: inits[k] for k in ("rope.cos_cached", "rope.sin_cached") if k in inits}
    w = onnx_to_hf(inits)
    del inits
    check_shapes(w, llama_expected_shapes(cfg), "smollm2")
    return cfg, w, rope


def whisper_weights(model_dir):
    cfg = load_json(os.path.join(model_dir, "config.json"))
    w = onnx_to_hf(onnx_initializers(os.path.join(model_dir, "encoder.onnx")))
    onnx_to_hf(onnx_initializers(os.path.join(model_dir, "decoder.onnx")), into=w)
    check_shapes(w, whisper_expected_shapes(cfg), "whisper")
    return cfg, w


# ----------------------------------------------------------------------------------------------
# byte-level detokenizer (GPT-2 table), as scripts/lm_reference.py / whisper_reference.py

def bytes_to_unicode():
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


class Detokenizer:
    def __init__(self, path):
        tok = load_json(path)
        self.id_to_token = {i: t for t, i in tok["model"]["vocab"].items()}
        self.special = {t["id"] for t in tok.get("added_tokens", []) if t.get("special")}
        for t in tok.get("added_tokens", []):
            self.id_to_token[t["id"]] = t["content"]
        self.u2b = {u: b for b, u in bytes_to_unicode().items()}

    def decode(self, ids, below=None):
        out = bytearray()
        for i in ids:
            if i in self.special or i not in self.id_to_token or (below is not None and i >= below):
                continue
            for ch in self.id_to_token[i]:
                if ch in self.u2b:
                    out.append(self.u2b[ch])
                else:
                    out += ch.encode("utf-8")
        return out.decode("utf-8", errors="replace")


def detok(model_dir, ids, below=None):
    p = os.path.join(model_dir, "tokenizer.json")
    if not os.path.isfile(p):
        return None
    try:
        return Detokenizer(p).decode(ids, below)
    except Exception as e:  # noqa: BLE001
        return f"<detokenize failed: {err_line(e)}>"


def compare_ids(got, want):
    """Position-wise matches and common prefix of got vs want (over len(got))."""
    n = len(got)
    matches = sum(1 for a, b in zip(got, want) if a == b)
    prefix = 0
    for a, b in zip(got, want):
        if a != b:
            break
        prefix += 1
    return {"equal": list(got) == list(want[:n]) and len(want) >= n, "matches": matches,
            "of": n, "common_prefix": prefix}


def reference_ids(path):
    if not path:
        return None
    return [int(x) for x in load_json(path)["generated_ids"]]


# ----------------------------------------------------------------------------------------------
# timing helpers (torch)

def bench(torch, fn, iters, warmup=3, setup=None):
    """Runs setup() (untimed) then fn() (timed between synchronizes); returns the ms list."""
    for _ in range(warmup):
        if setup is not None:
            setup()
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        if setup is not None:
            setup()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        ms.append((time.perf_counter() - t0) * 1e3)
    return ms


def stats(ms, per=1, **extra):
    """ms: list of run times; per: work items per run (decode steps) -> ms per item."""
    v = [m / per for m in ms]
    out = {"ms_median": round(statistics.median(v), 4), "ms_min": round(min(v), 4),
           "ms_mean": round(statistics.fmean(v), 4), "runs": len(v)}
    if per > 1:
        out["steps_per_run"] = per
        out["tokens_per_s"] = round(1000.0 / out["ms_median"], 1)
    out.update(extra)
    return out


def capture_graph(torch, fn, warmup_fn=None, warmup=2):
    """Warm fn up on a side stream (as the CUDA graph docs do), then capture one call of it."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            (warmup_fn or fn)()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    torch.cuda.synchronize()
    return g


def compile_with_fallback(torch, fn, sec, key):
    """fn(fullgraph=True); if that fails, torch._dynamo.reset() and fn(fullgraph=False)."""
    try:
        fn(True)
        return
    except Exception as e:  # noqa: BLE001
        first = err_line(e)
        print(f"[note] {key}: fullgraph=True failed ({first}); retrying with fullgraph=False",
              flush=True)
    try:
        torch._dynamo.reset()
    except Exception:  # noqa: BLE001
        pass
    try:
        fn(False)
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"fullgraph=True: {first} | fullgraph=False: {err_line(e)}") from e
    sec[key]["fullgraph_error"] = first


def best_of(section, prefix, per_key="ms_median"):
    cands = [(v[per_key], k[len(prefix):]) for k, v in section.items()
             if k.startswith(prefix) and isinstance(v, dict) and per_key in v]
    if not cands:
        return None
    ms, variant = min(cands)
    out = {"variant": variant, "ms": ms}
    if section.get(prefix + variant, {}).get("tokens_per_s"):
        out["tokens_per_s"] = section[prefix + variant]["tokens_per_s"]
    return out


# ----------------------------------------------------------------------------------------------
# SmolLM2

class LmRunner:
    def __init__(self, torch, args, report, sec):
        self.torch, self.args, self.report, self.sec = torch, args, report, sec
        self.dev = torch.device("cuda")

    def build(self):
        torch = self.torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
        t0 = time.perf_counter()
        cfg, w, rope = smollm2_weights(self.args.smollm2)
        self.cfg = cfg
        self.sec["load_onnx_s"] = round(time.perf_counter() - t0, 2)
        kw = dict(vocab_size=cfg["vocab"], hidden_size=cfg["hidden"],
                  intermediate_size=cfg["intermediate"], num_hidden_layers=cfg["layers"],
                  num_attention_heads=cfg["heads"], num_key_value_heads=cfg["kv_heads"],
                  head_dim=cfg["head_dim"], hidden_act="silu",
                  max_position_embeddings=cfg["max_positions"], rms_norm_eps=cfg["rms_norm_eps"],
                  rope_theta=cfg["rope_theta"], tie_word_embeddings=True, attention_bias=False,
                  mlp_bias=False, bos_token_id=cfg.get("bos_token_id"),
                  eos_token_id=cfg.get("eos_token_id"), pad_token_id=cfg.get("pad_token_id"),
                  use_cache=True)
        hf_cfg = LlamaConfig(**kw)
        try:
            hf_cfg._attn_implementation = "sdpa"
        except Exception as e:  # noqa: BLE001
            self.report.error("smollm2 attn_implementation", e)
        rp = getattr(hf_cfg, "rope_parameters", None) or {}
        theta = rp.get("rope_theta", getattr(hf_cfg, "rope_theta", None))
        if theta is None or abs(float(theta) - float(cfg["rope_theta"])) > 1e-3:
            raise ValueError(f"LlamaConfig rope_theta {theta} != {cfg['rope_theta']}")
        with torch.device("cuda"):
            model = LlamaForCausalLM(hf_cfg)
        sd = {k: torch.from_numpy(v) for k, v in w.items()}
        sd["lm_head.weight"] = sd["model.embed_tokens.weight"]
        model.load_state_dict(sd, strict=True)
        del sd, w
        if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
            raise ValueError("lm_head.weight is not tied to model.embed_tokens.weight")
        model.eval().float()
        self.model = model
        self.sec["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
        self.sec["build_s"] = round(time.perf_counter() - t0, 2)
        self.sec["config"] = {k: cfg.get(k) for k in ("layers", "hidden", "heads", "kv_heads",
                                                      "head_dim", "intermediate", "vocab",
                                                      "rope_theta", "rms_norm_eps", "name")}
        self.sec["parameters"] = int(sum(p.numel() for p in model.parameters()))
        # HF computes RoPE from inv_freq (fp32); the ONNX graph gathers float64-made tables
        inv = model.model.rotary_emb.inv_freq.detach().float().cpu().numpy().astype(np.float64)
        if "rope.cos_cached" in rope:
            pos = np.arange(rope["rope.cos_cached"].shape[0], dtype=np.float64)
            emb = np.concatenate([np.outer(pos, inv)] * 2, axis=1)
            self.sec["rope_table_max_abs_diff"] = float(max(
                np.abs(np.cos(emb) - rope["rope.cos_cached"]).max(),
                np.abs(np.sin(emb) - rope["rope.sin_cached"]).max()))
        self.fp32_buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
        self.prompt = torch.tensor([self.args.lm_prompt_ids], dtype=torch.long, device=self.dev)
        rng = np.random.RandomState(0)
        self.prefill_ids = torch.tensor(rng.randint(0, cfg["vocab"], size=(1, self.args.prefill_len)),
                                        dtype=torch.long, device=self.dev)
        print(f"smollm2: built in {self.sec['build_s']} s ({self.sec['parameters']:,} parameters, "
              f"{self.sec['attn_implementation']})", flush=True)

    def to_half(self):
        """fp16 weights; RoPE's inv_freq buffers stay fp32 as in a from_pretrained(dtype=fp16) model."""
        self.model.half()
        for name, b in self.fp32_buffers.items():
            mod_name, _, attr = name.rpartition(".")
            mod = self.model.get_submodule(mod_name) if mod_name else self.model
            setattr(mod, attr, b.clone())

    # -- eager decode with DynamicCache (the default cache)
    def eager_prefill(self):
        out = self.model(input_ids=self.prompt, use_cache=True, logits_to_keep=1)
        return out.past_key_values, out.logits[:, -1:].argmax(-1)

    def eager_steps(self, cache, tok, n, collect=None):
        m = self.model
        for _ in range(n):
            out = m(input_ids=tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
            if collect is not None:
                collect.append(tok)
        return tok

    def greedy_eager(self, n_tokens):
        with self.torch.inference_mode():
            cache, tok = self.eager_prefill()
            ids = [tok]
            self.eager_steps(cache, tok, n_tokens - 1, ids)
            return [int(x) for x in self.torch.cat(ids, dim=1)[0].tolist()]

    def correctness(self, dtype_name, ref):
        ids = self.greedy_eager(self.args.lm_steps)
        r = {"ids": ids}
        if ref is not None:
            r["vs_reference"] = compare_ids(ids, ref)
        if dtype_name == "fp16" and "fp32_greedy" in self.sec:
            r["vs_fp32"] = compare_ids(ids, self.sec["fp32_greedy"]["ids"])
        text = detok(self.args.smollm2, ids)
        if text is not None:
            r["text"] = text
        self.sec[f"{dtype_name}_greedy"] = r

    def time_decode_eager(self):
        torch, n = self.torch, self.args.decode_steps
        st = {}

        def setup():
            st["cache"], st["tok"] = self.eager_prefill()

        def run():
            self.eager_steps(st["cache"], st["tok"], n)

        with torch.inference_mode():
            ms = bench(torch, run, self.args.iters, warmup=2, setup=setup)
        self.sec["decode_eager"] = stats(ms, per=n, cache="DynamicCache")

    # -- StaticCache + manual CUDA graph of one decode step
    def static_cache(self, max_len):
        from transformers import StaticCache
        return StaticCache(config=self.model.config, max_cache_len=max_len)

    def time_decode_graph(self):
        torch, n, m = self.torch, self.args.decode_steps, self.model
        P = self.prompt.shape[1]
        with torch.inference_mode():
            cache = self.static_cache(P + n + 1)
            tok = torch.zeros((1, 1), dtype=torch.long, device=self.dev)

            def prefill():
                cache.reset()
                out = m(input_ids=self.prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                tok.copy_(out.logits[:, -1:].argmax(-1))

            def step():
                out = m(input_ids=tok, past_key_values=cache, use_cache=True)
                tok.copy_(out.logits[:, -1:].argmax(-1))

            prefill()
            g = capture_graph(torch, step)
            # correctness of the replayed graph against the eager fp16 ids
            prefill()
            ids = [int(tok.item())]
            for _ in range(self.args.lm_steps - 1):
                g.replay()
                ids.append(int(tok.item()))

            def run():
                for _ in range(n):
                    g.replay()

            ms = bench(torch, run, self.args.iters, warmup=2, setup=prefill)
        r = stats(ms, per=n, cache=f"StaticCache({P + n + 1})")
        if "fp16_greedy" in self.sec:
            r["ids_vs_eager_fp16"] = compare_ids(ids, self.sec["fp16_greedy"]["ids"])
        self.sec["decode_cuda_graph"] = r
        del g

    def time_decode_compiled(self):
        compile_with_fallback(self.torch, self._decode_compiled, self.sec, "decode_compiled")

    def _decode_compiled(self, fullgraph):
        torch, n, m = self.torch, self.args.decode_steps, self.model
        P = self.prompt.shape[1]
        with torch.inference_mode():
            cache = self.static_cache(P + n + 1)
            fwd = torch.compile(m.forward, mode="reduce-overhead", fullgraph=fullgraph,
                                dynamic=False)
            st = {}

            def prefill():
                cache.reset()
                out = m(input_ids=self.prompt, past_key_values=cache, use_cache=True, logits_to_keep=1)
                st["tok"] = out.logits[:, -1:].argmax(-1)

            def steps(k, collect=None):
                tok = st["tok"]
                for _ in range(k):
                    out = fwd(input_ids=tok, past_key_values=cache, use_cache=True)
                    tok = out.logits[:, -1:].argmax(-1)
                    if collect is not None:
                        collect.append(tok)

            t0 = time.perf_counter()
            prefill()
            steps(4)  # compile + cudagraph recording
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            prefill()
            ids = [st["tok"]]
            steps(self.args.lm_steps - 1, ids)
            ids = [int(x) for x in torch.cat(ids, dim=1)[0].tolist()]
            ms = bench(torch, lambda: steps(n), self.args.iters, warmup=1, setup=prefill)
        r = stats(ms, per=n, cache=f"StaticCache({P + n + 1})", compile_s=round(compile_s, 1),
                  fullgraph=fullgraph)
        if "fp16_greedy" in self.sec:
            r["ids_vs_eager_fp16"] = compare_ids(ids, self.sec["fp16_greedy"]["ids"])
        self.sec["decode_compiled"] = r

    # -- prefill
    def time_prefill_eager(self):
        torch, m, ids = self.torch, self.model, self.prefill_ids
        with torch.inference_mode():
            ms = bench(torch, lambda: m(input_ids=ids, use_cache=True), self.args.iters)
        self.sec[f"prefill{ids.shape[1]}_eager"] = stats(ms, cache="DynamicCache")

    def time_prefill_graph(self):
        torch, m, ids = self.torch, self.model, self.prefill_ids
        S = ids.shape[1]
        with torch.inference_mode():
            cache = self.static_cache(S)
            res = {}

            def fwd():
                res["logits"] = m(input_ids=ids, past_key_values=cache, use_cache=True).logits

            def warm():
                cache.reset()
                fwd()

            g = capture_graph(torch, fwd, warmup_fn=warm)
            cache.reset()
            g.replay()
            ref = m(input_ids=ids, use_cache=True).logits
            diff = float((res["logits"].float() - ref.float()).abs().max())
            ms = bench(torch, g.replay, self.args.iters, setup=cache.reset)
        self.sec[f"prefill{S}_cuda_graph"] = stats(ms, cache=f"StaticCache({S})",
                                                    max_abs_logits_vs_eager=round(diff, 5))
        del g

    def time_prefill_compiled(self):
        compile_with_fallback(self.torch, self._prefill_compiled, self.sec,
                              f"prefill{self.prefill_ids.shape[1]}_compiled")

    def _prefill_compiled(self, fullgraph):
        torch, m, ids = self.torch, self.model, self.prefill_ids
        S = ids.shape[1]
        with torch.inference_mode():
            cache = self.static_cache(S)
            # allocate the cache eagerly (outside the compiled region, so that its tensors get
            # torch._dynamo.mark_static_address and cudagraphs are not skipped)
            m(input_ids=ids, past_key_values=cache, use_cache=True)
            fwd = torch.compile(m.forward, mode="reduce-overhead", fullgraph=fullgraph,
                                dynamic=False)

            def run():
                return fwd(input_ids=ids, past_key_values=cache, use_cache=True).logits

            t0 = time.perf_counter()
            for _ in range(3):
                cache.reset()
                run()
            torch.cuda.synchronize()
            compile_s = time.perf_counter() - t0
            ms = bench(torch, run, self.args.iters, setup=cache.reset)
        self.sec[f"prefill{S}_compiled"] = stats(ms, cache=f"StaticCache({S})",
                                                  compile_s=round(compile_s, 1), fullgraph=fullgraph)


def run_smollm2(torch, args, report, compiled_jobs):
    sec = report.data.setdefault("smollm2", {"model_dir": args.smollm2})
    lm = LmRunner(torch, args, report, sec)
    attempt(report, "smollm2 build", lm.build)
    if not hasattr(lm, "model") or not hasattr(lm, "prefill_ids"):
        return
    report.save()
    if args.compiled_only:
        lm.to_half()
        seed = args.seed_data.get("smollm2", {}).get("fp16_greedy")
        if seed:
            sec["fp16_greedy"] = seed
        compiled_jobs.append(("smollm2 decode compiled", lm.time_decode_compiled))
        compiled_jobs.append(("smollm2 prefill compiled", lm.time_prefill_compiled))
        return
    ref = attempt(report, "smollm2 --lm-reference", reference_ids, args.lm_reference)
    sec["prompt_ids"] = list(args.lm_prompt_ids)
    sec["reference"] = args.lm_reference
    set_fp32_exact(torch)
    attempt(report, "smollm2 fp32 greedy", lm.correctness, "fp32", ref)
    lm.to_half()
    attempt(report, "smollm2 fp16 greedy", lm.correctness, "fp16", ref)
    report.save()
    attempt(report, "smollm2 decode eager", lm.time_decode_eager)
    if not args.no_graphs:
        attempt(report, "smollm2 decode cuda_graph", lm.time_decode_graph)
    report.save()
    attempt(report, "smollm2 prefill eager", lm.time_prefill_eager)
    if not args.no_graphs:
        attempt(report, "smollm2 prefill cuda_graph", lm.time_prefill_graph)
    report.save()


# ----------------------------------------------------------------------------------------------
# Whisper

class AsrRunner:
    def __init__(self, torch, args, report, sec):
        self.torch, self.args, self.report, self.sec = torch, args, report, sec
        self.dev = torch.device("cuda")

    def build(self):
        torch = self.torch
        from transformers import WhisperConfig, WhisperForConditionalGeneration
        t0 = time.perf_counter()
        cfg, w = whisper_weights(self.args.whisper)
        self.cfg = cfg
        self.sec["load_onnx_s"] = round(time.perf_counter() - t0, 2)
        eot, sot = cfg["eot_token_id"], cfg["sot_token_id"]
        hf_cfg = WhisperConfig(
            vocab_size=cfg["vocab"], d_model=cfg["d_model"], encoder_layers=cfg["encoder_layers"],
            decoder_layers=cfg["decoder_layers"], encoder_attention_heads=cfg["heads"],
            decoder_attention_heads=cfg["heads"], encoder_ffn_dim=cfg["ffn"],
            decoder_ffn_dim=cfg["ffn"], num_mel_bins=cfg["n_mels"],
            max_source_positions=cfg["n_audio_ctx"], max_target_positions=cfg["n_text_ctx"],
            activation_function="gelu", scale_embedding=False, tie_word_embeddings=True,
            dropout=0.0, attention_dropout=0.0, activation_dropout=0.0, apply_spec_augment=False,
            pad_token_id=eot, bos_token_id=eot, eos_token_id=eot, decoder_start_token_id=sot,
            suppress_tokens=None, begin_suppress_tokens=None, use_cache=True)
        try:
            hf_cfg._attn_implementation = "sdpa"
        except Exception as e:  # noqa: BLE001
            self.report.error("whisper attn_implementation", e)
        with torch.device("cuda"):
            model = WhisperForConditionalGeneration(hf_cfg)
        sd = {k: torch.from_numpy(v) for k, v in w.items()}
        sd["proj_out.weight"] = sd["model.decoder.embed_tokens.weight"]
        model.load_state_dict(sd, strict=True)
        del sd, w
        if model.proj_out.weight.data_ptr() != model.model.decoder.embed_tokens.weight.data_ptr():
            raise ValueError("proj_out.weight is not tied to model.decoder.embed_tokens.weight")
        model.eval().float()
        self.model = model
        self.sec["attn_implementation"] = getattr(model.config, "_attn_implementation", None)
        self.sec["build_s"] = round(time.perf_counter() - t0, 2)
        self.sec["config"] = {k: cfg.get(k) for k in ("d_model", "encoder_layers", "decoder_layers",
                                                      "heads", "ffn", "vocab", "n_audio_ctx",
                                                      "n_text_ctx", "name")}
        self.sec["parameters"] = int(sum(p.numel() for p in model.parameters()))
        import whisper_logmel
        mel = whisper_logmel.wav_to_features(self.args.wav)
        self.sec["wav"] = os.path.relpath(self.args.wav, REPO)
        self.mel = torch.from_numpy(np.ascontiguousarray(mel, dtype=np.float32)).to(self.dev)
        self.prompt = list(cfg["prompt_ids"])
        self.prompt_t = torch.tensor([self.prompt], dtype=torch.long, device=self.dev)
        print(f"whisper: built in {self.sec['build_s']} s ({self.sec['parameters']:,} parameters, "
              f"{self.sec['attn_implementation']})", flush=True)

    def encoder(self, x):
        return self.model.model.encoder(input_features=x).last_hidden_state

    def encoder_cross(self, x):
        """The encoder and each decoder layer's cross-attention k/v ([1, heads, T, head_dim])."""
        h = self.encoder(x)
        H = self.cfg["heads"]
        outs = [h]
        for layer in self.model.model.decoder.layers:
            a = layer.encoder_attn
            for proj in (a.k_proj, a.v_proj):
                outs.append(proj(h).view(1, -1, H, a.head_dim).transpose(1, 2).contiguous())
        return outs

    def dec(self, ids, enc, cache):
        return self.model(encoder_outputs=(enc,), decoder_input_ids=ids, past_key_values=cache,
                          use_cache=True)

    def greedy(self):
        """Eager greedy decoding as scripts/whisper_reference.py (stop after eot, kept)."""
        torch = self.torch
        eot = self.cfg["eot_token_id"]
        limit = min(self.args.asr_steps, self.cfg["n_text_ctx"] - len(self.prompt))
        with torch.inference_mode():
            enc = self.encoder(self.mel.to(self.model.dtype))
            out = self.dec(self.prompt_t, enc, None)
            cache = out.past_key_values
            ids = []
            for n in range(limit):
                tok = out.logits[:, -1:].argmax(-1)
                ids.append(int(tok.item()))
                if ids[-1] == eot or n + 1 == limit:
                    break
                out = self.dec(tok, enc, cache)
        return ids

    def correctness(self, dtype_name, ref):
        ids = self.greedy()
        r = {"ids": ids, "text": detok(self.args.whisper, ids, below=self.cfg["eot_token_id"])}
        if ref is not None:
            r["vs_reference"] = compare_ids(ids, ref)
            r["vs_reference"]["equal"] = ids == ref or (len(ids) == self.args.asr_steps
                                                        and ids == ref[:len(ids)])
        if dtype_name == "fp16" and "fp32_greedy" in self.sec:
            r["vs_fp32"] = compare_ids(ids, self.sec["fp32_greedy"]["ids"])
        self.sec[f"{dtype_name}_greedy"] = r

    def to_half(self):
        self.model.half()
        self.mel16 = self.mel.half()

    def time_encoder(self, variant, names=("encoder", "encoder_cross")):
        torch = self.torch
        x = self.mel16.clone()
        fns = {"encoder": self.encoder, "encoder_cross": self.encoder_cross}
        with torch.inference_mode():
            for name in names:
                fn = fns[name]
                key = f"{name}_{variant}"
                try:
                    if variant == "eager":
                        ms = bench(torch, lambda: fn(x), self.args.iters)
                        self.sec[key] = stats(ms)
                    elif variant == "cuda_graph":
                        res = {}

                        def run():
                            res["out"] = fn(x)

                        g = capture_graph(torch, run)
                        g.replay()
                        ref = fn(x)
                        o = res["out"][0] if isinstance(res["out"], list) else res["out"]
                        r0 = ref[0] if isinstance(ref, list) else ref
                        diff = float((o.float() - r0.float()).abs().max())
                        ms = bench(torch, g.replay, self.args.iters)
                        self.sec[key] = stats(ms, max_abs_vs_eager=round(diff, 5))
                        del g
                    else:
                        cf = torch.compile(fn, mode="reduce-overhead", fullgraph=False, dynamic=False)
                        t0 = time.perf_counter()
                        for _ in range(3):
                            cf(x)
                        torch.cuda.synchronize()
                        compile_s = time.perf_counter() - t0
                        ms = bench(torch, lambda: cf(x), self.args.iters)
                        self.sec[key] = stats(ms, compile_s=round(compile_s, 1))
                except Exception as e:  # noqa: BLE001
                    self.report.error(f"whisper {key}", e)

    def time_decoder_eager(self):
        torch, n = self.torch, self.args.asr_decode_steps
        st = {}
        with torch.inference_mode():
            enc = self.encoder(self.mel16)

            def setup():
                out = self.dec(self.prompt_t, enc, None)
                st["cache"], st["tok"] = out.past_key_values, out.logits[:, -1:].argmax(-1)

            def run():
                tok, cache = st["tok"], st["cache"]
                for _ in range(n):
                    tok = self.dec(tok, enc, cache).logits[:, -1:].argmax(-1)

            ms = bench(torch, run, self.args.iters, warmup=2, setup=setup)
        self.sec["decoder_step_eager"] = stats(ms, per=n, cache="EncoderDecoderCache(DynamicCache x2)")

    def time_decoder_graph(self):
        import copy
        from transformers import EncoderDecoderCache, StaticCache
        torch, n, m = self.torch, self.args.asr_decode_steps, self.model
        P = len(self.prompt)
        ccfg = copy.deepcopy(m.config)
        ccfg.num_hidden_layers = m.config.decoder_layers  # WhisperConfig maps it to encoder_layers
        with torch.inference_mode():
            enc = self.encoder(self.mel16)
            cache = EncoderDecoderCache(StaticCache(config=ccfg, max_cache_len=P + n + 1),
                                        StaticCache(config=ccfg, max_cache_len=enc.shape[1]))
            tok = torch.zeros((1, 1), dtype=torch.long, device=self.dev)

            def prefill():
                cache.self_attention_cache.reset()  # the cross k/v stay cached (is_updated)
                out = self.dec(self.prompt_t, enc, cache)
                tok.copy_(out.logits[:, -1:].argmax(-1))

            def step():
                out = self.dec(tok, enc, cache)
                tok.copy_(out.logits[:, -1:].argmax(-1))

            prefill()
            g = capture_graph(torch, step)
            prefill()
            ids = [int(tok.item())]
            eot = self.cfg["eot_token_id"]
            while ids[-1] != eot and len(ids) < self.args.asr_steps:
                g.replay()
                ids.append(int(tok.item()))

            def run():
                for _ in range(n):
                    g.replay()

            ms = bench(torch, run, self.args.iters, warmup=2, setup=prefill)
        r = stats(ms, per=n, cache=f"EncoderDecoderCache(StaticCache({P + n + 1}), "
                                   f"StaticCache({enc.shape[1]}))")
        if "fp16_greedy" in self.sec:
            r["ids_vs_eager_fp16"] = compare_ids(ids, self.sec["fp16_greedy"]["ids"])
        self.sec["decoder_step_cuda_graph"] = r
        del g


def run_whisper(torch, args, report, compiled_jobs):
    sec = report.data.setdefault("whisper", {"model_dir": args.whisper})
    asr = AsrRunner(torch, args, report, sec)
    attempt(report, "whisper build", asr.build)
    if not hasattr(asr, "model") or not hasattr(asr, "mel"):
        return
    report.save()
    if args.compiled_only:
        asr.to_half()
        for name in ("encoder", "encoder_cross"):
            compiled_jobs.append((f"whisper {name} compiled",
                                  lambda name=name: asr.time_encoder("compiled", (name,))))
        return
    ref = attempt(report, "whisper --asr-reference", reference_ids, args.asr_reference)
    sec["reference"] = args.asr_reference
    set_fp32_exact(torch)
    attempt(report, "whisper fp32 greedy", asr.correctness, "fp32", ref)
    asr.to_half()
    attempt(report, "whisper fp16 greedy", asr.correctness, "fp16", ref)
    report.save()
    asr.time_encoder("eager")
    if not args.no_graphs:
        asr.time_encoder("cuda_graph")
    attempt(report, "whisper decoder eager", asr.time_decoder_eager)
    if not args.no_graphs:
        attempt(report, "whisper decoder cuda_graph", asr.time_decoder_graph)
    report.save()


# ----------------------------------------------------------------------------------------------

def set_fp32_exact(torch):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.set_float32_matmul_precision("highest")
    except Exception:  # noqa: BLE001
        pass


def environment(torch):
    import transformers
    env = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
           "torch_cuda": torch.version.cuda, "transformers": transformers.__version__}
    try:
        import onnx
        env["onnx"] = onnx.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        env["cudnn"] = torch.backends.cudnn.version()
        p = torch.cuda.get_device_properties(0)
        env["gpu"] = p.name
        env["gpu_memory_gib"] = round(p.total_memory / 2**30, 1)
        env["gpu_capability"] = f"{p.major}.{p.minor}"
    except Exception as e:  # noqa: BLE001
        env["gpu_error"] = err_line(e)
    try:
        import subprocess
        env["driver"] = subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
    except Exception:  # noqa: BLE001
        pass
    return env


def inductor_counters(torch):
    """torch._dynamo's "inductor" counters (e.g. cudagraph_skips), as a plain dict."""
    try:
        from torch._dynamo.utils import counters
        return {k: int(v) for k, v in counters["inductor"].items() if "cudagraph" in k}
    except Exception:  # noqa: BLE001
        return {}


def run_compiled_child(args, report):
    """The torch.compile variants run in a child process (this script with --compiled-only): a
    crash there (inductor / cudagraph trees have segfaulted) or a timeout loses only them. The child
    rebuilds the fp16 models, writes OUT.json.compiled.json after each job; the "*_compiled"
    entries are merged here."""
    import subprocess
    start_budget = min(args.compile_deadline_s, args.time_limit_s - 30.0) - elapsed()
    if start_budget <= 0:
        report.data.setdefault("skipped", []).append(
            f"torch.compile variants: {elapsed():.0f} s elapsed (--compile-deadline-s "
            f"{args.compile_deadline_s:.0f}, --time-limit-s {args.time_limit_s:.0f})")
        return
    child_json = args.out_json + ".compiled.json"
    if os.path.exists(child_json):
        os.remove(child_json)
    cmd = [sys.executable, os.path.abspath(__file__), child_json, "--compiled-only",
           "--seed-json", args.out_json, "--iters", str(args.iters),
           "--lm-prompt-ids", ",".join(map(str, args.lm_prompt_ids)),
           "--decode-steps", str(args.decode_steps), "--prefill-len", str(args.prefill_len),
           "--wav", args.wav, "--compile-deadline-s", f"{start_budget:.1f}"]
    cmd += ["--smollm2", args.smollm2] if args.smollm2 else ["--no-smollm2"]
    cmd += ["--whisper", args.whisper] if args.whisper else ["--no-whisper"]
    timeout = max(30.0, args.time_limit_s - elapsed())
    report.save()
    print(f"torch.compile variants in a child process ({elapsed():.0f} s; it may take "
          f"{timeout:.0f} s) ...", flush=True)
    t0 = time.perf_counter()
    info = {}
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        info["rc"] = p.returncode
        log = (p.stdout or "") + (p.stderr or "")
    except subprocess.TimeoutExpired as e:
        info["rc"] = "timeout"
        log = ((e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes)
               else (e.stdout or "")) + ((e.stderr or b"").decode("utf-8", "replace")
                                         if isinstance(e.stderr, bytes) else (e.stderr or ""))
    info["s"] = round(time.perf_counter() - t0, 1)
    child = {}
    if os.path.exists(child_json):
        try:
            child = load_json(child_json)
            os.remove(child_json)
        except Exception as e:  # noqa: BLE001
            report.error("compiled child json", e)
    for name in ("smollm2", "whisper"):
        for k, v in child.get(name, {}).items():
            if k.endswith("_compiled") and name in report.data:
                report.data[name][k] = v
    for e in child.get("errors", []):
        report.data["errors"].append({"where": "compiled: " + e["where"], "error": e["error"]})
    if child.get("skipped"):
        report.data.setdefault("skipped", []).extend(child["skipped"])
    if child.get("inductor_counters"):
        info["inductor_counters"] = child["inductor_counters"]
    if info["rc"] != 0:
        lines = [ln for ln in log.splitlines() if "cudagraph_utils.py" not in ln]
        info["log_tail"] = "\n".join(lines[-15:])[-3000:]
        report.data["errors"].append({"where": "compiled child process",
                                      "error": f"exit {info['rc']} after {info['s']} s "
                                               "(rc -11: segfault); see compile_child.log_tail"})
        print(f"[error] compiled child process: exit {info['rc']}; last lines:\n"
              + "\n".join(lines[-6:]), flush=True)
    report.data["compile_child"] = info


def fmt_ms(v):
    return f"{v:9.3f}" if isinstance(v, (int, float)) else f"{'-':>9}"


def print_table(data):
    env = data.get("env", {})
    print("=" * 78)
    print(f"torch baseline: torch {env.get('torch')} (CUDA {env.get('torch_cuda')}), "
          f"transformers {env.get('transformers')}, {env.get('gpu')}, driver {env.get('driver')}")

    def greedy_line(sec, label):
        parts = []
        for dt in ("fp32", "fp16"):
            g = sec.get(f"{dt}_greedy")
            if not g:
                parts.append(f"{dt}: -")
                continue
            s = f"{dt}: {len(g['ids'])} ids"
            if "vs_reference" in g:
                v = g["vs_reference"]
                s += (f", ref {'EQUAL' if v['equal'] else 'DIFFERENT'} ({v['matches']}/{v['of']}, "
                      f"prefix {v['common_prefix']})")
            if "vs_fp32" in g:
                s += f", vs fp32 {g['vs_fp32']['matches']}/{g['vs_fp32']['of']}"
            parts.append(s)
        print(f"{label}: " + "; ".join(parts))

    def row(name, r, extra=""):
        if not isinstance(r, dict) or "ms_median" not in r:
            return
        tps = f"{r['tokens_per_s']:9.1f} tok/s" if "tokens_per_s" in r else " " * 15
        comp = f"  compile {r['compile_s']} s" if "compile_s" in r else ""
        chk = ""
        if "ids_vs_eager_fp16" in r:
            c = r["ids_vs_eager_fp16"]
            chk = f"  ids {c['matches']}/{c['of']} = eager"
        print(f"  {name:28s} {fmt_ms(r['ms_median'])} ms (min {fmt_ms(r['ms_min']).strip()})"
              f" {tps}{comp}{chk}{extra}")

    lm = data.get("smollm2")
    if lm:
        print(f"SmolLM2 ({lm.get('model_dir')}, {lm.get('attn_implementation')})")
        greedy_line(lm, "  greedy")
        t = lm.get("fp16_greedy", {}).get("text")
        if t:
            print(f"  fp16 text: {t[:90]!r}")
        for k in sorted(lm):
            if k.startswith(("decode_", "prefill")) and not k.endswith("_best"):
                row(k + (" /step" if k.startswith("decode_") else ""), lm[k])
        for k in ("decode_best", "prefill_best"):
            if lm.get(k):
                b = lm[k]
                print(f"  {k:28s} {b['variant']}: {b['ms']} ms"
                      + (f" = {b['tokens_per_s']} tok/s" if b.get("tokens_per_s") else ""))
    asr = data.get("whisper")
    if asr:
        print(f"Whisper ({asr.get('model_dir')}, {asr.get('attn_implementation')})")
        greedy_line(asr, "  greedy")
        t = asr.get("fp16_greedy", {}).get("text")
        if t is not None:
            print(f"  fp16 text: {t[:90]!r}")
        for k in sorted(asr):
            if k.startswith(("encoder_", "decoder_step_")) and not k.endswith("_best"):
                row(k + (" /step" if k.startswith("decoder_") else ""), asr[k])
        for k in ("encoder_best", "encoder_cross_best", "decoder_step_best"):
            if asr.get(k):
                print(f"  {k:28s} {asr[k]['variant']}: {asr[k]['ms']} ms")
    if data.get("errors"):
        print(f"errors ({len(data['errors'])}):")
        for e in data["errors"]:
            print(f"  {e['where']}: {e['error'][:200]}")
    print(f"total {data.get('total_s')} s")


def check_weights_only(args):
    """--check-weights: the ONNX -> HF mapping and shapes, without torch."""
    ok = True
    if args.smollm2:
        try:
            cfg, w, rope = smollm2_weights(args.smollm2)
            n = sum(a.size for a in w.values())
            print(f"smollm2 {args.smollm2}: {len(w)} HF tensors + tied lm_head, {n:,} parameters, "
                  f"names and shapes OK (rope tables {sorted(rope)})")
        except Exception as e:  # noqa: BLE001
            ok = False
            print(f"smollm2: {err_line(e)}")
    if args.whisper:
        try:
            cfg, w = whisper_weights(args.whisper)
            n = sum(a.size for a in w.values())
            print(f"whisper {args.whisper}: {len(w)} HF tensors + tied proj_out, {n:,} parameters, "
                  f"names and shapes OK")
        except Exception as e:  # noqa: BLE001
            ok = False
            print(f"whisper: {err_line(e)}")
    return 0 if ok else 1


def default_dir(name):
    d = os.path.join(REPO, "models", name)
    return d if os.path.isdir(d) else None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_json", nargs="?")
    ap.add_argument("--smollm2", default=default_dir("smollm2"),
                    help="convert_smollm2.py output dir (default models/smollm2 if present)")
    ap.add_argument("--whisper", default=default_dir("whisper"),
                    help="convert_whisper.py output dir (default models/whisper if present)")
    ap.add_argument("--no-smollm2", action="store_true")
    ap.add_argument("--no-whisper", action="store_true")
    ap.add_argument("--iters", type=int, default=20, help="timed runs per measurement (median)")
    ap.add_argument("--lm-reference", help="scripts/lm_reference.py OUT.json (generated_ids)")
    ap.add_argument("--asr-reference", help="scripts/whisper_reference.py OUT.json (generated_ids)")
    ap.add_argument("--lm-prompt-ids", default=",".join(map(str, DEFAULT_LM_PROMPT)),
                    help="comma-separated prompt ids (default: the capital-of-France ChatML prompt)")
    ap.add_argument("--lm-steps", type=int, default=64, help="greedy tokens for the LM check")
    ap.add_argument("--decode-steps", type=int, default=64, help="timed LM decode steps per run")
    ap.add_argument("--prefill-len", type=int, default=128)
    ap.add_argument("--wav", default=os.path.join(REPO, "tests", "data", "speech", "jfk.wav"))
    ap.add_argument("--asr-steps", type=int, default=32, help="most tokens for the Whisper check")
    ap.add_argument("--asr-decode-steps", type=int, default=32, help="timed decoder steps per run")
    ap.add_argument("--no-graphs", action="store_true", help="skip the manual CUDA graph variants")
    ap.add_argument("--no-compile", action="store_true", help="skip the torch.compile variants")
    ap.add_argument("--compile-deadline-s", type=float, default=195.0,
                    help="start no torch.compile variant after this many seconds of the run "
                         "(default 195)")
    ap.add_argument("--time-limit-s", type=float, default=240.0,
                    help="the torch.compile child process is killed when the run reaches this "
                         "many seconds (default 240)")
    ap.add_argument("--compiled-only", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--seed-json", help=argparse.SUPPRESS)
    ap.add_argument("--check-weights", action="store_true",
                    help="only map and check the ONNX weights (numpy + onnx; no torch needed)")
    args = ap.parse_args()
    if args.no_smollm2:
        args.smollm2 = None
    if args.no_whisper:
        args.whisper = None
    args.lm_prompt_ids = [int(x) for x in str(args.lm_prompt_ids).split(",") if x.strip()]
    if args.check_weights:
        sys.exit(check_weights_only(args))
    if not args.out_json:
        ap.error("OUT.json is required (or --check-weights)")

    faulthandler.enable()
    report = Report(args.out_json)
    report.data["args"] = {k: v for k, v in vars(args).items()}
    import torch
    try:
        import transformers
        transformers.logging.set_verbosity_error()
    except Exception as e:  # noqa: BLE001
        report.error("import transformers", e)
    report.data["env"] = environment(torch)
    if not torch.cuda.is_available():
        report.error("cuda", RuntimeError("torch.cuda.is_available() is False"))
        report.save()
        sys.exit(1)
    report.save()
    torch.manual_seed(0)

    compiled_jobs = []
    if args.compiled_only:
        args.seed_data = load_json(args.seed_json) if args.seed_json else {}
    if args.smollm2:
        attempt(report, "smollm2", run_smollm2, torch, args, report, compiled_jobs)
    if args.whisper:
        attempt(report, "whisper", run_whisper, torch, args, report, compiled_jobs)
    if args.compiled_only:
        counters = inductor_counters(torch)
        for where, fn in compiled_jobs:
            if elapsed() > args.compile_deadline_s:
                report.data.setdefault("skipped", []).append(
                    f"{where}: not started after {elapsed():.0f} s of the compile process "
                    f"(deadline {args.compile_deadline_s:.0f} s)")
                continue
            print(f"{where} ({elapsed():.0f} s) ...", flush=True)
            attempt(report, where, fn)
            now = inductor_counters(torch)
            report.data.setdefault("inductor_counters", {})[where] = {
                k: v - counters.get(k, 0) for k, v in now.items() if v != counters.get(k, 0)}
            counters = now
            report.save()
        report.save()
        return
    if not args.no_compile:
        run_compiled_child(args, report)

    lm = report.data.get("smollm2")
    if lm:
        lm["decode_best"] = best_of(lm, "decode_")
        lm["prefill_best"] = best_of(lm, f"prefill{args.prefill_len}_")
    asr = report.data.get("whisper")
    if asr:
        enc = {k: v for k, v in asr.items() if k.startswith("encoder_")
               and not k.startswith("encoder_cross") and not k.endswith("_best")}
        asr["encoder_best"] = best_of(enc, "encoder_")
        asr["encoder_cross_best"] = best_of(asr, "encoder_cross_")
        asr["decoder_step_best"] = best_of(asr, "decoder_step_")
    report.data["total_s"] = round(elapsed(), 1)
    report.save()
    print_table(report.data)
    print(f"wrote {args.out_json}")


if __name__ == "__main__":
    main()
