//! Built-in per-layer size tables for the OCR models, used until packed models exist.
//!
//! Derived from the published architectures, not from the model files: PP-LCNetV3 backbones (det at
//! scale 0.75 over a 640×640 input with an RSE-FPN-style neck and DB head; rec at scale 0.95 over
//! 48×320 with rec strides, an SVTR neck of two 120-wide blocks and a CTC head over an 18,385-entry
//! dictionary) and a PP-LCNet ×0.25 angle classifier over 48×192. Parameter counts land near the
//! released files (det ≈1.1 M, cls ≈0.1 M, rec ≈4 M parameters). Compute time per layer is
//! 2·MACs ÷ 1 TFLOP/s + 5 µs launch; activation bytes are the layer's input + output at fp16 with C4
//! padding. Real profiles replace these as soon as `models/ocr/*.tspk` exist.
use scheduler::synth::{layered, LayerSpec};
use scheduler::Profile;

/// Names accepted by `ProfileFallback::Builtin`.
pub const BUILTIN_TABLES: [&str; 3] = ["pp-ocrv6-det", "pp-ocr-mobile-cls", "pp-ocrv6-rec"];

const FLOPS: f64 = 1e12;
const LAUNCH_S: f64 = 5e-6;

struct Net {
    layers: Vec<LayerSpec>,
    c: u64,
    h: u64,
    w: u64,
    bpv: u64,
}

fn c4(c: u64) -> u64 {
    c.div_ceil(4) * 4
}

fn scaled(c: u64, s: f64) -> u64 {
    (((c as f64 * s) / 8.0).round() as u64).max(1) * 8
}

impl Net {
    fn new(c: u64, h: u64, w: u64, bpv: u64) -> Net {
        Net {
            layers: Vec::new(),
            c,
            h,
            w,
            bpv,
        }
    }

    fn push(&mut self, name: String, params: u64, macs: u64, out: (u64, u64, u64)) {
        let act = (c4(self.c) * self.h * self.w + c4(out.0) * out.1 * out.2) * 2;
        self.layers.push(LayerSpec {
            name,
            weight_bytes: params * self.bpv,
            compute_s: 2.0 * macs as f64 / FLOPS + LAUNCH_S,
            activation_bytes: act,
            reuses: None,
        });
        (self.c, self.h, self.w) = out;
    }

    fn conv(&mut self, name: &str, cout: u64, k: u64, sh: u64, sw: u64, groups: u64) {
        let (oh, ow) = (self.h.div_ceil(sh), self.w.div_ceil(sw));
        let per_out = (self.c / groups) * k * k;
        let idx = self.layers.len();
        self.push(
            format!("{idx}.{name}"),
            cout * per_out + cout,
            cout * per_out * oh * ow,
            (cout, oh, ow),
        );
    }

    fn block(&mut self, k: u64, cout: u64, sh: u64, sw: u64) {
        let c = self.c;
        self.conv("dw", c, k, sh, sw, c);
        self.conv("pw", cout, 1, 1, 1, 1);
    }

    fn upsample(&mut self, name: &str, cout: u64, f: u64) {
        let (oh, ow) = (self.h * f, self.w * f);
        let params = self.c * cout * f * f + cout;
        let idx = self.layers.len();
        self.push(
            format!("{idx}.{name}"),
            params,
            params * self.h * self.w,
            (cout, oh, ow),
        );
    }

    fn fc(&mut self, name: &str, n: u64) {
        let tokens = self.h * self.w;
        let idx = self.layers.len();
        let k = self.c;
        self.push(
            format!("{idx}.{name}"),
            k * n + n,
            k * n * tokens,
            (n, self.h, self.w),
        );
    }

    fn set(&mut self, c: u64, h: u64, w: u64) {
        (self.c, self.h, self.w) = (c, h, w);
    }
}

const LCNET: [(u64, u64, u64, u64); 12] = [
    // (kernel, out channels at scale 1, stride h, stride w) for det/cls; rec replaces strides.
    (3, 32, 1, 1),
    (3, 64, 2, 2),
    (3, 64, 1, 1),
    (3, 128, 2, 2),
    (3, 128, 1, 1),
    (3, 256, 2, 2),
    (5, 256, 1, 1),
    (5, 256, 1, 1),
    (5, 256, 1, 1),
    (5, 256, 1, 1),
    (5, 512, 2, 2),
    (5, 512, 1, 1),
];

fn det(bpv: u64) -> Vec<LayerSpec> {
    let s = 0.75;
    let mut n = Net::new(3, 640, 640, bpv);
    n.conv("stem", scaled(16, s), 3, 2, 2, 1);
    let mut taps = Vec::new();
    for (i, &(k, c, sh, sw)) in LCNET.iter().enumerate() {
        n.block(k, scaled(c, s), sh, sw);
        if [2, 4, 9, 11].contains(&i) {
            taps.push((n.c, n.h, n.w));
        }
    }
    // RSE-FPN: 1×1 in-convs to 96, 3×3 out-convs to 24, upsampled and concatenated at 1/4 scale.
    for (i, &(c, h, w)) in taps.iter().enumerate().rev() {
        n.set(c, h, w);
        n.conv(&format!("neck_in{i}"), 96, 1, 1, 1, 1);
    }
    for (i, &(_, h, w)) in taps.iter().enumerate().rev() {
        n.set(96, h, w);
        n.conv(&format!("neck_out{i}"), 24, 3, 1, 1, 1);
    }
    let (_, h4, w4) = taps[0];
    n.set(96, h4, w4);
    n.conv("head_conv", 24, 3, 1, 1, 1);
    n.upsample("head_up1", 24, 2);
    n.upsample("head_up2", 1, 2);
    n.layers
}

fn cls(bpv: u64) -> Vec<LayerSpec> {
    let s = 0.25;
    let mut n = Net::new(3, 48, 192, bpv);
    n.conv("stem", scaled(16, s), 3, 2, 2, 1);
    for &(k, c, sh, sw) in LCNET.iter() {
        n.block(k, scaled(c, s), sh, sw);
    }
    let c = n.c;
    n.set(c, 1, 1);
    n.fc("fc", 2);
    n.layers
}

fn rec(bpv: u64) -> Vec<LayerSpec> {
    let s = 0.95;
    let mut n = Net::new(3, 48, 320, bpv);
    n.conv("stem", scaled(16, s), 3, 2, 2, 1);
    for (i, &(k, c, _, _)) in LCNET.iter().enumerate() {
        let (sh, sw) = if [1, 3, 5, 10].contains(&i) {
            (2, 1)
        } else {
            (1, 1)
        };
        n.block(k, scaled(c, s), sh, sw);
    }
    let cb = n.c;
    n.set(cb, 1, 40);
    n.conv("svtr_conv1", cb / 8, 3, 1, 1, 1);
    n.conv("svtr_conv2", 120, 1, 1, 1, 1);
    for b in 0..2 {
        n.fc(&format!("svtr{b}.qkv"), 360);
        n.set(120, 1, 40);
        n.fc(&format!("svtr{b}.proj"), 120);
        n.fc(&format!("svtr{b}.fc1"), 240);
        n.fc(&format!("svtr{b}.fc2"), 120);
    }
    n.conv("svtr_conv3", cb, 1, 1, 1, 1);
    n.set(2 * cb, 1, 40);
    n.conv("svtr_conv4", cb / 8, 3, 1, 1, 1);
    n.conv("svtr_conv5", 120, 1, 1, 1, 1);
    n.fc("ctc_head", 18_385);
    n.layers
}

/// The built-in profile `table` for model `name`, and a description of where it came from.
pub fn builtin_profile(
    table: &str,
    name: &str,
    page_bytes: u64,
    bytes_per_value: u64,
) -> Option<(Profile, String)> {
    let (layers, what) = match table {
        "pp-ocrv6-det" => (
            det(bytes_per_value),
            "PP-OCRv6 detector (approx. PP-LCNetV3 ×0.75 + RSE-FPN + DB head, 640×640)",
        ),
        "pp-ocr-mobile-cls" => (
            cls(bytes_per_value),
            "PP-OCR mobile angle classifier (approx. PP-LCNet ×0.25, 48×192)",
        ),
        "pp-ocrv6-rec" => (
            rec(bytes_per_value),
            "PP-OCRv6 recognizer (approx. PP-LCNetV3 ×0.95 + SVTR + CTC over 18,385 chars, 48×320)",
        ),
        _ => return None,
    };
    Some((layered(name, page_bytes, &layers), what.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_counts_are_near_the_released_models() {
        let params = |l: Vec<LayerSpec>| l.iter().map(|x| x.weight_bytes).sum::<u64>();
        let (d, c, r) = (params(det(1)), params(cls(1)), params(rec(1)));
        assert!((600_000..2_500_000).contains(&d), "det {d}");
        assert!((30_000..400_000).contains(&c), "cls {c}");
        assert!((3_000_000..6_000_000).contains(&r), "rec {r}");
    }
}
