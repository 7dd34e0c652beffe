#!/usr/bin/env python3
"""A byte-level BPE tokenizer written from GPT-2's `encoder.py`, as an independent reference for
texstream's `Tokenize` step on a Hugging Face tokenizer.json (SmolLM2's: added tokens matched
literally, `Digits(individual_digits)` then `ByteLevel` pre-tokenization, BPE merges by rank).
Only ASCII text: the GPT-2 split pattern's \\p{L} and \\p{N} are written as ASCII classes.

    bpe_reference.py TOKENIZER.json TEXT     prints the token ids as a JSON list
"""
import json
import re
import sys

SPLIT = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def bpe(word, ranks):
    parts = list(word)
    while len(parts) > 1:
        pairs = [(ranks.get((a, b), float("inf")), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
        rank, i = min(pairs)
        if rank == float("inf"):
            break
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return parts


def encode(tok, text):
    if any(ord(c) > 127 for c in text):
        sys.exit("ASCII text only")
    vocab = tok["model"]["vocab"]
    merges = [tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in tok["model"]["merges"]]
    ranks = {m: i for i, m in enumerate(merges)}
    added = {a["content"]: a["id"] for a in tok["added_tokens"]}
    byte_enc = bytes_to_unicode()
    ids = []
    pattern = "(" + "|".join(re.escape(a) for a in sorted(added, key=len, reverse=True)) + ")"
    for piece in re.split(pattern, text):
        if piece in added:
            ids.append(added[piece])
            continue
        for part in re.split(r"([0-9])", piece):
            for w in SPLIT.findall(part):
                u = "".join(byte_enc[b] for b in w.encode())
                ids.extend(vocab[t] for t in bpe(u, ranks))
    return ids


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        tok = json.load(f)
    print(json.dumps(encode(tok, sys.argv[2])))


if __name__ == "__main__":
    main()
