//! Shared helpers of the spatial kernels (conv, pooling, resize, pad): 2D window geometry,
//! output-size arithmetic, shape checks and 3D dispatch sizing.

use crate::device::Device;
use crate::error::Result;
use crate::kernels::launch::kerr;
use crate::tensor::Tensor;

/// 2D window geometry shared by Conv, ConvTranspose and pooling (ONNX attribute semantics).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window2d {
    /// `[kh, kw]`
    pub kernel: [usize; 2],
    /// `[sh, sw]`
    pub strides: [usize; 2],
    /// `[dh, dw]`
    pub dilations: [usize; 2],
    /// `[top, left, bottom, right]`
    pub pads: [usize; 4],
}

impl Window2d {
    /// A `kh x kw` window with stride 1, dilation 1 and no padding.
    pub fn new(kh: usize, kw: usize) -> Self {
        Window2d {
            kernel: [kh, kw],
            strides: [1, 1],
            dilations: [1, 1],
            pads: [0; 4],
        }
    }
    /// Checks every value is in range for the shaders' 16-bit packed fields.
    pub(crate) fn validate(&self, kernel: &str) -> Result<()> {
        let all = self
            .kernel
            .iter()
            .chain(&self.strides)
            .chain(&self.dilations);
        if all.clone().any(|&v| v == 0) {
            return Err(kerr(
                kernel,
                format!("kernel, strides and dilations must be >= 1, got {self:?}"),
            ));
        }
        if all.chain(&self.pads).any(|&v| v > 0xFFFF) {
            return Err(kerr(
                kernel,
                format!("window values must be < 65536, got {self:?}"),
            ));
        }
        Ok(())
    }
    /// Dilated kernel extent `[(kh-1)*dh + 1, (kw-1)*dw + 1]`.
    pub fn extent(&self) -> [usize; 2] {
        [
            (self.kernel[0] - 1) * self.dilations[0] + 1,
            (self.kernel[1] - 1) * self.dilations[1] + 1,
        ]
    }
    /// Push-constant words: kernel, stride, dilation, (top | left << 16).
    pub(crate) fn words(&self) -> [u32; 4] {
        let pack = |a: usize, b: usize| a as u32 | ((b as u32) << 16);
        [
            pack(self.kernel[0], self.kernel[1]),
            pack(self.strides[0], self.strides[1]),
            pack(self.dilations[0], self.dilations[1]),
            pack(self.pads[0], self.pads[1]),
        ]
    }
    /// Output `[OH, OW]` of a sliding window over `[H, W]` (floor, or ceil with the rule that the
    /// last window must start inside the input or the leading pad).
    pub fn output_hw(&self, kernel: &str, hw: [usize; 2], ceil_mode: bool) -> Result<[usize; 2]> {
        self.validate(kernel)?;
        let ext = self.extent();
        let mut out = [0; 2];
        for a in 0..2 {
            let padded = hw[a] + self.pads[a] + self.pads[a + 2];
            if padded < ext[a] {
                return Err(kerr(
                    kernel,
                    format!(
                        "window extent {} exceeds the padded input size {padded} on axis {}",
                        ext[a],
                        a + 2
                    ),
                ));
            }
            let span = padded - ext[a];
            let s = self.strides[a];
            let mut o = if ceil_mode {
                span.div_ceil(s)
            } else {
                span / s
            } + 1;
            if ceil_mode && (o - 1) * s >= hw[a] + self.pads[a] {
                o -= 1;
            }
            out[a] = o;
        }
        Ok(out)
    }
}

/// `[N, C, H, W]` of a rank-4 tensor (spatial kernels need an explicit 4-D shape).
pub(crate) fn rank4(kernel: &str, t: &Tensor) -> Result<[usize; 4]> {
    match *t.shape() {
        [n, c, h, w] => Ok([n, c, h, w]),
        _ => Err(kerr(
            kernel,
            format!(
                "tensor `{}` has shape {:?}; this kernel needs a rank-4 [N, C, H, W] tensor",
                t.name(),
                t.shape()
            ),
        )),
    }
}

/// Checks the output tensor has the expected shape and the input's precision.
pub(crate) fn check_out(kernel: &str, x: &Tensor, out: &Tensor, want: &[usize]) -> Result<()> {
    if out.shape() != want {
        return Err(kerr(
            kernel,
            format!(
                "output `{}` has shape {:?}, expected {want:?} for input `{}` {:?}",
                out.name(),
                out.shape(),
                x.name(),
                x.shape()
            ),
        ));
    }
    if out.precision() != x.precision() {
        return Err(kerr(
            kernel,
            format!(
                "output `{}` is {:?} but input `{}` is {:?}",
                out.name(),
                out.precision(),
                x.name(),
                x.precision()
            ),
        ));
    }
    Ok(())
}

/// Workgroup counts covering `threads` with a `local` workgroup size; errors past device limits.
pub(crate) fn dispatch_3d(
    device: &Device,
    kernel: &str,
    threads: [u64; 3],
    local: [u32; 3],
) -> Result<[u32; 3]> {
    let max = device.properties().limits.max_compute_work_group_count;
    let mut g = [0u32; 3];
    for a in 0..3 {
        let n = threads[a].div_ceil(local[a] as u64).max(1);
        if n > max[a] as u64 {
            return Err(kerr(
                kernel,
                format!(
                    "needs {n} workgroups on axis {a}, the device allows {}",
                    max[a]
                ),
            ));
        }
        g[a] = n as u32;
    }
    Ok(g)
}
