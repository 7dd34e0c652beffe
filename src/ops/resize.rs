//! OpenCV-compatible `resize(INTER_LINEAR)` of 8-bit BGR images, bit-exact with OpenCV's fixed-point path.
//!
//! OpenCV quantizes the bilinear weights to 11 bits, keeps the horizontal pass in ints and finishes the
//! vertical pass with a SIMD formula whose rounding differs from its scalar code; the SIMD one is
//! reproduced so the detector/classifier/recognizer inputs match RapidOCR's.

use super::image::BgrImage;

const COEF_BITS: i32 = 11;
const COEF_SCALE: f32 = (1 << COEF_BITS) as f32;
/// Fewest output rows worth a thread of their own.
const MIN_ROWS_PER_THREAD: usize = 64;

/// Per-destination-index: the two source indices (clamped) and their fixed-point weights.
fn linear_taps(src_len: usize, dst_len: usize, clamp_frac: bool) -> Vec<(usize, usize, i32, i32)> {
    // OpenCV derives the scale as 1 / (dst/src), in double.
    let scale = 1.0 / (dst_len as f64 / src_len as f64);
    (0..dst_len)
        .map(|d| {
            let f = ((d as f64 + 0.5) * scale - 0.5) as f32;
            let mut s = f.floor() as i64;
            let mut frac = f - s as f32;
            if clamp_frac {
                if s < 0 {
                    s = 0;
                    frac = 0.0;
                }
                if s >= src_len as i64 - 1 {
                    s = src_len as i64 - 1;
                    frac = 0.0;
                }
            }
            let w0 = ((1.0 - frac) * COEF_SCALE).round_ties_even() as i32;
            let w1 = (frac * COEF_SCALE).round_ties_even() as i32;
            // For rows OpenCV clamps the two row indices but keeps the weights.
            let last = src_len as i64 - 1;
            (
                s.clamp(0, last) as usize,
                (s + 1).clamp(0, last) as usize,
                w0,
                w1,
            )
        })
        .collect()
}

/// Resizes to `dw` x `dh` like `cv2.resize(img, (dw, dh))` (default INTER_LINEAR) on uint8 data.
/// Returns an empty image if a dimension is 0.
pub fn resize_linear(src: &BgrImage, dw: usize, dh: usize) -> BgrImage {
    let (sw, sh) = (src.width, src.height);
    if dw == 0 || dh == 0 || sw == 0 || sh == 0 {
        return BgrImage {
            width: dw,
            height: dh,
            data: vec![0; dw * dh * 3],
        };
    }
    if dw == sw && dh == sh {
        return src.clone();
    }
    // OpenCV switches an exact 2x downscale to INTER_AREA.
    if sw == 2 * dw && sh == 2 * dh {
        return area_half(src, dw, dh);
    }
    let xt = linear_taps(sw, dw, true);
    let yt = linear_taps(sh, dh, false);
    let row_len = dw * 3;
    // Horizontal pass of one source row.
    let hrow = |y: usize| -> Vec<i32> {
        let s = &src.data[y * sw * 3..(y + 1) * sw * 3];
        let mut out = Vec::with_capacity(row_len);
        for &(sx, sx1, a0, a1) in &xt {
            for c in 0..3 {
                out.push(i32::from(s[sx * 3 + c]) * a0 + i32::from(s[sx1 * 3 + c]) * a1);
            }
        }
        out
    };
    // Blocks of output rows on several threads (the detector's input is a ~1500x740 upscale
    // every frame); each block keeps its own cache of the two source rows in use, so the result
    // is the same as one pass.
    let mut data = vec![0u8; row_len * dh];
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(dh.div_ceil(MIN_ROWS_PER_THREAD))
        .max(1);
    let rows_per = dh.div_ceil(threads);
    std::thread::scope(|scope| {
        for (block, out) in data.chunks_mut(rows_per * row_len).enumerate() {
            let (yt, hrow) = (&yt, &hrow);
            scope.spawn(move || {
                let mut cache: Vec<(usize, Vec<i32>)> = Vec::new();
                let mut get = |y: usize| -> Vec<i32> {
                    if let Some((_, r)) = cache.iter().find(|(cy, _)| *cy == y) {
                        return r.clone();
                    }
                    let r = hrow(y);
                    if cache.len() >= 2 {
                        cache.remove(0);
                    }
                    cache.push((y, r.clone()));
                    r
                };
                for (i, row) in out.chunks_mut(row_len).enumerate() {
                    let (sy, sy1, b0, b1) = yt[block * rows_per + i];
                    let r0 = get(sy);
                    let r1 = get(sy1);
                    vertical_row(&r0, &r1, b0, b1, row);
                }
            });
        }
    });
    BgrImage {
        width: dw,
        height: dh,
        data,
    }
}

/// OpenCV's VResizeLinear for uint8 as its SIMD code computes it: weights applied to values
/// pre-shifted by 4 with 16-bit high multiplies, then a rounding shift by 2. (Checked against
/// OpenCV 4.12 on full rows, tails included; its scalar formula rounds differently.)
fn vertical_row(r0: &[i32], r1: &[i32], b0: i32, b1: i32, out: &mut [u8]) {
    for ((&a, &b), o) in r0.iter().zip(r1).zip(out) {
        let v = ((b0 * (a >> 4)) >> 16) + ((b1 * (b >> 4)) >> 16);
        *o = ((v + 2) >> 2).clamp(0, 255) as u8;
    }
}

fn area_half(src: &BgrImage, dw: usize, dh: usize) -> BgrImage {
    let sw = src.width;
    let mut data = Vec::with_capacity(dw * dh * 3);
    for y in 0..dh {
        for x in 0..dw {
            for c in 0..3 {
                let at = |yy: usize, xx: usize| u32::from(src.data[(yy * sw + xx) * 3 + c]);
                let s = at(2 * y, 2 * x)
                    + at(2 * y, 2 * x + 1)
                    + at(2 * y + 1, 2 * x)
                    + at(2 * y + 1, 2 * x + 1);
                data.push(((s + 2) >> 2) as u8);
            }
        }
    }
    BgrImage {
        width: dw,
        height: dh,
        data,
    }
}
