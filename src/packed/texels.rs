//! Weight packing into texel order, following the binding texel conventions.
//!
//! MatMul/Gemm B matrices, conv filters, depthwise filters and vectors are packed by
//! `vk_backend::layout` (the functions the kernels are written against), so packer and kernel agree
//! by construction. Constant operands in activation layout are packed here (C4, no fold).
//! Each returns 4 f32 values (RGBA) per texel.
use super::format::WeightKind;
use crate::ir::nchw;
use crate::ir::tensor::c4_value_index;

/// Why a weight's values cannot be packed.
#[derive(Debug, thiserror::Error)]
pub enum TexelError {
    #[error("{kind:?} needs {want} values, got {got}")]
    ValueCount {
        kind: WeightKind,
        want: usize,
        got: usize,
    },
    /// The packers of `vk_backend::layout` refused the weight.
    #[error(transparent)]
    Layout(#[from] vk_backend::VkError),
}

/// Texels needed by a weight of this kind.
pub fn texel_count(kind: &WeightKind) -> usize {
    match kind {
        WeightKind::MatrixKN { k, n } => k.div_ceil(4) * n,
        WeightKind::Rows { rows, width } => rows.div_ceil(4) * width,
        WeightKind::ConvFilter {
            o,
            i_per_group,
            kh,
            kw,
        } => o * kh * kw * i_per_group.div_ceil(4),
        WeightKind::Depthwise { c, kh, kw } => kh * kw * c.div_ceil(4),
        WeightKind::Vector { c } => c.div_ceil(4),
        WeightKind::Activation { shape } => {
            let [n, c, h, w] = nchw(shape);
            n * c.div_ceil(4) * h * w
        }
    }
}

/// Packs `data` (row-major in the kind's logical shape) into texel order.
pub fn pack(kind: &WeightKind, data: &[f32]) -> Result<Vec<f32>, TexelError> {
    let mut out = vec![0f32; texel_count(kind) * 4];
    let want = match kind {
        WeightKind::MatrixKN { k, n } => k * n,
        WeightKind::Rows { rows, width } => rows * width,
        WeightKind::ConvFilter {
            o,
            i_per_group,
            kh,
            kw,
        } => o * i_per_group * kh * kw,
        WeightKind::Depthwise { c, kh, kw } => c * kh * kw,
        WeightKind::Vector { c } => *c,
        WeightKind::Activation { shape } => shape.iter().product(),
    };
    if data.len() != want {
        return Err(TexelError::ValueCount {
            kind: kind.clone(),
            want,
            got: data.len(),
        });
    }
    use vk_backend::layout as vl;
    match *kind {
        WeightKind::MatrixKN { k, n } => out = vl::pack_matrix_kn(data, k, n)?,
        // The same texel order as a [K = rows, N = width] matrix.
        WeightKind::Rows { rows, width } => out = vl::pack_matrix_kn(data, rows, width)?,
        WeightKind::ConvFilter {
            o,
            i_per_group,
            kh,
            kw,
        } => out = vl::pack_conv_filter(data, o, i_per_group, kh, kw)?,
        WeightKind::Depthwise { c, kh, kw } => out = vl::pack_depthwise_filter(data, c, kh, kw)?,
        WeightKind::Vector { .. } => out = vl::pack_vector(data),
        WeightKind::Activation { ref shape } => {
            let dims = nchw(shape);
            for (lin, &v) in data.iter().enumerate() {
                out[c4_value_index(dims, lin)] = v;
            }
        }
    }
    Ok(out)
}

/// Row-major transpose of a [rows, cols] matrix.
pub fn transpose2(data: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0f32; data.len()];
    for r in 0..rows {
        for c in 0..cols {
            out[c * rows + r] = data[r * cols + c];
        }
    }
    out
}

/// ConvTranspose weight [I, O/g, KH, KW] -> [O, I/g, KH, KW] per group (no spatial flip).
pub fn conv_transpose_to_oihw(
    w: &[f32],
    i: usize,
    og: usize,
    group: usize,
    khw: usize,
) -> Vec<f32> {
    let ig = i / group.max(1);
    let mut out = vec![0f32; w.len()];
    for g in 0..group {
        for il in 0..ig {
            for ol in 0..og {
                for k in 0..khw {
                    let src = (((g * ig + il) * og) + ol) * khw + k;
                    let dst = (((g * og + ol) * ig) + il) * khw + k;
                    out[dst] = w[src];
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Independent check of the conventions by their formulas, written per texel (not per value).
    #[test]
    fn rank_rule_matches_vk_backend() {
        for shape in [
            vec![],
            vec![5],
            vec![3, 5],
            vec![7, 3, 5],
            vec![2, 7, 3, 5],
            vec![2, 2, 7, 3, 5],
            vec![3, 2, 2, 7, 3, 5],
        ] {
            assert_eq!(
                crate::ir::nchw(&shape),
                vk_backend::layout::nchw(&shape).unwrap(),
                "{shape:?}"
            );
        }
    }

    #[test]
    fn activation_packing_by_formula() {
        let shape = vec![2, 6, 2, 3];
        let v: Vec<f32> = (0..72).map(|x| x as f32).collect();
        let p = pack(
            &WeightKind::Activation {
                shape: shape.clone(),
            },
            &v,
        )
        .unwrap();
        assert_eq!(p.len(), 2 * 2 * 2 * 3 * 4);
        for n in 0..2 {
            for c in 0..8 {
                for h in 0..2 {
                    for w in 0..3 {
                        let t = ((n * 2 + c / 4) * 2 + h) * 3 + w;
                        let want = if c < 6 {
                            v[((n * 6 + c) * 2 + h) * 3 + w]
                        } else {
                            0.0
                        };
                        assert_eq!(p[t * 4 + c % 4], want);
                    }
                }
            }
        }
    }

    #[test]
    fn conventions_by_formula() {
        let (k, n) = (6, 3);
        let b: Vec<f32> = (0..k * n).map(|v| v as f32 + 1.0).collect();
        let p = pack(&WeightKind::MatrixKN { k, n }, &b).unwrap();
        for t in 0..texel_count(&WeightKind::MatrixKN { k, n }) {
            let (kb, nn) = (t / n, t % n);
            for j in 0..4 {
                let kk = 4 * kb + j;
                let want = if kk < k { b[kk * n + nn] } else { 0.0 };
                assert_eq!(p[t * 4 + j], want);
            }
        }
        let (o, ig, kh, kw) = (2, 5, 3, 2);
        let w: Vec<f32> = (0..o * ig * kh * kw).map(|v| v as f32 * 0.5).collect();
        let kind = WeightKind::ConvFilter {
            o,
            i_per_group: ig,
            kh,
            kw,
        };
        let p = pack(&kind, &w).unwrap();
        let i4 = ig.div_ceil(4);
        for t in 0..texel_count(&kind) {
            let ib = t % i4;
            let rest = t / i4;
            let (kx, ky, oo) = (rest % kw, (rest / kw) % kh, rest / (kw * kh));
            for j in 0..4 {
                let ii = 4 * ib + j;
                let want = if ii < ig {
                    w[((oo * ig + ii) * kh + ky) * kw + kx]
                } else {
                    0.0
                };
                assert_eq!(p[t * 4 + j], want);
            }
        }
        let c = 6;
        let dw: Vec<f32> = (0..c * 4).map(|v| v as f32).collect();
        let kind = WeightKind::Depthwise { c, kh: 2, kw: 2 };
        let p = pack(&kind, &dw).unwrap();
        for t in 0..texel_count(&kind) {
            let (cb, kk) = (t % 2, t / 2);
            for j in 0..4 {
                let cc = 4 * cb + j;
                let want = if cc < c { dw[cc * 4 + kk] } else { 0.0 };
                assert_eq!(p[t * 4 + j], want);
            }
        }
    }
}
