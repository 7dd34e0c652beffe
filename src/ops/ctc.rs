//! CTC greedy decoding of recognizer output as RapidOCR's `CTCLabelDecode`: argmax per time step,
//! collapse repeats, drop blank (index 0); the character list is the model's dictionary with "blank"
//! put first and a space appended.

use super::error::OcrError;
use super::tensor::Tensor;
use super::textline::argmax;

/// Splits the recognizer's `character` metadata string into entries like Python's `str.splitlines()`
/// (which RapidOCR uses): \n, \r, \r\n, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029 all end a line.
pub fn dict_from_metadata(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => {
                if chars.peek() == Some(&'\n') {
                    chars.next();
                }
                out.push(std::mem::take(&mut cur));
            }
            '\n' | '\u{0b}' | '\u{0c}' | '\u{1c}' | '\u{1d}' | '\u{1e}' | '\u{85}' | '\u{2028}'
            | '\u{2029}' => {
                out.push(std::mem::take(&mut cur));
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[derive(Clone, Debug)]
pub struct CtcDecoder {
    /// "blank", the dictionary, " ".
    chars: Vec<String>,
}

/// Python's round(x, 5) for the values seen here: correctly rounded via decimal formatting.
fn round5(x: f64) -> f64 {
    format!("{x:.5}").parse().unwrap_or(x)
}

impl CtcDecoder {
    pub fn new(dict: &[String]) -> Self {
        let mut chars = Vec::with_capacity(dict.len() + 2);
        chars.push("blank".to_string());
        chars.extend(dict.iter().cloned());
        chars.push(" ".to_string());
        Self { chars }
    }

    /// Number of classes the recognizer must output.
    pub fn classes(&self) -> usize {
        self.chars.len()
    }

    /// Decodes one sequence of `t` steps x `classes()` probabilities: (text, mean confidence rounded to
    /// 5 decimals as RapidOCR reports it; 0 for an empty text).
    pub fn decode_one(&self, probs: &[f32], t: usize) -> Result<(String, f64), OcrError> {
        let c = self.chars.len();
        if probs.len() != t * c {
            return Err(OcrError::Shape {
                what: "recognizer output".into(),
                shape: vec![t, probs.len() / t.max(1)],
                expected: format!("[{t}, {c}] (dictionary + blank + space)"),
            });
        }
        let mut text = String::new();
        let mut confs: Vec<f64> = Vec::new();
        let mut prev = usize::MAX;
        for step in probs.chunks_exact(c) {
            let (idx, p) = argmax(step);
            if idx != prev && idx != 0 {
                text.push_str(&self.chars[idx]);
                confs.push(round5(f64::from(p)));
            }
            prev = idx;
        }
        if confs.is_empty() {
            confs.push(0.0);
        }
        let mean = confs.iter().sum::<f64>() / confs.len() as f64;
        // numpy's round: rint(x * 1e5) / 1e5.
        Ok((text, (mean * 1e5).round_ties_even() / 1e5))
    }

    /// Decodes a `[n, T, classes]` batch.
    pub fn decode(&self, out: &Tensor) -> Result<Vec<(String, f64)>, OcrError> {
        let d = out.dims("recognizer output", 3)?;
        let (n, t, c) = (d[0], d[1], d[2]);
        if c != self.chars.len() {
            return Err(OcrError::Shape {
                what: "recognizer output".into(),
                shape: out.shape.clone(),
                expected: format!("{} classes (dictionary + blank + space)", self.chars.len()),
            });
        }
        // Lines decode independently; each is a full argmax over T x classes (1.8M values for
        // the PP-OCR recognizer at width 768), so they run on several threads.
        let items: Vec<&[f32]> = (0..n)
            .map(|i| &out.data[i * t * c..(i + 1) * t * c])
            .collect();
        let threads = std::thread::available_parallelism().map_or(1, |v| v.get().min(8));
        let per = items.len().div_ceil(threads).max(1);
        std::thread::scope(|s| {
            let handles: Vec<_> = items
                .chunks(per)
                .map(|group| {
                    s.spawn(move || {
                        group
                            .iter()
                            .map(|d| self.decode_one(d, t))
                            .collect::<Vec<_>>()
                    })
                })
                .collect();
            let mut all = Vec::with_capacity(n);
            for h in handles {
                match h.join() {
                    Ok(v) => all.extend(v),
                    Err(p) => std::panic::resume_unwind(p),
                }
            }
            all.into_iter().collect()
        })
    }
}
