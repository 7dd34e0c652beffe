#!/usr/bin/env python3
"""Runs RapidOCR 3.10.0 (ONNX Runtime) on the OCR test images and records every intermediate result the
Rust OCR steps (src/ops/) are tested against, into tests/data/ocr/ (small files only).

Run in the project venv:  .venv/bin/python scripts/ocr_reference.py
Needs: rapidocr==3.10.0 (+ its deps: opencv-python-headless, pyclipper, shapely, omegaconf, Pillow),
models from scripts/fetch_models.py, images from scripts/fetch_test_images.sh.

Written per image <name>:
  <name>.json          shapes, ratios, det input stats, raw/sorted/final boxes, det scores, crop shapes,
                       cls inputs/outputs per batch, rec batch layout, top-k rec probabilities per time
                       step, RapidOCR's final text lines
  (only for the images marked full:)
  <name>_det_in.png    detector input tensor mapped back to u8 (exact: x = (u8/255 - .5)/.5); gray when
                       all three channels are equal
  <name>_det_prob.png  detector probability map, 16-bit gray, value = round(p * 65535)
  <name>_crop<i>.png   the i-th crop (BGR stored as RGB PNG) before the classifier
  <name>_rec_in<i>.png rec input of crop i resized (the non-padded part, mapped back to u8)
  tiny.jpg, tiny_rgba.png, tiny_la.png + loader.json: RapidOCR's LoadImage output (BGR) for each
  rec_dict.txt         the recognizer's character list from the ONNX metadata, one per line
"""
import copy
import hashlib
import json
import os
import sys

import cv2
import numpy as np
from rapidocr import RapidOCR
from rapidocr.utils.process_img import apply_vertical_padding

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "ocr")
# (image, write the big PNGs too): text.png only contributes stats, to keep tests/data/ocr < 2 MB.
IMAGES = [("page.png", True), ("text.png", False)]
TOPK = 3


def png_u8(path, arr):
    # cv2.imwrite takes BGR and writes an RGB PNG.
    if not cv2.imwrite(path, np.ascontiguousarray(arr)):
        sys.exit(f"ocr_reference: cannot write {path}")


def tensor_to_u8(chw, what):
    u8 = np.rint(chw.astype(np.float64) * 127.5 + 127.5)
    back = ((u8.astype(np.float32) / np.float32(255.0)) - np.float32(0.5)) / np.float32(0.5)
    if np.abs(back - chw).max() > 1e-6:
        sys.exit(f"ocr_reference: {what} is not an exact u8 image")
    return u8.astype(np.uint8)


def hwc_for_png(chw_u8):
    if np.array_equal(chw_u8[0], chw_u8[1]) and np.array_equal(chw_u8[0], chw_u8[2]):
        return chw_u8[0]
    return chw_u8.transpose(1, 2, 0)  # BGR order


def stats(a):
    a = a.astype(np.float64)
    return {"shape": list(a.shape), "sum": float(a.sum()), "abs_sum": float(np.abs(a).sum()),
            "min": float(a.min()), "max": float(a.max())}


class Recorder:
    """Wraps an inference session to record each call's input and output."""

    def __init__(self, session):
        self.session = session
        self.calls = []

    def __call__(self, x):
        y = self.session(x)
        self.calls.append((x.copy(), y.copy()))
        return y

    def __getattr__(self, name):
        return getattr(self.session, name)


def run_image(engine, name, full):
    path = os.path.join(ROOT, "models", "images", name)
    stem = os.path.splitext(name)[0]
    with open(path, "rb") as f:
        image_sha = hashlib.sha256(f.read()).hexdigest()
    rec = {"image": f"models/images/{name}", "image_sha256": image_sha}

    ori = engine.load_img(path)
    img, op_record = engine.preprocess_img(ori)
    img, op_record = apply_vertical_padding(
        img, op_record, engine.cfg.Global.width_height_ratio, engine.cfg.Global.min_height)
    rec["ori_shape"] = list(ori.shape)
    rec["det_image_shape"] = list(img.shape)
    rec["op_record"] = {k: dict(v) for k, v in op_record.items()}

    det = engine._load_det_model()
    pre = det.get_preprocess()(img)
    rec["det_input"] = stats(pre)
    det_u8 = hwc_for_png(tensor_to_u8(pre[0], "det input"))
    if full:
        png_u8(os.path.join(OUT, f"{stem}_det_in.png"), det_u8)
    prob = det.session(pre)
    rec["det_output_shape"] = list(prob.shape)
    p16 = np.rint(np.clip(prob[0, 0].astype(np.float64), 0, 1) * 65535).astype(np.uint16)
    if full:
        cv2.imwrite(os.path.join(OUT, f"{stem}_det_prob.png"), p16)
    # Post-process from the quantized map, so the Rust side sees exactly the same input.
    prob_q = (p16.astype(np.float32) / np.float32(65535.0))[None, None]
    raw_boxes, scores = det.postprocess_op(prob_q, img.shape[:2])
    rec["det_raw_boxes"] = np.asarray(raw_boxes).tolist()
    rec["det_scores"] = [float(s) for s in scores]
    # The same from the float map, to show the quantization does not change the boxes.
    raw_f, _ = det.postprocess_op(prob, img.shape[:2])
    rec["det_boxes_same_from_float_map"] = bool(np.array_equal(np.asarray(raw_f), np.asarray(raw_boxes)))
    if len(raw_boxes) == 0:
        rec["det_sorted_boxes"] = []
        rec["crops"] = []
        rec["final"] = []
        return rec
    boxes = det.sorted_boxes(np.asarray(raw_boxes))
    rec["det_sorted_boxes"] = boxes.tolist()

    crops = engine.crop_text_regions(img, boxes)
    rec["crops"] = [list(c.shape) for c in crops]
    for i, c in enumerate(crops):
        png_u8(os.path.join(OUT, f"{stem}_crop{i}.png"), c)

    cls = engine._load_cls_model()
    cls.session = Recorder(cls.session)
    cls_out = cls(copy.deepcopy(crops))
    rec["cls_image_shape"] = list(cls.cls_image_shape)
    rec["cls_batches"] = [{"input": stats(x), "output": y.tolist()} for x, y in cls.session.calls]
    rec["cls_res"] = [[lbl, float(s)] for lbl, s in cls_out.cls_res]
    rec["cls_rotated"] = [not np.array_equal(a, b) for a, b in zip(crops, cls_out.img_list)]

    recog = engine._load_rec_model()
    recog.session = Recorder(recog.session)
    rec_in = copy.deepcopy(cls_out.img_list)
    from rapidocr.ch_ppocr_rec import TextRecInput
    rec_out = recog(TextRecInput(img=rec_in, return_word_box=False))
    batches = []
    for x, y in recog.session.calls:
        order = np.argsort(-y, axis=2, kind="stable")[:, :, :TOPK]
        topv = np.take_along_axis(y, order, axis=2)
        batches.append({"input_shape": list(x.shape), "input": stats(x),
                        "output_shape": list(y.shape),
                        "topk_index": order.tolist(), "topk_prob": topv.astype(np.float64).tolist()})
    rec["rec_batches"] = batches
    rec["rec_res"] = [[t, float(s)] for t, s in zip(rec_out.txts, rec_out.scores)]
    # Rec input of each (classified) crop on its own (batch of one), the non-padded part as u8.
    rec["rec_single"] = []
    for i, c in enumerate(cls_out.img_list):
        h, w = c.shape[:2]
        max_wh = max(recog.rec_image_shape[2] / recog.rec_image_shape[1], w / h)
        x = recog.resize_norm_img(c, max_wh)
        rw = int(min(x.shape[2], np.ceil(recog.rec_image_shape[1] * (w / float(h)))))
        png_u8(os.path.join(OUT, f"{stem}_rec_in{i}.png"), hwc_for_png(tensor_to_u8(x[:, :, :rw], "rec input")))
        rec["rec_single"].append({"shape": list(x.shape), "resized_w": rw, "stats": stats(x)})

    final = engine(path)
    rec["final"] = [] if final.txts is None else [
        {"box": np.asarray(b).tolist(), "text": t, "score": float(s)}
        for b, t, s in zip(final.boxes, final.txts, final.scores)]
    return rec


def loader_cases():
    """Small synthetic JPEG / RGBA PNG / gray+alpha PNG files and what RapidOCR's LoadImage makes of them."""
    from PIL import Image
    rng = np.random.default_rng(7)
    yy, xx = np.mgrid[0:12, 0:20]
    rgb = np.stack([xx * 12, yy * 20, (xx + yy) * 7], axis=2).astype(np.uint8)
    alpha = rng.integers(0, 256, size=(12, 20), dtype=np.uint8)
    files = {
        "tiny.jpg": lambda p: Image.fromarray(rgb).save(p, quality=90),
        "tiny_rgba.png": lambda p: Image.fromarray(np.dstack([rgb, alpha])).save(p),
        "tiny_la.png": lambda p: Image.fromarray(np.dstack([rgb[:, :, 0], alpha]), mode="LA").save(p),
    }
    out = {}
    for name, write in files.items():
        path = os.path.join(OUT, name)
        write(path)
        from rapidocr.utils.load_image import LoadImage
        out[name] = LoadImage()(path).tolist()
    with open(os.path.join(OUT, "loader.json"), "w") as f:
        json.dump(out, f)


def main():
    os.makedirs(OUT, exist_ok=True)
    loader_cases()
    models = os.path.join(ROOT, "models", "ocr")
    engine = RapidOCR(params={
        "Global.log_level": "warning",
        "Det.model_path": os.path.join(models, "det.onnx"),
        "Cls.model_path": os.path.join(models, "cls.onnx"),
        "Rec.model_path": os.path.join(models, "rec.onnx"),
    })
    for name, full in IMAGES:
        rec = run_image(engine, name, full)
        stem = os.path.splitext(name)[0]
        with open(os.path.join(OUT, f"{stem}.json"), "w", encoding="utf-8") as f:
            json.dump(rec, f, ensure_ascii=False, indent=1)
        print(f"{name}: {len(rec['final'])} lines: {[l['text'] for l in rec['final']]}")
    chars = engine._load_rec_model().session.get_character_list()
    with open(os.path.join(OUT, "rec_dict.txt"), "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(chars) + "\n")
    print(f"dictionary: {len(chars)} entries; cv2 {cv2.__version__}")


if __name__ == "__main__":
    main()
