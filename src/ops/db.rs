//! DB (Differentiable Binarization) detector post-processing as RapidOCR's `DBPostProcess` (score_mode
//! "fast"): threshold, 2x2 dilation, contours (outer borders and holes, like OpenCV's RETR_LIST),
//! minimum-area boxes, box score, unclip, scaling to the detector's input image, filtering and sorting.

use super::error::OcrError;
use super::geometry::{fill_poly_mask, min_area_rect, offset_polygon_round, Pt};
use super::tensor::Tensor;

#[derive(Clone, Debug, PartialEq)]
pub struct DbParams {
    pub thresh: f32,
    pub box_thresh: f64,
    pub max_candidates: usize,
    pub unclip_ratio: f64,
    pub use_dilation: bool,
}

impl Default for DbParams {
    fn default() -> Self {
        Self {
            thresh: 0.3,
            box_thresh: 0.5,
            max_candidates: 1000,
            unclip_ratio: 1.6,
            use_dilation: true,
        }
    }
}

/// A detected text box: corners clockwise from top-left (x right, y down) in the coordinates of the
/// image given to the detector, and its mean probability.
#[derive(Clone, Debug, PartialEq)]
pub struct DetBox {
    pub points: [[f32; 2]; 4],
    pub score: f64,
}

const MIN_SIZE: f32 = 3.0;

/// Boxes for a `[1, 1, H, W]` probability map, scaled to a `dest_h` x `dest_w` image, in contour order
/// (use [`sort_boxes`] for reading order).
pub fn db_postprocess(
    prob: &Tensor,
    dest_h: usize,
    dest_w: usize,
    p: &DbParams,
) -> Result<Vec<DetBox>, OcrError> {
    let d = prob.dims("detector output", 4)?;
    if d[0] != 1 || d[1] != 1 {
        return Err(OcrError::Shape {
            what: "detector output".into(),
            shape: prob.shape.clone(),
            expected: "[1, 1, H, W]".into(),
        });
    }
    let (h, w) = (d[2], d[3]);
    let pred = &prob.data;
    let mut mask: Vec<bool> = pred.iter().map(|&v| v > p.thresh).collect();
    if p.use_dilation {
        // OpenCV dilate with a 2x2 kernel, anchor (1,1): max over (x-1..x, y-1..y).
        let m = mask.clone();
        for y in 0..h {
            for x in 0..w {
                let at = |yy: usize, xx: usize| m[yy * w + xx];
                mask[y * w + x] = at(y, x)
                    || (x > 0 && at(y, x - 1))
                    || (y > 0 && at(y - 1, x))
                    || (x > 0 && y > 0 && at(y - 1, x - 1));
            }
        }
    }
    let mut out = Vec::new();
    for contour in contours(&mask, w, h).into_iter().take(p.max_candidates) {
        let (points, sside) = mini_box(&contour);
        if sside < MIN_SIZE {
            continue;
        }
        let score = box_score_fast(pred, w, h, &points);
        if p.box_thresh > score {
            continue;
        }
        let poly: Vec<Pt> = points
            .iter()
            .map(|q| [f64::from(q[0]), f64::from(q[1])])
            .collect();
        let expanded = offset_polygon_round(&poly, unclip_distance(&poly, p.unclip_ratio));
        let expanded: Vec<Pt> = expanded
            .iter()
            .map(|q| [q[0] as f64, q[1] as f64])
            .collect();
        let (bx, sside) = mini_box(&expanded);
        if sside < MIN_SIZE + 2.0 {
            continue;
        }
        let scale = |v: f32, from: usize, to: usize| {
            ((v / from as f32 * to as f32).round_ties_even()).clamp(0.0, to as f32)
        };
        let scaled = bx.map(|q| [scale(q[0], w, dest_w), scale(q[1], h, dest_h)]);
        if let Some(b) = filter_box(scaled, dest_h, dest_w) {
            out.push(DetBox { points: b, score });
        }
    }
    Ok(out)
}

/// Area * ratio / perimeter of the polygon (shapely's area and length).
fn unclip_distance(poly: &[Pt], ratio: f64) -> f64 {
    let n = poly.len();
    let (mut a2, mut len) = (0.0, 0.0);
    for i in 0..n {
        let (p, q) = (poly[i], poly[(i + 1) % n]);
        a2 += p[0] * q[1] - q[0] * p[1];
        len += ((q[0] - p[0]).powi(2) + (q[1] - p[1]).powi(2)).sqrt();
    }
    if len == 0.0 {
        0.0
    } else {
        (a2 / 2.0).abs() * ratio / len
    }
}

/// RapidOCR's `get_mini_boxes`: min-area rectangle corners ordered top-left, top-right, bottom-right,
/// bottom-left (by x, then y within the left and right pairs), and the shorter side.
fn mini_box(points: &[Pt]) -> ([[f32; 2]; 4], f32) {
    let r = min_area_rect(points);
    let mut c: Vec<[f32; 2]> = r
        .corners
        .iter()
        .map(|q| [q[0] as f32, q[1] as f32])
        .collect();
    c.sort_by(|a, b| a[0].total_cmp(&b[0]));
    let (i1, i4) = if c[1][1] > c[0][1] { (0, 1) } else { (1, 0) };
    let (i2, i3) = if c[3][1] > c[2][1] { (2, 3) } else { (3, 2) };
    ([c[i1], c[i2], c[i3], c[i4]], (r.width.min(r.height)) as f32)
}

/// Mean probability over the box polygon as cv2.fillPoly rasterizes it (vertices truncated to ints
/// within the box's bounding window).
fn box_score_fast(pred: &[f32], w: usize, h: usize, b: &[[f32; 2]; 4]) -> f64 {
    let clampi = |v: f32, hi: usize| (v as i64).clamp(0, hi as i64 - 1);
    let xmin = clampi(b.iter().map(|q| q[0]).fold(f32::MAX, f32::min).floor(), w);
    let xmax = clampi(b.iter().map(|q| q[0]).fold(f32::MIN, f32::max).ceil(), w);
    let ymin = clampi(b.iter().map(|q| q[1]).fold(f32::MAX, f32::min).floor(), h);
    let ymax = clampi(b.iter().map(|q| q[1]).fold(f32::MIN, f32::max).ceil(), h);
    let poly: Vec<[i64; 2]> = b
        .iter()
        .map(|q| [(q[0] - xmin as f32) as i64, (q[1] - ymin as f32) as i64])
        .collect();
    let (ww, wh) = ((xmax - xmin + 1) as usize, (ymax - ymin + 1) as usize);
    let mask = fill_poly_mask(&poly, ww, wh);
    let (mut sum, mut n) = (0.0f64, 0usize);
    for (i, _) in mask.iter().enumerate().filter(|(_, &m)| m) {
        sum += f64::from(pred[(i / ww + ymin as usize) * w + xmin as usize + i % ww]);
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// RapidOCR's `filter_det_res` for one box: clockwise order, clip to the image (int truncation),
/// drop boxes with a side <= 3.
fn filter_box(b: [[f32; 2]; 4], img_h: usize, img_w: usize) -> Option<[[f32; 2]; 4]> {
    let mut xs: Vec<[f32; 2]> = b.to_vec();
    xs.sort_by(|a, c| a[0].total_cmp(&c[0]));
    let (mut left, mut right) = ([xs[0], xs[1]], [xs[2], xs[3]]);
    left.sort_by(|a, c| a[1].total_cmp(&c[1]));
    right.sort_by(|a, c| a[1].total_cmp(&c[1]));
    let mut r = [left[0], right[0], right[1], left[1]];
    for q in &mut r {
        q[0] = q[0].max(0.0).min(img_w as f32 - 1.0).trunc();
        q[1] = q[1].max(0.0).min(img_h as f32 - 1.0).trunc();
    }
    let dist =
        |a: [f32; 2], c: [f32; 2]| ((a[0] - c[0]).powi(2) + (a[1] - c[1]).powi(2)).sqrt() as i64;
    (dist(r[0], r[1]) > 3 && dist(r[0], r[3]) > 3).then_some(r)
}

/// RapidOCR's `sorted_boxes`: stable by the top-left y, then boxes whose y is within 10 px of the
/// previous one share a line and are ordered by x.
pub fn sort_boxes(boxes: &mut Vec<DetBox>) {
    boxes.sort_by(|a, b| a.points[0][1].total_cmp(&b.points[0][1]));
    let mut line = 0usize;
    let mut keyed: Vec<(usize, f32, DetBox)> = Vec::with_capacity(boxes.len());
    for (i, b) in boxes.drain(..).enumerate() {
        if let Some(prev) = keyed.last() {
            if i > 0 && b.points[0][1] - prev.2.points[0][1] >= 10.0 {
                line += 1;
            }
        }
        keyed.push((line, b.points[0][0], b));
    }
    keyed.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    boxes.extend(keyed.into_iter().map(|k| k.2));
}

/// Point sets whose convex hulls equal OpenCV's RETR_LIST contours of the mask (8-connected
/// foreground): each component's border pixels, and for each hole (4-connected background region
/// not reaching the image edge) the foreground pixels 4-adjacent to it. Ordered by the raster position
/// where the border starts.
fn contours(mask: &[bool], w: usize, h: usize) -> Vec<Vec<Pt>> {
    contours_with(mask, w, h, true)
}

/// [`contours`]; `prelabel_outside` = false flood-fills the edge-connected background like every
/// other region (slower, the same result: kept for the equivalence test).
fn contours_with(mask: &[bool], w: usize, h: usize, prelabel_outside: bool) -> Vec<Vec<Pt>> {
    let mut found: Vec<((usize, usize), Vec<Pt>)> = Vec::new();
    let mut label = vec![u32::MAX; w * h];
    let mut stack = Vec::new();
    // Background 4-connected to the image edge is never a hole and yields no points; it is most
    // of the map, so it is labelled first by a plain 4-neighbour fill.
    if prelabel_outside {
        label_outside(mask, w, h, &mut label);
    }
    for start in 0..w * h {
        if label[start] != u32::MAX {
            continue;
        }
        let fg = mask[start];
        let id = found.len() as u32;
        label[start] = id;
        stack.push(start);
        let mut pts = Vec::new();
        let mut touches_edge = false;
        let mut hole_border: Vec<usize> = Vec::new();
        while let Some(i) = stack.pop() {
            let (x, y) = ((i % w) as i64, (i / w) as i64);
            let mut border = false;
            for dy in -1i64..=1 {
                for dx in -1i64..=1 {
                    if dx == 0 && dy == 0 {
                        continue;
                    }
                    let four = dx == 0 || dy == 0;
                    let (nx, ny) = (x + dx, y + dy);
                    if nx < 0 || ny < 0 || nx >= w as i64 || ny >= h as i64 {
                        if four {
                            border = true;
                            touches_edge = true;
                        }
                        continue;
                    }
                    let j = ny as usize * w + nx as usize;
                    if mask[j] == fg {
                        // Foreground joins 8-neighbours, background only 4-neighbours.
                        if (fg || four) && label[j] == u32::MAX {
                            label[j] = id;
                            stack.push(j);
                        }
                    } else if four {
                        border = true;
                        if !fg {
                            hole_border.push(j);
                        }
                    }
                }
            }
            if fg && border {
                pts.push([x as f64, y as f64]);
            }
        }
        let at = (start / w, start % w);
        if fg {
            found.push((at, pts));
        } else if !touches_edge && !hole_border.is_empty() {
            hole_border.sort_unstable();
            hole_border.dedup();
            let pts = hole_border
                .iter()
                .map(|&j| [(j % w) as f64, (j / w) as f64])
                .collect();
            // The hole's border starts at the foreground pixel left of its first pixel.
            found.push(((at.0, at.1.saturating_sub(1)), pts));
        } else {
            found.push((at, Vec::new()));
        }
    }
    found.sort_by_key(|f| f.0);
    found
        .into_iter()
        .filter(|f| !f.1.is_empty())
        .map(|f| f.1)
        .collect()
}

/// Label of background pixels 4-connected to the image edge.
const OUTSIDE: u32 = u32::MAX - 1;

/// Labels every background pixel 4-connected to the image edge [`OUTSIDE`].
fn label_outside(mask: &[bool], w: usize, h: usize, label: &mut [u32]) {
    if w == 0 || h == 0 {
        return;
    }
    let mut stack: Vec<usize> = Vec::new();
    let seed = |i: usize, label: &mut [u32], stack: &mut Vec<usize>| {
        if !mask[i] && label[i] == u32::MAX {
            label[i] = OUTSIDE;
            stack.push(i);
        }
    };
    for x in 0..w {
        seed(x, label, &mut stack);
        seed((h - 1) * w + x, label, &mut stack);
    }
    for y in 0..h {
        seed(y * w, label, &mut stack);
        seed(y * w + w - 1, label, &mut stack);
    }
    while let Some(i) = stack.pop() {
        let (x, y) = (i % w, i / w);
        if x > 0 {
            seed(i - 1, label, &mut stack);
        }
        if x + 1 < w {
            seed(i + 1, label, &mut stack);
        }
        if y > 0 {
            seed(i - w, label, &mut stack);
        }
        if y + 1 < h {
            seed(i + w, label, &mut stack);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outside_prelabelling_keeps_every_contour() {
        let mut s = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            s
        };
        for case in 0..200 {
            let (w, h) = (3 + (rnd() % 40) as usize, 3 + (rnd() % 30) as usize);
            let density = 1 + rnd() % 7;
            let mut mask: Vec<bool> = (0..w * h).map(|_| rnd() % 8 < density).collect();
            // Rings, so that holes (and holes touching several components) occur.
            if case % 3 == 0 && w > 6 && h > 6 {
                let (x0, y0) = (
                    (rnd() % (w as u64 - 5)) as usize,
                    (rnd() % (h as u64 - 5)) as usize,
                );
                for y in y0..y0 + 5 {
                    for x in x0..x0 + 5 {
                        let edge = y == y0 || y == y0 + 4 || x == x0 || x == x0 + 4;
                        mask[y * w + x] = edge;
                    }
                }
            }
            assert_eq!(
                contours(&mask, w, h),
                contours_with(&mask, w, h, false),
                "case {case}: {w}x{h}"
            );
        }
    }
}
