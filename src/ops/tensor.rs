//! A minimal dense f32 tensor (row-major, NCHW for images) passed between steps and model runs.

use super::error::OcrError;

#[derive(Clone, Debug, PartialEq)]
pub struct Tensor {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
}

impl Tensor {
    /// Checks that `data` holds exactly `shape.iter().product()` values.
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Result<Self, OcrError> {
        let n: usize = shape.iter().product();
        if n != data.len() {
            return Err(OcrError::Shape {
                what: "Tensor::new".into(),
                shape,
                expected: format!("{} values, got {}", n, data.len()),
            });
        }
        Ok(Self { shape, data })
    }

    pub fn zeros(shape: Vec<usize>) -> Self {
        let n = shape.iter().product();
        Self {
            shape,
            data: vec![0.0; n],
        }
    }

    /// Errors unless the tensor has `rank` dims; returns them.
    pub fn dims(&self, what: &str, rank: usize) -> Result<&[usize], OcrError> {
        if self.shape.len() != rank {
            return Err(OcrError::Shape {
                what: what.into(),
                shape: self.shape.clone(),
                expected: format!("rank {rank}"),
            });
        }
        Ok(&self.shape)
    }
}
