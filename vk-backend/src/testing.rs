//! Test helpers shared by every crate's tests: one validated device per test binary, a seeded
//! PRNG, tolerance checks, and a validation-message assertion.

use std::sync::OnceLock;

use crate::device::Device;
use crate::options::DeviceOptions;

/// The shared test device (validation from `TEXSTREAM_VALIDATION`, device from `TEXSTREAM_DEVICE`).
/// Panics with the error if no device can be opened.
pub fn device() -> Device {
    static DEV: OnceLock<Device> = OnceLock::new();
    DEV.get_or_init(|| match Device::new(&DeviceOptions::from_env()) {
        Ok(d) => d,
        Err(e) => panic!("cannot open a Vulkan device for tests: {e}"),
    })
    .clone()
}

/// Panics if the device recorded any validation warning or error.
pub fn assert_no_validation_messages(device: &Device) {
    let m = device.validation_messages();
    assert!(
        m.is_empty(),
        "{} Vulkan validation message(s):\n{}",
        m.len(),
        m.join("\n")
    );
}

/// Small deterministic PRNG (xorshift64*), so tests need no extra dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f32, hi: f32) -> f32 {
        let u = (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32;
        lo + (hi - lo) * u
    }
    pub fn vec(&mut self, n: usize, lo: f32, hi: f32) -> Vec<f32> {
        (0..n).map(|_| self.uniform(lo, hi)).collect()
    }
}

/// Checks `|got - want| <= tol * max(1, |want|)` elementwise; panics naming the worst index.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: length mismatch");
    let mut worst = (0usize, 0f64);
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = if w.is_nan() && (g as f64).is_nan() {
            0.0
        } else {
            (g as f64 - w).abs() / w.abs().max(1.0)
        };
        let err = if err.is_nan() { f64::INFINITY } else { err };
        if err > worst.1 {
            worst = (i, err);
        }
    }
    assert!(
        worst.1 <= tol,
        "{what}: element {} got {} want {} (scaled error {:.3e} > {tol:.1e})",
        worst.0,
        got[worst.0],
        want[worst.0],
        worst.1
    );
}
