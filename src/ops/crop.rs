//! Upright crops of rotated text boxes, as RapidOCR's `get_rotate_crop_image`: OpenCV's
//! getPerspectiveTransform + warpPerspective (INTER_CUBIC, BORDER_REPLICATE) reproduced in fixed point,
//! then a 90° turn for tall crops.

use std::sync::OnceLock;

use super::error::OcrError;
use super::image::BgrImage;

const INTER_BITS: i32 = 5;
const TAB: usize = 1 << INTER_BITS;
const COEF_BITS: i32 = 15;

/// Crops box `pts` (top-left, top-right, bottom-right, bottom-left) out of `img`. Crops with
/// height / width >= 1.5 are turned 90° counter-clockwise.
pub fn get_rotate_crop_image(img: &BgrImage, pts: &[[f32; 2]; 4]) -> Result<BgrImage, OcrError> {
    let norm = |a: [f32; 2], b: [f32; 2]| ((a[0] - b[0]).powi(2) + (a[1] - b[1]).powi(2)).sqrt();
    let w = norm(pts[0], pts[1]).max(norm(pts[2], pts[3])) as usize;
    let h = norm(pts[0], pts[3]).max(norm(pts[1], pts[2])) as usize;
    let out = rotate_crop(img, pts, w, h)?;
    if out.height as f64 / out.width as f64 >= 1.5 {
        return Ok(out.rotate_90_ccw());
    }
    Ok(out)
}

/// Warps quadrilateral `pts` onto a `w` x `h` upright image.
pub fn rotate_crop(
    img: &BgrImage,
    pts: &[[f32; 2]; 4],
    w: usize,
    h: usize,
) -> Result<BgrImage, OcrError> {
    if w == 0 || h == 0 || img.width == 0 || img.height == 0 {
        return Err(OcrError::Invalid(format!(
            "empty crop {w}x{h} for box {pts:?}"
        )));
    }
    let dst = [
        [0.0, 0.0],
        [w as f32, 0.0],
        [w as f32, h as f32],
        [0.0, h as f32],
    ];
    let m = perspective_transform(pts, &dst)
        .ok_or_else(|| OcrError::Invalid(format!("degenerate text box {pts:?}")))?;
    let inv =
        invert3(&m).ok_or_else(|| OcrError::Invalid(format!("degenerate text box {pts:?}")))?;
    Ok(warp_perspective_cubic(img, &inv, w, h))
}

/// OpenCV's getPerspectiveTransform: the 8x8 system solved by LU with partial pivoting, in f64
/// (products of coordinates formed in f32, as OpenCV does).
fn perspective_transform(src: &[[f32; 2]; 4], dst: &[[f32; 2]; 4]) -> Option<[f64; 9]> {
    let mut a = [[0f64; 9]; 8];
    for i in 0..4 {
        let (x, y) = (f64::from(src[i][0]), f64::from(src[i][1]));
        let (u, v) = (f64::from(dst[i][0]), f64::from(dst[i][1]));
        let pr = |s: f32, t: f32| f64::from(-s * t);
        a[i] = [
            x,
            y,
            1.0,
            0.0,
            0.0,
            0.0,
            pr(src[i][0], dst[i][0]),
            pr(src[i][1], dst[i][0]),
            u,
        ];
        a[i + 4] = [
            0.0,
            0.0,
            0.0,
            x,
            y,
            1.0,
            pr(src[i][0], dst[i][1]),
            pr(src[i][1], dst[i][1]),
            v,
        ];
    }
    // OpenCV's LUImpl: first strict maximum as pivot, rows updated with alpha = a[j][i] * (-1 / a[i][i]).
    for i in 0..8 {
        let mut p = i;
        for j in i + 1..8 {
            if a[j][i].abs() > a[p][i].abs() {
                p = j;
            }
        }
        if a[p][i].abs() < f64::EPSILON * 100.0 {
            return None;
        }
        a.swap(i, p);
        let d = -1.0 / a[i][i];
        let pivot = a[i];
        for row in a.iter_mut().skip(i + 1) {
            let alpha = row[i] * d;
            for (v, p) in row.iter_mut().zip(pivot.iter()).skip(i + 1) {
                *v += alpha * p;
            }
        }
    }
    let mut x = [0f64; 8];
    for i in (0..8).rev() {
        let mut s = a[i][8];
        for k in i + 1..8 {
            s -= a[i][k] * x[k];
        }
        x[i] = s / a[i][i];
    }
    Some([x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7], 1.0])
}

/// 3x3 inverse by the adjugate (what OpenCV's invert does for 3x3 with DECOMP_LU).
fn invert3(m: &[f64; 9]) -> Option<[f64; 9]> {
    let det = m[0] * (m[4] * m[8] - m[5] * m[7]) - m[1] * (m[3] * m[8] - m[5] * m[6])
        + m[2] * (m[3] * m[7] - m[4] * m[6]);
    if det == 0.0 {
        return None;
    }
    let d = 1.0 / det;
    Some([
        (m[4] * m[8] - m[5] * m[7]) * d,
        (m[2] * m[7] - m[1] * m[8]) * d,
        (m[1] * m[5] - m[2] * m[4]) * d,
        (m[5] * m[6] - m[3] * m[8]) * d,
        (m[0] * m[8] - m[2] * m[6]) * d,
        (m[2] * m[3] - m[0] * m[5]) * d,
        (m[3] * m[7] - m[4] * m[6]) * d,
        (m[1] * m[6] - m[0] * m[7]) * d,
        (m[0] * m[4] - m[1] * m[3]) * d,
    ])
}

/// OpenCV's fixed-point bicubic table: 32x32 sub-pixel positions x 16 weights summing to 2^15.
fn cubic_table() -> &'static Vec<[i32; 16]> {
    static T: OnceLock<Vec<[i32; 16]>> = OnceLock::new();
    T.get_or_init(|| {
        let one_d: Vec<[f32; 4]> = (0..TAB)
            .map(|i| {
                let x = i as f32 * (1.0 / TAB as f32);
                let a = -0.75f32;
                let c0 = ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a;
                let c1 = ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
                let c2 = ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0;
                [c0, c1, c2, 1.0 - c0 - c1 - c2]
            })
            .collect();
        let mut tab = Vec::with_capacity(TAB * TAB);
        for fy in &one_d {
            for fx in &one_d {
                let mut w = [0i32; 16];
                let mut sum = 0;
                for k1 in 0..4 {
                    for k2 in 0..4 {
                        let v = fy[k1] * fx[k2];
                        w[k1 * 4 + k2] = (v * (1 << COEF_BITS) as f32).round_ties_even() as i32;
                        sum += w[k1 * 4 + k2];
                    }
                }
                let diff = sum - (1 << COEF_BITS);
                if diff != 0 {
                    // OpenCV puts the rounding error on the largest/smallest of the central 2x2.
                    let (mut mn, mut mx) = ((1, 1), (1, 1));
                    for k1 in 1..3 {
                        for k2 in 1..3 {
                            if w[k1 * 4 + k2] < w[mn.0 * 4 + mn.1] {
                                mn = (k1, k2);
                            } else if w[k1 * 4 + k2] > w[mx.0 * 4 + mx.1] {
                                mx = (k1, k2);
                            }
                        }
                    }
                    if diff < 0 {
                        w[mx.0 * 4 + mx.1] -= diff;
                    } else {
                        w[mn.0 * 4 + mn.1] -= diff;
                    }
                }
                tab.push(w);
            }
        }
        tab
    })
}

/// warpPerspective with the destination->source matrix `m`, INTER_CUBIC, BORDER_REPLICATE.
fn warp_perspective_cubic(src: &BgrImage, m: &[f64; 9], w: usize, h: usize) -> BgrImage {
    let tab = cubic_table();
    let (sw, sh) = (src.width as i64, src.height as i64);
    // OpenCV walks the output in blocks; X0 is formed at each block's left edge.
    let bh0 = 16.min(h);
    let bw0 = (1024 / bh0).min(w);
    let mut data = vec![0u8; w * h * 3];
    for y in 0..h {
        let mut xb = 0;
        while xb < w {
            let bw = bw0.min(w - xb);
            let (xf, yf) = (xb as f64, y as f64);
            let x0 = m[0] * xf + m[1] * yf + m[2];
            let y0 = m[3] * xf + m[4] * yf + m[5];
            let w0 = m[6] * xf + m[7] * yf + m[8];
            for x1 in 0..bw {
                let wv = w0 + m[6] * x1 as f64;
                let wv = if wv != 0.0 { TAB as f64 / wv } else { 0.0 };
                let fx = ((x0 + m[0] * x1 as f64) * wv).clamp(i32::MIN as f64, i32::MAX as f64);
                let fy = ((y0 + m[3] * x1 as f64) * wv).clamp(i32::MIN as f64, i32::MAX as f64);
                let (ix, iy) = (fx.round_ties_even() as i32, fy.round_ties_even() as i32);
                let sx = i64::from((ix >> INTER_BITS).clamp(i16::MIN as i32, i16::MAX as i32)) - 1;
                let sy = i64::from((iy >> INTER_BITS).clamp(i16::MIN as i32, i16::MAX as i32)) - 1;
                let wt = &tab[((iy as usize) & (TAB - 1)) * TAB + ((ix as usize) & (TAB - 1))];
                let xs: [usize; 4] =
                    std::array::from_fn(|i| (sx + i as i64).clamp(0, sw - 1) as usize);
                let ys: [usize; 4] =
                    std::array::from_fn(|i| (sy + i as i64).clamp(0, sh - 1) as usize);
                let o = (y * w + xb + x1) * 3;
                for c in 0..3 {
                    let mut acc = 0i32;
                    for (i, &yy) in ys.iter().enumerate() {
                        let row = yy * src.width;
                        for (j, &xx) in xs.iter().enumerate() {
                            acc += i32::from(src.data[(row + xx) * 3 + c]) * wt[i * 4 + j];
                        }
                    }
                    data[o + c] = ((acc + (1 << (COEF_BITS - 1))) >> COEF_BITS).clamp(0, 255) as u8;
                }
            }
            xb += bw;
        }
    }
    BgrImage {
        width: w,
        height: h,
        data,
    }
}
