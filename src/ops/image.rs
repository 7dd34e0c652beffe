//! 8-bit BGR images: PNG/JPEG decoding with RapidOCR's channel conversions, rotations, padding.

use std::path::Path;

use super::error::OcrError;

/// An 8-bit, 3-channel image, row-major HWC in **BGR** order (as RapidOCR holds it after loading).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BgrImage {
    pub width: usize,
    pub height: usize,
    pub data: Vec<u8>,
}

impl BgrImage {
    pub fn new(width: usize, height: usize, data: Vec<u8>) -> Result<Self, OcrError> {
        if data.len() != width * height * 3 {
            return Err(OcrError::Invalid(format!(
                "BgrImage {width}x{height} needs {} bytes, got {}",
                width * height * 3,
                data.len()
            )));
        }
        Ok(Self {
            width,
            height,
            data,
        })
    }

    pub fn filled(width: usize, height: usize, bgr: [u8; 3]) -> Self {
        let data = bgr
            .iter()
            .copied()
            .cycle()
            .take(width * height * 3)
            .collect();
        Self {
            width,
            height,
            data,
        }
    }

    /// From packed RGB bytes.
    pub fn from_rgb(width: usize, height: usize, rgb: &[u8]) -> Result<Self, OcrError> {
        let data = rgb
            .chunks_exact(3)
            .flat_map(|p| [p[2], p[1], p[0]])
            .collect();
        Self::new(width, height, data)
    }

    /// From one gray byte per pixel (OpenCV GRAY2BGR: replicate).
    pub fn from_gray(width: usize, height: usize, gray: &[u8]) -> Result<Self, OcrError> {
        Self::new(
            width,
            height,
            gray.iter().flat_map(|&g| [g, g, g]).collect(),
        )
    }

    /// From gray + alpha, as RapidOCR's `cvt_two_to_three`: gray where alpha != 0 (else 0), plus
    /// 255 - alpha, saturating.
    pub fn from_gray_alpha(width: usize, height: usize, ga: &[u8]) -> Result<Self, OcrError> {
        let data = ga
            .chunks_exact(2)
            .flat_map(|p| {
                let v = if p[1] != 0 { p[0] } else { 0 };
                let g = v.saturating_add(255 - p[1]);
                [g, g, g]
            })
            .collect();
        Self::new(width, height, data)
    }

    /// From RGBA, as RapidOCR's `cvt_four_to_three`: blend over white when the mean luminance of the
    /// non-transparent pixels is below 128 (or all are transparent), else over black; f32 math, truncation.
    pub fn from_rgba(width: usize, height: usize, rgba: &[u8]) -> Result<Self, OcrError> {
        let (mut sum, mut n) = (0.0f64, 0usize);
        for p in rgba.chunks_exact(4).filter(|p| p[3] > 0) {
            sum += 0.299 * f64::from(p[0]) + 0.587 * f64::from(p[1]) + 0.114 * f64::from(p[2]);
            n += 1;
        }
        let bg: f32 = if n == 0 || sum / (n as f64) < 128.0 {
            255.0
        } else {
            0.0
        };
        let data = rgba
            .chunks_exact(4)
            .flat_map(|p| {
                let a = f32::from(p[3]) / 255.0;
                let blend = |c: u8| (f32::from(c) * a + bg * (1.0 - a)) as u8;
                [blend(p[2]), blend(p[1]), blend(p[0])]
            })
            .collect();
        Self::new(width, height, data)
    }

    pub fn pixel(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.data[i], self.data[i + 1], self.data[i + 2]]
    }

    /// OpenCV `rotate(img, ROTATE_180)`.
    pub fn rotate_180(&self) -> Self {
        let data = self.data.chunks_exact(3).rev().flatten().copied().collect();
        Self {
            width: self.width,
            height: self.height,
            data,
        }
    }

    /// numpy `rot90` (90° counter-clockwise): out[i][j] = in[j][W-1-i].
    pub fn rotate_90_ccw(&self) -> Self {
        let (w, h) = (self.height, self.width);
        let mut data = Vec::with_capacity(self.data.len());
        for i in 0..h {
            for j in 0..w {
                data.extend_from_slice(&self.pixel(self.width - 1 - i, j));
            }
        }
        Self {
            width: w,
            height: h,
            data,
        }
    }

    /// Adds `top` and `bottom` black rows (OpenCV copyMakeBorder, BORDER_CONSTANT 0).
    pub fn pad_vertical(&self, top: usize, bottom: usize) -> Self {
        let row = self.width * 3;
        let mut data = vec![0u8; top * row];
        data.extend_from_slice(&self.data);
        data.resize(data.len() + bottom * row, 0);
        Self {
            width: self.width,
            height: self.height + top + bottom,
            data,
        }
    }
}

/// Largest image texstream decodes: 2^26 pixels (64 megapixels, e.g. 8192 x 8192; 256 MiB as
/// RGBA). The OCR pipeline resizes far below that; the limit is checked against the dimensions
/// a PNG or JPEG header declares before any pixel buffer is allocated, so a small file that
/// declares 50000 x 50000 pixels is refused instead of allocating gigabytes.
pub const MAX_IMAGE_PIXELS: u64 = 1 << 26;

/// Why image bytes could not be decoded.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    #[error("not a PNG or JPEG file")]
    UnknownFormat,
    #[error("PNG: {0}")]
    Png(#[from] png::DecodingError),
    #[error("JPEG: {0}")]
    Jpeg(#[from] jpeg_decoder::Error),
    #[error("the image declares {width} x {height} pixels, over the limit of {MAX_IMAGE_PIXELS} pixels (texstream::ops::image::MAX_IMAGE_PIXELS)")]
    TooLarge { width: u64, height: u64 },
    #[error("the JPEG has no frame header")]
    NoJpegHeader,
    #[error("CMYK JPEG is not supported")]
    Cmyk,
    #[error("the PNG palette was not expanded")]
    Palette,
    #[error("decoded {got} bytes for a {width} x {height} image, expected {expected}")]
    PixelCount {
        width: usize,
        height: usize,
        expected: usize,
        got: usize,
    },
}

fn check_dimensions(width: u64, height: u64) -> Result<(), ImageError> {
    if width.saturating_mul(height) > MAX_IMAGE_PIXELS {
        return Err(ImageError::TooLarge { width, height });
    }
    Ok(())
}

/// Decodes PNG or JPEG bytes (sniffed by magic number). `what` names the source in errors.
///
/// PNG palettes and bit depths < 8 are expanded and 16-bit samples reduced to their high byte (RapidOCR,
/// through PIL, would hand OpenCV palette indices or 16-bit values: that is a RapidOCR quirk we do not copy).
/// EXIF orientation is not applied. Images over [`MAX_IMAGE_PIXELS`] are refused.
pub fn decode_image(bytes: &[u8], what: &str) -> Result<BgrImage, OcrError> {
    let decoded = if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        decode_png(bytes)
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        decode_jpeg(bytes)
    } else {
        Err(ImageError::UnknownFormat)
    };
    decoded.map_err(|source| OcrError::Decode {
        what: what.to_string(),
        source,
    })
}

/// Reads and decodes an image file.
pub fn load_image(path: &Path) -> Result<BgrImage, OcrError> {
    let bytes = std::fs::read(path).map_err(|source| OcrError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode_image(&bytes, &path.display().to_string())
}

/// The image from `pixels` of `width` x `height`, or how many bytes were missing.
fn assemble(
    width: usize,
    height: usize,
    pixels: &[u8],
    channels: usize,
    convert: fn(usize, usize, &[u8]) -> Result<BgrImage, OcrError>,
) -> Result<BgrImage, ImageError> {
    let expected = width * height * channels;
    if pixels.len() != expected {
        return Err(ImageError::PixelCount {
            width,
            height,
            expected,
            got: pixels.len(),
        });
    }
    // The length matches, so the conversion cannot fail.
    convert(width, height, pixels).map_err(|_| ImageError::PixelCount {
        width,
        height,
        expected,
        got: pixels.len(),
    })
}

fn decode_png(bytes: &[u8]) -> Result<BgrImage, ImageError> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info()?;
    let header = reader.info();
    check_dimensions(header.width.into(), header.height.into())?;
    let size = reader.output_buffer_size().ok_or(ImageError::TooLarge {
        width: header.width.into(),
        height: header.height.into(),
    })?;
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf)?;
    let (w, h) = (info.width as usize, info.height as usize);
    let ch = info.color_type.samples();
    let mut packed = Vec::with_capacity(w * h * ch);
    for row in buf.chunks(info.line_size).take(h) {
        packed.extend_from_slice(row.get(..w * ch).unwrap_or(row));
    }
    match info.color_type {
        png::ColorType::Grayscale => assemble(w, h, &packed, 1, BgrImage::from_gray),
        png::ColorType::GrayscaleAlpha => assemble(w, h, &packed, 2, BgrImage::from_gray_alpha),
        png::ColorType::Rgb => assemble(w, h, &packed, 3, BgrImage::from_rgb),
        png::ColorType::Rgba => assemble(w, h, &packed, 4, BgrImage::from_rgba),
        png::ColorType::Indexed => Err(ImageError::Palette),
    }
}

fn decode_jpeg(bytes: &[u8]) -> Result<BgrImage, ImageError> {
    let mut decoder = jpeg_decoder::Decoder::new(bytes);
    decoder.read_info()?;
    let info = decoder.info().ok_or(ImageError::NoJpegHeader)?;
    check_dimensions(info.width.into(), info.height.into())?;
    let pixels = decoder.decode()?;
    let (w, h) = (usize::from(info.width), usize::from(info.height));
    match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => assemble(w, h, &pixels, 1, BgrImage::from_gray),
        jpeg_decoder::PixelFormat::L16 => {
            // Big-endian 16-bit samples: keep the high byte.
            let g: Vec<u8> = pixels.chunks_exact(2).map(|p| p[0]).collect();
            assemble(w, h, &g, 1, BgrImage::from_gray)
        }
        jpeg_decoder::PixelFormat::RGB24 => assemble(w, h, &pixels, 3, BgrImage::from_rgb),
        jpeg_decoder::PixelFormat::CMYK32 => Err(ImageError::Cmyk),
    }
}
