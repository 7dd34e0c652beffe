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

/// Decodes PNG or JPEG bytes (sniffed by magic number). `what` names the source in errors.
///
/// PNG palettes and bit depths < 8 are expanded and 16-bit samples reduced to their high byte (RapidOCR,
/// through PIL, would hand OpenCV palette indices or 16-bit values: that is a RapidOCR quirk we do not copy).
/// EXIF orientation is not applied.
pub fn decode_image(bytes: &[u8], what: &str) -> Result<BgrImage, OcrError> {
    let err = |msg: String| OcrError::Decode {
        what: what.to_string(),
        msg,
    };
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        decode_png(bytes).map_err(err)
    } else if bytes.starts_with(&[0xff, 0xd8]) {
        decode_jpeg(bytes).map_err(err)
    } else {
        Err(err("not a PNG or JPEG file".into()))
    }
}

/// Reads and decodes an image file.
pub fn load_image(path: &Path) -> Result<BgrImage, OcrError> {
    let bytes = std::fs::read(path).map_err(|source| OcrError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    decode_image(&bytes, &path.display().to_string())
}

fn decode_png(bytes: &[u8]) -> Result<BgrImage, String> {
    let mut decoder = png::Decoder::new(std::io::Cursor::new(bytes));
    decoder.set_transformations(png::Transformations::normalize_to_color8());
    let mut reader = decoder.read_info().map_err(|e| e.to_string())?;
    let size = reader.output_buffer_size().ok_or("image too large")?;
    let mut buf = vec![0u8; size];
    let info = reader.next_frame(&mut buf).map_err(|e| e.to_string())?;
    let (w, h) = (info.width as usize, info.height as usize);
    let mut packed = Vec::with_capacity(w * h * 4);
    let ch = info.color_type.samples();
    for row in buf.chunks(info.line_size).take(h) {
        packed.extend_from_slice(&row[..w * ch]);
    }
    let img = match info.color_type {
        png::ColorType::Grayscale => BgrImage::from_gray(w, h, &packed),
        png::ColorType::GrayscaleAlpha => BgrImage::from_gray_alpha(w, h, &packed),
        png::ColorType::Rgb => BgrImage::from_rgb(w, h, &packed),
        png::ColorType::Rgba => BgrImage::from_rgba(w, h, &packed),
        png::ColorType::Indexed => return Err("palette not expanded".into()),
    };
    img.map_err(|e| e.to_string())
}

fn decode_jpeg(bytes: &[u8]) -> Result<BgrImage, String> {
    let mut decoder = jpeg_decoder::Decoder::new(bytes);
    let pixels = decoder.decode().map_err(|e| e.to_string())?;
    let info = decoder.info().ok_or("no JPEG header")?;
    let (w, h) = (usize::from(info.width), usize::from(info.height));
    let img = match info.pixel_format {
        jpeg_decoder::PixelFormat::L8 => BgrImage::from_gray(w, h, &pixels),
        jpeg_decoder::PixelFormat::L16 => {
            // Big-endian 16-bit samples: keep the high byte.
            let g: Vec<u8> = pixels.chunks_exact(2).map(|p| p[0]).collect();
            BgrImage::from_gray(w, h, &g)
        }
        jpeg_decoder::PixelFormat::RGB24 => BgrImage::from_rgb(w, h, &pixels),
        jpeg_decoder::PixelFormat::CMYK32 => return Err("CMYK JPEG is not supported".into()),
    };
    img.map_err(|e| e.to_string())
}
