#!/usr/bin/env bash
# Writes a synthetic English speech clip for the Whisper tests with espeak-ng (a Debian package,
# installed by scripts/setup.sh):
#
#     scripts/make_speech_clip.sh OUT.wav [TEXT]
#
# espeak-ng writes 16-bit mono PCM at 22050 Hz; the clip is kept at that rate (no sox in the
# project's dependencies), so scripts/whisper_logmel.py (and the engine's front end) resample it to
# 16 kHz. Voice en-us, 150 words per minute, default text "Please turn on the kitchen lights and set
# a timer." (tiny.en transcribes it verbatim; on espeak's voice it hears "The quick brown fox jumps
# over the lazy dog." as "The quick roundfire jump over the lazy dog.", CTranslate2 agreeing). The
# output depends on the espeak-ng version (Debian 12: 1.51), so a clip is made, not committed;
# tests/data/speech/jfk.wav is the real 16 kHz recording.
set -euo pipefail
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 OUT.wav [TEXT]" >&2
  exit 2
fi
out="$1"
text="${2:-Please turn on the kitchen lights and set a timer.}"
if ! command -v espeak-ng >/dev/null 2>&1; then
  echo "make_speech_clip: espeak-ng not found (apt-get install espeak-ng; scripts/setup.sh does)" >&2
  exit 1
fi
mkdir -p "$(dirname "$out")"
espeak-ng -v en-us -s 150 -w "$out" -- "$text"
