#!/usr/bin/env python3
"""Greedy decoding with ONNX Runtime (CPU) on a "with_past" decoder (scripts/convert_smollm2.py's
form), as the reference for texstream's LM tests.

usage: lm_reference.py MODEL_DIR_OR_ONNX OUT.json
           [--prompt-ids 1,2,3 | --prompt-text TEXT | --chat QUESTION] [--steps 64]
           [--stop-at-eos] [--token-by-token-prefill] [--no-system]

Shapes grow for real: the prompt is prefilled in one call with empty past tensors
([1, n_kv, 0, head_dim]), then one token per call with the previous call's present.* fed back as
past_key_values.*. --token-by-token-prefill feeds the prompt one token per call instead.
--prompt-text and --chat need tokenizer.json next to the model and the `tokenizers` package;
--chat wraps QUESTION in the ChatML template of SmolLM2-Instruct (with its default system prompt
unless --no-system). Everything else needs only onnxruntime and numpy.

OUT.json: {"prompt_ids", "generated_ids", "first_logits_range": [min, max] of the logits row that
picks the first generated token, "last_logits": the first 16 values of the final step's logits row,
"generated_text" (when MODEL_DIR has tokenizer.json; decoded without the tokenizers package)}.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"


def bytes_to_unicode():
    """GPT-2's byte <-> printable-unicode table used by ByteLevel BPE vocabularies."""
    bs = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1))
          + list(range(ord("\u00ae"), ord("\u00ff") + 1)))
    cs = bs[:]
    n = 0
    for byte in range(256):
        if byte not in bs:
            bs.append(byte)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def load_vocab(tokenizer_path):
    with open(tokenizer_path, encoding="utf-8") as f:
        tok = json.load(f)
    id_to_token = {i: t for t, i in tok["model"]["vocab"].items()}
    special = set()
    for a in tok.get("added_tokens", []):
        id_to_token[a["id"]] = a["content"]
        if a.get("special"):
            special.add(a["id"])
    return id_to_token, special


def decode(ids, id_to_token, special, skip_special=True):
    back = {c: b for b, c in bytes_to_unicode().items()}
    out = bytearray()
    for i in ids:
        t = id_to_token.get(int(i), "")
        if int(i) in special:
            if not skip_special:
                out += t.encode("utf-8")
            continue
        for ch in t:
            out += bytes([back[ch]]) if ch in back else ch.encode("utf-8")
    return out.decode("utf-8", errors="replace")


def encode_with_tokenizers(tokenizer_path, text):
    try:
        from tokenizers import Tokenizer
    except ImportError:
        sys.exit("lm_reference: --prompt-text/--chat need the `tokenizers` package; use --prompt-ids")
    return Tokenizer.from_file(tokenizer_path).encode(text, add_special_tokens=False).ids


class Decoder:
    def __init__(self, onnx_path, threads=0):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        self.sess = ort.InferenceSession(onnx_path, so, providers=["CPUExecutionProvider"])
        self.past_names = [i.name for i in self.sess.get_inputs() if i.name.startswith("past_key_values.")]
        shapes = {i.name: i.shape for i in self.sess.get_inputs()}
        self.n_kv, self.head_dim = shapes[self.past_names[0]][1], shapes[self.past_names[0]][3]
        self.out_names = [o.name for o in self.sess.get_outputs()]
        for p in self.past_names:
            assert "present." + p[len("past_key_values."):] in self.out_names, p
        self.reset()

    def reset(self):
        empty = np.zeros((1, self.n_kv, 0, self.head_dim), np.float32)
        self.past = {p: empty for p in self.past_names}
        self.pos = 0

    def step(self, ids):
        """Feeds ids (list of int) at the next positions; returns logits [len(ids), vocab]."""
        s = len(ids)
        feeds = {
            "input_ids": np.array([ids], np.int64),
            "position_ids": np.arange(self.pos, self.pos + s, dtype=np.int64)[None],
            "attention_mask": np.ones((1, self.pos + s), np.int64),
        }
        feeds.update(self.past)
        outs = dict(zip(self.out_names, self.sess.run(self.out_names, feeds)))
        for p in self.past_names:
            self.past[p] = outs["present." + p[len("past_key_values."):]]
        self.pos += s
        return outs["logits"][0]


def generate(dec, prompt, steps, eos=None, token_by_token_prefill=False):
    dec.reset()
    if token_by_token_prefill:
        for t in prompt:
            logits = dec.step([t])
    else:
        logits = dec.step(list(prompt))
    row = logits[-1]
    first_range = [float(row.min()), float(row.max())]
    generated = []
    for i in range(steps):
        nxt = int(np.argmax(row))
        generated.append(nxt)
        if eos is not None and nxt == eos:
            break
        if i + 1 == steps:
            break
        row = dec.step([nxt])[-1]
    return generated, first_range, row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="model directory (with decoder.onnx) or an .onnx file")
    ap.add_argument("out_json")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--prompt-ids", help="comma-separated token ids")
    g.add_argument("--prompt-text", help="raw text (needs tokenizer.json and `tokenizers`)")
    g.add_argument("--chat", help="a user message, wrapped in the ChatML template")
    ap.add_argument("--no-system", action="store_true", help="--chat without the system prompt")
    ap.add_argument("--steps", type=int, default=64)
    ap.add_argument("--then-prompt-ids", help="a conversation's next turn: comma-separated ids fed "
                    "after the reply's last picked token, on the same cache; --steps more tokens")
    ap.add_argument("--stop-at-eos", action="store_true")
    ap.add_argument("--token-by-token-prefill", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="ORT intra-op threads (0: default)")
    args = ap.parse_args()

    if os.path.isdir(args.model):
        model_dir, onnx_path = args.model, os.path.join(args.model, "decoder.onnx")
    else:
        model_dir, onnx_path = os.path.dirname(os.path.abspath(args.model)), args.model
    cfg = {}
    if os.path.isfile(os.path.join(model_dir, "config.json")):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            cfg = json.load(f)
    tok_path = os.path.join(model_dir, "tokenizer.json")

    if args.prompt_ids:
        prompt = [int(x) for x in args.prompt_ids.split(",") if x.strip()]
    elif args.prompt_text is not None:
        prompt = encode_with_tokenizers(tok_path, args.prompt_text)
    elif args.chat is not None:
        text = "" if args.no_system else f"<|im_start|>system\n{DEFAULT_SYSTEM}<|im_end|>\n"
        text += f"<|im_start|>user\n{args.chat}<|im_end|>\n<|im_start|>assistant\n"
        prompt = encode_with_tokenizers(tok_path, text)
    else:
        prompt = [cfg.get("bos_token_id", 1)]
    if not prompt:
        sys.exit("lm_reference: empty prompt")

    dec = Decoder(onnx_path, args.threads)
    eos = cfg.get("eos_token_id", 2) if args.stop_at_eos else None
    generated, first_range, last = generate(dec, prompt, args.steps, eos, args.token_by_token_prefill)

    out = {"prompt_ids": prompt, "generated_ids": generated, "first_logits_range": first_range,
           "last_logits": [float(x) for x in last[:16]]}
    if args.then_prompt_ids:
        # The last picked token (the reply's last, or the stop token) was never fed: it comes first.
        feed = [generated[-1]] + [int(x) for x in args.then_prompt_ids.split(",") if x.strip()]
        row = dec.step(feed)[-1]
        then = []
        for i in range(args.steps):
            nxt = int(np.argmax(row))
            then.append(nxt)
            if (eos is not None and nxt == eos) or i + 1 == args.steps:
                break
            row = dec.step([nxt])[-1]
        out["then_generated_ids"] = then
    if os.path.isfile(tok_path):
        id_to_token, special = load_vocab(tok_path)
        out["generated_text"] = decode(generated, id_to_token, special)
    with open(args.out_json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(f"prompt    {len(prompt)} ids: {prompt}")
    print(f"generated {len(generated)} ids: {generated}")
    if "generated_text" in out:
        print(f"text      {out['generated_text']!r}")


if __name__ == "__main__":
    main()
