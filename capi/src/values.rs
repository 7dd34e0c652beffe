//! `TsValues`: named values in or out of a request, built by the caller with the setters and
//! read with the readers. Strings and shapes the readers hand out point into the `TsValues`
//! and stay valid until it is changed or freed, so each entry keeps C copies of its name and
//! texts beside the value.
use std::collections::BTreeMap;
use std::ffi::{c_char, CString};
use std::sync::Arc;

use texstream::ops::TextLine;
use texstream::{Audio, Image, Tensor, Value, Values};

use crate::boundary::{
    c_string_lossy, call, call_void, mut_arg, ref_arg, slice_arg, slice_out, str_arg, write_out,
};
use crate::status::{CapiError, TsStatus};

/// What kind of value an entry holds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TsValueKind {
    /// A dense row-major tensor (read as f32).
    Tensor = 0,
    /// An 8-bit colour image.
    Image = 1,
    /// Mono f32 audio with its sample rate.
    Audio = 2,
    /// A UTF-8 string.
    Text = 3,
    /// Text boxes found on an image (no reader yet).
    Boxes = 4,
    /// Recognized text lines: text, score and box corners.
    TextLines = 5,
    /// A list of values (no reader yet).
    List = 6,
    /// Token ids of a tokenizer's vocabulary (u32 each).
    Tokens = 7,
}

/// Named values (an opaque handle). Not thread-safe: one thread at a time may use a
/// `TsValues`, or several may read it while none changes it.
pub struct TsValues {
    entries: BTreeMap<String, Entry>,
}

struct Entry {
    c_name: CString,
    value: Value,
    /// C copies of the value's strings: a text's, or each text line's, in order.
    c_texts: Vec<CString>,
}

impl Entry {
    fn new(name: &str, value: Value) -> Entry {
        let c_texts = match &value {
            Value::Text(t) => vec![c_string_lossy(t)],
            Value::TextLines(lines) => lines.iter().map(|l| c_string_lossy(&l.text)).collect(),
            _ => Vec::new(),
        };
        Entry {
            c_name: c_string_lossy(name),
            value,
            c_texts,
        }
    }
}

impl TsValues {
    /// Takes a request's inputs or outputs.
    pub fn from_values(values: Values) -> TsValues {
        TsValues {
            entries: values
                .into_iter()
                .map(|(k, v)| {
                    let e = Entry::new(&k, v);
                    (k, e)
                })
                .collect(),
        }
    }

    /// A copy of the values, to submit (the caller keeps its `TsValues`).
    pub fn to_values(&self) -> Values {
        self.entries
            .iter()
            .map(|(k, e)| (k.clone(), e.value.clone()))
            .collect()
    }

    fn insert(&mut self, name: &str, value: Value) {
        self.entries
            .insert(name.to_string(), Entry::new(name, value));
    }

    fn entry(&self, name: &str) -> Result<&Entry, CapiError> {
        self.entries.get(name).ok_or_else(|| CapiError::NotFound {
            name: name.into(),
            known: if self.entries.is_empty() {
                "none".into()
            } else {
                self.entries
                    .keys()
                    .map(|k| format!("`{k}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            },
        })
    }

    fn tensor(&self, name: &str) -> Result<&Tensor, CapiError> {
        match &self.entry(name)?.value {
            Value::Tensor(t) => Ok(t),
            v => Err(wrong_kind(name, v, "a tensor")),
        }
    }

    fn image(&self, name: &str) -> Result<&Image, CapiError> {
        match &self.entry(name)?.value {
            Value::Image(i) => Ok(i),
            v => Err(wrong_kind(name, v, "an image")),
        }
    }

    fn tokens(&self, name: &str) -> Result<&[u32], CapiError> {
        match &self.entry(name)?.value {
            Value::Tokens(ids) => Ok(ids),
            v => Err(wrong_kind(name, v, "token ids")),
        }
    }

    /// The text lines of `name` and their C strings.
    fn text_lines(&self, name: &str) -> Result<(&[TextLine], &[CString]), CapiError> {
        let e = self.entry(name)?;
        match &e.value {
            Value::TextLines(lines) => Ok((lines, &e.c_texts)),
            v => Err(wrong_kind(name, v, "text lines")),
        }
    }

    fn text_line(&self, name: &str, index: usize) -> Result<(&TextLine, &CString), CapiError> {
        let (lines, texts) = self.text_lines(name)?;
        match (lines.get(index), texts.get(index)) {
            (Some(l), Some(t)) => Ok((l, t)),
            _ => Err(CapiError::Invalid(format!(
                "text line {index} of `{name}`: it has {} lines",
                lines.len()
            ))),
        }
    }
}

fn wrong_kind(name: &str, v: &Value, wanted: &'static str) -> CapiError {
    CapiError::WrongKind {
        name: name.into(),
        actual: v.value_type().to_string(),
        wanted,
    }
}

fn kind_of(v: &Value) -> TsValueKind {
    match v {
        Value::Tensor(_) => TsValueKind::Tensor,
        Value::Image(_) => TsValueKind::Image,
        Value::Audio(_) => TsValueKind::Audio,
        Value::Text(_) => TsValueKind::Text,
        Value::Boxes(_) => TsValueKind::Boxes,
        Value::TextLines(_) => TsValueKind::TextLines,
        Value::List(_) => TsValueKind::List,
        Value::Tokens(_) => TsValueKind::Tokens,
    }
}

/// Creates an empty `TsValues` in `*out`. The caller owns it and frees it with
/// `ts_values_free`.
///
/// # Safety
/// `out` is NULL or points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_values_new(out: *mut *mut TsValues) -> TsStatus {
    call("ts_values_new", || {
        let v = Box::into_raw(Box::new(TsValues::from_values(Values::new())));
        write_out(out, "out", v).inspect_err(|_| drop(Box::from_raw(v)))
    })
}

/// Frees a `TsValues` (from `ts_values_new` or `ts_request_wait`); NULL is ignored. Pointers
/// the readers returned into it become invalid.
///
/// # Safety
/// `values` is NULL or a live `TsValues` that is not used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ts_values_free(values: *mut TsValues) {
    call_void("ts_values_free", || {
        if !values.is_null() {
            drop(Box::from_raw(values));
        }
    })
}

/// Sets `name` to an f32 tensor of `rank` dimensions `shape[0..rank]` (row-major) holding
/// `len` values copied from `data`; `len` must be the product of the dimensions. A value of
/// the same name is replaced. `shape` may be NULL when `rank` is 0, `data` when `len` is 0.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `shape` and `data` are
/// NULL or point to `rank` and `len` elements.
#[no_mangle]
pub unsafe extern "C" fn ts_values_set_tensor_f32(
    values: *mut TsValues,
    name: *const c_char,
    shape: *const usize,
    rank: usize,
    data: *const f32,
    len: usize,
) -> TsStatus {
    call("ts_values_set_tensor_f32", || {
        let values = mut_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let shape = slice_arg(shape, rank, "shape")?.to_vec();
        let data = slice_arg(data, len, "data")?.to_vec();
        let t = Tensor::f32(shape, data)
            .map_err(|e| CapiError::Invalid(format!("tensor `{name}`: {e}")))?;
        values.insert(name, Value::Tensor(t));
        Ok(())
    })
}

/// Sets `name` to an image decoded from the `len` bytes of a PNG or JPEG file at `bytes`
/// (copied; decoded here, so a broken file fails this call).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `bytes` points to `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn ts_values_set_image_encoded(
    values: *mut TsValues,
    name: *const c_char,
    bytes: *const u8,
    len: usize,
) -> TsStatus {
    call("ts_values_set_image_encoded", || {
        let values = mut_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let bytes = slice_arg(bytes, len, "bytes")?;
        let img =
            Image::decode(bytes).map_err(|e| CapiError::Invalid(format!("image `{name}`: {e}")))?;
        values.insert(name, Value::Image(img));
        Ok(())
    })
}

/// Sets `name` to a `width` × `height` image from packed RGB8 pixels, row-major, no row
/// padding: `len` = width · height · 3 bytes at `rgb` (copied).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `rgb` points to `len`
/// bytes.
#[no_mangle]
pub unsafe extern "C" fn ts_values_set_image_rgb8(
    values: *mut TsValues,
    name: *const c_char,
    width: usize,
    height: usize,
    rgb: *const u8,
    len: usize,
) -> TsStatus {
    call("ts_values_set_image_rgb8", || {
        let values = mut_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let want = width.checked_mul(height).and_then(|n| n.checked_mul(3));
        if want != Some(len) {
            return Err(CapiError::Invalid(format!(
                "image `{name}`: {width}x{height} RGB8 takes {} bytes, `len` is {len}",
                want.map_or("more than 2^64".into(), |n| n.to_string())
            )));
        }
        let rgb = slice_arg(rgb, len, "rgb")?;
        let img = Image::from_rgb8(width, height, rgb)
            .map_err(|e| CapiError::Invalid(format!("image `{name}`: {e}")))?;
        values.insert(name, Value::Image(img));
        Ok(())
    })
}

/// Sets `name` to mono audio: `len` f32 samples in [-1, 1] at `sample_rate` Hz (copied).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `samples` points to `len`
/// floats.
#[no_mangle]
pub unsafe extern "C" fn ts_values_set_audio_f32(
    values: *mut TsValues,
    name: *const c_char,
    samples: *const f32,
    len: usize,
    sample_rate: u32,
) -> TsStatus {
    call("ts_values_set_audio_f32", || {
        let values = mut_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let samples = slice_arg(samples, len, "samples")?.to_vec();
        if sample_rate == 0 {
            return Err(CapiError::Invalid(format!(
                "audio `{name}`: the sample rate is 0"
            )));
        }
        let audio = Audio {
            samples: Arc::new(samples),
            sample_rate,
        };
        values.insert(name, Value::Audio(audio));
        Ok(())
    })
}

/// Sets `name` to a copy of the UTF-8 string `text`.
///
/// # Safety
/// `values` is a live `TsValues`; `name` and `text` are NUL-terminated strings.
#[no_mangle]
pub unsafe extern "C" fn ts_values_set_text(
    values: *mut TsValues,
    name: *const c_char,
    text: *const c_char,
) -> TsStatus {
    call("ts_values_set_text", || {
        let values = mut_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let text = str_arg(text, "text")?;
        values.insert(name, Value::Text(text.into()));
        Ok(())
    })
}

/// Sets `name` to the `len` token ids at `ids` (copied). `ids` may be NULL when `len` is 0.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `ids` is NULL or points to
/// `len` elements.
#[no_mangle]
pub unsafe extern "C" fn ts_values_set_tokens(
    values: *mut TsValues,
    name: *const c_char,
    ids: *const u32,
    len: usize,
) -> TsStatus {
    call("ts_values_set_tokens", || {
        let values = mut_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let ids = slice_arg(ids, len, "ids")?.to_vec();
        values.insert(name, Value::Tokens(ids));
        Ok(())
    })
}

/// The number of values in `*count`.
///
/// # Safety
/// `values` is a live `TsValues`; `count` points to writable memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_count(values: *const TsValues, count: *mut usize) -> TsStatus {
    call("ts_values_count", || {
        let values = ref_arg(values, "values")?;
        write_out(count, "count", values.entries.len())
    })
}

/// The name of value `index` (0 ≤ index < count, in byte order of the names) in `*name`:
/// owned by `values`, valid until it is changed or freed.
///
/// # Safety
/// `values` is a live `TsValues`; `name` points to writable memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_values_name(
    values: *const TsValues,
    index: usize,
    name: *mut *const c_char,
) -> TsStatus {
    call("ts_values_name", || {
        let values = ref_arg(values, "values")?;
        let e = values.entries.values().nth(index).ok_or_else(|| {
            CapiError::Invalid(format!(
                "index {index}: there are {} values",
                values.entries.len()
            ))
        })?;
        write_out(name, "name", e.c_name.as_ptr())
    })
}

/// The kind of value `name` in `*kind`.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `kind` points to writable
/// memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_kind(
    values: *const TsValues,
    name: *const c_char,
    kind: *mut TsValueKind,
) -> TsStatus {
    call("ts_values_kind", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        write_out(kind, "kind", kind_of(&values.entry(name)?.value))
    })
}

/// Tensor `name`'s shape: `*rank` dimensions at `*shape` (owned by `values`, valid until it is
/// changed or freed).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `shape` and `rank` point
/// to writable memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_tensor_shape(
    values: *const TsValues,
    name: *const c_char,
    shape: *mut *const usize,
    rank: *mut usize,
) -> TsStatus {
    call("ts_values_tensor_shape", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let t = values.tensor(name)?;
        crate::boundary::check_out(shape, "shape")?;
        write_out(rank, "rank", t.shape().len())?;
        write_out(shape, "shape", t.shape().as_ptr())
    })
}

/// Tensor `name`'s element count (the product of its shape) in `*len`.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `len` points to writable
/// memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_tensor_len(
    values: *const TsValues,
    name: *const c_char,
    len: *mut usize,
) -> TsStatus {
    call("ts_values_tensor_len", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        write_out(len, "len", values.tensor(name)?.data().len())
    })
}

/// Copies tensor `name`'s values, as f32 and row-major, into the caller's `out[0..len]`; `len`
/// must be its element count (`ts_values_tensor_len`).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `out` points to `len`
/// writable floats.
#[no_mangle]
pub unsafe extern "C" fn ts_values_tensor_f32(
    values: *const TsValues,
    name: *const c_char,
    out: *mut f32,
    len: usize,
) -> TsStatus {
    call("ts_values_tensor_f32", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let t = values.tensor(name)?;
        let n = t.data().len();
        if len != n {
            return Err(CapiError::Invalid(format!(
                "tensor `{name}` has {n} values, `len` is {len}"
            )));
        }
        let out = slice_out(out, len, "out")?;
        match t.as_f32() {
            Some(v) => out.copy_from_slice(v),
            None => {
                let v = t
                    .to_f32()
                    .map_err(|e| CapiError::Invalid(format!("tensor `{name}`: {e}")))?;
                out.copy_from_slice(&v);
            }
        }
        Ok(())
    })
}

/// The number of token ids in value `name` in `*len`.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `len` points to writable
/// memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_tokens_len(
    values: *const TsValues,
    name: *const c_char,
    len: *mut usize,
) -> TsStatus {
    call("ts_values_tokens_len", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        write_out(len, "len", values.tokens(name)?.len())
    })
}

/// Copies the token ids of value `name` into the caller's `out[0..len]`; `len` must be their
/// count (`ts_values_tokens_len`).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `out` points to `len`
/// writable elements.
#[no_mangle]
pub unsafe extern "C" fn ts_values_tokens(
    values: *const TsValues,
    name: *const c_char,
    out: *mut u32,
    len: usize,
) -> TsStatus {
    call("ts_values_tokens", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let ids = values.tokens(name)?;
        if len != ids.len() {
            return Err(CapiError::Invalid(format!(
                "`{name}` has {} token ids, `len` is {len}",
                ids.len()
            )));
        }
        slice_out(out, len, "out")?.copy_from_slice(ids);
        Ok(())
    })
}

/// Image `name`'s width and height in pixels.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `width` and `height`
/// point to writable memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_image_size(
    values: *const TsValues,
    name: *const c_char,
    width: *mut usize,
    height: *mut usize,
) -> TsStatus {
    call("ts_values_image_size", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let img = values.image(name)?;
        crate::boundary::check_out(height, "height")?;
        write_out(width, "width", img.width())?;
        write_out(height, "height", img.height())
    })
}

/// Copies image `name`'s pixels as packed RGB8, row-major, into `out[0..len]`; `len` must be
/// width · height · 3.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `out` points to `len`
/// writable bytes.
#[no_mangle]
pub unsafe extern "C" fn ts_values_image_rgb8(
    values: *const TsValues,
    name: *const c_char,
    out: *mut u8,
    len: usize,
) -> TsStatus {
    call("ts_values_image_rgb8", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let img = values.image(name)?;
        let want = img.width() * img.height() * 3;
        if len != want {
            return Err(CapiError::Invalid(format!(
                "image `{name}` is {}x{} ({want} RGB8 bytes), `len` is {len}",
                img.width(),
                img.height()
            )));
        }
        slice_out(out, len, "out")?.copy_from_slice(&img.to_rgb8());
        Ok(())
    })
}

/// Text value `name` in `*text` (UTF-8, owned by `values`, valid until it is changed or
/// freed).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `text` points to writable
/// memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_values_text(
    values: *const TsValues,
    name: *const c_char,
    text: *mut *const c_char,
) -> TsStatus {
    call("ts_values_text", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let e = values.entry(name)?;
        match (&e.value, e.c_texts.first()) {
            (Value::Text(_), Some(c)) => write_out(text, "text", c.as_ptr()),
            (v, _) => Err(wrong_kind(name, v, "text")),
        }
    })
}

/// The number of text lines in value `name` in `*count`.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `count` points to
/// writable memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_text_lines_count(
    values: *const TsValues,
    name: *const c_char,
    count: *mut usize,
) -> TsStatus {
    call("ts_values_text_lines_count", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        write_out(count, "count", values.text_lines(name)?.0.len())
    })
}

/// Text line `index` of value `name`: its text in `*text` (UTF-8, owned by `values`, valid
/// until it is changed or freed).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `text` points to writable
/// memory for one pointer.
#[no_mangle]
pub unsafe extern "C" fn ts_values_text_line_text(
    values: *const TsValues,
    name: *const c_char,
    index: usize,
    text: *mut *const c_char,
) -> TsStatus {
    call("ts_values_text_line_text", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let (_, c) = values.text_line(name, index)?;
        write_out(text, "text", c.as_ptr())
    })
}

/// Text line `index` of value `name`: its recognition score in `*score`.
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `score` points to
/// writable memory.
#[no_mangle]
pub unsafe extern "C" fn ts_values_text_line_score(
    values: *const TsValues,
    name: *const c_char,
    index: usize,
    score: *mut f64,
) -> TsStatus {
    call("ts_values_text_line_score", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        write_out(score, "score", values.text_line(name, index)?.0.score)
    })
}

/// Text line `index` of value `name`: its box corners in original-image pixels, written to
/// `points[0..8]` as x0, y0, x1, y1, x2, y2, x3, y3 (top-left, top-right, bottom-right,
/// bottom-left).
///
/// # Safety
/// `values` is a live `TsValues`; `name` is a NUL-terminated string; `points` points to 8
/// writable floats.
#[no_mangle]
pub unsafe extern "C" fn ts_values_text_line_points(
    values: *const TsValues,
    name: *const c_char,
    index: usize,
    points: *mut f32,
) -> TsStatus {
    call("ts_values_text_line_points", || {
        let values = ref_arg(values, "values")?;
        let name = str_arg(name, "name")?;
        let (line, _) = values.text_line(name, index)?;
        let out = slice_out(points, 8, "points")?;
        for (o, v) in out.iter_mut().zip(line.points.iter().flatten()) {
            *o = *v;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::CStr;
    use std::ptr;

    use super::*;

    fn lines() -> TsValues {
        let line = |text: &str, score: f64, x: f32| TextLine {
            points: [[x, 1.0], [x + 10.0, 1.0], [x + 10.0, 5.0], [x, 5.0]],
            text: text.into(),
            score,
        };
        let mut v = Values::new();
        v.insert(
            "text".into(),
            Value::TextLines(vec![line("hello", 0.75, 2.0), line("wörld", 0.5, 20.0)]),
        );
        v.insert("caption".into(), Value::Text("a\0b".into()));
        TsValues::from_values(v)
    }

    unsafe fn c(p: *const c_char) -> String {
        CStr::from_ptr(p).to_str().expect("UTF-8").to_string()
    }

    #[test]
    fn text_lines_read_back_text_score_and_points() {
        let v = lines();
        unsafe {
            let mut n = 0;
            assert_eq!(
                ts_values_text_lines_count(&v, c"text".as_ptr(), &mut n),
                TsStatus::Ok
            );
            assert_eq!(n, 2);
            let mut text = ptr::null();
            assert_eq!(
                ts_values_text_line_text(&v, c"text".as_ptr(), 1, &mut text),
                TsStatus::Ok
            );
            assert_eq!(c(text), "wörld");
            let mut score = 0.0;
            assert_eq!(
                ts_values_text_line_score(&v, c"text".as_ptr(), 0, &mut score),
                TsStatus::Ok
            );
            assert_eq!(score, 0.75);
            let mut pts = [0f32; 8];
            assert_eq!(
                ts_values_text_line_points(&v, c"text".as_ptr(), 1, pts.as_mut_ptr()),
                TsStatus::Ok
            );
            assert_eq!(pts, [20.0, 1.0, 30.0, 1.0, 30.0, 5.0, 20.0, 5.0]);
            assert_eq!(
                ts_values_text_line_score(&v, c"text".as_ptr(), 2, &mut score),
                TsStatus::InvalidArgument
            );
            assert_eq!(
                ts_values_text_line_points(&v, c"text".as_ptr(), 0, ptr::null_mut()),
                TsStatus::NullArgument
            );
            assert_eq!(
                ts_values_text_lines_count(&v, c"caption".as_ptr(), &mut n),
                TsStatus::WrongKind
            );
        }
    }

    #[test]
    fn names_come_in_order_and_texts_lose_only_their_nuls() {
        let v = lines();
        unsafe {
            let mut n = 0;
            assert_eq!(ts_values_count(&v, &mut n), TsStatus::Ok);
            assert_eq!(n, 2);
            let mut name = ptr::null();
            assert_eq!(ts_values_name(&v, 0, &mut name), TsStatus::Ok);
            assert_eq!(c(name), "caption");
            assert_eq!(ts_values_name(&v, 2, &mut name), TsStatus::InvalidArgument);
            let mut text = ptr::null();
            assert_eq!(
                ts_values_text(&v, c"caption".as_ptr(), &mut text),
                TsStatus::Ok
            );
            assert_eq!(c(text), "a\u{FFFD}b");
            let mut kind = TsValueKind::Tensor;
            assert_eq!(
                ts_values_kind(&v, c"text".as_ptr(), &mut kind),
                TsStatus::Ok
            );
            assert_eq!(kind, TsValueKind::TextLines);
        }
    }

    #[test]
    fn setters_copy_check_and_replace() {
        unsafe {
            let mut v: *mut TsValues = ptr::null_mut();
            assert_eq!(ts_values_new(&mut v), TsStatus::Ok);
            assert_eq!(ts_values_new(ptr::null_mut()), TsStatus::NullArgument);
            let shape = [2usize, 2];
            let data = [1.0f32, 2.0, 3.0, 4.0];
            let set = |len: usize| {
                ts_values_set_tensor_f32(v, c"t".as_ptr(), shape.as_ptr(), 2, data.as_ptr(), len)
            };
            assert_eq!(set(3), TsStatus::InvalidArgument);
            assert_eq!(set(4), TsStatus::Ok);
            let scalar =
                ts_values_set_tensor_f32(v, c"s".as_ptr(), ptr::null(), 0, data.as_ptr(), 1);
            assert_eq!(scalar, TsStatus::Ok);
            let mut out = [0f32; 4];
            assert_eq!(
                ts_values_tensor_f32(v, c"t".as_ptr(), out.as_mut_ptr(), 4),
                TsStatus::Ok
            );
            assert_eq!(out, data);
            assert_eq!(
                ts_values_set_text(v, c"t".as_ptr(), c"now text".as_ptr()),
                TsStatus::Ok
            );
            assert_eq!(
                ts_values_tensor_f32(v, c"t".as_ptr(), out.as_mut_ptr(), 4),
                TsStatus::WrongKind
            );
            let samples = [0.0f32, 0.5];
            assert_eq!(
                ts_values_set_audio_f32(v, c"a".as_ptr(), samples.as_ptr(), 2, 0),
                TsStatus::InvalidArgument
            );
            assert_eq!(
                ts_values_set_audio_f32(v, c"a".as_ptr(), samples.as_ptr(), 2, 16_000),
                TsStatus::Ok
            );
            let pixels = [255u8, 0, 0, 0, 255, 0];
            assert_eq!(
                ts_values_set_image_rgb8(v, c"i".as_ptr(), 2, 1, pixels.as_ptr(), 5),
                TsStatus::InvalidArgument
            );
            assert_eq!(
                ts_values_set_image_rgb8(v, c"i".as_ptr(), 2, 1, pixels.as_ptr(), 6),
                TsStatus::Ok
            );
            let mut back = [0u8; 6];
            assert_eq!(
                ts_values_image_rgb8(v, c"i".as_ptr(), back.as_mut_ptr(), 6),
                TsStatus::Ok
            );
            assert_eq!(back, pixels);
            let ids = [3u32, 0, u32::MAX];
            assert_eq!(
                ts_values_set_tokens(v, c"ids".as_ptr(), ids.as_ptr(), 3),
                TsStatus::Ok
            );
            let mut n = 0;
            assert_eq!(
                ts_values_tokens_len(v, c"ids".as_ptr(), &mut n),
                TsStatus::Ok
            );
            assert_eq!(n, 3);
            let mut got = [0u32; 3];
            assert_eq!(
                ts_values_tokens(v, c"ids".as_ptr(), got.as_mut_ptr(), 2),
                TsStatus::InvalidArgument
            );
            assert_eq!(
                ts_values_tokens(v, c"ids".as_ptr(), got.as_mut_ptr(), 3),
                TsStatus::Ok
            );
            assert_eq!(got, ids);
            let mut kind = TsValueKind::Tensor;
            assert_eq!(ts_values_kind(v, c"ids".as_ptr(), &mut kind), TsStatus::Ok);
            assert_eq!(kind, TsValueKind::Tokens);
            assert_eq!(
                ts_values_tokens_len(v, c"i".as_ptr(), &mut n),
                TsStatus::WrongKind
            );
            let values = (*v).to_values();
            assert_eq!(
                values.keys().collect::<Vec<_>>(),
                ["a", "i", "ids", "s", "t"]
            );
            assert!(matches!(&values["a"], Value::Audio(a) if a.sample_rate == 16_000));
            ts_values_free(v);
        }
    }
}
