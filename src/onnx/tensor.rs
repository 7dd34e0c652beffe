//! Converts ONNX `TensorProto`s (raw, typed or external data) into IR constants.
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::proto;
use crate::ir::{DType, TensorData, Values};

/// Limit on one constant's element count, so a malformed file cannot make us allocate wildly.
pub const MAX_ELEMENTS: usize = 1 << 31;

/// What is wrong with one tensor's type, shape or data.
#[derive(Debug, thiserror::Error)]
pub enum TensorProblem {
    #[error("unsupported dtype {0} (supported: float32, float16, float64, int64, int32, int8, uint8, bool)")]
    UnsupportedDtype(String),
    #[error("negative dimension {dim} in {dims:?}")]
    NegativeDimension { dim: i64, dims: Vec<i64> },
    #[error("shape {dims:?} is too large (more than {MAX_ELEMENTS} elements)")]
    TooLarge { dims: Vec<i64> },
    #[error("raw_data has {got} bytes, expected {want} for shape {shape:?} {dtype:?}")]
    RawDataLength {
        got: usize,
        want: usize,
        shape: Vec<usize>,
        dtype: DType,
    },
    #[error("missing initializer data: shape {shape:?} needs {want} values, the tensor has none")]
    MissingData { shape: Vec<usize>, want: usize },
    #[error("has {got} values, expected {want} for shape {shape:?}")]
    ValueCount {
        got: usize,
        want: usize,
        shape: Vec<usize>,
    },
    #[error("external data without a 'location'")]
    NoLocation,
    #[error("external data {key} '{value}' is not a number")]
    NotANumber { key: &'static str, value: String },
    #[error("external data location '{0}' must be a relative path inside the model directory")]
    AbsoluteLocation(String),
    #[error("external data file {path} resolves to {resolved}, outside the model directory {dir}")]
    OutsideModelDir {
        path: PathBuf,
        resolved: PathBuf,
        dir: PathBuf,
    },
    #[error("external data length {length} != {want} bytes expected from shape and dtype")]
    LengthMismatch { length: u64, want: usize },
    #[error("cannot open external data file {path}: {source}")]
    Open {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("external data file {path} is {file_len} bytes, too short for {want} bytes at offset {offset}")]
    OutOfRange {
        path: PathBuf,
        file_len: u64,
        want: usize,
        offset: u64,
    },
}

/// A tensor that could not be decoded, by name.
#[derive(Debug, thiserror::Error)]
#[error("tensor '{tensor}': {problem}")]
pub struct TensorError {
    pub tensor: String,
    #[source]
    pub problem: TensorProblem,
}

pub fn dtype_from_onnx(code: i32) -> Result<DType, TensorProblem> {
    Ok(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        other => return Err(TensorProblem::UnsupportedDtype(dtype_name(other))),
    })
}

fn dtype_name(code: i32) -> String {
    let n = match code {
        0 => "UNDEFINED",
        4 => "uint16",
        5 => "int16",
        8 => "string",
        12 => "uint32",
        13 => "uint64",
        14 => "complex64",
        15 => "complex128",
        16 => "bfloat16",
        17..=20 => "float8",
        21 => "uint4",
        22 => "int4",
        _ => "",
    };
    if n.is_empty() {
        format!("code {code}")
    } else {
        format!("{n} (code {code})")
    }
}

pub fn dims_to_shape(dims: &[i64]) -> Result<Vec<usize>, TensorProblem> {
    let mut n: usize = 1;
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        if d < 0 {
            return Err(TensorProblem::NegativeDimension {
                dim: d,
                dims: dims.to_vec(),
            });
        }
        n = n
            .checked_mul(d as usize)
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| TensorProblem::TooLarge {
                dims: dims.to_vec(),
            })?;
        out.push(d as usize);
    }
    Ok(out)
}

fn from_le(dtype: DType, bytes: &[u8]) -> Values {
    match dtype {
        DType::F32 => Values::F(
            bytes
                .chunks_exact(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        DType::F16 => Values::F(
            bytes
                .chunks_exact(2)
                .map(|c| half::f16::from_le_bytes([c[0], c[1]]).to_f32())
                .collect(),
        ),
        DType::F64 => Values::F(
            bytes
                .chunks_exact(8)
                .map(|c| {
                    f64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]) as f32
                })
                .collect(),
        ),
        DType::I64 => Values::I(
            bytes
                .chunks_exact(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        DType::I32 => Values::I(
            bytes
                .chunks_exact(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
        ),
        DType::I8 => Values::I(bytes.iter().map(|&b| b as i8 as i64).collect()),
        DType::U8 => Values::I(bytes.iter().map(|&b| b as i64).collect()),
        DType::Bool => Values::I(bytes.iter().map(|&b| (b != 0) as i64).collect()),
    }
}

/// Reads `want` bytes of external data. The file must resolve (through `..` or symlinks) to a
/// path inside the model's directory, and the declared range must lie inside the file, both
/// checked before the buffer is allocated.
fn read_external(
    t: &proto::TensorProto,
    model_dir: &Path,
    want: usize,
) -> Result<Vec<u8>, TensorProblem> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let (k, v) = (
            kv.key.as_deref().unwrap_or(""),
            kv.value.as_deref().unwrap_or(""),
        );
        let number = |key: &'static str| {
            v.parse::<u64>().map_err(|_| TensorProblem::NotANumber {
                key,
                value: v.to_string(),
            })
        };
        match k {
            "location" => location = Some(v.to_string()),
            "offset" => offset = number("offset")?,
            "length" => length = Some(number("length")?),
            _ => {}
        }
    }
    let loc = location.ok_or(TensorProblem::NoLocation)?;
    let rel = Path::new(&loc);
    if rel.is_absolute() {
        return Err(TensorProblem::AbsoluteLocation(loc));
    }
    if let Some(l) = length {
        if l != want as u64 {
            return Err(TensorProblem::LengthMismatch { length: l, want });
        }
    }
    let dir = if model_dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        model_dir
    };
    let path = dir.join(rel);
    let open_err = |source| TensorProblem::Open {
        path: path.clone(),
        source,
    };
    let resolved = std::fs::canonicalize(&path).map_err(open_err)?;
    let real_dir = std::fs::canonicalize(dir).map_err(open_err)?;
    if !resolved.starts_with(&real_dir) {
        return Err(TensorProblem::OutsideModelDir {
            path,
            resolved,
            dir: real_dir,
        });
    }
    let mut f = std::fs::File::open(&resolved).map_err(open_err)?;
    let file_len = f.metadata().map_err(open_err)?.len();
    let too_short = TensorProblem::OutOfRange {
        path: path.clone(),
        file_len,
        want,
        offset,
    };
    if offset
        .checked_add(want as u64)
        .is_none_or(|end| end > file_len)
    {
        return Err(too_short);
    }
    let mut buf = vec![0u8; want];
    f.seek(SeekFrom::Start(offset))
        .and_then(|_| f.read_exact(&mut buf))
        .map_err(|_| too_short)?;
    Ok(buf)
}

/// Decodes one tensor; errors carry its name (the caller adds the file).
pub fn tensor_from_proto(
    t: &proto::TensorProto,
    model_dir: &Path,
) -> Result<TensorData, TensorError> {
    decode_tensor(t, model_dir).map_err(|problem| TensorError {
        tensor: t.name.clone().unwrap_or_default(),
        problem,
    })
}

fn decode_tensor(t: &proto::TensorProto, model_dir: &Path) -> Result<TensorData, TensorProblem> {
    let code = t.data_type.unwrap_or(0);
    let dtype = dtype_from_onnx(code)?;
    let shape = dims_to_shape(&t.dims)?;
    let n: usize = shape.iter().product();
    let want = n * dtype.size();
    let external = t.data_location == Some(proto::tensor_proto::DataLocation::External as i32);
    let values = if external {
        from_le(dtype, &read_external(t, model_dir, want)?)
    } else if let Some(raw) = t.raw_data.as_ref().filter(|r| !r.is_empty() || n == 0) {
        if raw.len() != want {
            return Err(TensorProblem::RawDataLength {
                got: raw.len(),
                want,
                shape,
                dtype,
            });
        }
        from_le(dtype, raw)
    } else {
        let (len, values) = match dtype {
            DType::F32 => (t.float_data.len(), Values::F(t.float_data.clone())),
            DType::F64 => (
                t.double_data.len(),
                Values::F(t.double_data.iter().map(|&x| x as f32).collect()),
            ),
            DType::I64 => (t.int64_data.len(), Values::I(t.int64_data.clone())),
            DType::F16 => (
                t.int32_data.len(),
                Values::F(
                    t.int32_data
                        .iter()
                        .map(|&x| half::f16::from_bits(x as u16).to_f32())
                        .collect(),
                ),
            ),
            DType::Bool => (
                t.int32_data.len(),
                Values::I(t.int32_data.iter().map(|&x| (x != 0) as i64).collect()),
            ),
            DType::I32 | DType::I8 | DType::U8 => (
                t.int32_data.len(),
                Values::I(t.int32_data.iter().map(|&x| x as i64).collect()),
            ),
        };
        if len != n {
            return Err(if len == 0 {
                TensorProblem::MissingData { shape, want: n }
            } else {
                TensorProblem::ValueCount {
                    got: len,
                    want: n,
                    shape,
                }
            });
        }
        values
    };
    Ok(TensorData {
        dtype,
        shape,
        values,
    })
}
