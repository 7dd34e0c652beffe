//! Built-in CPU pipeline steps around the networks: the PP-OCR pre/post-processing, matching RapidOCR 3.10.0.
//!
//! Images are 8-bit BGR (the order RapidOCR/OpenCV keep them in); network tensors are plain f32 NCHW
//! [`Tensor`]s. The pipeline executor's OCR steps (`pipeline::steps::ocr`) are built from these.

pub mod config;
pub mod crop;
pub mod ctc;
pub mod db;
pub mod det_pre;
pub mod error;
pub mod geometry;
pub mod image;
pub mod resize;
pub mod tensor;
pub mod textline;

pub use config::{OcrConfig, TextLine};
pub use crop::{get_rotate_crop_image, rotate_crop};
pub use ctc::{dict_from_metadata, CtcDecoder};
pub use db::{db_postprocess, sort_boxes, DbParams, DetBox};
pub use det_pre::{
    apply_vertical_padding, det_preprocess, det_resize_dims, resize_image_within_bounds,
    DetPreprocess, LimitType,
};
pub use error::{BoxError, OcrError};
pub use image::{decode_image, load_image, BgrImage, ImageError, MAX_IMAGE_PIXELS};
pub use resize::resize_linear;
pub use tensor::Tensor;
pub use textline::{
    cls_postprocess, cls_preprocess, plan_batches, rec_batch_width, rec_preprocess,
};
