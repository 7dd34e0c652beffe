//! RapidOCR's settings for the steps around the networks, and the recognized text line. The
//! steps themselves run as pipeline steps (`pipeline::steps::ocr`), one DAG with the models.

use super::db::DbParams;
use super::det_pre::DetPreprocess;

/// RapidOCR 3.10.0's defaults (config.yaml) for everything around the networks.
#[derive(Clone, Debug, PartialEq)]
pub struct OcrConfig {
    pub min_side_len: f64,
    pub max_side_len: f64,
    pub use_vertical_padding: bool,
    pub min_height: f64,
    pub width_height_ratio: f64,
    pub det: DetPreprocess,
    pub db: DbParams,
    pub use_cls: bool,
    /// Classifier input height and width.
    pub cls_hw: (usize, usize),
    pub cls_batch: usize,
    pub cls_thresh: f32,
    /// Index of the "180" label in the classifier output (labels ["0", "180"]).
    pub cls_rotated_label: usize,
    pub cls_labels: usize,
    /// Recognizer input height and minimum width.
    pub rec_hw: (usize, usize),
    /// Crops per recognizer run; the batch is padded to its widest crop, so 1 (plain fan-out) can give
    /// slightly different scores than RapidOCR's 6.
    pub rec_batch: usize,
    pub text_score: f64,
}

impl Default for OcrConfig {
    fn default() -> Self {
        Self {
            min_side_len: 30.0,
            max_side_len: 2000.0,
            use_vertical_padding: true,
            min_height: 30.0,
            width_height_ratio: 8.0,
            det: DetPreprocess::default(),
            db: DbParams::default(),
            use_cls: true,
            cls_hw: (48, 192),
            cls_batch: 6,
            cls_thresh: 0.9,
            cls_rotated_label: 1,
            cls_labels: 2,
            rec_hw: (48, 320),
            rec_batch: 6,
            text_score: 0.5,
        }
    }
}

/// One recognized line: its box in original-image pixels (top-left, top-right, bottom-right,
/// bottom-left), text and mean character confidence.
#[derive(Clone, Debug, PartialEq)]
pub struct TextLine {
    pub points: [[f32; 2]; 4],
    pub text: String,
    pub score: f64,
}
