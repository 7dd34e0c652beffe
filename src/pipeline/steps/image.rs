//! Image steps: loading a request's image and RapidOCR's detector preprocessing (bounded resize,
//! vertical padding, normalization), plus the bilinear NCHW resizes that fit a tensor to a
//! model's fixed input and back.
use std::sync::Arc;

use super::StepError;
use crate::ops::{
    apply_vertical_padding, det_preprocess, resize_image_within_bounds, DetPreprocess, OcrConfig,
};
use crate::pipeline::value::{Frame, Image, Tensor};

/// The detector input for `image`: `[1, 3, H, W]` (H, W from RapidOCR's rule, or `resize`),
/// with the frame geometry attached.
pub fn normalize(
    image: &Image,
    resize: Option<(usize, usize)>,
    mean: [f64; 3],
    std: [f64; 3],
) -> Result<Tensor, StepError> {
    let img = image.bgr();
    if img.width == 0 || img.height == 0 {
        return Err(StepError::Invalid("the image is empty".into()));
    }
    let cfg = OcrConfig::default();
    let (bounded, ratio_h, ratio_w) =
        resize_image_within_bounds(img, cfg.min_side_len, cfg.max_side_len)?;
    let (padded, pad_top) = if cfg.use_vertical_padding {
        apply_vertical_padding(&bounded, cfg.width_height_ratio, cfg.min_height)
    } else {
        (bounded, 0)
    };
    let det = DetPreprocess {
        mean,
        std,
        ..DetPreprocess::default()
    };
    let input = det_preprocess(&padded, &det).ok_or_else(|| {
        StepError::Invalid(format!(
            "the image ({}x{}) is too small for the detector",
            img.width, img.height
        ))
    })?;
    let det_hw = (input.shape[2], input.shape[3]);
    let (shape, data) = match resize {
        Some((h, w)) => (
            vec![1, 3, h, w],
            resize_nchw(&input.shape, &input.data, h, w),
        ),
        None => (input.shape, input.data),
    };
    let frame = Frame {
        original: (img.width, img.height),
        padded,
        pad_top,
        ratio_h,
        ratio_w,
        det_hw,
    };
    Ok(Tensor::f32(shape, data)?.with_frame(Some(Arc::new(frame))))
}

/// Bilinear resize of an NCHW tensor's H and W (half-pixel centers).
pub fn resize_nchw(shape: &[usize], data: &[f32], h2: usize, w2: usize) -> Vec<f32> {
    let (n, c, h, w) = (shape[0], shape[1], shape[2], shape[3]);
    if (h, w) == (h2, w2) {
        return data.to_vec();
    }
    let mut out = vec![0.0f32; n * c * h2 * w2];
    let src = |v: usize, s: usize, d: usize| -> (usize, usize, f32) {
        let x = ((v as f32 + 0.5) * s as f32 / d as f32 - 0.5).max(0.0);
        let x0 = (x.floor() as usize).min(s - 1);
        let x1 = (x0 + 1).min(s - 1);
        (x0, x1, x - x0 as f32)
    };
    // Column taps are the same on every row: computed once.
    let cols: Vec<(usize, usize, f32)> = (0..w2).map(|x| src(x, w, w2)).collect();
    for p in 0..n * c {
        let base = &data[p * h * w..(p + 1) * h * w];
        for y in 0..h2 {
            let (y0, y1, fy) = src(y, h, h2);
            let (r0, r1) = (&base[y0 * w..(y0 + 1) * w], &base[y1 * w..(y1 + 1) * w]);
            let row = &mut out[p * h2 * w2 + y * w2..p * h2 * w2 + (y + 1) * w2];
            for (o, &(x0, x1, fx)) in row.iter_mut().zip(&cols) {
                let a = r0[x0] * (1.0 - fx) + r0[x1] * fx;
                let b = r1[x0] * (1.0 - fx) + r1[x1] * fx;
                *o = a * (1.0 - fy) + b * fy;
            }
        }
    }
    out
}

/// Pads (zeros on the right) or resizes the width of a `[1, C, H, W]` item to `w2`.
pub fn fit_width(shape: &[usize], data: &[f32], h2: usize, w2: usize) -> Vec<f32> {
    let (c, h, w) = (shape[1], shape[2], shape[3]);
    if h != h2 || w > w2 {
        return resize_nchw(shape, data, h2, w2);
    }
    let mut out = vec![0.0f32; c * h2 * w2];
    for p in 0..c {
        for y in 0..h {
            out[(p * h2 + y) * w2..(p * h2 + y) * w2 + w]
                .copy_from_slice(&data[(p * h + y) * w..(p * h + y) * w + w]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resize_to_the_same_size_is_a_copy_and_constants_stay() {
        let d: Vec<f32> = (0..12).map(|i| i as f32).collect();
        assert_eq!(resize_nchw(&[1, 1, 3, 4], &d, 3, 4), d);
        let c = vec![2.5f32; 2 * 5 * 7];
        assert!(resize_nchw(&[1, 2, 5, 7], &c, 9, 3)
            .iter()
            .all(|&v| (v - 2.5).abs() < 1e-6));
    }

    #[test]
    fn fit_width_pads_on_the_right() {
        let d = vec![1.0f32; 2 * 2 * 3];
        let out = fit_width(&[1, 2, 2, 3], &d, 2, 5);
        assert_eq!(out.len(), 2 * 2 * 5);
        assert_eq!(&out[..5], &[1.0, 1.0, 1.0, 0.0, 0.0]);
    }
}
