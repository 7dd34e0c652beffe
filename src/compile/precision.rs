//! Choosing a model's activation precision by measurement. The packed weights stay fp16 (half the
//! memory and half the streaming); what is chosen is whether the intermediate values are stored
//! as fp16 or fp32. fp16 activations are twice as dense in texels and faster, but deep networks
//! amplify their rounding: the OCR detector ends 1.2e-2 of its output range away from fp32.
//! [`choose_activations`] runs the model on a calibration input both ways on the device, and
//! keeps fp16 activations only where they land within the tolerance of the fp32 model (fp32
//! weights and activations, which matches ONNX Runtime within 1e-4). `texstream compile --activations auto` records the choice in the packed header
//! ([`ActivationChoice`]), and the engine and `texstream infer` use it where the workload or the
//! command line names no precision.

use vk_backend::{Device, PageSource};

pub use crate::packed::format::ActivationChoice;
use crate::packed::format::PackedHeader;
use crate::runtime::{BuildOptions, Executable, HostTensor};
use crate::Precision;

/// Largest error of fp16 activations, as a fraction of each output's range, that keeps them.
pub const DEFAULT_TOLERANCE: f64 = 1e-2;

/// Why no choice could be made.
#[derive(Debug, thiserror::Error)]
pub enum ChoiceError {
    #[error("the weights are fp32: fp16 activations over them are not supported, so there is nothing to choose")]
    Fp32Weights,
    #[error("calibration input `{0}` is missing (every model input needs one)")]
    MissingInput(String),
    #[error("calibration input `{name}` is {got:?}, the model takes {want:?}")]
    Shape {
        name: String,
        got: Vec<usize>,
        want: Vec<usize>,
    },
    #[error("running the model with {precision:?} activations: {source}")]
    Run {
        precision: Precision,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    #[error("output `{0}` is not finite with fp32 activations on the calibration input")]
    NotFinite(String),
}

/// Error of `got` against `reference` as a fraction of the reference's range (its largest
/// magnitude where the range is 0; 1 where both are 0). Any non-finite value in `got` is an
/// infinite error.
pub fn range_error(got: &[f32], reference: &[f32]) -> f64 {
    let (lo, hi) = reference
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(l, h), &v| {
            (l.min(v as f64), h.max(v as f64))
        });
    // The range, else the largest magnitude, else 1 (NaN-safe: `> 0.0` is false for NaN).
    let magnitude = || {
        reference
            .iter()
            .fold(0.0f64, |m, &v| m.max((v as f64).abs()))
    };
    let scale = [hi - lo, magnitude(), 1.0]
        .into_iter()
        .find(|&s| s > 0.0)
        .unwrap_or(1.0);
    let worst = got.iter().zip(reference).fold(0.0f64, |m, (&a, &b)| {
        let d = (a as f64 - b as f64).abs();
        if d.is_nan() {
            f64::INFINITY
        } else {
            m.max(d)
        }
    });
    worst / scale
}

/// A packed model to run: its header and where its pages come from.
pub type ModelRef<'a> = (&'a PackedHeader, &'a dyn PageSource);

/// Runs `model` (fp16 weights) on `inputs` with fp16 and with fp32 activations, and `reference`
/// (the same graph compiled with fp32 weights: the fp32 model) with fp32 activations; chooses
/// fp16 activations when every output of that run lands within `tolerance` of the reference's
/// range, fp32 otherwise.
pub fn choose_activations(
    device: &Device,
    model: ModelRef<'_>,
    reference: ModelRef<'_>,
    inputs: &[(String, HostTensor)],
    tolerance: f64,
) -> Result<ActivationChoice, ChoiceError> {
    let (header, _) = model;
    if header.precision != Precision::F16 {
        return Err(ChoiceError::Fp32Weights);
    }
    let g = &header.graph;
    let mut feeds = Vec::new();
    for p in &g.inputs {
        let Some((_, t)) = inputs.iter().find(|(n, _)| *n == p.name) else {
            return Err(ChoiceError::MissingInput(p.name.clone()));
        };
        let want = &g.tensors[p.tensor].shape;
        if &t.shape != want {
            return Err(ChoiceError::Shape {
                name: p.name.clone(),
                got: t.shape.clone(),
                want: want.clone(),
            });
        }
        feeds.push((p.name.clone(), t.clone()));
    }
    let run = |(h, pages): ModelRef<'_>,
               activations: Precision|
     -> Result<Vec<(String, HostTensor)>, ChoiceError> {
        let err = |e: Box<dyn std::error::Error + Send + Sync>| ChoiceError::Run {
            precision: activations,
            source: e,
        };
        let opts = BuildOptions {
            precisions: crate::runtime::TensorPrecisions {
                activations: Some(crate::runtime::weights::vk_precision(activations)),
                cache: None,
            },
            ..BuildOptions::default()
        };
        let mut exe =
            Executable::with_options(device, h, pages, &opts).map_err(|e| err(Box::new(e)))?;
        exe.run(&feeds).map_err(|e| err(Box::new(e)))
    };
    let want = run(reference, Precision::F32)?;
    for (name, r) in &want {
        if r.data.iter().any(|v| !v.is_finite()) {
            return Err(ChoiceError::NotFinite(name.clone()));
        }
    }
    // The largest error over the outputs, and the output it is on.
    let worst = |got: &[(String, HostTensor)]| -> (f64, String) {
        let mut w = (0.0f64, String::new());
        for ((name, r), (_, g)) in want.iter().zip(got) {
            let e = range_error(&g.data, &r.data);
            if e > w.0 || w.1.is_empty() {
                w = (e, name.clone());
            }
        }
        w
    };
    let (fp16_error, worst_output) = worst(&run(model, Precision::F16)?);
    let (fp32_error, _) = worst(&run(model, Precision::F32)?);
    Ok(ActivationChoice {
        precision: if fp16_error <= tolerance {
            Precision::F16
        } else {
            Precision::F32
        },
        fp16_error,
        fp32_error,
        worst_output,
        tolerance,
        calibration: feeds
            .iter()
            .map(|(n, t)| format!("{n} {:?}", t.shape))
            .collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_fractions_of_the_reference_range() {
        assert_eq!(range_error(&[0.0, 1.0], &[0.0, 2.0]), 0.5);
        // A constant reference: its magnitude is the scale.
        assert_eq!(range_error(&[3.0, 3.0], &[4.0, 4.0]), 0.25);
        assert_eq!(range_error(&[1.0], &[0.0]), 1.0);
        assert_eq!(range_error(&[f32::NAN], &[1.0]), f64::INFINITY);
        assert_eq!(range_error(&[1.0, 2.0], &[1.0, 2.0]), 0.0);
    }
}
