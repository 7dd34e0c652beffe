//! The CPU side of the PP-OCR pipeline (detector -> angle classifier -> recognizer, fanned out over
//! the detected boxes), with the three network runs plugged in as closures by the GPU runtime.

use std::time::{Duration, Instant};

use super::crop::get_rotate_crop_image;
use super::ctc::CtcDecoder;
use super::db::{db_postprocess, sort_boxes, DbParams, DetBox};
use super::det_pre::{
    apply_vertical_padding, det_preprocess, resize_image_within_bounds, DetPreprocess,
};
use super::error::{BoxError, OcrError};
use super::image::BgrImage;
use super::tensor::Tensor;
use super::textline::{cls_postprocess, cls_preprocess, plan_batches, rec_preprocess};

/// RapidOCR 3.10.0's defaults (config.yaml) for everything around the networks.
#[derive(Clone, Debug, PartialEq)]
pub struct OcrConfig {
    pub min_side_len: f64,
    pub max_side_len: f64,
    pub use_vertical_padding: bool,
    pub min_height: f64,
    pub width_height_ratio: f64,
    pub det: DetPreprocess,
    pub db: DbParams,
    pub use_cls: bool,
    /// Classifier input height and width.
    pub cls_hw: (usize, usize),
    pub cls_batch: usize,
    pub cls_thresh: f32,
    /// Index of the "180" label in the classifier output (labels ["0", "180"]).
    pub cls_rotated_label: usize,
    pub cls_labels: usize,
    /// Recognizer input height and minimum width.
    pub rec_hw: (usize, usize),
    /// Crops per recognizer run; the batch is padded to its widest crop, so 1 (plain fan-out) can give
    /// slightly different scores than RapidOCR's 6.
    pub rec_batch: usize,
    pub text_score: f64,
}

impl Default for OcrConfig {
    fn default() -> Self {
        Self {
            min_side_len: 30.0,
            max_side_len: 2000.0,
            use_vertical_padding: true,
            min_height: 30.0,
            width_height_ratio: 8.0,
            det: DetPreprocess::default(),
            db: DbParams::default(),
            use_cls: true,
            cls_hw: (48, 192),
            cls_batch: 6,
            cls_thresh: 0.9,
            cls_rotated_label: 1,
            cls_labels: 2,
            rec_hw: (48, 320),
            rec_batch: 6,
            text_score: 0.5,
        }
    }
}

/// One recognized line: its box in original-image pixels (top-left, top-right, bottom-right,
/// bottom-left), text and mean character confidence.
#[derive(Clone, Debug, PartialEq)]
pub struct TextLine {
    pub points: [[f32; 2]; 4],
    pub text: String,
    pub score: f64,
}

/// Everything the pipeline computed, for tests and debugging.
#[derive(Clone, Debug, Default)]
pub struct OcrTrace {
    /// Detector boxes in reading order, in the coordinates of the detector's (bounded, padded) image.
    pub boxes: Vec<DetBox>,
    /// Upright crops (before the classifier's rotation).
    pub crops: Vec<BgrImage>,
    /// Classifier (label index, probability) per crop.
    pub cls: Vec<(usize, f32)>,
    /// Recognizer (text, score) per crop, before filtering.
    pub rec: Vec<(String, f64)>,
    /// Final lines (empty texts and scores below `text_score` removed).
    pub lines: Vec<TextLine>,
    /// Where the pipeline's own (CPU) time went; the model callbacks are not included.
    pub times: OcrStageTimes,
}

/// Wall time of the OCR pipeline's CPU stages, excluding the model callbacks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct OcrStageTimes {
    /// Bounds resize, padding and the detector's normalization.
    pub preprocess: Duration,
    /// DB box extraction from the probability map, and sorting.
    pub boxes: Duration,
    /// Rotated crops of every box.
    pub crops: Duration,
    /// Classifier batches' resize/normalize and their postprocessing (and 180° rotations).
    pub cls: Duration,
    /// Recognizer batches' resize/normalize.
    pub rec_pre: Duration,
    /// CTC decoding of the recognizer's output.
    pub ctc: Duration,
}

fn model_err<E: Into<BoxError>>(model: &'static str) -> impl FnOnce(E) -> OcrError {
    move |e| OcrError::Model {
        model,
        source: e.into(),
    }
}

/// Runs the OCR pipeline on `img`. `run_det` maps `[1, 3, H, W]` to the `[1, 1, H, W]` probability map,
/// `run_cls` maps `[n, 3, 48, 192]` to `[n, 2]` probabilities, `run_rec` maps `[n, 3, 48, W]` to
/// `[n, T, classes]` probabilities. `dict` is the recognizer's character list (its ONNX metadata
/// `character`, split with [`super::dict_from_metadata`]).
pub fn ocr_pipeline<D, C, R, E1, E2, E3>(
    img: &BgrImage,
    cfg: &OcrConfig,
    dict: &[String],
    run_det: D,
    run_cls: C,
    run_rec: R,
) -> Result<Vec<TextLine>, OcrError>
where
    D: FnMut(Tensor) -> Result<Tensor, E1>,
    C: FnMut(Tensor) -> Result<Tensor, E2>,
    R: FnMut(Tensor) -> Result<Tensor, E3>,
    E1: Into<BoxError>,
    E2: Into<BoxError>,
    E3: Into<BoxError>,
{
    Ok(ocr_pipeline_traced(img, cfg, dict, run_det, run_cls, run_rec)?.lines)
}

/// [`ocr_pipeline`], also returning the intermediate results.
pub fn ocr_pipeline_traced<D, C, R, E1, E2, E3>(
    img: &BgrImage,
    cfg: &OcrConfig,
    dict: &[String],
    mut run_det: D,
    mut run_cls: C,
    mut run_rec: R,
) -> Result<OcrTrace, OcrError>
where
    D: FnMut(Tensor) -> Result<Tensor, E1>,
    C: FnMut(Tensor) -> Result<Tensor, E2>,
    R: FnMut(Tensor) -> Result<Tensor, E3>,
    E1: Into<BoxError>,
    E2: Into<BoxError>,
    E3: Into<BoxError>,
{
    let mut trace = OcrTrace::default();
    if img.width == 0 || img.height == 0 {
        return Err(OcrError::Invalid("empty image".into()));
    }
    let mut times = OcrStageTimes::default();
    let t = Instant::now();
    let (bounded, ratio_h, ratio_w) =
        resize_image_within_bounds(img, cfg.min_side_len, cfg.max_side_len)?;
    let (det_img, pad_top) = if cfg.use_vertical_padding {
        apply_vertical_padding(&bounded, cfg.width_height_ratio, cfg.min_height)
    } else {
        (bounded, 0)
    };

    let Some(input) = det_preprocess(&det_img, &cfg.det) else {
        return Ok(trace);
    };
    times.preprocess = t.elapsed();
    let (ih, iw) = (input.shape[2], input.shape[3]);
    let prob = run_det(input).map_err(model_err("detector"))?;
    let t = Instant::now();
    if prob.shape != [1, 1, ih, iw] {
        return Err(OcrError::Shape {
            what: "detector output".into(),
            shape: prob.shape,
            expected: format!("[1, 1, {ih}, {iw}]"),
        });
    }
    let mut boxes = db_postprocess(&prob, det_img.height, det_img.width, &cfg.db)?;
    if boxes.is_empty() {
        return Ok(trace);
    }
    sort_boxes(&mut boxes);
    times.boxes = t.elapsed();
    let t = Instant::now();
    let crops = boxes
        .iter()
        .map(|b| get_rotate_crop_image(&det_img, &b.points))
        .collect::<Result<Vec<_>, _>>()?;
    times.crops = t.elapsed();

    let mut upright = crops.clone();
    let mut cls = vec![(0usize, 0f32); crops.len()];
    if cfg.use_cls {
        for idx in plan_batches(&crops, cfg.cls_batch) {
            let t0 = Instant::now();
            let t = cls_preprocess(&crops, &idx, cfg.cls_hw.0, cfg.cls_hw.1);
            times.cls += t0.elapsed();
            let out = run_cls(t).map_err(model_err("classifier"))?;
            let t0 = Instant::now();
            for (&i, r) in idx
                .iter()
                .zip(cls_postprocess(&out, idx.len(), cfg.cls_labels)?)
            {
                cls[i] = r;
                if r.0 == cfg.cls_rotated_label && r.1 > cfg.cls_thresh {
                    upright[i] = crops[i].rotate_180();
                }
            }
            times.cls += t0.elapsed();
        }
    }

    let decoder = CtcDecoder::new(dict);
    let mut rec = vec![(String::new(), 0f64); crops.len()];
    for idx in plan_batches(&upright, cfg.rec_batch) {
        let t0 = Instant::now();
        let t = rec_preprocess(&upright, &idx, cfg.rec_hw.0, cfg.rec_hw.1);
        times.rec_pre += t0.elapsed();
        let out = run_rec(t).map_err(model_err("recognizer"))?;
        let t0 = Instant::now();
        let d = out.dims("recognizer output", 3)?;
        if d[0] != idx.len() {
            return Err(OcrError::Shape {
                what: "recognizer output".into(),
                shape: out.shape.clone(),
                expected: format!("batch of {}", idx.len()),
            });
        }
        for (&i, r) in idx.iter().zip(decoder.decode(&out)?) {
            rec[i] = r;
        }
        times.ctc += t0.elapsed();
    }

    // Back to original-image coordinates: undo the padding, then the bounds resize; clip.
    let (ow, oh) = (img.width as f32, img.height as f32);
    for (b, (text, score)) in boxes.iter().zip(&rec) {
        if text.trim().is_empty() || *score < cfg.text_score {
            continue;
        }
        let points = b.points.map(|p| {
            let x = (p[0] * ratio_w as f32).max(0.0).min(ow);
            let y = ((p[1] - pad_top as f32) * ratio_h as f32).max(0.0).min(oh);
            [x, y]
        });
        trace.lines.push(TextLine {
            points,
            text: text.clone(),
            score: *score,
        });
    }
    trace.boxes = boxes;
    trace.crops = crops;
    trace.cls = cls;
    trace.rec = rec;
    trace.times = times;
    Ok(trace)
}
