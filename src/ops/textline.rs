//! Classifier and recognizer input preparation as RapidOCR does it: crops ordered by aspect ratio,
//! batches, resize to a fixed height keeping the aspect, (x/255 - 0.5)/0.5, zero padding on the right;
//! and the classifier's argmax post-processing.

use super::error::OcrError;
use super::image::BgrImage;
use super::resize::resize_linear;
use super::tensor::Tensor;

/// Crop indices ordered by width/height (stable), cut into batches of at most `batch` crops.
pub fn plan_batches(crops: &[BgrImage], batch: usize) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..crops.len()).collect();
    let ratio = |i: usize| crops[i].width as f64 / crops[i].height as f64;
    order.sort_by(|&a, &b| ratio(a).total_cmp(&ratio(b)));
    order.chunks(batch.max(1)).map(<[usize]>::to_vec).collect()
}

/// Writes one crop resized to height `h` (width ceil(h * aspect), at most `w`), normalized, into a
/// zeroed `[3, h, w]` slot. Returns the resized width.
fn resize_norm_into(img: &BgrImage, h: usize, w: usize, out: &mut [f32]) -> usize {
    let ratio = img.width as f64 / img.height as f64;
    let want = (h as f64 * ratio).ceil();
    let rw = if want > w as f64 { w } else { want as usize };
    let r = resize_linear(img, rw, h);
    for (i, px) in r.data.chunks_exact(3).enumerate() {
        let (y, x) = (i / rw, i % rw);
        for c in 0..3 {
            // numpy: f32 / 255, -= 0.5, /= 0.5, all in f32.
            let v = (f32::from(px[c]) / 255.0 - 0.5) / 0.5;
            out[(c * h + y) * w + x] = v;
        }
    }
    rw
}

/// The classifier input for the crops `idx` of `crops`: `[n, 3, h, w]` (RapidOCR: 48 x 192).
pub fn cls_preprocess(crops: &[BgrImage], idx: &[usize], h: usize, w: usize) -> Tensor {
    let mut t = Tensor::zeros(vec![idx.len(), 3, h, w]);
    for (k, &i) in idx.iter().enumerate() {
        resize_norm_into(
            &crops[i],
            h,
            w,
            &mut t.data[k * 3 * h * w..(k + 1) * 3 * h * w],
        );
    }
    t
}

/// The recognizer batch width: int(h * max(base_w / h, max aspect ratio in the batch)).
pub fn rec_batch_width(crops: &[BgrImage], idx: &[usize], h: usize, base_w: usize) -> usize {
    let mut max_ratio = base_w as f64 / h as f64;
    for &i in idx {
        max_ratio = max_ratio.max(crops[i].width as f64 / crops[i].height as f64);
    }
    (h as f64 * max_ratio) as usize
}

/// The recognizer input for the crops `idx`: `[n, 3, h, W]` with W from [`rec_batch_width`]
/// (RapidOCR: h = 48, base width 320).
pub fn rec_preprocess(crops: &[BgrImage], idx: &[usize], h: usize, base_w: usize) -> Tensor {
    let w = rec_batch_width(crops, idx, h, base_w);
    let mut t = Tensor::zeros(vec![idx.len(), 3, h, w]);
    for (k, &i) in idx.iter().enumerate() {
        resize_norm_into(
            &crops[i],
            h,
            w,
            &mut t.data[k * 3 * h * w..(k + 1) * 3 * h * w],
        );
    }
    t
}

/// Classifier output `[n, labels]` -> (label index, probability) per row (first maximum wins).
pub fn cls_postprocess(
    out: &Tensor,
    n: usize,
    labels: usize,
) -> Result<Vec<(usize, f32)>, OcrError> {
    let d = out.dims("classifier output", 2)?;
    if d[0] != n || d[1] != labels {
        return Err(OcrError::Shape {
            what: "classifier output".into(),
            shape: out.shape.clone(),
            expected: format!("[{n}, {labels}]"),
        });
    }
    Ok(out.data.chunks_exact(labels).map(argmax).collect())
}

/// Index and value of the first maximum.
pub(crate) fn argmax(row: &[f32]) -> (usize, f32) {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, &v) in row.iter().enumerate() {
        if v > best.1 {
            best = (i, v);
        }
    }
    best
}
