#!/usr/bin/env bash
# Session 44, set-up: session 43's tar of the real assistant's wheels in 52 MiB pieces
# (.dev44/x/qNN), one a call, kept in /tmp on the held machine (idle release 30 s). The calls
# carried a working tree without tests/data (but its speech clip) and the older measurements,
# which left room for pieces of 52 MiB instead of 22. `r00`: the OCR models and the camera
# page for mixed.ron (its own sha256-checked tar; setup.sh unpacks it where it came).
set -u
mkdir -p /tmp/xfer
for f in .dev44/x/q* .dev44/x/r*; do [ -f "$f" ] && cp "$f" /tmp/xfer/; done
ls -la /tmp/xfer
