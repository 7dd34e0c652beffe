//! ConvTranspose2d vs. an f64 CPU reference in scatter form (each input pixel adds its taps to the
//! output; the kernel gathers instead). Inputs/weights are rounded to the storage precision first;
//! tolerance |got - ref| <= tol * max(1, |ref|), tol = 1e-4 (fp32) / 3e-3 (fp16).

use vk_backend::kernels::{
    conv_transpose2d, conv_transpose2d_output_shape, ConvTranspose2dParams, ConvWeights, UnaryOp,
    Window2d,
};
use vk_backend::layout::{pack_conv_transpose_filter, pack_vector};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{AtlasConfig, Precision, QueueKind, Recorder, Tensor, WeightAtlas};

fn tol(p: Precision) -> f64 {
    match p {
        Precision::F16 => 3e-3,
        Precision::F32 => 1e-4,
    }
}

fn act_ref(op: UnaryOp, x: f64) -> f64 {
    match op {
        UnaryOp::Identity => x,
        UnaryOp::Relu => x.max(0.0),
        UnaryOp::Sigmoid => 1.0 / (1.0 + (-x).exp()),
        UnaryOp::LeakyRelu { alpha } => {
            if x < 0.0 {
                alpha as f64 * x
            } else {
                x
            }
        }
        other => panic!("no reference for {other:?}"),
    }
}

struct Case {
    x: [usize; 4],
    p: ConvTranspose2dParams,
    bias: bool,
}

/// Scatter-form reference; returns (shape, values).
fn reference(c: &Case, x: &[f64], w: &[f64], b: Option<&[f64]>) -> ([usize; 4], Vec<f64>) {
    let [n, ci, h, wd] = c.x;
    let p = &c.p;
    let win = p.window;
    let (icg, ocg) = (ci / p.groups, p.out_channels / p.groups);
    let [kh, kw] = win.kernel;
    let oh = (h - 1) * win.strides[0] + (kh - 1) * win.dilations[0] + 1 + p.output_padding[0]
        - win.pads[0]
        - win.pads[2];
    let ow = (wd - 1) * win.strides[1] + (kw - 1) * win.dilations[1] + 1 + p.output_padding[1]
        - win.pads[1]
        - win.pads[3];
    let o = p.out_channels;
    let mut out = vec![0f64; n * o * oh * ow];
    for nn in 0..n {
        for ic in 0..ci {
            let g = ic / icg;
            for iy in 0..h {
                for ix in 0..wd {
                    let xv = x[((nn * ci + ic) * h + iy) * wd + ix];
                    for oj in 0..ocg {
                        let oc = g * ocg + oj;
                        for ky in 0..kh {
                            for kx in 0..kw {
                                let oy = (iy * win.strides[0] + ky * win.dilations[0]) as isize
                                    - win.pads[0] as isize;
                                let ox = (ix * win.strides[1] + kx * win.dilations[1]) as isize
                                    - win.pads[1] as isize;
                                if oy < 0 || ox < 0 || oy >= oh as isize || ox >= ow as isize {
                                    continue;
                                }
                                out[((nn * o + oc) * oh + oy as usize) * ow + ox as usize] +=
                                    xv * w[((ic * ocg + oj) * kh + ky) * kw + kx];
                            }
                        }
                    }
                }
            }
        }
    }
    for nn in 0..n {
        for oc in 0..o {
            for k in 0..oh * ow {
                let v = &mut out[(nn * o + oc) * oh * ow + k];
                *v = act_ref(p.activation, *v + b.map_or(0.0, |b| b[oc]));
            }
        }
    }
    ([n, o, oh, ow], out)
}

#[allow(clippy::too_many_arguments)]
fn params(
    k: [usize; 2],
    s: [usize; 2],
    d: [usize; 2],
    pads: [usize; 4],
    groups: usize,
    o: usize,
    op: [usize; 2],
    act: UnaryOp,
) -> ConvTranspose2dParams {
    ConvTranspose2dParams {
        window: Window2d {
            kernel: k,
            strides: s,
            dilations: d,
            pads,
        },
        groups,
        out_channels: o,
        output_padding: op,
        activation: act,
    }
}

#[test]
fn conv_transpose2d_matches_reference() {
    let d = device();
    let cases = vec![
        Case {
            x: [1, 4, 5, 6],
            p: params(
                [3, 3],
                [2, 2],
                [1, 1],
                [1, 1, 1, 1],
                1,
                3,
                [1, 1],
                UnaryOp::Relu,
            ),
            bias: true,
        },
        Case {
            x: [2, 6, 4, 5],
            p: params(
                [2, 3],
                [2, 1],
                [1, 2],
                [0, 1, 1, 0],
                2,
                4,
                [1, 0],
                UnaryOp::LeakyRelu { alpha: 0.2 },
            ),
            bias: true,
        },
        Case {
            x: [1, 8, 3, 4],
            p: params(
                [4, 4],
                [2, 2],
                [1, 1],
                [1, 1, 1, 1],
                2,
                8,
                [0, 0],
                UnaryOp::Sigmoid,
            ),
            bias: false,
        },
        Case {
            x: [1, 5, 4, 3],
            p: params(
                [2, 2],
                [2, 2],
                [1, 1],
                [0; 4],
                1,
                7,
                [0, 0],
                UnaryOp::Identity,
            ),
            bias: true,
        },
        Case {
            x: [1, 3, 3, 3],
            p: params(
                [3, 3],
                [3, 2],
                [1, 1],
                [2, 0, 0, 1],
                1,
                5,
                [2, 1],
                UnaryOp::Identity,
            ),
            bias: false,
        },
        // The PP-OCR detector's 2x2 upsampling (24 channels), over several workgroups of
        // output pixels and six output layers.
        Case {
            x: [1, 24, 5, 7],
            p: params([2, 2], [2, 2], [1, 1], [0; 4], 1, 24, [0, 0], UnaryOp::Relu),
            bias: true,
        },
        // And its last one, to one channel.
        Case {
            x: [1, 24, 6, 5],
            p: params(
                [2, 2],
                [2, 2],
                [1, 1],
                [0; 4],
                1,
                1,
                [0, 0],
                UnaryOp::Sigmoid,
            ),
            bias: true,
        },
        // A long filter row (4 x 4 taps x 18 input texels).
        Case {
            x: [1, 72, 3, 4],
            p: params(
                [4, 4],
                [2, 2],
                [1, 1],
                [1, 1, 1, 1],
                1,
                8,
                [0, 0],
                UnaryOp::Identity,
            ),
            bias: true,
        },
    ];
    let mut rng = Rng::new(31);
    for prec in [Precision::F32, Precision::F16] {
        let mut space: Vec<f32> = Vec::new();
        let mut prepared = Vec::new();
        for c in &cases {
            let ci = c.x[1];
            let ocg = c.p.out_channels / c.p.groups;
            let [kh, kw] = c.p.window.kernel;
            let w = rng.vec(ci * ocg * kh * kw, -0.5, 0.5);
            let b = rng.vec(c.p.out_channels, -0.5, 0.5);
            let filter = (space.len() / 4) as u32;
            space.extend(pack_conv_transpose_filter(&w, ci, ocg, c.p.groups, kh, kw).unwrap());
            let bias = c.bias.then(|| {
                let off = (space.len() / 4) as u32;
                space.extend(pack_vector(&b));
                off
            });
            prepared.push((w, b, ConvWeights { filter, bias }));
        }
        let atlas = WeightAtlas::new(
            &d,
            AtlasConfig {
                slots: 16,
                precision: prec,
                page_height: Some(1),
                logical_pages: 16,
            },
        )
        .unwrap();
        atlas.load_all_now(&space).unwrap();
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        rec.use_weights(&atlas);
        let mut checks = Vec::new();
        for (c, (w, b, cw)) in cases.iter().zip(prepared) {
            let xv = rng.vec(c.x.iter().product(), -1.0, 1.0);
            let x = Tensor::from_data(&d, "x", &c.x, prec, &xv).unwrap();
            let y = conv_transpose2d(&mut rec, &x, cw, &c.p, "y").unwrap();
            let r = |v: &[f32]| v.iter().map(|&v| prec.round(v) as f64).collect::<Vec<_>>();
            let (shape, want) = reference(c, &r(&xv), &r(&w), c.bias.then(|| r(&b)).as_deref());
            assert_eq!(y.shape(), &shape[..]);
            checks.push((format!("{:?} {:?} {prec:?}", c.x, c.p), y, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, y, want) in &checks {
            assert_close(what, &y.download().unwrap(), want, tol(prec));
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn conv_transpose2d_errors() {
    let p = params(
        [3, 3],
        [2, 2],
        [1, 1],
        [0; 4],
        1,
        4,
        [2, 0],
        UnaryOp::Identity,
    );
    let e = conv_transpose2d_output_shape(&[1, 4, 5, 5], &p).unwrap_err();
    assert!(e.to_string().contains("output_padding"), "{e}");
    let p = params(
        [3, 3],
        [2, 2],
        [1, 1],
        [0; 4],
        3,
        4,
        [0, 0],
        UnaryOp::Identity,
    );
    assert!(conv_transpose2d_output_shape(&[1, 4, 5, 5], &p).is_err());
    let p = params(
        [3, 3],
        [2, 2],
        [1, 1],
        [0; 4],
        1,
        4,
        [0, 0],
        UnaryOp::Identity,
    );
    assert_eq!(
        conv_transpose2d_output_shape(&[1, 4, 5, 5], &p).unwrap(),
        [1, 4, 11, 11]
    );
}
