//! Converts ONNX `TensorProto`s (raw, typed or external data) into IR constants.
use std::io::{Read, Seek, SeekFrom};
use std::path::{Component, Path};

use super::proto;
use crate::ir::{DType, TensorData, Values};

/// Limit on one constant's element count, so a malformed file cannot make us allocate wildly.
pub const MAX_ELEMENTS: usize = 1 << 31;

pub fn dtype_from_onnx(code: i32) -> Result<DType, String> {
    Ok(match code {
        1 => DType::F32,
        2 => DType::U8,
        3 => DType::I8,
        6 => DType::I32,
        7 => DType::I64,
        9 => DType::Bool,
        10 => DType::F16,
        11 => DType::F64,
        other => {
            return Err(format!(
                "unsupported dtype {} (supported: float32, float16, float64, int64, int32, int8, uint8, bool)",
                dtype_name(other)
            ))
        }
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

pub fn dims_to_shape(dims: &[i64]) -> Result<Vec<usize>, String> {
    let mut n: usize = 1;
    let mut out = Vec::with_capacity(dims.len());
    for &d in dims {
        if d < 0 {
            return Err(format!("negative dimension {d} in {dims:?}"));
        }
        n = n
            .checked_mul(d as usize)
            .filter(|&n| n <= MAX_ELEMENTS)
            .ok_or_else(|| format!("shape {dims:?} is too large"))?;
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

fn read_external(t: &proto::TensorProto, model_dir: &Path, want: usize) -> Result<Vec<u8>, String> {
    let mut location = None;
    let mut offset = 0u64;
    let mut length = None;
    for kv in &t.external_data {
        let (k, v) = (
            kv.key.as_deref().unwrap_or(""),
            kv.value.as_deref().unwrap_or(""),
        );
        match k {
            "location" => location = Some(v.to_string()),
            "offset" => {
                offset = v
                    .parse()
                    .map_err(|_| format!("external data offset '{v}' is not a number"))?
            }
            "length" => {
                length = Some(
                    v.parse::<usize>()
                        .map_err(|_| format!("external data length '{v}' is not a number"))?,
                )
            }
            _ => {}
        }
    }
    let loc = location.ok_or("external data without a 'location'")?;
    let rel = Path::new(&loc);
    if rel.is_absolute() || rel.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!(
            "external data location '{loc}' must be a relative path inside the model directory"
        ));
    }
    if let Some(l) = length {
        if l != want {
            return Err(format!(
                "external data length {l} != {want} bytes expected from shape and dtype"
            ));
        }
    }
    let path = model_dir.join(rel);
    let mut f = std::fs::File::open(&path)
        .map_err(|e| format!("cannot open external data file {}: {e}", path.display()))?;
    f.seek(SeekFrom::Start(offset))
        .map_err(|e| format!("cannot seek external data file {}: {e}", path.display()))?;
    let mut buf = vec![0u8; want];
    f.read_exact(&mut buf).map_err(|e| {
        format!(
            "external data file {} is too short for {want} bytes at offset {offset}: {e}",
            path.display()
        )
    })?;
    Ok(buf)
}

/// Decodes one tensor. Errors are plain messages; the caller adds file and tensor name.
pub fn tensor_from_proto(t: &proto::TensorProto, model_dir: &Path) -> Result<TensorData, String> {
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
            return Err(format!(
                "raw_data has {} bytes, expected {want} for shape {shape:?} {dtype:?}",
                raw.len()
            ));
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
                format!("missing initializer data: shape {shape:?} needs {n} values, the tensor has none")
            } else {
                format!("has {len} values, expected {n} for shape {shape:?}")
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
