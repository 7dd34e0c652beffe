//! `texstream ocr IMAGE`: reads the text in an image with the PP-OCR models, through the same
//! engine and pipeline executor as `texstream run` (a built-in workload sized to the image).
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use texstream::ops::TextLine;
use texstream::{Engine, EngineOptions, Image, Precision, Value, Values};

#[derive(clap::Args, Debug)]
pub struct OcrArgs {
    /// The image (PNG or JPEG).
    pub image: PathBuf,
    /// Vulkan device (index or name substring).
    #[arg(long)]
    pub device: Option<String>,
    /// Weight precision of the models.
    #[arg(long, value_enum, default_value = "f16")]
    pub precision: Precision,
    /// Directory holding det.onnx, cls.onnx, rec.onnx (`scripts/fetch_models.py` puts them in
    /// models/ocr); compiled models are kept beside them.
    #[arg(long, default_value = "models/ocr")]
    pub models: PathBuf,
}

/// Reads the text lines of the image file at `image` with the models in `models`.
pub fn ocr_image(
    image: &std::path::Path,
    models: &std::path::Path,
    precision: Precision,
    device: Option<String>,
) -> anyhow::Result<Vec<TextLine>> {
    let bytes = std::fs::read(image).with_context(|| format!("reading {}", image.display()))?;
    let img = Image::decode(&bytes).with_context(|| image.display().to_string())?;
    let det = texstream::workload::builtin::ocr_detector_hw(&texstream::ops::decode_image(
        &bytes, "image",
    )?)
    .with_context(|| format!("{}: too small to read", image.display()))?;
    let w = texstream::workload::builtin::ocr_workload(models, det, precision)?;
    let env = EngineOptions::from_env();
    let engine = Engine::open_workload(
        w,
        EngineOptions {
            device: texstream::engine::DeviceChoice {
                name: device.or(env.device.name.clone()),
                ..env.device.clone()
            },
            calibrate_after: 0,
            ..EngineOptions::default()
        },
        &mut |model, why| eprintln!("compiling model `{model}` ({why})"),
    )?;
    let mut inputs = Values::new();
    inputs.insert("image".into(), Value::Image(img));
    let mut r = engine.run("ocr", inputs)?;
    match r.outputs.remove("text") {
        Some(Value::TextLines(lines)) => Ok(lines),
        _ => anyhow::bail!("the OCR pipeline returned no text"),
    }
}

pub fn run(args: &OcrArgs) -> anyhow::Result<()> {
    let t0 = Instant::now();
    let lines = ocr_image(
        &args.image,
        &args.models,
        args.precision,
        args.device.clone(),
    )?;
    for l in &lines {
        println!("{}\t{:.5}", l.text, l.score);
    }
    eprintln!(
        "{} lines in {:.1} s",
        lines.len(),
        t0.elapsed().as_secs_f64()
    );
    Ok(())
}
