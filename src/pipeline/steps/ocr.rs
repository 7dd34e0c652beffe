//! Text-recognition steps, as RapidOCR 3.10.0 does them: DB boxes on the detector's probability
//! map, rotated crops, the classifier's and recognizer's line tensors, the 180° fix, and CTC
//! decoding into text lines with their boxes.
use std::sync::Arc;

use super::image::{fit_width, resize_nchw};
use super::StepError;
use crate::ops::{
    self, cls_postprocess, cls_preprocess, db_postprocess, get_rotate_crop_image, plan_batches,
    rec_preprocess, sort_boxes, CtcDecoder, DbParams, TextLine,
};
use crate::pipeline::value::{Boxes, Image, Tensor, Value};
use crate::workload::TextlineKind;

/// The classifier's label for "rotated 180°" (labels ["0", "180"]).
const ROTATED_LABEL: usize = 1;
const CLS_LABELS: usize = 2;

fn ops_tensor(t: &Tensor) -> Result<ops::Tensor, StepError> {
    Ok(ops::Tensor::new(t.shape().to_vec(), t.to_f32()?)?)
}

/// Boxes on the probability map `prob` (`[1, 1, H, W]` of a model run on a `Normalize`d image).
pub fn ocr_boxes(prob: &Tensor, params: &DbParams) -> Result<Boxes, StepError> {
    let frame = prob.frame().cloned().ok_or_else(|| {
        StepError::Invalid(
            "the probability map does not come from a Normalize'd image (run the detector on \
             a Normalize output)"
                .into(),
        )
    })?;
    let [1, 1, h, w] = *prob.shape() else {
        return Err(StepError::Invalid(format!(
            "the probability map must be [1, 1, H, W], it is {:?}",
            prob.shape()
        )));
    };
    let (ih, iw) = frame.det_hw;
    let data = prob.to_f32()?;
    let map = ops::Tensor::new(
        vec![1, 1, ih, iw],
        resize_nchw(&[1, 1, h, w], &data, ih, iw),
    )?;
    let mut boxes = db_postprocess(&map, frame.padded.height, frame.padded.width, params)?;
    sort_boxes(&mut boxes);
    Ok(Boxes { boxes, frame })
}

/// One upright-ish crop per box, cut from the detector's (bounded, padded) image.
pub fn crop_rotate(image: &Image, boxes: &Boxes) -> Result<Vec<Value>, StepError> {
    if (image.width(), image.height()) != boxes.frame.original {
        return Err(StepError::Invalid(format!(
            "the boxes were found on a {}x{} image, this one is {}x{}",
            boxes.frame.original.0,
            boxes.frame.original.1,
            image.width(),
            image.height()
        )));
    }
    boxes
        .boxes
        .iter()
        .map(|b| {
            Ok(Value::Image(Image::from_bgr(get_rotate_crop_image(
                &boxes.frame.padded,
                &b.points,
            )?)))
        })
        .collect()
}

fn images(list: &[Value]) -> Result<Vec<crate::ops::BgrImage>, StepError> {
    list.iter()
        .map(|v| match v {
            Value::Image(i) => Ok(i.bgr().clone()),
            other => Err(StepError::Invalid(format!(
                "expected images, got {}",
                other.value_type()
            ))),
        })
        .collect()
}

/// One `[1, 3, height, width]` tensor per crop (see the schema's `TextlineTensors`).
pub fn textline_tensors(
    crops: &[Value],
    kind: TextlineKind,
    height: usize,
    width: usize,
    batch: usize,
) -> Result<Vec<Value>, StepError> {
    let crops = images(crops)?;
    let mut out: Vec<Option<Value>> = vec![None; crops.len()];
    for idx in plan_batches(&crops, batch) {
        let t = match kind {
            TextlineKind::Classifier => cls_preprocess(&crops, &idx, height, width),
            TextlineKind::Recognizer => rec_preprocess(&crops, &idx, height, width),
        };
        let item = t.data.len() / idx.len().max(1);
        let mut shape = t.shape.clone();
        shape[0] = 1;
        for (k, &i) in idx.iter().enumerate() {
            let x = fit_width(&shape, &t.data[k * item..(k + 1) * item], height, width);
            out[i] = Some(Value::Tensor(Tensor::f32(vec![1, 3, height, width], x)?));
        }
    }
    Ok(out.into_iter().flatten().collect())
}

/// Turns each crop the classifier reads as rotated by 180° (above `thresh`) upright.
pub fn angle_fix(crops: &[Value], scores: &[Value], thresh: f32) -> Result<Vec<Value>, StepError> {
    if crops.len() != scores.len() {
        return Err(StepError::Invalid(format!(
            "{} crops but {} classifier outputs",
            crops.len(),
            scores.len()
        )));
    }
    crops
        .iter()
        .zip(scores)
        .map(|(c, s)| {
            let (Value::Image(img), Value::Tensor(t)) = (c, s) else {
                return Err(StepError::Invalid(
                    "expected an image and a tensor per item".into(),
                ));
            };
            let flat = ops::Tensor::new(vec![1, t.shape().iter().product::<usize>()], t.to_f32()?)?;
            let (label, p) = cls_postprocess(&flat, 1, CLS_LABELS)?[0];
            Ok(if label == ROTATED_LABEL && p > thresh {
                Value::Image(Image::from_bgr(img.bgr().rotate_180()))
            } else {
                c.clone()
            })
        })
        .collect()
}

/// CTC-decodes each recognizer output into a line; keeps lines with text scoring at least
/// `text_score`, each with its box in original-image pixels (zero corners without boxes).
pub fn ctc_decode(
    logits: &[Value],
    boxes: Option<&Boxes>,
    decoder: &Arc<CtcDecoder>,
    text_score: f64,
) -> Result<Vec<TextLine>, StepError> {
    if let Some(b) = boxes {
        if b.len() != logits.len() {
            return Err(StepError::Invalid(format!(
                "{} boxes but {} recognizer outputs",
                b.len(),
                logits.len()
            )));
        }
    }
    let mut lines = Vec::new();
    for (i, v) in logits.iter().enumerate() {
        let Value::Tensor(t) = v else {
            return Err(StepError::Invalid(
                "expected recognizer output tensors".into(),
            ));
        };
        let (text, score) = decoder.decode(&ops_tensor(t)?)?.remove(0);
        if text.trim().is_empty() || score < text_score {
            continue;
        }
        let points = boxes.map_or([[0.0; 2]; 4], |b| b.frame.to_original(&b.boxes[i].points));
        lines.push(TextLine {
            points,
            text,
            score,
        });
    }
    Ok(lines)
}
