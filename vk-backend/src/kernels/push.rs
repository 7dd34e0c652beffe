//! Push-constant builder and dispatch-size helpers shared by kernel wrappers.

use crate::device::Device;
use crate::tensor::TensorDesc;

/// Builds a push-constant block as 32-bit words, in the order the GLSL block declares them.
#[derive(Debug, Clone, Default)]
pub struct PushConstants {
    words: Vec<u32>,
}

impl PushConstants {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn u32(mut self, v: u32) -> Self {
        self.words.push(v);
        self
    }
    pub fn i32(mut self, v: i32) -> Self {
        self.words.push(v as u32);
        self
    }
    pub fn f32(mut self, v: f32) -> Self {
        self.words.push(v.to_bits());
        self
    }
    /// A `TensorDesc` (8 words).
    pub fn tensor(mut self, d: TensorDesc) -> Self {
        self.words.extend_from_slice(&d.words());
        self
    }
    /// Pads with zero words up to `words` total (to match a GLSL block with padding).
    pub fn pad_to(mut self, words: usize) -> Self {
        self.words.resize(self.words.len().max(words), 0);
        self
    }
    /// Overwrites word `index` (a padding word, for a kernel that reuses another's block);
    /// out of range does nothing.
    pub fn set_word(mut self, index: usize, v: u32) -> Self {
        if let Some(w) = self.words.get_mut(index) {
            *w = v;
        }
        self
    }
    pub fn len_bytes(&self) -> usize {
        self.words.len() * 4
    }
    pub fn bytes(&self) -> Vec<u8> {
        self.words.iter().flat_map(|w| w.to_le_bytes()).collect()
    }
}

/// Workgroup counts for `invocations` threads of a `local_size`-wide 1D kernel, tiled into 2D so
/// the x count stays within the device limit. Shaders use `global_id_1d()` and bounds-check.
pub fn dispatch_1d(device: &Device, invocations: u64, local_size: u32) -> [u32; 3] {
    let groups = invocations.div_ceil(local_size as u64).max(1);
    let max_x = device.properties().limits.max_compute_work_group_count[0].clamp(1, 65535) as u64;
    let x = groups.min(max_x);
    let y = groups.div_ceil(x);
    [x as u32, y as u32, 1]
}
