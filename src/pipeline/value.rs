//! The typed values that flow between pipeline steps and through the engine's API: tensors
//! (shape plus f32, f16 or i64 data), images, audio, text, token ids, detected text boxes,
//! recognized text lines, and lists of these.
use std::fmt;
use std::sync::Arc;

use half::f16;

use crate::ops::{BgrImage, DetBox, TextLine};

/// The element data of a [`Tensor`].
#[derive(Clone, Debug)]
pub enum TensorData {
    F32(Vec<f32>),
    F16(Vec<f16>),
    I64(Vec<i64>),
}

impl TensorData {
    pub fn len(&self) -> usize {
        match self {
            TensorData::F32(v) => v.len(),
            TensorData::F16(v) => v.len(),
            TensorData::I64(v) => v.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The element type's name as the KServe protocol spells it (`FP32`, `FP16`, `INT64`).
    pub fn datatype(&self) -> &'static str {
        match self {
            TensorData::F32(_) => "FP32",
            TensorData::F16(_) => "FP16",
            TensorData::I64(_) => "INT64",
        }
    }
}

/// A dense row-major tensor. Model runs read and write f32 on the device; f16 and i64 inputs are
/// converted on the way in (i64 exactly up to 2^24 in magnitude, beyond that it is an error).
#[derive(Clone)]
pub struct Tensor {
    shape: Vec<usize>,
    data: TensorData,
    /// Where the tensor's pixels came from, when a step derived it from an image (the OCR
    /// detector's input and output): lets box extraction map back to the image.
    frame: Option<Arc<Frame>>,
    /// Names these values: a tensor never changes after it is made, so two tensors with one id
    /// (one is a clone of the other) hold the same values ([`Tensor::content_id`]).
    id: u64,
}

/// Shape, values and frame: the id names this process's copy of the values, not the values, so
/// two runs that compute the same tensor print it alike.
impl std::fmt::Debug for Tensor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tensor")
            .field("shape", &self.shape)
            .field("data", &self.data)
            .field("frame", &self.frame)
            .finish_non_exhaustive()
    }
}

/// The next [`Tensor::content_id`].
static NEXT_TENSOR_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// Errors building a tensor from caller data.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TensorError {
    #[error("shape {shape:?} holds {expected} values, the data has {got}")]
    Length {
        shape: Vec<usize>,
        expected: String,
        got: usize,
    },
    #[error("i64 value {0} cannot be represented exactly on the device (|v| > 2^24)")]
    IntegerRange(i64),
}

impl Tensor {
    /// A tensor of `shape` over `data`; the element counts must agree.
    pub fn new(shape: Vec<usize>, data: TensorData) -> Result<Tensor, TensorError> {
        let n = shape.iter().try_fold(1usize, |a, &d| a.checked_mul(d));
        if n != Some(data.len()) {
            return Err(TensorError::Length {
                expected: n.map_or("more than 2^64".into(), |n| n.to_string()),
                shape,
                got: data.len(),
            });
        }
        Ok(Tensor {
            shape,
            data,
            frame: None,
            id: NEXT_TENSOR_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        })
    }

    /// An id that names these values: equal for a tensor and its clones, different for any
    /// tensor made apart (even with equal values). Lets a model run skip uploading an input it
    /// uploaded last time.
    pub fn content_id(&self) -> u64 {
        self.id
    }

    /// An f32 tensor.
    pub fn f32(shape: Vec<usize>, data: Vec<f32>) -> Result<Tensor, TensorError> {
        Tensor::new(shape, TensorData::F32(data))
    }

    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    pub fn data(&self) -> &TensorData {
        &self.data
    }

    /// The values as f32, borrowed when they are f32 already (an upload reads them once).
    pub fn f32_values(&self) -> Result<std::borrow::Cow<'_, [f32]>, TensorError> {
        match &self.data {
            TensorData::F32(v) => Ok(std::borrow::Cow::Borrowed(v)),
            _ => self.to_f32().map(std::borrow::Cow::Owned),
        }
    }

    /// The values as f32 (converted from f16 or i64).
    pub fn to_f32(&self) -> Result<Vec<f32>, TensorError> {
        Ok(match &self.data {
            TensorData::F32(v) => v.clone(),
            TensorData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
            TensorData::I64(v) => v
                .iter()
                .map(|&x| {
                    if x.unsigned_abs() > 1 << 24 {
                        Err(TensorError::IntegerRange(x))
                    } else {
                        Ok(x as f32)
                    }
                })
                .collect::<Result<_, _>>()?,
        })
    }

    /// The f32 values without a copy, where the tensor holds f32.
    pub fn as_f32(&self) -> Option<&[f32]> {
        match &self.data {
            TensorData::F32(v) => Some(v),
            _ => None,
        }
    }

    pub(crate) fn frame(&self) -> Option<&Arc<Frame>> {
        self.frame.as_ref()
    }

    pub(crate) fn with_frame(mut self, frame: Option<Arc<Frame>>) -> Tensor {
        self.frame = frame;
        self
    }

    /// Same shape and the same bits in every element (what "bit-identical outputs" means).
    pub fn bit_eq(&self, other: &Tensor) -> bool {
        self.shape == other.shape
            && match (&self.data, &other.data) {
                (TensorData::F32(a), TensorData::F32(b)) => {
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                }
                (TensorData::F16(a), TensorData::F16(b)) => {
                    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
                }
                (TensorData::I64(a), TensorData::I64(b)) => a == b,
                _ => false,
            }
    }
}

/// The geometry of an image's detector preprocessing (RapidOCR's bounded resize and vertical
/// padding): the padded image the boxes are found on, and how its coordinates map back.
#[derive(Debug)]
pub(crate) struct Frame {
    /// The original image's width and height.
    pub original: (usize, usize),
    /// The bounded, padded image that detector coordinates refer to (crops are cut from it).
    pub padded: BgrImage,
    /// Rows of padding added on top.
    pub pad_top: usize,
    /// Original size over bounded size, per axis.
    pub ratio_h: f64,
    pub ratio_w: f64,
    /// The detector preprocessing's tensor height and width (before any resize to the model).
    pub det_hw: (usize, usize),
}

/// An 8-bit colour image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Image(Arc<BgrImage>);

impl Image {
    /// Decodes PNG or JPEG bytes (RapidOCR's channel conversions; bounded in size, see
    /// [`crate::ops::decode_image`]).
    pub fn decode(bytes: &[u8]) -> Result<Image, crate::ops::OcrError> {
        Ok(Image(Arc::new(crate::ops::decode_image(bytes, "image")?)))
    }

    /// From packed RGB8 pixels, row-major.
    pub fn from_rgb8(
        width: usize,
        height: usize,
        rgb: &[u8],
    ) -> Result<Image, crate::ops::OcrError> {
        Ok(Image(Arc::new(BgrImage::from_rgb(width, height, rgb)?)))
    }

    pub(crate) fn from_bgr(img: BgrImage) -> Image {
        Image(Arc::new(img))
    }

    pub(crate) fn bgr(&self) -> &BgrImage {
        &self.0
    }

    pub fn width(&self) -> usize {
        self.0.width
    }

    pub fn height(&self) -> usize {
        self.0.height
    }

    /// The pixels as packed RGB8.
    pub fn to_rgb8(&self) -> Vec<u8> {
        self.0
            .data
            .chunks_exact(3)
            .flat_map(|p| [p[2], p[1], p[0]])
            .collect()
    }
}

/// Mono audio: f32 samples in [-1, 1] and their rate.
#[derive(Clone, Debug, PartialEq)]
pub struct Audio {
    pub samples: Arc<Vec<f32>>,
    pub sample_rate: u32,
}

/// Why bytes are not a WAV file the engine takes.
#[derive(Debug, thiserror::Error)]
pub enum AudioError {
    #[error("WAV: {0}")]
    Wav(#[from] hound::Error),
    #[error("WAV: {samples} samples, more than {max}")]
    TooLong { samples: u32, max: u32 },
}

/// Largest WAV accepted, in samples (an hour of 48 kHz stereo), so a forged header cannot
/// make the decoder allocate without bound.
pub const MAX_WAV_SAMPLES: u32 = 48_000 * 3600 * 2;

impl Audio {
    /// A WAV file's samples as mono f32 in [-1, 1] (channels averaged), decoded by `hound`.
    pub fn decode_wav(bytes: &[u8]) -> Result<Audio, AudioError> {
        let mut r = hound::WavReader::new(std::io::Cursor::new(bytes))?;
        let spec = r.spec();
        if r.len() > MAX_WAV_SAMPLES {
            return Err(AudioError::TooLong {
                samples: r.len(),
                max: MAX_WAV_SAMPLES,
            });
        }
        let samples: Vec<f32> = match spec.sample_format {
            hound::SampleFormat::Float => r.samples::<f32>().collect::<Result<_, _>>()?,
            hound::SampleFormat::Int => {
                let scale = 1.0 / (1u64 << (spec.bits_per_sample.clamp(1, 32) - 1)) as f32;
                r.samples::<i32>()
                    .map(|s| s.map(|s| s as f32 * scale))
                    .collect::<Result<_, _>>()?
            }
        };
        let ch = spec.channels.max(1) as usize;
        let mono = samples
            .chunks(ch)
            .map(|c| c.iter().sum::<f32>() / c.len() as f32)
            .collect();
        Ok(Audio {
            samples: Arc::new(mono),
            sample_rate: spec.sample_rate,
        })
    }
}

/// Text boxes found on one image, in reading order, with the frame they refer to.
#[derive(Clone, Debug)]
pub struct Boxes {
    pub(crate) boxes: Vec<DetBox>,
    pub(crate) frame: Arc<Frame>,
}

impl Boxes {
    pub fn len(&self) -> usize {
        self.boxes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.boxes.is_empty()
    }

    /// Each box's corners in original-image pixels (top-left, top-right, bottom-right,
    /// bottom-left), clipped to the image.
    pub fn points(&self) -> Vec<[[f32; 2]; 4]> {
        self.boxes
            .iter()
            .map(|b| self.frame.to_original(&b.points))
            .collect()
    }
}

impl Frame {
    /// Detector-image points → original-image points: undo the padding, then the bounds
    /// resize; clip.
    pub fn to_original(&self, pts: &[[f32; 2]; 4]) -> [[f32; 2]; 4] {
        let (ow, oh) = (self.original.0 as f32, self.original.1 as f32);
        pts.map(|p| {
            let x = (p[0] * self.ratio_w as f32).max(0.0).min(ow);
            let y = ((p[1] - self.pad_top as f32) * self.ratio_h as f32)
                .max(0.0)
                .min(oh);
            [x, y]
        })
    }
}

/// A value of a pipeline.
#[derive(Clone, Debug)]
pub enum Value {
    Tensor(Tensor),
    Image(Image),
    Audio(Audio),
    Text(String),
    /// Token ids of a tokenizer's vocabulary (what `Tokenize` writes and a text model reads).
    Tokens(Vec<u32>),
    Boxes(Boxes),
    /// Recognized text lines: text, score and box (original-image pixels).
    TextLines(Vec<TextLine>),
    List(Vec<Value>),
}

impl Value {
    /// The value's type; a list's element type is its first element's (an empty list is a
    /// list of anything).
    pub fn value_type(&self) -> ValueType {
        match self {
            Value::Tensor(_) => ValueType::Tensor,
            Value::Image(_) => ValueType::Image,
            Value::Audio(_) => ValueType::Audio,
            Value::Text(_) => ValueType::Text,
            Value::Tokens(_) => ValueType::Tokens,
            Value::Boxes(_) => ValueType::Boxes,
            Value::TextLines(_) => ValueType::TextLines,
            Value::List(v) => ValueType::List(Box::new(
                v.first().map_or(ValueType::Any, Value::value_type),
            )),
        }
    }

    /// Whether two values are the same, bit for bit (tensors) or exactly (everything else).
    pub fn bit_eq(&self, other: &Value) -> bool {
        match (self, other) {
            (Value::Tensor(a), Value::Tensor(b)) => a.bit_eq(b),
            (Value::Image(a), Value::Image(b)) => a == b,
            (Value::Audio(a), Value::Audio(b)) => a == b,
            (Value::Text(a), Value::Text(b)) => a == b,
            (Value::Tokens(a), Value::Tokens(b)) => a == b,
            (Value::Boxes(a), Value::Boxes(b)) => a.points() == b.points(),
            (Value::TextLines(a), Value::TextLines(b)) => a == b,
            (Value::List(a), Value::List(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.bit_eq(y))
            }
            _ => false,
        }
    }

    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    pub fn as_list(&self) -> Option<&[Value]> {
        match self {
            Value::List(v) => Some(v),
            _ => None,
        }
    }
}

/// The static type of a pipeline value, checked before anything runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueType {
    Tensor,
    Image,
    Audio,
    Text,
    /// Token ids ([`Value::Tokens`]).
    Tokens,
    Boxes,
    TextLines,
    List(Box<ValueType>),
    /// Only as the element type of an empty list.
    Any,
}

impl ValueType {
    pub fn list_of(t: ValueType) -> ValueType {
        ValueType::List(Box::new(t))
    }

    /// Whether a value of type `self` may be given where `want` is expected.
    pub fn fits(&self, want: &ValueType) -> bool {
        match (self, want) {
            (_, ValueType::Any) | (ValueType::Any, _) => true,
            (ValueType::List(a), ValueType::List(b)) => a.fits(b),
            (a, b) => a == b,
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueType::Tensor => f.write_str("tensor"),
            ValueType::Image => f.write_str("image"),
            ValueType::Audio => f.write_str("audio"),
            ValueType::Text => f.write_str("text"),
            ValueType::Tokens => f.write_str("token ids"),
            ValueType::Boxes => f.write_str("boxes"),
            ValueType::TextLines => f.write_str("text lines"),
            ValueType::List(t) => write!(f, "list of {t}"),
            ValueType::Any => f.write_str("anything"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tensor_lengths_are_checked_without_overflow() {
        assert!(Tensor::f32(vec![2, 3], vec![0.0; 6]).is_ok());
        let e = Tensor::f32(vec![2, 3], vec![0.0; 5]).unwrap_err();
        assert!(e.to_string().contains("6 values"), "{e}");
        let e = Tensor::f32(vec![usize::MAX, 2], vec![]).unwrap_err();
        assert!(e.to_string().contains("more than 2^64"), "{e}");
    }

    #[test]
    fn integers_convert_exactly_or_fail() {
        let t = Tensor::new(vec![2], TensorData::I64(vec![-7, 1 << 24])).unwrap();
        assert_eq!(t.to_f32().unwrap(), vec![-7.0, 16777216.0]);
        let t = Tensor::new(vec![1], TensorData::I64(vec![(1 << 24) + 1])).unwrap();
        assert!(t.to_f32().is_err());
    }

    #[test]
    fn list_types_fit_by_element() {
        let l = ValueType::list_of(ValueType::Tensor);
        assert!(l.fits(&ValueType::list_of(ValueType::Tensor)));
        assert!(!l.fits(&ValueType::Tensor));
        assert!(ValueType::list_of(ValueType::Any).fits(&l));
        assert_eq!(l.to_string(), "list of tensor");
    }
}
