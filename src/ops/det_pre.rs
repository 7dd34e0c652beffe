//! Detector-side preprocessing as RapidOCR does it: global size bounds, vertical padding, the
//! multiple-of-32 resize with limit_side_len/limit_type, mean/std normalization and HWC(BGR) -> NCHW.

use super::error::OcrError;
use super::image::BgrImage;
use super::resize::resize_linear;
use super::tensor::Tensor;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitType {
    /// Upscale so the shorter side reaches the limit (RapidOCR's default).
    Min,
    /// Downscale so the longer side stays within the limit.
    Max,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DetPreprocess {
    pub limit_side_len: f64,
    pub limit_type: LimitType,
    /// Per channel, in the image's (BGR) channel order.
    pub mean: [f64; 3],
    pub std: [f64; 3],
}

impl Default for DetPreprocess {
    fn default() -> Self {
        Self {
            limit_side_len: 736.0,
            limit_type: LimitType::Min,
            mean: [0.5; 3],
            std: [0.5; 3],
        }
    }
}

/// int(round(int(v * ratio) / 32) * 32) with Python's round-half-to-even.
fn to_32(v: usize, ratio: f64) -> i64 {
    let r = (v as f64 * ratio) as i64;
    ((r as f64 / 32.0).round_ties_even() * 32.0) as i64
}

/// The detector input size (h, w) for an image of `h` x `w`; `None` when it would be empty (RapidOCR
/// then returns no boxes).
pub fn det_resize_dims(h: usize, w: usize, cfg: &DetPreprocess) -> Option<(usize, usize)> {
    let lim = cfg.limit_side_len;
    let ratio = match cfg.limit_type {
        LimitType::Max if (h.max(w) as f64) > lim => lim / if h > w { h } else { w } as f64,
        LimitType::Min if (h.min(w) as f64) < lim => lim / if h < w { h } else { w } as f64,
        _ => 1.0,
    };
    let (rh, rw) = (to_32(h, ratio), to_32(w, ratio));
    (rh > 0 && rw > 0).then_some((rh as usize, rw as usize))
}

/// Resize + normalize + NCHW: the detector input `[1, 3, rh, rw]`, channels in BGR order like RapidOCR.
pub fn det_preprocess(img: &BgrImage, cfg: &DetPreprocess) -> Option<Tensor> {
    let (rh, rw) = det_resize_dims(img.height, img.width, cfg)?;
    let r = resize_linear(img, rw, rh);
    let plane = rh * rw;
    let mut data = vec![0f32; 3 * plane];
    // numpy: (u8 as f32 * f32(1/255)) then - mean / std in f64, stored as f32.
    let scale = (1.0f64 / 255.0) as f32;
    for (i, px) in r.data.chunks_exact(3).enumerate() {
        for c in 0..3 {
            let v = f32::from(px[c]) * scale;
            data[c * plane + i] = ((f64::from(v) - cfg.mean[c]) / cfg.std[c]) as f32;
        }
    }
    Some(Tensor {
        shape: vec![1, 3, rh, rw],
        data,
    })
}

fn bound_resize(
    img: &BgrImage,
    limit: f64,
    shrink: bool,
) -> Result<(BgrImage, f64, f64), OcrError> {
    let (h, w) = (img.height, img.width);
    let ratio = if shrink {
        if (h.max(w) as f64) > limit {
            limit / if h > w { h } else { w } as f64
        } else {
            1.0
        }
    } else if (h.min(w) as f64) < limit {
        limit / if h < w { h } else { w } as f64
    } else {
        1.0
    };
    let (rh, rw) = (to_32(h, ratio), to_32(w, ratio));
    if rh <= 0 || rw <= 0 {
        return Err(OcrError::Invalid(format!(
            "image {w}x{h} resizes to nothing (bound {limit})"
        )));
    }
    let out = resize_linear(img, rw as usize, rh as usize);
    Ok((out, h as f64 / rh as f64, w as f64 / rw as f64))
}

/// RapidOCR's `resize_image_within_bounds`: returns the image and (ratio_h, ratio_w) = original / new.
pub fn resize_image_within_bounds(
    img: &BgrImage,
    min_side_len: f64,
    max_side_len: f64,
) -> Result<(BgrImage, f64, f64), OcrError> {
    let mut cur = img.clone();
    let (mut rh, mut rw) = (1.0, 1.0);
    if (cur.height.max(cur.width) as f64) > max_side_len {
        (cur, rh, rw) = bound_resize(&cur, max_side_len, true)?;
    }
    if (cur.height.min(cur.width) as f64) < min_side_len {
        // RapidOCR's second ratio replaces the first (relative to the already-shrunk image).
        (cur, rh, rw) = bound_resize(&cur, min_side_len, false)?;
    }
    Ok((cur, rh, rw))
}

/// RapidOCR's `apply_vertical_padding`: pads very flat or very low images top and bottom with black.
/// Returns the image and the top padding. `width_height_ratio < 0` turns the ratio rule off.
pub fn apply_vertical_padding(
    img: &BgrImage,
    width_height_ratio: f64,
    min_height: f64,
) -> (BgrImage, usize) {
    let (h, w) = (img.height as f64, img.width as f64);
    let too_flat = width_height_ratio != -1.0 && w / h > width_height_ratio;
    if h <= min_height || too_flat {
        let new_h = ((w / width_height_ratio).trunc()).max(min_height) * 2.0;
        let pad = ((new_h - h).abs() / 2.0) as usize;
        return (img.pad_vertical(pad, pad), pad);
    }
    (img.clone(), 0)
}
