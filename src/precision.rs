//! The one precision type: how weights are stored (and, where asked, how activations are kept).
//! It is spelled `F16`/`F32` in workload files and packed headers and `f16`/`f32` on the command
//! line; the Vulkan backend has its own texel-format enum, converted in `runtime::weights`.
use serde::{Deserialize, Serialize};

/// fp16 or fp32 values.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize, clap::ValueEnum,
)]
pub enum Precision {
    #[default]
    #[value(name = "f16")]
    F16,
    #[value(name = "f32")]
    F32,
}

impl Precision {
    pub fn bytes_per_value(self) -> usize {
        match self {
            Precision::F16 => 2,
            Precision::F32 => 4,
        }
    }

    /// An RGBA texel holds four values.
    pub fn bytes_per_texel(self) -> usize {
        4 * self.bytes_per_value()
    }

    pub fn name(self) -> &'static str {
        match self {
            Precision::F16 => "f16",
            Precision::F32 => "f32",
        }
    }
}

impl std::fmt::Display for Precision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A precision name other than `f16` or `f32`.
#[derive(Debug, thiserror::Error)]
#[error("unknown precision `{0}` (use f16 or f32)")]
pub struct UnknownPrecision(pub String);

impl std::str::FromStr for Precision {
    type Err = UnknownPrecision;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "f16" | "fp16" => Ok(Precision::F16),
            "f32" | "fp32" => Ok(Precision::F32),
            _ => Err(UnknownPrecision(s.into())),
        }
    }
}
