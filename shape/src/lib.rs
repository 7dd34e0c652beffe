//! Pure tensor shape rules, written once and shared by the IR's shape inference
//! (`texstream::ir::infer`) and the Vulkan kernels' shape checks (`vk_backend::kernels`), which
//! must not depend on each other. No Vulkan, no IR, no ONNX.

/// Two shapes that do not broadcast.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cannot broadcast shapes {a:?} and {b:?}")]
pub struct BroadcastError {
    pub a: Vec<usize>,
    pub b: Vec<usize>,
}

/// Numpy broadcasting of two shapes: right-aligned, each pair of dimensions equal or one of them
/// 1 (the missing leading dimensions of the shorter shape count as 1).
pub fn broadcast(a: &[usize], b: &[usize]) -> Result<Vec<usize>, BroadcastError> {
    let rank = a.len().max(b.len());
    // Dimension `i` of the rank-`rank` result, read from a shape right-aligned against it.
    let dim = |s: &[usize], i: usize| (i + s.len()).checked_sub(rank).map_or(1, |k| s[k]);
    (0..rank)
        .map(|i| match (dim(a, i), dim(b, i)) {
            (x, y) if x == y => Ok(x),
            (1, y) => Ok(y),
            (x, 1) => Ok(x),
            _ => Err(BroadcastError {
                a: a.to_vec(),
                b: b.to_vec(),
            }),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_rule() {
        assert_eq!(broadcast(&[2, 3, 4], &[4]), Ok(vec![2, 3, 4]));
        assert_eq!(broadcast(&[3, 1], &[1, 5]), Ok(vec![3, 5]));
        assert_eq!(broadcast(&[1], &[2, 0]), Ok(vec![2, 0]));
        assert_eq!(broadcast(&[], &[2, 3]), Ok(vec![2, 3]));
        assert_eq!(broadcast(&[], &[]), Ok(vec![]));
        let e = broadcast(&[2, 3], &[4]).unwrap_err();
        assert_eq!(e.to_string(), "cannot broadcast shapes [2, 3] and [4]");
        assert!(broadcast(&[0], &[2]).is_err());
    }
}
