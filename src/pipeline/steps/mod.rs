//! Built-in pipeline steps, grouped by medium, and the one function that runs a step of the
//! checked graph on its input values. Model runs are not here: the executor hands them to the
//! engine.
pub mod audio;
pub mod image;
pub mod ocr;
pub mod text;

use super::graph::StepKind;
use super::value::{TensorError, Value};

/// Why a built-in step failed on the values it was given.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Ocr(#[from] crate::ops::OcrError),
    #[error(transparent)]
    Tensor(#[from] TensorError),
    #[error(transparent)]
    Audio(#[from] audio::AudioStepError),
    #[error(transparent)]
    Text(#[from] text::TextStepError),
}

fn wrong(what: &str, v: &Value) -> StepError {
    StepError::Invalid(format!("expected {what}, got {}", v.value_type()))
}

/// Runs the built-in step `kind` on `reads` (in the graph's read order); returns its writes.
pub fn run_builtin(kind: &StepKind, reads: &[&Value]) -> Result<Vec<Value>, StepError> {
    let arg = |i: usize| {
        reads
            .get(i)
            .copied()
            .ok_or_else(|| StepError::Invalid(format!("missing input {i}")))
    };
    let list = |i: usize| -> Result<&[Value], StepError> {
        let v = arg(i)?;
        v.as_list().ok_or_else(|| wrong("a list", v))
    };
    Ok(match kind {
        StepKind::ImageLoad => match arg(0)? {
            v @ Value::Image(_) => vec![v.clone()],
            v => return Err(wrong("an image", v)),
        },
        StepKind::Normalize { resize, mean, std } => match arg(0)? {
            Value::Image(img) => vec![Value::Tensor(image::normalize(img, *resize, *mean, *std)?)],
            v => return Err(wrong("an image", v)),
        },
        StepKind::OcrBoxes(params) => match arg(0)? {
            Value::Tensor(t) => vec![Value::Boxes(ocr::ocr_boxes(t, params)?)],
            v => return Err(wrong("a tensor", v)),
        },
        StepKind::CropRotate => match (arg(0)?, arg(1)?) {
            (Value::Image(img), Value::Boxes(b)) => vec![Value::List(ocr::crop_rotate(img, b)?)],
            _ => return Err(StepError::Invalid("expected an image and boxes".into())),
        },
        StepKind::TextlineTensors {
            kind,
            height,
            width,
            batch,
        } => vec![Value::List(ocr::textline_tensors(
            list(0)?,
            *kind,
            *height,
            *width,
            *batch,
        )?)],
        StepKind::AngleFix { thresh } => {
            vec![Value::List(ocr::angle_fix(list(0)?, list(1)?, *thresh)?)]
        }
        StepKind::CtcDecode {
            decoder,
            text_score,
        } => {
            let boxes = match reads.get(1) {
                Some(Value::Boxes(b)) => Some(b),
                Some(v) => return Err(wrong("boxes", v)),
                None => None,
            };
            vec![Value::TextLines(ocr::ctc_decode(
                list(0)?,
                boxes,
                decoder,
                *text_score,
            )?)]
        }
        StepKind::AudioLoad => match arg(0)? {
            Value::Audio(a) => vec![Value::Audio(audio::audio_load(a)?)],
            v => return Err(wrong("audio", v)),
        },
        StepKind::Resample { to_hz } => match arg(0)? {
            Value::Audio(a) => vec![Value::Audio(audio::resample(a, *to_hz)?)],
            v => return Err(wrong("audio", v)),
        },
        StepKind::LogMel { n_mels } => match arg(0)? {
            Value::Audio(a) => vec![Value::Tensor(audio::log_mel(a, *n_mels)?)],
            v => return Err(wrong("audio", v)),
        },
        StepKind::VadSegments { chunk, rules } => match (arg(0)?, arg(1)?) {
            (Value::Tensor(p), Value::Audio(a)) => audio::vad_segments(p, a, *chunk, rules)?,
            _ => return Err(StepError::Invalid("expected a tensor and audio".into())),
        },
        StepKind::Tokenize {
            tokenizer,
            add_special_tokens,
        } => match arg(0)? {
            Value::Text(t) => vec![Value::Tokens(tokenizer.encode(t, *add_special_tokens)?)],
            v => return Err(wrong("text", v)),
        },
        StepKind::Detokenize {
            tokenizer,
            skip_special_tokens,
        } => match arg(0)? {
            Value::Tokens(ids) => vec![Value::Text(tokenizer.decode(ids, *skip_special_tokens)?)],
            v => return Err(wrong("token ids", v)),
        },
        StepKind::ChatTemplate { system, format } => match arg(0)? {
            Value::Text(t) => vec![Value::Text(text::chat_prompt(
                *format,
                system.as_deref(),
                t,
            ))],
            v => return Err(wrong("text", v)),
        },
        StepKind::Tokens(ids) => vec![Value::Tokens(ids.clone())],
        StepKind::Run { .. } | StepKind::StreamChunks(_) | StepKind::Generate { .. } => {
            return Err(StepError::Invalid(
                "a model run is not a built-in step".into(),
            ))
        }
    })
}
