#!/usr/bin/env python3
"""The assistant pipeline (workloads/assistant.ron) under ONNX Runtime, the reference for
texstream's run of it (the Rust code is not consulted).

    assistant_reference.py VAD.onnx WHISPER_DIR LM.onnx IN.wav OUT.json
        [--asr-tokenizer F] [--lm-tokenizer F] [--asr-max N] [--reply-tokens N] [--system TEXT]

IN.wav is 16-bit PCM at 16 kHz. Silero VAD runs chunk by chunk with its state carried
(vad_reference.py) and the silero-vad wheel's own segment rules; when it finds speech, the
Whisper front end (whisper_logmel.py, the clip padded to 30 s) feeds the encoder, and the
decoder decodes greedily from the config's prompt ids until <|endoftext|> or --asr-max tokens
(whisper_reference.py). The transcript is those ids decoded by the `tokenizers` package; it goes
into the ChatML template (with --system), is tokenized without special tokens and the language
model decodes --reply-tokens tokens greedily (lm_reference.py, no stop). OUT.json gets the
segments, the ids and the texts.
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lm_reference  # noqa: E402
import vad_reference  # noqa: E402
import whisper_logmel  # noqa: E402
import whisper_reference  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("vad")
    ap.add_argument("whisper_dir")
    ap.add_argument("lm")
    ap.add_argument("wav")
    ap.add_argument("out_json")
    ap.add_argument("--asr-tokenizer", help="default: WHISPER_DIR/tokenizer.json")
    ap.add_argument("--lm-tokenizer", help="default: tokenizer.json beside LM.onnx")
    ap.add_argument("--asr-max", type=int, default=60)
    ap.add_argument("--reply-tokens", type=int, default=32)
    ap.add_argument("--system")
    args = ap.parse_args()
    from tokenizers import Tokenizer

    asr_tok = Tokenizer.from_file(args.asr_tokenizer or os.path.join(args.whisper_dir, "tokenizer.json"))
    lm_tok = Tokenizer.from_file(args.lm_tokenizer or os.path.join(os.path.dirname(args.lm), "tokenizer.json"))

    audio = vad_reference.read_wav(args.wav)
    probs = vad_reference.speech_probs(args.vad, audio)
    if not os.path.exists(vad_reference.WHEEL):
        sys.exit(f"{vad_reference.WHEEL} is missing: run scripts/fetch_models.py")
    segments = vad_reference.silero_rules()(
        [float(p) for p in probs], sampling_rate=vad_reference.RATE, threshold=0.5,
        min_speech_duration_ms=250, min_silence_duration_ms=100, speech_pad_ms=30,
        audio_length_samples=len(audio))
    out = {"segments": [[s["start"], s["end"]] for s in segments]}
    if segments:
        features = whisper_logmel.log_mel_spectrogram(whisper_logmel.pad_or_trim(audio))
        w = whisper_reference.Whisper(args.whisper_dir)
        cross = w.encode(np.asarray(features, np.float32)[None])
        prompt, heard, _, _ = w.greedy(cross, args.asr_max)
        eot = w.cfg["eot_token_id"]
        if heard and heard[-1] == eot:
            heard = heard[:-1]
        transcript = asr_tok.decode(heard, skip_special_tokens=True)
        chat = ""
        if args.system is not None:
            chat += f"<|im_start|>system\n{args.system}<|im_end|>\n"
        chat += f"<|im_start|>user\n{transcript}<|im_end|>\n<|im_start|>assistant\n"
        lm_prompt = lm_tok.encode(chat, add_special_tokens=False).ids
        reply, _, _ = lm_reference.generate(lm_reference.Decoder(args.lm), lm_prompt, args.reply_tokens)
        out.update({
            "asr_prompt_ids": prompt, "heard_ids": heard, "transcript": transcript,
            "prompt_ids": lm_prompt, "reply_ids": reply,
            "reply": lm_tok.decode(reply, skip_special_tokens=True),
        })
    with open(args.out_json, "w", encoding="utf-8") as f:
        json.dump(out, f, indent=1, ensure_ascii=False)
        f.write("\n")
    print(json.dumps({k: v for k, v in out.items() if k in ("segments", "transcript", "reply")}, ensure_ascii=False))


if __name__ == "__main__":
    main()
