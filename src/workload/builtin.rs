//! Workloads texstream writes itself: the PP-OCR pipeline for one image (`texstream ocr`), with
//! the detector sized to the image the way RapidOCR sizes it, so a one-off command runs the same
//! engine and pipeline executor as a served workload.
use std::path::Path;

use super::{parse_workload, LoadedWorkload, WorkloadError};
use crate::ops::{
    apply_vertical_padding, det_resize_dims, resize_image_within_bounds, BgrImage, DetPreprocess,
    OcrConfig,
};
use crate::Precision;

/// Recognizer input width of the built-in OCR workload (crops up to 16:1 fit unscaled).
pub const OCR_REC_WIDTH: usize = 768;

/// The detector input (h, w) RapidOCR uses for `img`, or `None` for an image too small.
pub fn ocr_detector_hw(img: &BgrImage) -> Option<(usize, usize)> {
    let cfg = OcrConfig::default();
    let (bounded, _, _) =
        resize_image_within_bounds(img, cfg.min_side_len, cfg.max_side_len).ok()?;
    let (padded, _) = apply_vertical_padding(&bounded, cfg.width_height_ratio, cfg.min_height);
    det_resize_dims(padded.height, padded.width, &DetPreprocess::default())
}

/// The OCR workload over `models` (holding det.onnx, cls.onnx, rec.onnx) with the detector at
/// `det_hw`; its packed files are kept next to the models, named by shape and precision.
pub fn ocr_workload(
    models: &Path,
    det_hw: (usize, usize),
    precision: Precision,
) -> Result<LoadedWorkload, WorkloadError> {
    let m = |f: &str| models.join(f).display().to_string().replace('\\', "/");
    let (h, w) = det_hw;
    let p = precision.name();
    let text = format!(
        r#"Workload(
    name: "ocr",
    cap: "1TiB",
    policy: "preload",
    models: [
        ModelSpec(name: "det", source: Onnx("{det}"), packed: "{det_p}",
            inputs: {{"x": [1, 3, {h}, {w}]}}, precision: {P}),
        ModelSpec(name: "cls", source: Onnx("{cls}"), packed: "{cls_p}",
            inputs: {{"x": [1, 3, 48, 192]}}, precision: {P}),
        ModelSpec(name: "rec", source: Onnx("{rec}"), packed: "{rec_p}",
            inputs: {{"x": [1, 3, 48, {rw}]}}, precision: {P}),
    ],
    pipelines: [
        PipelineSpec(name: "ocr", steps: [
            ImageLoad(output: "frame", source: "image"),
            Normalize(input: "frame", output: "det_in",
                mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]),
            Run(model: "det", inputs: {{"x": "det_in"}}, outputs: {{"fetch_name_0": "prob"}}),
            OcrBoxes(input: "prob", output: "boxes"),
            CropRotate(image: "frame", boxes: "boxes", output: "crops"),
            TextlineTensors(input: "crops", output: "cls_in", kind: Classifier, height: 48, width: 192),
            Run(model: "cls", inputs: {{"x": "cls_in"}},
                outputs: {{"save_infer_model/scale_0.tmp_1": "angles"}},
                fan_out: PerItem(over: "cls_in", expected: 8, max: 1000)),
            AngleFix(crops: "crops", scores: "angles", output: "upright"),
            TextlineTensors(input: "upright", output: "rec_in", kind: Recognizer, height: 48, width: {rw}),
            Run(model: "rec", inputs: {{"x": "rec_in"}}, outputs: {{"fetch_name_0": "logits"}},
                fan_out: PerItem(over: "rec_in", expected: 8, max: 1000)),
            CtcDecode(input: "logits", boxes: "boxes", output: "text"),
        ]),
    ],
)"#,
        det = m("det.onnx"),
        cls = m("cls.onnx"),
        rec = m("rec.onnx"),
        det_p = m(&format!("det.{h}x{w}.{p}.tspk")),
        cls_p = m(&format!("cls.48x192.{p}.tspk")),
        rec_p = m(&format!("rec.48x{OCR_REC_WIDTH}.{p}.tspk")),
        rw = OCR_REC_WIDTH,
        P = match precision {
            Precision::F16 => "F16",
            Precision::F32 => "F32",
        },
    );
    parse_workload(&text, &models.join("ocr.ron"))
}
