//! The KServe v2 inference protocol's wire format (the one Triton speaks): the JSON request and
//! response documents, model and server metadata, and the binary-tensor extension, where the
//! body is a JSON header of `Inference-Header-Content-Length` bytes followed by each tensor's
//! raw little-endian bytes (a tensor says how many in `parameters.binary_data_size`; BYTES
//! elements are each a 4-byte length and the bytes). Element data is decoded here into
//! [`WireTensor`]s; what they mean to a pipeline is [`super::tensors`]' business.
use std::collections::BTreeMap;

use axum::http::HeaderMap;
use half::f16;
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use super::error::ApiError;

/// The header that splits a binary-extension body.
pub const HEADER_LENGTH: &str = "inference-header-content-length";

/// `POST /v2/models/{name}/infer` as JSON.
#[derive(Debug, Deserialize)]
pub struct InferRequest {
    #[serde(default)]
    pub id: Option<String>,
    #[serde(default)]
    pub parameters: BTreeMap<String, Json>,
    pub inputs: Vec<RequestInput>,
    #[serde(default)]
    pub outputs: Vec<RequestOutput>,
}

#[derive(Debug, Deserialize)]
pub struct RequestInput {
    pub name: String,
    pub shape: Vec<i64>,
    pub datatype: String,
    #[serde(default)]
    pub parameters: BTreeMap<String, Json>,
    #[serde(default)]
    pub data: Option<Json>,
}

#[derive(Debug, Deserialize)]
pub struct RequestOutput {
    pub name: String,
    #[serde(default)]
    pub parameters: BTreeMap<String, Json>,
}

impl InferRequest {
    /// The client's own timeout (`parameters.timeout`, microseconds), if it sent one.
    pub fn timeout_us(&self) -> Option<u64> {
        self.parameters.get("timeout").and_then(Json::as_u64)
    }

    /// Whether outputs the request does not list explicitly come back binary.
    pub fn binary_by_default(&self) -> bool {
        self.parameters
            .get("binary_data_output")
            .and_then(Json::as_bool)
            .unwrap_or(false)
    }
}

/// Element data of one tensor on the wire.
#[derive(Debug, Clone, PartialEq)]
pub enum WireData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I64(Vec<i64>),
    U8(Vec<u8>),
    Bytes(Vec<Vec<u8>>),
}

impl WireData {
    pub fn len(&self) -> usize {
        match self {
            WireData::F32(v) => v.len(),
            WireData::F16(v) => v.len(),
            WireData::I64(v) => v.len(),
            WireData::U8(v) => v.len(),
            WireData::Bytes(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The KServe datatype name.
    pub fn datatype(&self) -> &'static str {
        match self {
            WireData::F32(_) => "FP32",
            WireData::F16(_) => "FP16",
            WireData::I64(_) => "INT64",
            WireData::U8(_) => "UINT8",
            WireData::Bytes(_) => "BYTES",
        }
    }

    /// The binary extension's bytes.
    fn to_bytes(&self) -> Vec<u8> {
        match self {
            WireData::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            WireData::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            WireData::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            WireData::U8(v) => v.clone(),
            WireData::Bytes(v) => {
                let mut out = Vec::with_capacity(v.iter().map(|b| b.len() + 4).sum());
                for b in v {
                    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
                    out.extend_from_slice(b);
                }
                out
            }
        }
    }

    /// The JSON `data` array (BYTES elements as UTF-8 strings, lossily).
    fn to_json(&self) -> Json {
        match self {
            WireData::F32(v) => Json::from(v.clone()),
            WireData::F16(v) => Json::from(v.iter().map(|x| x.to_f32()).collect::<Vec<_>>()),
            WireData::I64(v) => Json::from(v.clone()),
            WireData::U8(v) => Json::from(v.clone()),
            WireData::Bytes(v) => Json::from(
                v.iter()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
                    .collect::<Vec<_>>(),
            ),
        }
    }
}

/// One decoded input, or one output to encode.
#[derive(Debug, Clone, PartialEq)]
pub struct WireTensor {
    pub name: String,
    pub shape: Vec<usize>,
    pub data: WireData,
}

/// The datatypes an input may have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Datatype {
    F32,
    F16,
    I64,
    I32,
    U8,
    Bytes,
}

impl Datatype {
    fn parse(name: &str, input: &str) -> Result<Datatype, ApiError> {
        Ok(match name {
            "FP32" => Datatype::F32,
            "FP16" => Datatype::F16,
            "INT64" => Datatype::I64,
            "INT32" => Datatype::I32,
            "UINT8" => Datatype::U8,
            "BYTES" => Datatype::Bytes,
            other => {
                return Err(ApiError::bad_request(format!(
                    "input `{input}`: datatype `{other}` is not supported (use FP32, FP16, \
                     INT64, INT32, UINT8 or BYTES)"
                )))
            }
        })
    }

    fn element_bytes(self) -> Option<usize> {
        match self {
            Datatype::F32 | Datatype::I32 => Some(4),
            Datatype::F16 => Some(2),
            Datatype::I64 => Some(8),
            Datatype::U8 => Some(1),
            Datatype::Bytes => None,
        }
    }
}

/// Splits a body into its JSON header and the binary part after it.
fn split_body<'a>(headers: &HeaderMap, body: &'a [u8]) -> Result<(&'a [u8], &'a [u8]), ApiError> {
    let Some(v) = headers.get(HEADER_LENGTH) else {
        return Ok((body, &[]));
    };
    let n: usize = v
        .to_str()
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .ok_or_else(|| {
            ApiError::bad_request("Inference-Header-Content-Length is not a byte count")
        })?;
    if n > body.len() {
        return Err(ApiError::bad_request(format!(
            "Inference-Header-Content-Length is {n}, the body has only {} bytes",
            body.len()
        )));
    }
    Ok(body.split_at(n))
}

/// Parses an infer request: the JSON document and every input's data (JSON or binary).
pub fn parse_infer(
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(InferRequest, Vec<WireTensor>), ApiError> {
    let (json, mut binary) = split_body(headers, body)?;
    let mut req: InferRequest = serde_json::from_slice(json)
        .map_err(|e| ApiError::bad_request(format!("malformed JSON request: {e}")))?;
    let mut tensors = Vec::with_capacity(req.inputs.len());
    for input in &mut req.inputs {
        let name = &input.name;
        if input.parameters.contains_key("shared_memory_region") {
            return Err(ApiError::bad_request(format!(
                "input `{name}`: shared-memory inputs are not supported"
            )));
        }
        let dt = Datatype::parse(&input.datatype, name)?;
        let shape = input
            .shape
            .iter()
            .map(|&d| usize::try_from(d))
            .collect::<Result<Vec<usize>, _>>()
            .map_err(|_| {
                ApiError::bad_request(format!(
                    "input `{name}`: shape {:?} has a negative dimension",
                    input.shape
                ))
            })?;
        let count = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or_else(|| {
                ApiError::bad_request(format!("input `{name}`: shape {shape:?} is too large"))
            })?;
        let data = match input.parameters.get("binary_data_size") {
            Some(size) => {
                let n = size
                    .as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .ok_or_else(|| {
                        ApiError::bad_request(format!(
                            "input `{name}`: binary_data_size is not a byte count"
                        ))
                    })?;
                if n > binary.len() {
                    return Err(ApiError::bad_request(format!(
                        "input `{name}`: binary_data_size is {n}, only {} bytes of binary data \
                         are left in the body",
                        binary.len()
                    )));
                }
                let (mine, rest) = binary.split_at(n);
                binary = rest;
                from_binary(name, dt, mine)?
            }
            None => {
                let data = input.data.take().ok_or_else(|| {
                    ApiError::bad_request(format!(
                        "input `{name}` has neither `data` nor binary_data_size"
                    ))
                })?;
                from_json(name, dt, data)?
            }
        };
        if data.len() != count {
            return Err(ApiError::bad_request(format!(
                "input `{name}`: shape {shape:?} holds {count} elements, the data has {}",
                data.len()
            )));
        }
        tensors.push(WireTensor {
            name: name.clone(),
            shape,
            data,
        });
    }
    if !binary.is_empty() {
        return Err(ApiError::bad_request(format!(
            "{} bytes of binary data after the last binary input",
            binary.len()
        )));
    }
    Ok((req, tensors))
}

fn from_binary(name: &str, dt: Datatype, b: &[u8]) -> Result<WireData, ApiError> {
    if let Some(size) = dt.element_bytes() {
        if !b.len().is_multiple_of(size) {
            return Err(ApiError::bad_request(format!(
                "input `{name}`: {} bytes of binary data is not a whole number of {}-byte \
                 elements",
                b.len(),
                size
            )));
        }
    }
    let words = |n: usize| b.chunks_exact(n);
    Ok(match dt {
        Datatype::F32 => WireData::F32(
            words(4)
                .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        Datatype::F16 => {
            WireData::F16(words(2).map(|c| f16::from_le_bytes([c[0], c[1]])).collect())
        }
        Datatype::I64 => WireData::I64(
            words(8)
                .map(|c| i64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
        ),
        Datatype::I32 => WireData::I64(
            words(4)
                .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]) as i64)
                .collect(),
        ),
        Datatype::U8 => WireData::U8(b.to_vec()),
        Datatype::Bytes => {
            let mut out = Vec::new();
            let mut rest = b;
            while !rest.is_empty() {
                let bad = || {
                    ApiError::bad_request(format!(
                        "input `{name}`: BYTES element {} is cut short (each is a 4-byte \
                         little-endian length and that many bytes)",
                        out.len()
                    ))
                };
                let (len, tail) = rest.split_first_chunk::<4>().ok_or_else(bad)?;
                let n = u32::from_le_bytes(*len) as usize;
                if n > tail.len() {
                    return Err(bad());
                }
                out.push(tail[..n].to_vec());
                rest = &tail[n..];
            }
            WireData::Bytes(out)
        }
    })
}

/// Flattens nested JSON arrays in row-major order.
fn flatten(v: Json, out: &mut Vec<Json>) {
    match v {
        Json::Array(items) => {
            for x in items {
                flatten(x, out);
            }
        }
        x => out.push(x),
    }
}

fn from_json(name: &str, dt: Datatype, data: Json) -> Result<WireData, ApiError> {
    let mut flat = Vec::new();
    flatten(data, &mut flat);
    let bad = |i: usize, want: &str| {
        ApiError::bad_request(format!(
            "input `{name}`: element {i} of `data` is not {want}"
        ))
    };
    let number = |i: usize, x: &Json| x.as_f64().ok_or_else(|| bad(i, "a number"));
    let integer = |i: usize, x: &Json| x.as_i64().ok_or_else(|| bad(i, "an integer"));
    Ok(match dt {
        Datatype::F32 => WireData::F32(
            flat.iter()
                .enumerate()
                .map(|(i, x)| number(i, x).map(|v| v as f32))
                .collect::<Result<_, _>>()?,
        ),
        Datatype::F16 => WireData::F16(
            flat.iter()
                .enumerate()
                .map(|(i, x)| number(i, x).map(f16::from_f64))
                .collect::<Result<_, _>>()?,
        ),
        Datatype::I64 | Datatype::I32 => WireData::I64(
            flat.iter()
                .enumerate()
                .map(|(i, x)| integer(i, x))
                .collect::<Result<_, _>>()?,
        ),
        Datatype::U8 => WireData::U8(
            flat.iter()
                .enumerate()
                .map(|(i, x)| {
                    integer(i, x)
                        .ok()
                        .and_then(|v| u8::try_from(v).ok())
                        .ok_or_else(|| bad(i, "an integer in 0..=255"))
                })
                .collect::<Result<_, _>>()?,
        ),
        Datatype::Bytes => WireData::Bytes(
            flat.into_iter()
                .enumerate()
                .map(|(i, x)| match x {
                    Json::String(s) => Ok(s.into_bytes()),
                    _ => Err(bad(i, "a string")),
                })
                .collect::<Result<_, _>>()?,
        ),
    })
}

/// One output in the response document.
#[derive(Debug, Serialize)]
struct ResponseOutput {
    name: String,
    datatype: &'static str,
    shape: Vec<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parameters: Option<BTreeMap<String, Json>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Json>,
}

#[derive(Debug, Serialize)]
struct InferResponse {
    model_name: String,
    model_version: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<String>,
    outputs: Vec<ResponseOutput>,
}

/// An encoded response: the body, and the JSON header's length where binary data follows it.
pub struct EncodedResponse {
    pub body: Vec<u8>,
    pub header_length: Option<usize>,
}

/// Encodes outputs; `binary(name)` says which go as binary data after the JSON header.
pub fn encode_response(
    model: &str,
    id: Option<String>,
    outputs: Vec<WireTensor>,
    binary: impl Fn(&str) -> bool,
) -> Result<EncodedResponse, ApiError> {
    let mut blobs = Vec::new();
    let mut doc = InferResponse {
        model_name: model.into(),
        model_version: MODEL_VERSION,
        id,
        outputs: Vec::with_capacity(outputs.len()),
    };
    for t in outputs {
        let datatype = t.data.datatype();
        let (parameters, data) = if binary(&t.name) {
            let b = t.data.to_bytes();
            let p = BTreeMap::from([("binary_data_size".to_string(), Json::from(b.len()))]);
            blobs.push(b);
            (Some(p), None)
        } else {
            (None, Some(t.data.to_json()))
        };
        doc.outputs.push(ResponseOutput {
            name: t.name,
            datatype,
            shape: t.shape,
            parameters,
            data,
        });
    }
    let mut body = serde_json::to_vec(&doc)
        .map_err(|e| ApiError::internal(format!("encoding the response: {e}")))?;
    if blobs.is_empty() {
        return Ok(EncodedResponse {
            body,
            header_length: None,
        });
    }
    let header_length = body.len();
    for b in blobs {
        body.extend_from_slice(&b);
    }
    Ok(EncodedResponse {
        body,
        header_length: Some(header_length),
    })
}

/// Every model has one version.
pub const MODEL_VERSION: &str = "1";

/// `GET /v2/models/{name}`.
#[derive(Debug, Serialize)]
pub struct ModelMetadata {
    pub name: String,
    pub versions: Vec<&'static str>,
    pub platform: &'static str,
    pub inputs: Vec<TensorMetadata>,
    pub outputs: Vec<TensorMetadata>,
}

/// A tensor's name, datatype and shape (`-1` where a dimension varies).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TensorMetadata {
    pub name: String,
    pub datatype: &'static str,
    pub shape: Vec<i64>,
}

/// `GET /v2`.
#[derive(Debug, Serialize)]
pub struct ServerMetadata {
    pub name: &'static str,
    pub version: &'static str,
    pub extensions: Vec<&'static str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn binary_request(json: &str, blobs: &[&[u8]]) -> (HeaderMap, Vec<u8>) {
        let mut h = HeaderMap::new();
        h.insert(HEADER_LENGTH, HeaderValue::from(json.len()));
        let mut body = json.as_bytes().to_vec();
        for b in blobs {
            body.extend_from_slice(b);
        }
        (h, body)
    }

    #[test]
    fn json_inputs_flatten_nested_arrays() {
        let body =
            br#"{"inputs":[{"name":"x","shape":[2,2],"datatype":"FP32","data":[[1,2],[3,4.5]]}]}"#;
        let (_, t) = parse_infer(&HeaderMap::new(), body).unwrap();
        assert_eq!(t[0].data, WireData::F32(vec![1.0, 2.0, 3.0, 4.5]));
        assert_eq!(t[0].shape, vec![2, 2]);
    }

    #[test]
    fn binary_inputs_are_sliced_in_order() {
        let a: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let mut s = Vec::new();
        for e in [&b"png"[..], &b""[..]] {
            s.extend_from_slice(&(e.len() as u32).to_le_bytes());
            s.extend_from_slice(e);
        }
        let json = format!(
            r#"{{"inputs":[{{"name":"a","shape":[2],"datatype":"FP32","parameters":{{"binary_data_size":{}}}}},
               {{"name":"s","shape":[2],"datatype":"BYTES","parameters":{{"binary_data_size":{}}}}}]}}"#,
            a.len(),
            s.len()
        );
        let (h, body) = binary_request(&json, &[&a, &s]);
        let (_, t) = parse_infer(&h, &body).unwrap();
        assert_eq!(t[0].data, WireData::F32(vec![1.5, -2.0]));
        assert_eq!(
            t[1].data,
            WireData::Bytes(vec![b"png".to_vec(), Vec::new()])
        );
    }

    #[test]
    fn bad_requests_name_the_problem() {
        let e = |body: &[u8]| parse_infer(&HeaderMap::new(), body).unwrap_err();
        assert!(e(b"{not json").message.contains("malformed JSON"));
        let m = e(br#"{"inputs":[{"name":"x","shape":[3],"datatype":"FP32","data":[1,2]}]}"#);
        assert!(
            m.message.contains("holds 3 elements, the data has 2"),
            "{m}"
        );
        let m = e(br#"{"inputs":[{"name":"x","shape":[1],"datatype":"BF16","data":[1]}]}"#);
        assert!(m.message.contains("`BF16` is not supported"), "{m}");
        let m = e(br#"{"inputs":[{"name":"x","shape":[-1],"datatype":"FP32","data":[1]}]}"#);
        assert!(m.message.contains("negative"), "{m}");
        let (h, body) = binary_request(
            r#"{"inputs":[{"name":"x","shape":[1],"datatype":"FP32","parameters":{"binary_data_size":8}}]}"#,
            &[&[0; 4]],
        );
        let m = parse_infer(&h, &body).unwrap_err();
        assert!(m.message.contains("only 4 bytes"), "{m}");
        let (h, body) = binary_request(
            r#"{"inputs":[{"name":"s","shape":[1],"datatype":"BYTES","parameters":{"binary_data_size":6}}]}"#,
            &[&[9, 0, 0, 0, 1, 2]],
        );
        let m = parse_infer(&h, &body).unwrap_err();
        assert!(m.message.contains("cut short"), "{m}");
    }

    #[test]
    fn responses_put_binary_outputs_after_the_header() {
        let outs = vec![
            WireTensor {
                name: "y".into(),
                shape: vec![2],
                data: WireData::F32(vec![0.25, 1.0]),
            },
            WireTensor {
                name: "t".into(),
                shape: vec![1],
                data: WireData::Bytes(vec![b"hi".to_vec()]),
            },
        ];
        let r = encode_response("m", Some("7".into()), outs, |n| n == "y").unwrap();
        let n = r.header_length.unwrap();
        let doc: Json = serde_json::from_slice(&r.body[..n]).unwrap();
        assert_eq!(doc["outputs"][0]["parameters"]["binary_data_size"], 8);
        assert_eq!(doc["outputs"][1]["data"][0], "hi");
        assert_eq!(doc["id"], "7");
        assert_eq!(&r.body[n..n + 4], &0.25f32.to_le_bytes());
    }
}
