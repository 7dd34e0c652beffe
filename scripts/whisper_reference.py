#!/usr/bin/env python3
"""Greedy Whisper transcription with ONNX Runtime on the graphs of scripts/convert_whisper.py: the
reference the engine's transcription is checked against. Needs only onnx, onnxruntime and numpy.

    whisper_reference.py MODEL_DIR IN.wav OUT.json [--steps N] [--no-stop] [--mel OUT.npy]

1. input_features = scripts/whisper_logmel.py's log-mel of IN.wav ([1, 80, 3000]);
2. encoder.onnx once -> cross_k.{i} / cross_v.{i};
3. decoder.onnx with real growing shapes: the prompt (config.json prompt_ids, for tiny.en
   <|startoftranscript|> <|notimestamps|>) in one call with P = 0 (empty past [1, heads, 0, head_dim]),
   then one token per call feeding back present.* as past_key_values.*; position_ids are 0.., the
   attention_mask all ones over the T = P + S positions;
4. the next token is the plain argmax of the last position's logits (no token suppression, ties to
   the lowest id); stop after <|endoftext|> (it is kept in generated_ids) or after N generated
   tokens (--steps, default 64); --no-stop always runs N steps (for token-for-token comparisons);
5. text = GPT-2 byte-level decoding of the generated ids below <|endoftext|> with tokenizer.json's
   vocab (special and timestamp ids are left out).
Writes {"mel_path", "prompt_ids", "generated_ids", "text", ...} to OUT.json.
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import whisper_logmel  # noqa: E402


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


class Detokenizer:
    def __init__(self, tokenizer_path):
        with open(tokenizer_path, encoding="utf-8") as f:
            tok = json.load(f)
        self.id_to_token = {i: t for t, i in tok["model"]["vocab"].items()}
        self.special = {t["id"] for t in tok.get("added_tokens", []) if t.get("special")}
        for t in tok.get("added_tokens", []):
            self.id_to_token[t["id"]] = t["content"]
        self.u2b = {u: b for b, u in bytes_to_unicode().items()}

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            if i in self.special or i not in self.id_to_token:
                continue
            for ch in self.id_to_token[i]:
                if ch in self.u2b:
                    out.append(self.u2b[ch])
                else:
                    out += ch.encode("utf-8")
        return out.decode("utf-8", errors="replace")


def session(path):
    so = ort.SessionOptions()
    so.intra_op_num_threads = min(4, os.cpu_count() or 1)
    so.log_severity_level = 3
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])


class Whisper:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
            self.cfg = json.load(f)
        self.enc = session(os.path.join(model_dir, "encoder.onnx"))
        self.dec = session(os.path.join(model_dir, "decoder.onnx"))
        self.layers = self.cfg["decoder_layers"]
        self.heads = self.cfg["heads"]
        self.head_dim = self.cfg["head_dim"]
        self.out_names = [o.name for o in self.dec.get_outputs()]

    def encode(self, features):
        names = [o.name for o in self.enc.get_outputs()]
        res = dict(zip(names, self.enc.run(None, {"input_features": features.astype(np.float32)})))
        return {k: v for k, v in res.items() if k.startswith("cross_")}

    def empty_past(self):
        z = np.zeros((1, self.heads, 0, self.head_dim), np.float32)
        past = {}
        for i in range(self.layers):
            past[f"past_key_values.{i}.key"] = z
            past[f"past_key_values.{i}.value"] = z
        return past

    def step(self, ids, start, past, cross):
        """Runs ids (list) at positions start.. on top of past; returns (logits [S, V], new past)."""
        s = len(ids)
        feed = {"input_ids": np.array([ids], np.int64),
                "position_ids": np.arange(start, start + s, dtype=np.int64)[None],
                "attention_mask": np.ones((1, start + s), np.int64)}
        feed.update(past)
        feed.update(cross)
        res = dict(zip(self.out_names, self.dec.run(None, feed)))
        new_past = {}
        for i in range(self.layers):
            new_past[f"past_key_values.{i}.key"] = res[f"present.{i}.key"]
            new_past[f"past_key_values.{i}.value"] = res[f"present.{i}.value"]
        return res["logits"][0], new_past

    def greedy(self, cross, steps, stop=True, prompt=None):
        prompt = list(self.cfg["prompt_ids"] if prompt is None else prompt)
        eot = self.cfg["eot_token_id"]
        limit = self.cfg["n_text_ctx"] - len(prompt)
        logits, past = self.step(prompt, 0, self.empty_past(), cross)
        pos = len(prompt)
        generated, first_logits = [], logits[-1].copy()
        for n in range(min(steps, limit)):
            tok = int(np.argmax(logits[-1]))
            generated.append(tok)
            if (stop and tok == eot) or n + 1 == min(steps, limit):
                break
            logits, past = self.step([tok], pos, past, cross)
            pos += 1
        return prompt, generated, first_logits, past


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir")
    ap.add_argument("wav")
    ap.add_argument("out_json")
    ap.add_argument("--steps", type=int, default=64, help="most tokens to generate (default 64)")
    ap.add_argument("--no-stop", action="store_true", help="do not stop at <|endoftext|>")
    ap.add_argument("--mel", help="where to save the log-mel .npy (default: OUT.json's stem + .mel.npy)")
    ap.add_argument("--check-prefill", action="store_true",
                    help="also run the prompt one token at a time and compare with the one-call prefill")
    args = ap.parse_args()

    feats = whisper_logmel.wav_to_features(args.wav)
    mel_path = args.mel or os.path.splitext(args.out_json)[0] + ".mel.npy"
    np.save(mel_path, feats)
    w = Whisper(args.model_dir)
    cross = w.encode(feats)
    prompt, generated, first_logits, _ = w.greedy(cross, args.steps, stop=not args.no_stop)

    out = {"mel_path": os.path.relpath(mel_path), "wav_path": os.path.relpath(args.wav),
           "model_dir": os.path.relpath(args.model_dir), "prompt_ids": prompt,
           "generated_ids": generated}
    tok_path = os.path.join(args.model_dir, "tokenizer.json")
    out["text"] = Detokenizer(tok_path).decode(generated) if os.path.exists(tok_path) else None
    top = np.argsort(-first_logits)[:5]
    out["first_step_top5"] = [[int(i), float(first_logits[i])] for i in top]

    if args.check_prefill:
        # prompt token by token (P = 0, 1, ...) must give the same last logits and the same cache
        past = w.empty_past()
        for pos, t in enumerate(prompt):
            lg, past = w.step([t], pos, past, cross)
        lg_all, past_all = w.step(prompt, 0, w.empty_past(), cross)
        d_logits = float(np.abs(lg[-1] - lg_all[-1]).max())
        d_cache = max(float(np.abs(past[k] - past_all[k]).max()) for k in past)
        out["prefill_check"] = {"max_abs_logits": d_logits, "max_abs_cache": d_cache,
                                "argmax_equal": bool(np.argmax(lg[-1]) == np.argmax(lg_all[-1]))}
        print(f"prefill at once vs token by token: logits {d_logits:.3g}, cache {d_cache:.3g}",
              file=sys.stderr)
        if not (d_logits < 1e-3 and d_cache < 1e-3):
            sys.exit("whisper_reference: prefill mismatch")

    with open(args.out_json, "w", encoding="utf-8") as f:  # one key a line, values compact
        f.write("{\n" + ",\n".join(f" {json.dumps(k)}: {json.dumps(v, ensure_ascii=False)}"
                                    for k, v in out.items()) + "\n}\n")
    print(f"{len(generated)} tokens: {generated}", file=sys.stderr)
    print(out["text"])


if __name__ == "__main__":
    main()
