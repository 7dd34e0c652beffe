//! Pipeline values from files and to text: what `texstream run --input NAME=FILE` and a
//! workload's demo inputs read (`.png`/`.jpg` images, `.npy` tensors, `.txt` text, `.wav`
//! audio, `.tokens` token ids separated by commas or spaces), and the short summaries the CLI
//! prints.
use std::path::{Path, PathBuf};

use super::value::{Audio, Image, Tensor, TensorData, Value};

/// A file that does not give a value.
#[derive(Debug, thiserror::Error)]
pub enum ValueFileError {
    #[error("{path}: cannot read: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {msg}")]
    Invalid { path: PathBuf, msg: String },
}

/// Reads `path` as a value, by its extension.
pub fn read_value(path: &Path) -> Result<Value, ValueFileError> {
    let invalid = |msg: String| ValueFileError::Invalid {
        path: path.to_path_buf(),
        msg,
    };
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase)
        .unwrap_or_default();
    let bytes = || {
        std::fs::read(path).map_err(|source| ValueFileError::Io {
            path: path.to_path_buf(),
            source,
        })
    };
    Ok(match ext.as_str() {
        "png" | "jpg" | "jpeg" => {
            Value::Image(Image::decode(&bytes()?).map_err(|e| invalid(e.to_string()))?)
        }
        "npy" => {
            let a = crate::runtime::npy::parse_npy(path, &bytes()?)
                .map_err(|e| invalid(e.to_string()))?;
            let data = if a.integer {
                TensorData::I64(a.data.iter().map(|&x| x as i64).collect())
            } else {
                TensorData::F32(a.data)
            };
            Value::Tensor(Tensor::new(a.shape, data).map_err(|e| invalid(e.to_string()))?)
        }
        "wav" => Value::Audio(Audio::decode_wav(&bytes()?).map_err(|e| invalid(e.to_string()))?),
        "tokens" => {
            let text = String::from_utf8(bytes()?).map_err(|_| invalid("not UTF-8 text".into()))?;
            let ids = text
                .split(|c: char| c == ',' || c.is_whitespace())
                .filter(|s| !s.is_empty())
                .map(|s| {
                    s.parse::<u32>()
                        .map_err(|_| invalid(format!("`{s}` is not a token id")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            Value::Tokens(ids)
        }
        "txt" => {
            Value::Text(String::from_utf8(bytes()?).map_err(|_| invalid("not UTF-8 text".into()))?)
        }
        _ => {
            return Err(invalid(
                "unknown kind of input (use .png, .jpg, .npy, .txt, .wav or .tokens)".into(),
            ))
        }
    })
}

/// A one-line summary of a value: text lines in full, tensors by shape, sum and first values.
pub fn summarize(name: &str, v: &Value) -> String {
    match v {
        Value::TextLines(lines) => {
            let mut s = format!("`{name}`: {} lines", lines.len());
            for l in lines {
                s += &format!("\n  {:.3}  {}", l.score, l.text);
            }
            s
        }
        Value::Tensor(t) => {
            let v = t.to_f32().unwrap_or_default();
            let sum: f64 = v.iter().map(|&x| x as f64).sum();
            let head: Vec<String> = v.iter().take(4).map(|x| format!("{x:.5}")).collect();
            format!(
                "`{name}` {:?}: sum {sum:.6}, first [{}]",
                t.shape(),
                head.join(", ")
            )
        }
        Value::Text(t) => format!("`{name}`: {t}"),
        Value::Tokens(ids) => {
            let head: Vec<String> = ids.iter().take(8).map(u32::to_string).collect();
            let more = if ids.len() > 8 { ", ..." } else { "" };
            format!(
                "`{name}`: {} token ids [{}{more}]",
                ids.len(),
                head.join(", ")
            )
        }
        Value::List(items) => format!("`{name}`: list of {} ({})", items.len(), v.value_type()),
        other => format!("`{name}`: {}", other.value_type()),
    }
}

/// The FNV-1a offset basis: the start value of every content hash.
pub const HASH_SEED: u64 = 0xcbf29ce484222325;

/// Folds bytes into a 64-bit FNV-1a hash.
pub fn hash_bytes(h: &mut u64, bytes: &[u8]) {
    fnv(h, bytes)
}

/// The hash of named values (names and contents, in the map's order): how outputs are
/// compared across runs, policies and reloads.
pub fn hash_values<'a>(values: impl IntoIterator<Item = (&'a String, &'a Value)>) -> u64 {
    let mut h = HASH_SEED;
    for (k, v) in values {
        fnv(&mut h, k.as_bytes());
        hash_value(v, &mut h);
    }
    h
}

fn fnv(h: &mut u64, bytes: &[u8]) {
    for &b in bytes {
        *h ^= b as u64;
        *h = h.wrapping_mul(0x100000001b3);
    }
}

/// Folds a value's content into a 64-bit FNV-1a hash, bit-exactly (outputs are compared across
/// policies by their hashes, so runs of any length keep constant memory).
pub fn hash_value(v: &Value, h: &mut u64) {
    match v {
        Value::Tensor(t) => {
            for d in t.shape() {
                fnv(h, &(*d as u64).to_le_bytes());
            }
            match t.data() {
                TensorData::F32(x) => x.iter().for_each(|v| fnv(h, &v.to_bits().to_le_bytes())),
                TensorData::F16(x) => x.iter().for_each(|v| fnv(h, &v.to_bits().to_le_bytes())),
                TensorData::I64(x) => x.iter().for_each(|v| fnv(h, &v.to_le_bytes())),
            }
        }
        Value::TextLines(lines) => {
            for l in lines {
                fnv(h, l.text.as_bytes());
                fnv(h, &l.score.to_bits().to_le_bytes());
                for p in l.points.iter().flatten() {
                    fnv(h, &p.to_bits().to_le_bytes());
                }
            }
        }
        Value::Text(t) => fnv(h, t.as_bytes()),
        Value::Tokens(ids) => {
            fnv(h, &(ids.len() as u64).to_le_bytes());
            ids.iter().for_each(|v| fnv(h, &v.to_le_bytes()));
        }
        Value::Image(i) => fnv(h, &i.to_rgb8()),
        Value::Audio(a) => a
            .samples
            .iter()
            .for_each(|v| fnv(h, &v.to_bits().to_le_bytes())),
        Value::Boxes(b) => {
            for p in b.points().iter().flatten().flatten() {
                fnv(h, &p.to_bits().to_le_bytes());
            }
        }
        Value::List(items) => {
            fnv(h, &(items.len() as u64).to_le_bytes());
            for i in items {
                hash_value(i, h);
            }
        }
    }
}
