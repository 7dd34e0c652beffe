//! Conv2d (general, grouped, depthwise) with fused bias + activation vs. an f64 CPU reference on
//! random inputs. The reference uses inputs/weights rounded to the storage precision; tolerance
//! |got - ref| <= tol * max(1, |ref|) with tol = 1e-4 (fp32) / 3e-3 (fp16: output rounding is
//! 2^-11 relative, accumulation is fp32). Weights go through small atlas pages so filters cross
//! page boundaries.

use vk_backend::kernels::{
    conv2d, conv2d_add_into, conv2d_into, conv2d_is_depthwise, conv2d_kernel, conv2d_output_shape,
    conv2d_split_add_into, conv2d_split_shape, Conv2dParams, ConvKernel, ConvOperands, ConvWeights,
    CoopTile, UnaryOp, Window2d,
};
use vk_backend::layout::{pack_conv_filter, pack_depthwise_filter, pack_vector};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Tensor, WeightAtlas};

fn addend(t: &Tensor) -> ConvOperands<'_> {
    ConvOperands {
        addend: Some(t),
        input_scale: None,
    }
}

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 3e-3,
        Precision::F32 => 1e-4,
    }
}

fn erf_ref(x: f64) -> f64 {
    if x.abs() > 4.5 {
        return x.signum();
    }
    let (mut sum, mut term) = (0.0, x);
    for n in 0..200 {
        sum += term / (2 * n + 1) as f64;
        term *= -x * x / (n + 1) as f64;
        if term.abs() < 1e-18 {
            break;
        }
    }
    sum * 2.0 / std::f64::consts::PI.sqrt()
}

fn act_ref(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Identity => x,
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Clip { min, max } => x.clamp(min as f64, max as f64),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::HardSwish => x * ((x + 3.0).clamp(0.0, 6.0) / 6.0),
        UnaryOp::HardSigmoid { alpha, beta } => (alpha as f64 * x + beta as f64).clamp(0.0, 1.0),
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        UnaryOp::Tanh => x.tanh(),
        UnaryOp::Gelu => 0.5 * x * (1.0 + erf_ref(x / 2f64.sqrt())),
        other => panic!("no reference for {other:?}"),
    }
}

struct Case {
    x: [usize; 4],
    o: usize,
    groups: usize,
    window: Window2d,
    bias: bool,
    act: UnaryOp,
}

/// Direct f64 conv: out[n,o,oy,ox] = act(b[o] + sum x[n, g*icg+i, iy, ix] * w[o, i, ky, kx]).
fn conv_ref(c: &Case, x: &[f64], w: &[f64], b: Option<&[f64]>, oh: usize, ow: usize) -> Vec<f64> {
    let [n, ci, h, wd] = c.x;
    let (icg, ocg) = (ci / c.groups, c.o / c.groups);
    let [kh, kw] = c.window.kernel;
    let mut out = vec![0f64; n * c.o * oh * ow];
    for nn in 0..n {
        for o in 0..c.o {
            let g = o / ocg;
            for oy in 0..oh {
                for ox in 0..ow {
                    let mut s = b.map_or(0.0, |b| b[o]);
                    for i in 0..icg {
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let iy = (oy * c.window.strides[0] + ky * c.window.dilations[0])
                                    as isize
                                    - c.window.pads[0] as isize;
                                let ix = (ox * c.window.strides[1] + kx * c.window.dilations[1])
                                    as isize
                                    - c.window.pads[1] as isize;
                                if iy < 0 || ix < 0 || iy >= h as isize || ix >= wd as isize {
                                    continue;
                                }
                                let xv = x[((nn * ci + g * icg + i) * h + iy as usize) * wd
                                    + ix as usize];
                                s += xv * w[((o * icg + i) * kh + ky) * kw + kx];
                            }
                        }
                    }
                    out[((nn * c.o + o) * oh + oy) * ow + ox] = act_ref(c.act, s);
                }
            }
        }
    }
    out
}

fn win(k: [usize; 2], s: [usize; 2], d: [usize; 2], pads: [usize; 4]) -> Window2d {
    Window2d {
        kernel: k,
        strides: s,
        dilations: d,
        pads,
    }
}

fn cases() -> Vec<Case> {
    vec![
        // Several tiles of the large cooperative-matrix tile each way (135 pixels, 70 output
        // channels, 45 input texels of reduction: no multiple of a step), batch 2.
        Case {
            x: [2, 20, 9, 15],
            o: 70,
            groups: 1,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Gelu,
        },
        // A 1-D convolution with stride 2, as the Whisper encoder's second one.
        Case {
            x: [1, 24, 1, 150],
            o: 40,
            groups: 1,
            window: win([1, 3], [1, 2], [1, 1], [0, 1, 0, 1]),
            bias: true,
            act: UnaryOp::Identity,
        },
        // Plain 3x3 same conv, C and O not multiples of 4, batch 2.
        Case {
            x: [2, 5, 7, 9],
            o: 6,
            groups: 1,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        // Grouped, unaligned (icg 3, ocg 2): general path; stride 2, dilation 2, asymmetric pads.
        Case {
            x: [1, 6, 11, 10],
            o: 4,
            groups: 2,
            window: win([3, 2], [2, 2], [2, 2], [1, 0, 2, 1]),
            bias: true,
            act: UnaryOp::HardSwish,
        },
        // Grouped, aligned (icg 4, ocg 4), stride (2, 1), no bias.
        Case {
            x: [1, 8, 9, 6],
            o: 8,
            groups: 2,
            window: win([3, 3], [2, 1], [1, 1], [0, 1, 1, 0]),
            bias: false,
            act: UnaryOp::Sigmoid,
        },
        // Depthwise (fast path), stride 2, Relu6.
        Case {
            x: [2, 7, 9, 11],
            o: 7,
            groups: 7,
            window: win([3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Clip { min: 0.0, max: 6.0 },
        },
        // Depthwise 5x5, dilation 2, asymmetric pads.
        Case {
            x: [1, 5, 13, 10],
            o: 5,
            groups: 5,
            window: win([5, 5], [1, 1], [2, 2], [2, 3, 4, 1]),
            bias: true,
            act: UnaryOp::LeakyRelu { alpha: 0.1 },
        },
        // Pointwise, odd sizes.
        Case {
            x: [1, 13, 3, 17],
            o: 9,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            bias: true,
            act: UnaryOp::Tanh,
        },
        // Depthwise multiplier 2 (groups == C, O = 2C): general path.
        Case {
            x: [1, 3, 6, 7],
            o: 6,
            groups: 3,
            window: win([3, 3], [1, 2], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Gelu,
        },
        // Strided 3x3 over many channels (several input texels per tap), HardSigmoid.
        Case {
            x: [1, 18, 8, 8],
            o: 10,
            groups: 1,
            window: win([3, 3], [2, 2], [1, 1], [0, 0, 1, 1]),
            bias: true,
            act: UnaryOp::HardSigmoid {
                alpha: 0.2,
                beta: 0.5,
            },
        },
        // Dense convolutions that the implicit GEMM takes where the device has cooperative
        // matrices: tiles with padded pixels and channels, batch 2 with stride 2 and input
        // channels off the texel, a 7x7 stem over 3 channels, a pointwise conv, and a reduction
        // of 144 steps (every subgroup's share holds several).
        Case {
            x: [2, 10, 9, 11],
            o: 40,
            groups: 1,
            window: win([3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        Case {
            x: [1, 3, 20, 21],
            o: 16,
            groups: 1,
            window: win([7, 7], [2, 2], [1, 1], [3, 3, 3, 3]),
            bias: true,
            act: UnaryOp::Identity,
        },
        Case {
            x: [1, 64, 7, 7],
            o: 48,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            bias: false,
            act: UnaryOp::Identity,
        },
        Case {
            x: [1, 256, 3, 5],
            o: 36,
            groups: 1,
            window: win([3, 3], [1, 1], [2, 1], [2, 1, 2, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        // A depthwise conv with enough output units for the direct kernel on any device, its
        // filter read through its pages found once (conv2d_dw_plain.comp).
        Case {
            x: [1, 24, 16, 16],
            o: 24,
            groups: 24,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        // Long reductions over one or two output units (conv2d_split > 1 on any device: the
        // reduction's length sets the width): 64 lanes over 64 input texels x 9 taps, 32 over a
        // 7x7 kernel of 2 input texels (a lane's steps cross taps), 16 with padded output
        // channels, 8 for a pointwise conv; depthwise 3x3 (4 lanes) and 5x5 (8 lanes).
        Case {
            x: [1, 256, 1, 3],
            o: 4,
            groups: 1,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Identity,
        },
        Case {
            x: [1, 8, 7, 7],
            o: 4,
            groups: 1,
            window: win([7, 7], [4, 4], [1, 1], [3, 3, 3, 3]),
            bias: false,
            act: UnaryOp::Tanh,
        },
        Case {
            x: [1, 16, 2, 3],
            o: 3,
            groups: 1,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        Case {
            x: [1, 64, 1, 4],
            o: 4,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            bias: true,
            act: UnaryOp::Identity,
        },
        Case {
            x: [1, 4, 1, 3],
            o: 4,
            groups: 4,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        Case {
            x: [1, 8, 1, 2],
            o: 8,
            groups: 8,
            window: win([5, 5], [1, 1], [1, 1], [2, 2, 2, 2]),
            bias: true,
            act: UnaryOp::Identity,
        },
        // Squeeze-and-excitation convolutions: 1x1 filters on one pixel (fewer pixels than
        // the tensor cores' smallest tile, so the split kernel's 1x1 path on every device),
        // long (240 input texels over 64 lanes), wide (960 outputs) and with a partial input
        // texel; and a 1x1 filter whose padding puts some output rows outside the input.
        Case {
            x: [1, 960, 1, 1],
            o: 240,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            bias: true,
            act: UnaryOp::Relu,
        },
        Case {
            x: [1, 240, 1, 1],
            o: 960,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            bias: true,
            act: UnaryOp::Sigmoid,
        },
        Case {
            x: [1, 22, 1, 1],
            o: 88,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [0, 0, 0, 0]),
            bias: false,
            act: UnaryOp::Identity,
        },
        Case {
            x: [1, 40, 1, 2],
            o: 20,
            groups: 1,
            window: win([1, 1], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Identity,
        },
        // Outputs of whole 8x8 workgroups (8 rows of 8 units): the direct kernels' per-layer
        // grid on every device; the cases above leave most of such a grid idle, so on lavapipe
        // they count their units across rows and layers instead (`CONV_FLAT_UNITS`). The
        // depthwise one has 2^18 units, so that it runs on the direct kernel on a GPU too
        // (where outputs of fewer units than half its concurrent invocations split: 135 k on an
        // H200, where a smaller case left the direct depthwise kernel uncovered).
        Case {
            x: [1, 8, 8, 32],
            o: 12,
            groups: 1,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Relu,
        },
        Case {
            x: [1, 256, 64, 256],
            o: 256,
            groups: 256,
            window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
            bias: true,
            act: UnaryOp::Identity,
        },
        // Kernel larger than stride with no activation.
        Case {
            x: [1, 4, 5, 5],
            o: 4,
            groups: 1,
            window: win([2, 4], [1, 3], [1, 1], [0, 2, 0, 2]),
            bias: false,
            act: UnaryOp::Identity,
        },
    ]
}

#[test]
fn conv2d_matches_reference() {
    let d = device();
    let kernels = check_cases(&d, &[Precision::F32, Precision::F16], 11);
    // Every kernel, and split reductions of every width, are covered (a device with more
    // concurrent invocations splits the larger cases too). Where the implicit GEMM runs the
    // dense convolutions, it must take the fp16 cases that ask for it; the dense splits then only
    // cover what it leaves (fp32 still covers them all).
    let split = |lanes| ConvKernel::Split { lanes };
    let mut want = vec![
        (false, false, ConvKernel::Direct),
        (true, false, ConvKernel::Direct),
        (false, true, ConvKernel::Direct),
        (true, true, ConvKernel::Direct),
    ];
    for fp16 in [false, true] {
        want.extend([(fp16, true, split(4)), (fp16, true, split(8))]);
    }
    want.extend([2, 4, 8, 16, 32, 64].map(|l| (false, false, split(l))));
    if d.features().cooperative_matrix_f16 {
        want.push((true, false, ConvKernel::CoopGemm(CoopTile::Small)));
    } else {
        want.extend([2, 4, 8, 16, 32, 64].map(|l| (true, false, split(l))));
        assert!(!kernels
            .iter()
            .any(|k| matches!(k.2, ConvKernel::CoopGemm(_))));
    }
    for w in want {
        assert!(
            kernels.contains(&w),
            "(fp16, depthwise, kernel) {w:?} not covered: {kernels:?}"
        );
    }
}

/// Each cooperative-matrix tile, forced onto every dense fp16 case (the shapes pick the small
/// one for all of them on an H200). Without cooperative matrices the portable kernels run the
/// same cases.
#[test]
fn conv2d_on_each_cooperative_tile_matches_reference() {
    for tile in [
        CoopTile::Small,
        CoopTile::Wide,
        CoopTile::Large,
        CoopTile::LargeWide,
    ] {
        let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
            coop_conv_tile: Some(tile),
            ..vk_backend::DeviceOptions::from_env()
        })
        .unwrap();
        let kernels = check_cases(&d, &[Precision::F16], 13);
        let coop = kernels.contains(&(true, false, ConvKernel::CoopGemm(tile)));
        assert_eq!(
            coop,
            d.features().cooperative_matrix_f16,
            "{tile:?}: {kernels:?}"
        );
        if !coop {
            eprintln!("no cooperative matrices on this device: the portable kernels ran");
        }
    }
}

/// Runs every case of [`cases`] at each precision on `d` against the f64 reference, and returns
/// the kernels that ran them (fp16, depthwise, kernel).
fn check_cases(
    d: &vk_backend::Device,
    precisions: &[Precision],
    seed: u64,
) -> std::collections::BTreeSet<(bool, bool, ConvKernel)> {
    let mut rng = Rng::new(seed);
    let mut kernels = std::collections::BTreeSet::new();
    for &p in precisions {
        // Pack every case's weights into one weight space, like the compiler does for a model.
        let mut space: Vec<f32> = Vec::new();
        let mut prepared = Vec::new();
        for c in cases() {
            let [_, ci, _, _] = c.x;
            let icg = ci / c.groups;
            let [kh, kw] = c.window.kernel;
            let w = rng.vec(c.o * icg * kh * kw, -0.5, 0.5);
            let b = rng.vec(c.o, -0.5, 0.5);
            let packed = if conv2d_is_depthwise(ci, c.o, c.groups) {
                pack_depthwise_filter(&w, c.o, kh, kw).unwrap()
            } else {
                pack_conv_filter(&w, c.o, icg, kh, kw).unwrap()
            };
            let filter = (space.len() / 4) as u32;
            space.extend(packed);
            let bias = if c.bias {
                let off = (space.len() / 4) as u32;
                space.extend(pack_vector(&b));
                Some(off)
            } else {
                None
            };
            prepared.push((c, w, b, ConvWeights { filter, bias }));
        }
        let atlas = WeightAtlas::new(
            d,
            AtlasConfig {
                slots: 512,
                precision: p,
                page_height: Some(1),
                logical_pages: 512,
            },
        )
        .unwrap();
        assert!(space.len() / 4 > atlas.texels_per_page() as usize);
        atlas.load_all_now(&space).unwrap();

        let mut rec = Recorder::new(d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        let mut checks = Vec::new();
        for (i, (c, w, b, cw)) in prepared.into_iter().enumerate() {
            let xv = rng.vec(c.x.iter().product(), -1.0, 1.0);
            let x = Tensor::from_data(d, "x", &c.x, p, &xv).unwrap();
            // Every other dense case scales its input's channels (a squeeze-and-excitation's
            // Mul folded into the convolution).
            let [n, ci, h, wd] = c.x;
            let scale = (c.groups == 1 && i % 2 == 1).then(|| rng.vec(n * ci, 0.25, 1.5));
            let scale_tensor = scale
                .as_ref()
                .map(|s| Tensor::from_data(d, "scale", &[n, ci, 1, 1], p, s).unwrap());
            let operands = ConvOperands {
                addend: None,
                input_scale: scale_tensor.as_ref(),
            };
            let params = Conv2dParams {
                window: c.window,
                groups: c.groups,
                out_channels: c.o,
                activation: c.act,
            };
            let depthwise = conv2d_is_depthwise(c.x[1], c.o, c.groups);
            kernels.insert((
                p == Precision::F16,
                depthwise,
                conv2d_kernel(d, &c.x, &params, p).unwrap(),
            ));
            // Over reduction spans where the shape (or the device's options) splits it.
            let shape = conv2d_output_shape(&c.x, &params).unwrap();
            let out = Tensor::new(d, "y", &shape, p).unwrap();
            match conv2d_split_shape(&rec, &x, &params, &out).unwrap() {
                Some(s) => {
                    let partials = Tensor::new(d, "partials", &s, Precision::F32).unwrap();
                    conv2d_split_add_into(&mut rec, &x, cw, &params, operands, &out, &partials)
                }
                None => conv2d_add_into(&mut rec, &x, cw, &params, operands, &out),
            }
            .unwrap();
            let [_, _, oh, ow] = [0, 0, out.shape()[2], out.shape()[3]];
            let r = |v: &[f32]| v.iter().map(|&v| p.round(v) as f64).collect::<Vec<_>>();
            let mut x_in = r(&xv);
            if let Some(s) = &scale {
                let s = r(s);
                for (e, v) in x_in.iter_mut().enumerate() {
                    *v *= s[e / (h * wd)];
                }
            }
            let want = conv_ref(&c, &x_in, &r(&w), c.bias.then(|| r(&b)).as_deref(), oh, ow);
            checks.push((
                format!(
                    "{:?} o={} g={} {:?} {p:?} scaled={}",
                    c.x,
                    c.o,
                    c.groups,
                    c.window,
                    scale.is_some()
                ),
                out,
                want,
            ));
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want) in &checks {
            assert_close(what, &out.download().unwrap(), want, tol(p));
        }
    }
    assert_no_validation_messages(d);
    kernels
}

/// The small and wide tensor-core tiles over three reduction spans a convolution (their sums
/// finished by the combine kernel), on every dense fp16 case; without cooperative matrices
/// nothing splits and the portable kernels run the same cases.
#[test]
fn conv2d_over_reduction_spans_matches_reference() {
    for tile in [CoopTile::Small, CoopTile::Wide] {
        let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
            coop_conv_tile: Some(tile),
            conv_split_k: Some(3),
            ..vk_backend::DeviceOptions::from_env()
        })
        .unwrap();
        let rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let split = cases()
            .iter()
            .filter(|c| {
                let params = Conv2dParams {
                    window: c.window,
                    groups: c.groups,
                    out_channels: c.o,
                    activation: c.act,
                };
                let x = Tensor::new(&d, "x", &c.x, Precision::F16).unwrap();
                let shape = conv2d_output_shape(&c.x, &params).unwrap();
                let out = Tensor::new(&d, "y", &shape, Precision::F16).unwrap();
                conv2d_split_shape(&rec, &x, &params, &out)
                    .unwrap()
                    .is_some()
            })
            .count();
        assert_eq!(
            split > 0,
            d.features().cooperative_matrix_f16,
            "{tile:?}: {split} cases split"
        );
        check_cases(&d, &[Precision::F16], 29);
    }
}

#[test]
fn conv2d_output_shapes_and_errors() {
    let d = device();
    let x = Tensor::new(&d, "x", &[1, 6, 10, 7], Precision::F32).unwrap();
    let mut p = Conv2dParams {
        window: win([3, 3], [2, 2], [1, 1], [1, 1, 1, 1]),
        groups: 1,
        out_channels: 8,
        activation: UnaryOp::Identity,
    };
    assert_eq!(
        vk_backend::kernels::conv2d_output_shape(x.shape(), &p).unwrap(),
        [1, 8, 5, 4]
    );
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let cw = ConvWeights {
        filter: 0,
        bias: None,
    };
    p.groups = 4;
    let e = conv2d(&mut rec, &x, cw, &p, "y").unwrap_err();
    assert!(e.to_string().contains("groups 4"), "{e}");
    p.groups = 1;
    let wrong = Tensor::new(&d, "wrong", &[1, 8, 5, 5], Precision::F32).unwrap();
    let e = conv2d_into(&mut rec, &x, cw, &p, &wrong).unwrap_err();
    assert!(e.to_string().contains("expected [1, 8, 5, 4]"), "{e}");
    // No atlas bound.
    let e = conv2d(&mut rec, &x, cw, &p, "y").unwrap_err();
    assert!(e.to_string().contains("atlas"), "{e}");
    let x3 = Tensor::new(&d, "x3", &[6, 10, 7], Precision::F32).unwrap();
    assert!(conv2d(&mut rec, &x3, cw, &p, "y").is_err());
}

/// `act(conv + b + addend)`, with the addend in its own image and with the output written over
/// the addend (how the compiler chains partial convolutions in place).
#[test]
fn conv2d_adds_its_addend_before_the_activation_in_place() {
    let d = device();
    let mut rng = Rng::new(23);
    // 20 output channels: the implicit GEMM takes it where the device has cooperative matrices.
    let c = Case {
        x: [1, 6, 9, 11],
        o: 20,
        groups: 1,
        window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
        bias: true,
        act: UnaryOp::Relu,
    };
    // Each cooperative-matrix tile forced too (the portable kernels where there are none).
    let tiles = [
        None,
        Some(CoopTile::Small),
        Some(CoopTile::Wide),
        Some(CoopTile::Large),
        Some(CoopTile::LargeWide),
    ];
    for (tile, p) in tiles
        .into_iter()
        .flat_map(|t| [(t, Precision::F32), (t, Precision::F16)])
    {
        let d = match tile {
            None => d.clone(),
            Some(t) => vk_backend::Device::new(&vk_backend::DeviceOptions {
                coop_conv_tile: Some(t),
                ..vk_backend::DeviceOptions::from_env()
            })
            .unwrap(),
        };
        let (w, b, atlas, cw) = atlas_with_conv3x3(&d, &mut rng, c.o, 6, p);
        let xv = rng.vec(c.x.iter().product(), -1.0, 1.0);
        let zv = rng.vec(c.o * 9 * 11, -1.0, 1.0);
        let x = Tensor::from_data(&d, "x", &c.x, p, &xv).unwrap();
        let shape = [1, c.o, 9, 11];
        let z = Tensor::from_data(&d, "z", &shape, p, &zv).unwrap();
        let fresh = Tensor::new(&d, "y", &shape, p).unwrap();
        let over = Tensor::from_data(&d, "z2", &shape, p, &zv).unwrap();
        let params = Conv2dParams {
            window: c.window,
            groups: 1,
            out_channels: c.o,
            activation: UnaryOp::Relu,
        };
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        conv2d_add_into(&mut rec, &x, cw, &params, addend(&z), &fresh).unwrap();
        conv2d_add_into(&mut rec, &x, cw, &params, addend(&over), &over).unwrap();
        rec.submit_and_wait().unwrap();
        let r = |v: &[f32]| v.iter().map(|&v| p.round(v) as f64).collect::<Vec<_>>();
        let plain = Case {
            act: UnaryOp::Identity,
            ..c
        };
        let sum = conv_ref(&plain, &r(&xv), &r(&w), Some(&r(&b)), 9, 11);
        let want: Vec<f64> = sum
            .iter()
            .zip(r(&zv))
            .map(|(s, z)| act_ref(UnaryOp::Relu, s + z))
            .collect();
        assert!(want.iter().any(|&v| v > 0.5) && want.contains(&0.0));
        assert_close("addend", &fresh.download().unwrap(), &want, tol(p));
        assert_close("addend in place", &over.download().unwrap(), &want, tol(p));
        // A depthwise conv takes no addend; neither does one whose addend has another shape.
        let small = Tensor::new(&d, "small", &[1, c.o, 9, 10], p).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        assert!(conv2d_add_into(&mut rec, &x, cw, &params, addend(&small), &fresh).is_err());
        assert_no_validation_messages(&d);
    }
}

/// On a device whose images are padded to power-of-two row blocks the maps fold into 128-row
/// layers (input and output differently); the convolution reads and writes through those folds.
#[test]
fn conv2d_on_block_friendly_folds_matches_reference() {
    let d = vk_backend::Device::new(&vk_backend::DeviceOptions {
        pads_image_rows: Some(true),
        ..vk_backend::DeviceOptions::from_env()
    })
    .unwrap();
    let mut rng = Rng::new(31);
    let c = Case {
        x: [1, 24, 40, 48],
        o: 20,
        groups: 1,
        window: win([3, 3], [1, 1], [1, 1], [1, 1, 1, 1]),
        bias: true,
        act: UnaryOp::Relu,
    };
    let p = Precision::F16;
    let (w, b, atlas, cw) = atlas_with_conv3x3(&d, &mut rng, c.o, 24, p);
    let xv = rng.vec(c.x.iter().product(), -1.0, 1.0);
    let x = Tensor::from_data(&d, "x", &c.x, p, &xv).unwrap();
    // 6 layers of 40 rows -> 2 layers of 128 rows.
    assert_eq!((x.layout().ph, x.layout().pl), (128, 2));
    let params = Conv2dParams {
        window: c.window,
        groups: 1,
        out_channels: c.o,
        activation: c.act,
    };
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    rec.use_weights(&atlas);
    let out = conv2d(&mut rec, &x, cw, &params, "y").unwrap();
    rec.submit_and_wait().unwrap();
    let r = |v: &[f32]| v.iter().map(|&v| p.round(v) as f64).collect::<Vec<_>>();
    let want = conv_ref(&c, &r(&xv), &r(&w), Some(&r(&b)), 40, 48);
    assert_close(
        "block-friendly folds",
        &out.download().unwrap(),
        &want,
        tol(p),
    );
    assert_no_validation_messages(&d);
}

/// A random 3x3 filter `[o, ci, 3, 3]` and bias `[o]`, packed into a small atlas of precision
/// `p`: the values (for the reference), the atlas and where the conv finds them.
fn atlas_with_conv3x3(
    d: &vk_backend::Device,
    rng: &mut Rng,
    o: usize,
    ci: usize,
    p: Precision,
) -> (Vec<f32>, Vec<f32>, WeightAtlas, ConvWeights) {
    let w = rng.vec(o * ci * 9, -0.5, 0.5);
    let b = rng.vec(o, -0.5, 0.5);
    let mut space = pack_conv_filter(&w, o, ci, 3, 3).unwrap();
    let bias = (space.len() / 4) as u32;
    space.extend(pack_vector(&b));
    let atlas = WeightAtlas::new(
        d,
        AtlasConfig {
            slots: 8,
            precision: p,
            page_height: Some(1),
            logical_pages: 8,
        },
    )
    .unwrap();
    atlas.load_all_now(&space).unwrap();
    let cw = ConvWeights {
        filter: 0,
        bias: Some(bias),
    };
    (w, b, atlas, cw)
}
