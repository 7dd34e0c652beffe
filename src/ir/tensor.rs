//! Tensor metadata (shape, dtype) and constant tensor data used by the IR and constant folding.
use serde::{Deserialize, Serialize};

/// Element types the importer accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DType {
    F32,
    F16,
    F64,
    I64,
    I32,
    I8,
    U8,
    Bool,
}

impl DType {
    pub fn is_float(self) -> bool {
        matches!(self, DType::F32 | DType::F16 | DType::F64)
    }
    /// Bytes per element as stored in ONNX.
    pub fn size(self) -> usize {
        match self {
            DType::F64 | DType::I64 => 8,
            DType::F32 | DType::I32 => 4,
            DType::F16 => 2,
            DType::I8 | DType::U8 | DType::Bool => 1,
        }
    }
}

/// Constant values. Float dtypes are held as f32 and integer/bool dtypes as i64, which keeps
/// constant folding to two code paths; the logical dtype is kept alongside in [`TensorData`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Values {
    F(Vec<f32>),
    I(Vec<i64>),
}

impl Values {
    pub fn len(&self) -> usize {
        match self {
            Values::F(v) => v.len(),
            Values::I(v) => v.len(),
        }
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    pub fn get_f(&self, i: usize) -> f64 {
        match self {
            Values::F(v) => v[i] as f64,
            Values::I(v) => v[i] as f64,
        }
    }
    pub fn get_i(&self, i: usize) -> i64 {
        match self {
            Values::F(v) => v[i] as i64,
            Values::I(v) => v[i],
        }
    }
}

/// A constant tensor: dtype, shape and values (row-major).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorData {
    pub dtype: DType,
    pub shape: Vec<usize>,
    pub values: Values,
}

impl TensorData {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
    pub fn from_i64(shape: Vec<usize>, v: Vec<i64>) -> Self {
        TensorData {
            dtype: DType::I64,
            shape,
            values: Values::I(v),
        }
    }
    pub fn from_f32(shape: Vec<usize>, v: Vec<f32>) -> Self {
        TensorData {
            dtype: DType::F32,
            shape,
            values: Values::F(v),
        }
    }
    /// Builds values of `dtype` from f64s, rounding/truncating as a cast would.
    pub fn from_f64s(dtype: DType, shape: Vec<usize>, v: impl Iterator<Item = f64>) -> Self {
        let values = if dtype.is_float() {
            Values::F(v.map(|x| x as f32).collect())
        } else if dtype == DType::Bool {
            Values::I(v.map(|x| (x != 0.0) as i64).collect())
        } else {
            Values::I(v.map(|x| x as i64).collect())
        };
        TensorData {
            dtype,
            shape,
            values,
        }
    }
    /// The values as f32, borrowed when they are stored as f32.
    pub fn f32_values(&self) -> std::borrow::Cow<'_, [f32]> {
        match &self.values {
            Values::F(v) => std::borrow::Cow::Borrowed(v),
            Values::I(v) => v.iter().map(|&x| x as f32).collect::<Vec<_>>().into(),
        }
    }
    pub fn as_f32(&self) -> Vec<f32> {
        match &self.values {
            Values::F(v) => v.clone(),
            Values::I(v) => v.iter().map(|&x| x as f32).collect(),
        }
    }
    pub fn as_i64(&self) -> Vec<i64> {
        match &self.values {
            Values::F(v) => v.iter().map(|&x| x as i64).collect(),
            Values::I(v) => v.clone(),
        }
    }
}

/// Shape and dtype of one IR tensor, plus how it is stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TensorInfo {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: DType,
    /// Filled in by the layout pass.
    pub layout: TensorLayout,
}

impl TensorInfo {
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
    }
}

/// Storage decision for an activation tensor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum TensorLayout {
    /// Its own C4-packed (NC4HW4) image.
    #[default]
    C4,
    /// Same memory as another tensor: its producer (a Reshape-like node) is index arithmetic only.
    ViewOf(usize),
}

/// Maps a shape of rank 0..=6 onto (N, C, H, W): ranks below 4 are right-aligned with leading 1s,
/// ranks 5 and 6 fold their leading dimensions into N.
pub fn nchw(shape: &[usize]) -> [usize; 4] {
    let r = shape.len();
    if r <= 4 {
        let mut out = [1usize; 4];
        out[4 - r..].copy_from_slice(shape);
        out
    } else {
        let n = shape[..r - 3].iter().product();
        [n, shape[r - 3], shape[r - 2], shape[r - 1]]
    }
}

/// Where value `lin` (row-major) of a tensor mapped to `[N, C, H, W]` lives in its C4-packed
/// (NC4HW4) storage: `(((n*ceil(C/4) + c/4)*H + h)*W + w)*4 + c%4`, counting values, 4 a texel.
pub fn c4_value_index(nchw: [usize; 4], lin: usize) -> usize {
    let [_, c, h, w] = nchw;
    let x = lin % w;
    let y = (lin / w) % h;
    let ch = (lin / (w * h)) % c;
    let n = lin / (w * h * c);
    (((n * c.div_ceil(4) + ch / 4) * h + y) * w + x) * 4 + ch % 4
}

/// Row-major strides (in elements) of `shape`.
pub fn row_major_strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Bytes of a C4-packed activation image for `shape` at `bytes_per_value` (2 = fp16, 4 = fp32).
pub fn c4_bytes(shape: &[usize], bytes_per_value: usize) -> usize {
    let [n, c, h, w] = nchw(shape);
    n * c.div_ceil(4) * h * w * 4 * bytes_per_value
}
