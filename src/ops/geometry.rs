//! Plane geometry for the DB post-processing: convex hull, minimum-area rectangle, the polygon offset
//! that pyclipper (Clipper 6, round joins) computes, and convex-polygon rasterization.

pub type Pt = [f64; 2];

fn cross(o: Pt, a: Pt, b: Pt) -> f64 {
    (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0])
}

/// Convex hull (Andrew's monotone chain), counter-clockwise in a y-up frame, no collinear points.
pub fn convex_hull(points: &[Pt]) -> Vec<Pt> {
    let mut p: Vec<Pt> = points.to_vec();
    p.sort_by(|a, b| a[0].total_cmp(&b[0]).then(a[1].total_cmp(&b[1])));
    p.dedup();
    if p.len() < 3 {
        return p;
    }
    let mut hull: Vec<Pt> = Vec::with_capacity(p.len() + 1);
    for pass in 0..2 {
        let start = hull.len();
        let iter: Box<dyn Iterator<Item = &Pt>> = if pass == 0 {
            Box::new(p.iter())
        } else {
            Box::new(p.iter().rev())
        };
        for &q in iter {
            while hull.len() >= start + 2
                && cross(hull[hull.len() - 2], hull[hull.len() - 1], q) <= 0.0
            {
                hull.pop();
            }
            hull.push(q);
        }
        hull.pop();
    }
    hull
}

/// A rotated rectangle: its 4 corners (in order around it) and its side lengths.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RotRect {
    pub corners: [Pt; 4],
    pub width: f64,
    pub height: f64,
}

/// Minimum-area enclosing rectangle (OpenCV's minAreaRect), by checking every hull edge direction.
/// Degenerate inputs (fewer than 3 hull points) give a zero-height rectangle.
pub fn min_area_rect(points: &[Pt]) -> RotRect {
    let hull = convex_hull(points);
    match hull.len() {
        0 => {
            return RotRect {
                corners: [[0.0; 2]; 4],
                width: 0.0,
                height: 0.0,
            }
        }
        1 => {
            return RotRect {
                corners: [hull[0]; 4],
                width: 0.0,
                height: 0.0,
            }
        }
        2 => {
            let d = ((hull[1][0] - hull[0][0]).powi(2) + (hull[1][1] - hull[0][1]).powi(2)).sqrt();
            return RotRect {
                corners: [hull[0], hull[1], hull[1], hull[0]],
                width: d,
                height: 0.0,
            };
        }
        _ => {}
    }
    let n = hull.len();
    let mut best: Option<(f64, RotRect)> = None;
    for i in 0..n {
        let (a, b) = (hull[i], hull[(i + 1) % n]);
        let len = ((b[0] - a[0]).powi(2) + (b[1] - a[1]).powi(2)).sqrt();
        if len == 0.0 {
            continue;
        }
        let u = [(b[0] - a[0]) / len, (b[1] - a[1]) / len];
        let v = [-u[1], u[0]];
        let (mut umin, mut umax, mut vmin, mut vmax) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
        for p in &hull {
            let (pu, pv) = (p[0] * u[0] + p[1] * u[1], p[0] * v[0] + p[1] * v[1]);
            umin = umin.min(pu);
            umax = umax.max(pu);
            vmin = vmin.min(pv);
            vmax = vmax.max(pv);
        }
        let area = (umax - umin) * (vmax - vmin);
        // Relative tolerance so float noise does not flip between equal rectangles.
        if best.as_ref().is_none_or(|(ba, _)| area < ba * (1.0 - 1e-9)) {
            let at = |s: f64, t: f64| [s * u[0] + t * v[0], s * u[1] + t * v[1]];
            let corners = [
                at(umin, vmin),
                at(umax, vmin),
                at(umax, vmax),
                at(umin, vmax),
            ];
            best = Some((
                area,
                RotRect {
                    corners,
                    width: umax - umin,
                    height: vmax - vmin,
                },
            ));
        }
    }
    match best {
        Some((_, r)) => r,
        None => RotRect {
            corners: [hull[0]; 4],
            width: 0.0,
            height: 0.0,
        },
    }
}

/// Clipper's Round(): half away from zero.
fn cround(v: f64) -> i64 {
    if v < 0.0 {
        (v - 0.5) as i64
    } else {
        (v + 0.5) as i64
    }
}

/// Offsets a closed polygon outward by `delta` with round joins, as pyclipper's
/// `PyclipperOffset.AddPath(path, JT_ROUND, ET_CLOSEDPOLYGON); Execute(delta)` (Clipper 6.4, default
/// arc tolerance 0.25) does for a convex polygon. The input is truncated to integers first, as
/// pyclipper does when handed floats. Returns the integer points of the offset outline.
pub fn offset_polygon_round(poly: &[Pt], delta: f64) -> Vec<[i64; 2]> {
    let mut src: Vec<[i64; 2]> = Vec::with_capacity(poly.len());
    for p in poly {
        let q = [p[0] as i64, p[1] as i64];
        if src.last() != Some(&q) {
            src.push(q);
        }
    }
    while src.len() > 1 && src.first() == src.last() {
        src.pop();
    }
    let n = src.len();
    if n == 0 || delta <= 0.0 {
        return src;
    }
    if n < 3 {
        // Clipper turns points and segments into round blobs; the DB step drops these anyway.
        return src;
    }
    // Clipper offsets positively-oriented outer polygons; reverse a negative one.
    let area2: i64 = (0..n)
        .map(|i| src[i][0] * src[(i + 1) % n][1] - src[(i + 1) % n][0] * src[i][1])
        .sum();
    if area2 < 0 {
        src.reverse();
    }
    let pts: Vec<Pt> = src.iter().map(|p| [p[0] as f64, p[1] as f64]).collect();
    let normals: Vec<Pt> = (0..n)
        .map(|j| {
            let (a, b) = (pts[j], pts[(j + 1) % n]);
            let (dx, dy) = (b[0] - a[0], b[1] - a[1]);
            let f = 1.0 / (dx * dx + dy * dy).sqrt();
            [dy * f, -dx * f]
        })
        .collect();
    let y = 0.25f64.min(delta.abs() * 0.25);
    let mut steps = std::f64::consts::PI / (1.0 - y / delta.abs()).acos();
    if steps > delta.abs() * std::f64::consts::PI {
        steps = delta.abs() * std::f64::consts::PI;
    }
    let (sin, cos) = (2.0 * std::f64::consts::PI / steps).sin_cos();
    let steps_per_rad = steps / (2.0 * std::f64::consts::PI);
    let mut out: Vec<[i64; 2]> = Vec::new();
    let mut k = n - 1;
    for j in 0..n {
        let (nk, nj, p) = (normals[k], normals[j], pts[j]);
        let sin_a = (nk[0] * nj[1] - nj[0] * nk[1]).clamp(-1.0, 1.0);
        let cos_a = nk[0] * nj[0] + nk[1] * nj[1];
        let push = |out: &mut Vec<[i64; 2]>, nx: f64, ny: f64| {
            out.push([cround(p[0] + nx * delta), cround(p[1] + ny * delta)]);
        };
        if (sin_a * delta).abs() < 1.0 && cos_a > 0.0 {
            // Nearly collinear: one point, and Clipper keeps k on the previous edge.
            push(&mut out, nk[0], nk[1]);
            continue;
        } else if sin_a * delta < 0.0 {
            push(&mut out, nk[0], nk[1]);
            out.push(src[j]);
            push(&mut out, nj[0], nj[1]);
        } else {
            let a = sin_a.atan2(cos_a);
            let count = (cround(steps_per_rad * a.abs()) as usize).max(1);
            let (mut x, mut yv) = (nk[0], nk[1]);
            for _ in 0..count {
                push(&mut out, x, yv);
                let x2 = x;
                x = x * cos - sin * yv;
                yv = x2 * sin + yv * cos;
            }
            push(&mut out, nj[0], nj[1]);
        }
        k = j;
    }
    out
}

/// Integer pixels (x, y) inside or on a convex polygon with integer vertices, row by row:
/// calls `f(y, x_start, x_end_inclusive)` for every row clipped to `[0, w) x [0, h)`.
pub fn fill_convex(poly: &[[i64; 2]], w: usize, h: usize, mut f: impl FnMut(usize, usize, usize)) {
    if poly.is_empty() || w == 0 || h == 0 {
        return;
    }
    let ymin = poly.iter().map(|p| p[1]).min().unwrap_or(0).max(0);
    let ymax = poly
        .iter()
        .map(|p| p[1])
        .max()
        .unwrap_or(-1)
        .min(h as i64 - 1);
    let n = poly.len();
    for y in ymin..=ymax {
        let (mut lo, mut hi) = (f64::MAX, f64::MIN);
        for i in 0..n {
            let (a, b) = (poly[i], poly[(i + 1) % n]);
            if (a[1] <= y && y <= b[1]) || (b[1] <= y && y <= a[1]) {
                if a[1] == b[1] {
                    lo = lo.min(a[0].min(b[0]) as f64);
                    hi = hi.max(a[0].max(b[0]) as f64);
                } else {
                    let x = a[0] as f64
                        + (y - a[1]) as f64 * (b[0] - a[0]) as f64 / (b[1] - a[1]) as f64;
                    lo = lo.min(x);
                    hi = hi.max(x);
                }
            }
        }
        if lo > hi {
            continue;
        }
        let x0 = (lo - 1e-9).ceil().max(0.0);
        let x1 = (hi + 1e-9).floor().min(w as f64 - 1.0);
        if x0 <= x1 {
            f(y as usize, x0 as usize, x1 as usize);
        }
    }
}

/// OpenCV's 8-connected line (LineIterator, drawn left to right) between integer points; calls `f` per
/// pixel.
fn bresenham(p1: [i64; 2], p2: [i64; 2], mut f: impl FnMut(i64, i64)) {
    let (a, b) = if p2[0] < p1[0] { (p2, p1) } else { (p1, p2) };
    let (mut dx, mut dy) = (b[0] - a[0], b[1] - a[1]);
    let sy = if dy < 0 { -1 } else { 1 };
    dy = dy.abs();
    let steep = dy > dx;
    if steep {
        std::mem::swap(&mut dx, &mut dy);
    }
    let mut err = dx - 2 * dy;
    let (mut x, mut y) = (a[0], a[1]);
    for _ in 0..=dx {
        f(x, y);
        let minor = err < 0;
        err += -2 * dy + if minor { 2 * dx } else { 0 };
        if steep {
            y += sy;
            x += i64::from(minor);
        } else {
            x += 1;
            if minor {
                y += sy;
            }
        }
    }
}

/// The pixels `cv2.fillPoly(mask, [poly], 1)` sets (default LINE_8) for a convex integer polygon, as a
/// row-major `w` x `h` mask: the interior by pixel centers plus the polygon's edges drawn as lines.
pub fn fill_poly_mask(poly: &[[i64; 2]], w: usize, h: usize) -> Vec<bool> {
    let mut m = vec![false; w * h];
    fill_convex(poly, w, h, |y, x0, x1| {
        m[y * w + x0..=y * w + x1].fill(true)
    });
    let n = poly.len();
    for i in 0..n {
        bresenham(poly[i], poly[(i + 1) % n], |x, y| {
            if x >= 0 && y >= 0 && (x as usize) < w && (y as usize) < h {
                m[y as usize * w + x as usize] = true;
            }
        });
    }
    m
}
