//! `texstream ocr IMAGE`: the PP-OCR pipeline with detector, classifier and recognizer executed
//! on the GPU by the runtime's executor.
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;

use crate::ops::{self, dict_from_metadata, load_image, OcrConfig, TextLine};
use crate::runtime::shape_cache::ShapeCachedModel;

#[derive(clap::Args, Debug)]
pub struct OcrArgs {
    pub image: PathBuf,
    #[arg(long)]
    pub device: Option<String>,
    #[arg(long, default_value = "f16")]
    pub precision: String,
    /// Directory holding det.onnx, cls.onnx, rec.onnx.
    #[arg(long, default_value = "models/ocr")]
    pub models: PathBuf,
}

/// Runs OCR on `image` with the three models under `models`.
pub fn ocr_image(
    device: &vk_backend::Device,
    image: &std::path::Path,
    models: &std::path::Path,
    precision: crate::packed::StoredPrecision,
) -> anyhow::Result<Vec<TextLine>> {
    let img = load_image(image)?;
    let cfg = OcrConfig::default();
    let mut det =
        ShapeCachedModel::new(device, &models.join("det.onnx"), precision, &[1, 3, 32, 32])?;
    let mut cls = ShapeCachedModel::new(
        device,
        &models.join("cls.onnx"),
        precision,
        &[1, 3, 48, 192],
    )?;
    let mut rec = ShapeCachedModel::new(
        device,
        &models.join("rec.onnx"),
        precision,
        &[1, 3, 48, 320],
    )?;
    let dict = rec
        .metadata()
        .get("character")
        .map(|s| dict_from_metadata(s))
        .context("recognizer has no `character` metadata")?;
    let to_ops = |t: crate::runtime::HostTensor| ops::Tensor::new(t.shape, t.data);
    let lines = ops::ocr_pipeline(
        &img,
        &cfg,
        &dict,
        |t: ops::Tensor| -> anyhow::Result<ops::Tensor> { Ok(to_ops(det.run(t.shape, t.data)?)?) },
        |t: ops::Tensor| -> anyhow::Result<ops::Tensor> { Ok(to_ops(cls.run(t.shape, t.data)?)?) },
        |t: ops::Tensor| -> anyhow::Result<ops::Tensor> { Ok(to_ops(rec.run(t.shape, t.data)?)?) },
    )?;
    Ok(lines)
}

pub fn run(args: &OcrArgs) -> anyhow::Result<()> {
    let device = crate::cli::infer::open_device(&args.device)?;
    let precision = crate::cli::infer::parse_precision(&args.precision)?;
    let t0 = Instant::now();
    let lines = ocr_image(&device, &args.image, &args.models, precision)?;
    for l in &lines {
        println!("{}\t{:.5}", l.text, l.score);
    }
    eprintln!(
        "{} lines in {:.1} s on {}",
        lines.len(),
        t0.elapsed().as_secs_f64(),
        device.name()
    );
    Ok(())
}
