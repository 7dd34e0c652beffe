//! .npy reading and writing (format versions 1-3, C order). Reads f32, f16, f64, i64, i32, i8, u8
//! and bool into f32; writes f32, i64 or bool.
use std::path::Path;

use super::error::{Result, RuntimeError};

/// An array read from or written to .npy: shape plus values as f32.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    pub shape: Vec<usize>,
    pub data: Vec<f32>,
    /// The file held an integer or bool dtype.
    pub integer: bool,
}

impl NpyArray {
    pub fn new(shape: Vec<usize>, data: Vec<f32>) -> Self {
        NpyArray {
            shape,
            data,
            integer: false,
        }
    }
}

/// Element type to write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyWrite {
    F32,
    I64,
    Bool,
}

fn bad(file: &Path, reason: impl Into<String>) -> RuntimeError {
    RuntimeError::Npy {
        file: file.to_path_buf(),
        reason: reason.into(),
    }
}

/// Value of `'key': value` in the header dict (string values without quotes).
fn header_field<'a>(h: &'a str, key: &str) -> Option<&'a str> {
    let pat = format!("'{key}':");
    let rest = h[h.find(&pat)? + pat.len()..].trim_start();
    if let Some(r) = rest.strip_prefix('\'') {
        return r.split('\'').next();
    }
    if let Some(r) = rest.strip_prefix('(') {
        return r.split(')').next();
    }
    rest.split([',', '}']).next().map(str::trim)
}

/// Parses .npy bytes; `file` is only used in error messages.
pub fn parse_npy(file: &Path, bytes: &[u8]) -> Result<NpyArray> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(bad(file, "not a .npy file (bad magic)"));
    }
    let major = bytes[6];
    let (hlen, hstart) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (
            u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize,
            12,
        ),
        v => return Err(bad(file, format!("unsupported .npy version {v}"))),
    };
    let header = bytes
        .get(hstart..hstart + hlen)
        .ok_or_else(|| bad(file, "truncated header"))?;
    let header = std::str::from_utf8(header).map_err(|_| bad(file, "header is not UTF-8"))?;
    let descr = header_field(header, "descr").ok_or_else(|| bad(file, "header has no descr"))?;
    if header_field(header, "fortran_order") == Some("True") {
        return Err(bad(file, "Fortran-order arrays are not supported"));
    }
    let shape_s = header_field(header, "shape").ok_or_else(|| bad(file, "header has no shape"))?;
    let mut shape = Vec::new();
    for d in shape_s.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        shape.push(
            d.parse::<usize>()
                .map_err(|_| bad(file, format!("bad shape entry '{d}'")))?,
        );
    }
    let body = &bytes[hstart + hlen..];
    let (little, code) = match descr.as_bytes().first() {
        Some(b'<') | Some(b'|') | Some(b'=') => (true, &descr[1..]),
        Some(b'>') => (false, &descr[1..]),
        _ => (true, descr),
    };
    let size = match code {
        "f4" | "i4" | "u4" => 4,
        "f8" | "i8" | "u8" => 8,
        "f2" | "i2" | "u2" => 2,
        "i1" | "u1" | "b1" => 1,
        _ => return Err(bad(file, format!("unsupported dtype '{descr}'"))),
    };
    // The size in u128 so that the message gives the real byte count; compared with the file
    // before anything of that size is allocated.
    let needed = shape
        .iter()
        .try_fold(size as u128, |n, &d| n.checked_mul(d as u128));
    let Some(needed) = needed.filter(|&b| b <= body.len() as u128) else {
        let needs = needed.map_or("more than 2^128".to_string(), |b| b.to_string());
        return Err(bad(
            file,
            format!(
                "data is {} bytes, shape {shape:?} of {descr} needs {needs}",
                body.len()
            ),
        ));
    };
    // Fits: at most the body's length.
    let n = needed as usize / size;
    let word = |i: usize| -> [u8; 8] {
        let mut w = [0u8; 8];
        let src = &body[i * size..(i + 1) * size];
        if little {
            w[..size].copy_from_slice(src);
        } else {
            for (k, b) in src.iter().rev().enumerate() {
                w[k] = *b;
            }
        }
        w
    };
    let data = (0..n)
        .map(|i| {
            let w = word(i);
            match code {
                "f4" => f32::from_le_bytes([w[0], w[1], w[2], w[3]]),
                "f8" => f64::from_le_bytes(w) as f32,
                "f2" => half::f16::from_le_bytes([w[0], w[1]]).to_f32(),
                "i8" => i64::from_le_bytes(w) as f32,
                "u8" => u64::from_le_bytes(w) as f32,
                "i4" => i32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f32,
                "u4" => u32::from_le_bytes([w[0], w[1], w[2], w[3]]) as f32,
                "i2" => i16::from_le_bytes([w[0], w[1]]) as f32,
                "u2" => u16::from_le_bytes([w[0], w[1]]) as f32,
                "i1" => w[0] as i8 as f32,
                "b1" => (w[0] != 0) as u8 as f32,
                _ => w[0] as f32,
            }
        })
        .collect();
    let integer = !code.starts_with('f');
    Ok(NpyArray {
        shape,
        data,
        integer,
    })
}

pub fn read_npy(path: &Path) -> Result<NpyArray> {
    let bytes = std::fs::read(path).map_err(|e| bad(path, e.to_string()))?;
    parse_npy(path, &bytes)
}

/// Serializes an array as .npy version 1.0.
pub fn npy_bytes(shape: &[usize], data: &[f32], dtype: NpyWrite) -> Vec<u8> {
    let descr = match dtype {
        NpyWrite::F32 => "<f4",
        NpyWrite::I64 => "<i8",
        NpyWrite::Bool => "|b1",
    };
    let shape_s = match shape.len() {
        0 => "()".to_string(),
        1 => format!("({},)", shape[0]),
        _ => format!(
            "({})",
            shape
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
    };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_s}, }}");
    // Pad so the data starts on a 64-byte boundary, header ends with '\n'.
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat(total.div_ceil(64) * 64 - total));
    header.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in data {
        match dtype {
            NpyWrite::F32 => out.extend_from_slice(&v.to_le_bytes()),
            NpyWrite::I64 => out.extend_from_slice(&(v.round() as i64).to_le_bytes()),
            NpyWrite::Bool => out.push((v != 0.0) as u8),
        }
    }
    out
}

pub fn write_npy(path: &Path, shape: &[usize], data: &[f32], dtype: NpyWrite) -> Result<()> {
    std::fs::write(path, npy_bytes(shape, data, dtype)).map_err(|e| bad(path, e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_errors() {
        let p = Path::new("x.npy");
        let a = parse_npy(
            p,
            &npy_bytes(&[2, 3], &[1.0, -2.5, 3.0, 4.0, 5.0, 6.0], NpyWrite::F32),
        )
        .unwrap();
        assert_eq!(a.shape, vec![2, 3]);
        assert_eq!(a.data, vec![1.0, -2.5, 3.0, 4.0, 5.0, 6.0]);
        let b = parse_npy(p, &npy_bytes(&[3], &[1.0, -7.0, 9.0], NpyWrite::I64)).unwrap();
        assert_eq!(b.data, vec![1.0, -7.0, 9.0]);
        let s = parse_npy(p, &npy_bytes(&[], &[2.0], NpyWrite::F32)).unwrap();
        assert!(s.shape.is_empty() && s.data == vec![2.0]);
        let e = parse_npy(p, b"hello world").unwrap_err().to_string();
        assert!(e.contains("x.npy") && e.contains("magic"), "{e}");
        let mut t = npy_bytes(&[4], &[1.0; 4], NpyWrite::F32);
        t.truncate(t.len() - 3);
        assert!(parse_npy(p, &t)
            .unwrap_err()
            .to_string()
            .contains("needs 16"));
        // Sizes past 2^64 are reported, not wrapped.
        let header =
            "{'descr': '<f4', 'fortran_order': False, 'shape': (18446744073709551615, 2), }\n";
        let mut huge = b"\x93NUMPY\x01\x00".to_vec();
        huge.extend_from_slice(&(header.len() as u16).to_le_bytes());
        huge.extend_from_slice(header.as_bytes());
        huge.extend_from_slice(&[0; 64]);
        let e = parse_npy(p, &huge).unwrap_err().to_string();
        assert!(e.contains("needs 147573952589676412920"), "{e}");
    }
}
