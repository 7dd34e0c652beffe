//! KServe tensors to pipeline values and back, and what the metadata says about each port.
//!
//! A pipeline's ports are typed values; on the wire they are tensors:
//! - a tensor is FP32 (FP16, INT64, INT32 and UINT8 are accepted and converted), its shape
//!   checked against the model's;
//! - an image is a BYTES tensor of shape `[1]` holding the encoded PNG or JPEG file (or a
//!   UINT8 `[height, width, 3]` tensor of RGB pixels); audio the WAV file's bytes (decoded with
//!   `hound`, channels averaged to mono); text its UTF-8 bytes;
//! - token ids are an INT64 tensor of shape `[n]` (or `[1, n]`; INT32 is accepted too), each id
//!   in 0..2^32. INT64 because that is what tokenizer front ends and text models exchange
//!   (Triton's ensembles, ONNX `input_ids`), and every KServe client has it;
//! - a list is one tensor whose first axis counts the items (tensors stacked, files and texts
//!   one BYTES element each; a list of audio comes back as one 32-bit float WAV file each);
//! - outputs: boxes come back as FP32 `[n, 4, 2]` (corners in image pixels); recognized text
//!   lines `NAME` as three tensors, `NAME` (BYTES `[n]`, the texts), `NAME_scores` (FP32 `[n]`)
//!   and `NAME_boxes` (FP32 `[n, 4, 2]`); an image as UINT8 `[height, width, 3]`; audio as
//!   FP32 `[samples]` plus `NAME_sample_rate` (INT64 `[1]`).

use super::error::ApiError;
use super::protocol::{TensorMetadata, WireData, WireTensor};
use crate::engine::PortInfo;
use crate::ops::TextLine;
use crate::pipeline::{Audio, Image, Tensor, TensorData, Value, ValueType};

/// Suffixes of the extra tensors of a text-lines output.
pub const SCORES_SUFFIX: &str = "_scores";
pub const BOXES_SUFFIX: &str = "_boxes";
/// Suffix of an audio output's sample-rate tensor.
pub const SAMPLE_RATE_SUFFIX: &str = "_sample_rate";

fn meta(name: &str, datatype: &'static str, shape: Vec<i64>) -> TensorMetadata {
    TensorMetadata {
        name: name.into(),
        datatype,
        shape,
    }
}

fn known_shape(port: &PortInfo) -> Vec<i64> {
    port.shape
        .as_ref()
        .map_or(vec![-1], |s| s.iter().map(|&d| d as i64).collect())
}

/// How an input port appears in the model metadata.
pub fn input_metadata(port: &PortInfo) -> TensorMetadata {
    match &port.ty {
        ValueType::Tensor => meta(&port.name, "FP32", known_shape(port)),
        ValueType::Tokens => meta(&port.name, "INT64", vec![-1]),
        ValueType::List(t) if **t == ValueType::Tensor => meta(&port.name, "FP32", vec![-1]),
        ValueType::List(_) => meta(&port.name, "BYTES", vec![-1]),
        _ => meta(&port.name, "BYTES", vec![1]),
    }
}

/// How an output port appears in the model metadata (text lines and audio give more than one
/// tensor).
pub fn output_metadata(port: &PortInfo) -> Vec<TensorMetadata> {
    let n = &port.name;
    match &port.ty {
        ValueType::Tensor => vec![meta(n, "FP32", known_shape(port))],
        ValueType::Text => vec![meta(n, "BYTES", vec![1])],
        ValueType::Tokens => vec![meta(n, "INT64", vec![-1])],
        ValueType::Image => vec![meta(n, "UINT8", vec![-1, -1, 3])],
        ValueType::Audio => vec![
            meta(n, "FP32", vec![-1]),
            meta(&format!("{n}{SAMPLE_RATE_SUFFIX}"), "INT64", vec![1]),
        ],
        ValueType::Boxes => vec![meta(n, "FP32", vec![-1, 4, 2])],
        ValueType::TextLines => vec![
            meta(n, "BYTES", vec![-1]),
            meta(&format!("{n}{SCORES_SUFFIX}"), "FP32", vec![-1]),
            meta(&format!("{n}{BOXES_SUFFIX}"), "FP32", vec![-1, 4, 2]),
        ],
        ValueType::List(t) if **t == ValueType::Tensor => vec![meta(n, "FP32", vec![-1])],
        _ => vec![meta(n, "BYTES", vec![-1])],
    }
}

/// The request tensor for `port` as the value the pipeline takes.
pub fn to_value(port: &PortInfo, t: WireTensor) -> Result<Value, ApiError> {
    let name = &port.name;
    let bad = |msg: String| ApiError::bad_request(format!("input `{name}`: {msg}"));
    let bad_value = |e: WireValueError| bad(e.to_string());
    match &port.ty {
        ValueType::Tensor => {
            if let Some(want) = &port.shape {
                if &t.shape != want {
                    return Err(bad(format!(
                        "shape {:?}, the model takes {want:?}",
                        t.shape
                    )));
                }
            }
            tensor(t).map(Value::Tensor).map_err(bad_value)
        }
        ValueType::Tokens => tokens(t).map(Value::Tokens).map_err(bad_value),
        ValueType::List(elem) => list(elem, t).map(Value::List).map_err(bad_value),
        ty => {
            if let (WireData::U8(_), ValueType::Image) = (&t.data, ty) {
                return rgb_image(t).map(Value::Image).map_err(bad_value);
            }
            let WireData::Bytes(mut items) = t.data else {
                return Err(bad(format!(
                    "a {ty} is given as a BYTES tensor of shape [1], not {}",
                    t.data.datatype()
                )));
            };
            if items.len() != 1 {
                return Err(bad(format!(
                    "a {ty} is one BYTES element, the tensor has {}",
                    items.len()
                )));
            }
            from_bytes(ty, items.remove(0)).map_err(bad_value)
        }
    }
}

/// Why a request tensor is not the value its port takes.
#[derive(Debug, thiserror::Error)]
pub enum WireValueError {
    #[error("not a PNG or JPEG image the decoder takes: {0}")]
    Image(crate::ops::OcrError),
    #[error(transparent)]
    Audio(#[from] crate::pipeline::AudioError),
    #[error("text must be UTF-8")]
    NotUtf8,
    #[error("a {0} cannot be given over HTTP")]
    NotOverHttp(ValueType),
    #[error("a tensor cannot be BYTES (use FP32)")]
    BytesTensor,
    #[error(transparent)]
    Tensor(#[from] crate::pipeline::TensorError),
    #[error("RGB pixels must be UINT8")]
    RgbNotU8,
    #[error("UINT8 pixels must be [height, width, 3], not {0:?}")]
    RgbShape(Vec<usize>),
    #[error("RGB pixels: {0}")]
    Rgb(crate::ops::OcrError),
    #[error("a list of tensors needs a first axis that counts them")]
    ListAxis,
    #[error("token ids are an INT64 tensor, not {0}")]
    TokensDatatype(&'static str),
    #[error("token ids are a tensor of shape [n] or [1, n], not {0:?}")]
    TokensShape(Vec<usize>),
    #[error("token id {0} is outside 0..2^32")]
    TokenRange(i64),
    #[error("a list of {ty} is a BYTES tensor, not {datatype}")]
    ListDatatype {
        ty: ValueType,
        datatype: &'static str,
    },
}

/// One BYTES element as a value of type `ty`.
fn from_bytes(ty: &ValueType, bytes: Vec<u8>) -> Result<Value, WireValueError> {
    match ty {
        ValueType::Image => Image::decode(&bytes)
            .map(Value::Image)
            .map_err(WireValueError::Image),
        ValueType::Audio => Ok(Value::Audio(Audio::decode_wav(&bytes)?)),
        ValueType::Text => String::from_utf8(bytes)
            .map(Value::Text)
            .map_err(|_| WireValueError::NotUtf8),
        other => Err(WireValueError::NotOverHttp(other.clone())),
    }
}

/// A tensor from wire data (integers and bytes as the engine takes them).
fn tensor(t: WireTensor) -> Result<Tensor, WireValueError> {
    let data = match t.data {
        WireData::F32(v) => TensorData::F32(v),
        WireData::F16(v) => TensorData::F16(v),
        WireData::I64(v) => TensorData::I64(v),
        WireData::U8(v) => TensorData::F32(v.into_iter().map(f32::from).collect()),
        WireData::Bytes(_) => return Err(WireValueError::BytesTensor),
    };
    let t = Tensor::new(t.shape, data)?;
    // Integers the device cannot hold exactly are the caller's mistake: say so here, not as a
    // failed model run.
    if let TensorData::I64(_) = t.data() {
        t.to_f32()?;
    }
    Ok(t)
}

/// Token ids from an integer tensor of shape `[n]` or `[1, n]`.
fn tokens(t: WireTensor) -> Result<Vec<u32>, WireValueError> {
    let WireData::I64(ids) = t.data else {
        return Err(WireValueError::TokensDatatype(t.data.datatype()));
    };
    if !matches!(t.shape[..], [_] | [1, _]) {
        return Err(WireValueError::TokensShape(t.shape));
    }
    ids.into_iter()
        .map(|id| u32::try_from(id).map_err(|_| WireValueError::TokenRange(id)))
        .collect()
}

fn rgb_image(t: WireTensor) -> Result<Image, WireValueError> {
    let WireData::U8(px) = &t.data else {
        return Err(WireValueError::RgbNotU8);
    };
    match t.shape[..] {
        [h, w, 3] => Image::from_rgb8(w, h, px).map_err(WireValueError::Rgb),
        _ => Err(WireValueError::RgbShape(t.shape.clone())),
    }
}

/// A list value: the first axis counts the items.
fn list(elem: &ValueType, t: WireTensor) -> Result<Vec<Value>, WireValueError> {
    match (elem, t.data) {
        (ValueType::Tensor, data) => {
            let Some((&n, item_shape)) = t.shape.split_first() else {
                return Err(WireValueError::ListAxis);
            };
            let per: usize = item_shape.iter().product();
            let chunk = |i: usize| i * per..(i + 1) * per;
            (0..n)
                .map(|i| {
                    let data = match &data {
                        WireData::F32(v) => WireData::F32(v[chunk(i)].to_vec()),
                        WireData::F16(v) => WireData::F16(v[chunk(i)].to_vec()),
                        WireData::I64(v) => WireData::I64(v[chunk(i)].to_vec()),
                        WireData::U8(v) => WireData::U8(v[chunk(i)].to_vec()),
                        WireData::Bytes(_) => return Err(WireValueError::BytesTensor),
                    };
                    tensor(WireTensor {
                        name: String::new(),
                        shape: item_shape.to_vec(),
                        data,
                    })
                    .map(Value::Tensor)
                })
                .collect()
        }
        (ty, WireData::Bytes(items)) => items.into_iter().map(|b| from_bytes(ty, b)).collect(),
        (ty, d) => Err(WireValueError::ListDatatype {
            ty: ty.clone(),
            datatype: d.datatype(),
        }),
    }
}

fn wire(name: &str, shape: Vec<usize>, data: WireData) -> WireTensor {
    WireTensor {
        name: name.into(),
        shape,
        data,
    }
}

fn tensor_data(t: &Tensor) -> WireData {
    match t.data() {
        TensorData::F32(v) => WireData::F32(v.clone()),
        TensorData::F16(v) => WireData::F16(v.clone()),
        TensorData::I64(v) => WireData::I64(v.clone()),
    }
}

fn corners(points: impl Iterator<Item = [[f32; 2]; 4]>) -> Vec<f32> {
    points.flat_map(|b| b.into_iter().flatten()).collect()
}

/// An output value as the tensors that carry it (see the module docs for the naming).
pub fn from_value(name: &str, v: &Value) -> Result<Vec<WireTensor>, ApiError> {
    let bad = |what: &str| {
        ApiError::internal(format!(
            "output `{name}`: {what} cannot be returned over HTTP"
        ))
    };
    Ok(match v {
        Value::Tensor(t) => vec![wire(name, t.shape().to_vec(), tensor_data(t))],
        Value::Text(s) => vec![wire(
            name,
            vec![1],
            WireData::Bytes(vec![s.clone().into_bytes()]),
        )],
        Value::Tokens(ids) => vec![wire(
            name,
            vec![ids.len()],
            WireData::I64(ids.iter().map(|&id| i64::from(id)).collect()),
        )],
        Value::Image(img) => vec![wire(
            name,
            vec![img.height(), img.width(), 3],
            WireData::U8(img.to_rgb8()),
        )],
        Value::Audio(a) => vec![
            wire(
                name,
                vec![a.samples.len()],
                WireData::F32(a.samples.to_vec()),
            ),
            wire(
                &format!("{name}{SAMPLE_RATE_SUFFIX}"),
                vec![1],
                WireData::I64(vec![a.sample_rate as i64]),
            ),
        ],
        Value::Boxes(b) => vec![wire(
            name,
            vec![b.len(), 4, 2],
            WireData::F32(corners(b.points().into_iter())),
        )],
        Value::TextLines(lines) => text_lines(name, lines),
        Value::List(items) => match items.first() {
            None => vec![wire(name, vec![0], WireData::F32(Vec::new()))],
            Some(Value::Tensor(first)) => {
                let mut shape = vec![items.len()];
                shape.extend_from_slice(first.shape());
                let mut data = Vec::with_capacity(items.len() * first.data().len());
                for it in items {
                    match it {
                        Value::Tensor(t) if t.shape() == first.shape() => data
                            .extend(t.to_f32().map_err(|e| {
                                ApiError::internal(format!("output `{name}`: {e}"))
                            })?),
                        _ => return Err(bad("a list of tensors of differing shapes")),
                    }
                }
                vec![wire(name, shape, WireData::F32(data))]
            }
            Some(Value::Text(_)) => {
                let texts = items
                    .iter()
                    .map(|it| match it {
                        Value::Text(s) => Ok(s.clone().into_bytes()),
                        _ => Err(bad("a mixed list")),
                    })
                    .collect::<Result<_, _>>()?;
                vec![wire(name, vec![items.len()], WireData::Bytes(texts))]
            }
            Some(Value::Audio(_)) => {
                let wavs = items
                    .iter()
                    .map(|it| match it {
                        Value::Audio(a) => wav_bytes(a)
                            .map_err(|e| ApiError::internal(format!("output `{name}`: {e}"))),
                        _ => Err(bad("a mixed list")),
                    })
                    .collect::<Result<_, _>>()?;
                vec![wire(name, vec![items.len()], WireData::Bytes(wavs))]
            }
            Some(other) => return Err(bad(&format!("a list of {}", other.value_type()))),
        },
    })
}

/// Audio as a mono 32-bit float WAV file (how a list of audio, such as speech segments, comes
/// back: one file per BYTES element).
fn wav_bytes(a: &Audio) -> Result<Vec<u8>, hound::Error> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: a.sample_rate,
        bits_per_sample: 32,
        sample_format: hound::SampleFormat::Float,
    };
    let mut out = std::io::Cursor::new(Vec::new());
    let mut w = hound::WavWriter::new(&mut out, spec)?;
    for &s in a.samples.iter() {
        w.write_sample(s)?;
    }
    w.finalize()?;
    Ok(out.into_inner())
}

fn text_lines(name: &str, lines: &[TextLine]) -> Vec<WireTensor> {
    let n = lines.len();
    vec![
        wire(
            name,
            vec![n],
            WireData::Bytes(lines.iter().map(|l| l.text.clone().into_bytes()).collect()),
        ),
        wire(
            &format!("{name}{SCORES_SUFFIX}"),
            vec![n],
            WireData::F32(lines.iter().map(|l| l.score as f32).collect()),
        ),
        wire(
            &format!("{name}{BOXES_SUFFIX}"),
            vec![n, 4, 2],
            WireData::F32(corners(lines.iter().map(|l| l.points))),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn port(name: &str, ty: ValueType, shape: Option<Vec<usize>>) -> PortInfo {
        PortInfo {
            name: name.into(),
            value_type: ty.to_string(),
            shape,
            ty,
        }
    }

    #[test]
    fn tensor_inputs_check_their_shape() {
        let p = port("x", ValueType::Tensor, Some(vec![1, 2]));
        let ok = wire("x", vec![1, 2], WireData::F32(vec![1.0, 2.0]));
        assert!(matches!(to_value(&p, ok), Ok(Value::Tensor(_))));
        let e = to_value(&p, wire("x", vec![2, 1], WireData::F32(vec![1.0, 2.0]))).unwrap_err();
        assert!(e.message.contains("the model takes [1, 2]"), "{e}");
        let e = to_value(
            &p,
            wire("x", vec![1, 2], WireData::Bytes(vec![vec![], vec![]])),
        )
        .unwrap_err();
        assert!(e.message.contains("cannot be BYTES"), "{e}");
        let e = to_value(&p, wire("x", vec![1, 2], WireData::I64(vec![1, 1 << 30]))).unwrap_err();
        assert!(e.message.contains("cannot be represented exactly"), "{e}");
    }

    #[test]
    fn images_come_as_encoded_files() {
        let p = port("camera", ValueType::Image, None);
        let png = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/ocr/tiny_rgba.png"
        ))
        .unwrap();
        let v = to_value(&p, wire("camera", vec![1], WireData::Bytes(vec![png]))).unwrap();
        assert!(matches!(v, Value::Image(_)));
        let e = to_value(
            &p,
            wire("camera", vec![1], WireData::Bytes(vec![b"nope".to_vec()])),
        )
        .unwrap_err();
        assert!(e.message.contains("not a PNG or JPEG"), "{e}");
        let rgb = to_value(&p, wire("camera", vec![1, 2, 3], WireData::U8(vec![9; 6]))).unwrap();
        let Value::Image(img) = rgb else { panic!() };
        assert_eq!((img.width(), img.height()), (2, 1));
    }

    #[test]
    fn wav_files_decode_to_mono() {
        let mut buf = Cursor::new(Vec::new());
        let spec = hound::WavSpec {
            channels: 2,
            sample_rate: 16000,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::new(&mut buf, spec).unwrap();
        for s in [16384i16, 0, -32768, -32768] {
            w.write_sample(s).unwrap();
        }
        w.finalize().unwrap();
        let a = Audio::decode_wav(buf.get_ref()).unwrap();
        assert_eq!(a.sample_rate, 16000);
        assert_eq!(*a.samples, vec![0.25, -1.0]);
        let e = Audio::decode_wav(b"RIFF....").unwrap_err().to_string();
        assert!(e.starts_with("WAV"), "{e}");
    }

    #[test]
    fn text_lines_come_back_as_three_tensors() {
        let lines = vec![TextLine {
            points: [[0.0, 1.0], [2.0, 1.0], [2.0, 3.0], [0.0, 3.0]],
            text: "héllo".into(),
            score: 0.5,
        }];
        let t = from_value("text", &Value::TextLines(lines)).unwrap();
        let names: Vec<&str> = t.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["text", "text_scores", "text_boxes"]);
        assert_eq!(
            t[0].data,
            WireData::Bytes(vec!["héllo".as_bytes().to_vec()])
        );
        assert_eq!(t[1].data, WireData::F32(vec![0.5]));
        assert_eq!(t[2].shape, vec![1, 4, 2]);
        let meta = output_metadata(&port("text", ValueType::TextLines, None));
        assert_eq!(
            meta.iter().map(|m| m.name.as_str()).collect::<Vec<_>>(),
            names
        );
    }

    #[test]
    fn token_ids_are_int64() {
        let p = port("ids", ValueType::Tokens, None);
        assert_eq!(input_metadata(&p).datatype, "INT64");
        let v = to_value(
            &p,
            wire("ids", vec![1, 3], WireData::I64(vec![0, 7, 4_294_967_295])),
        );
        let Ok(Value::Tokens(ids)) = v else {
            panic!("{v:?}")
        };
        assert_eq!(ids, [0, 7, u32::MAX]);
        let t = from_value("ids", &Value::Tokens(ids)).unwrap();
        assert_eq!(t[0].shape, vec![3]);
        assert_eq!(t[0].data, WireData::I64(vec![0, 7, 4_294_967_295]));
        let e = to_value(&p, wire("ids", vec![1], WireData::I64(vec![-1]))).unwrap_err();
        assert!(e.message.contains("outside 0..2^32"), "{e}");
        let e = to_value(&p, wire("ids", vec![2, 1], WireData::I64(vec![1, 2]))).unwrap_err();
        assert!(e.message.contains("[n] or [1, n]"), "{e}");
        let e = to_value(&p, wire("ids", vec![1], WireData::F32(vec![1.0]))).unwrap_err();
        assert!(e.message.contains("not FP32"), "{e}");
    }

    #[test]
    fn audio_lists_come_back_as_wav_files() {
        let seg = Audio {
            samples: std::sync::Arc::new(vec![0.5, -0.25]),
            sample_rate: 16_000,
        };
        let t = from_value("segments", &Value::List(vec![Value::Audio(seg.clone())])).unwrap();
        let WireData::Bytes(files) = &t[0].data else {
            panic!("{:?}", t[0].data)
        };
        assert_eq!(Audio::decode_wav(&files[0]).unwrap(), seg);
    }

    #[test]
    fn tensor_lists_stack_and_split_on_the_first_axis() {
        let p = port("xs", ValueType::list_of(ValueType::Tensor), None);
        let v = to_value(
            &p,
            wire(
                "xs",
                vec![2, 3],
                WireData::F32(vec![1., 2., 3., 4., 5., 6.]),
            ),
        )
        .unwrap();
        let t = from_value("xs", &v).unwrap();
        assert_eq!(t[0].shape, vec![2, 3]);
        assert_eq!(t[0].data, WireData::F32(vec![1., 2., 3., 4., 5., 6.]));
    }
}
