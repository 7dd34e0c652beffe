//! Pad (constant, reflect, edge) on N, C, H, W vs. a CPU reference built by index arithmetic on
//! NCHW arrays. Pad copies values, so results must match exactly.

use vk_backend::kernels::{pad, pad_output_shape, PadMode, PadParams};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn src(i: isize, len: usize, mode: PadMode) -> Option<usize> {
    let l = len as isize;
    if (0..l).contains(&i) {
        return Some(i as usize);
    }
    match mode {
        PadMode::Constant => None,
        PadMode::Edge => Some(i.clamp(0, l - 1) as usize),
        PadMode::Reflect => Some(if i < 0 { -i } else { 2 * (l - 1) - i } as usize),
    }
}

fn pad_ref(x: &[f64], shape: &[usize], p: &PadParams) -> (Vec<usize>, Vec<f64>) {
    let r = shape.len();
    let out: Vec<usize> = (0..r)
        .map(|a| shape[a] + p.pads[a] + p.pads[r + a])
        .collect();
    let total: usize = out.iter().product();
    let mut vals = Vec::with_capacity(total);
    for lin in 0..total {
        let mut rem = lin;
        let mut idx = vec![0usize; r];
        for a in (0..r).rev() {
            idx[a] = rem % out[a];
            rem /= out[a];
        }
        let mut off = Some(0usize);
        for a in 0..r {
            let s = src(idx[a] as isize - p.pads[a] as isize, shape[a], p.mode);
            off = match (off, s) {
                (Some(o), Some(s)) => Some(o * shape[a] + s),
                _ => None,
            };
        }
        vals.push(off.map_or(p.value as f64, |o| x[o]));
    }
    (out, vals)
}

#[test]
fn pad_matches_reference() {
    let d = device();
    let cases: Vec<(Vec<usize>, PadParams)> = vec![
        (
            vec![2, 5, 3, 4],
            PadParams {
                mode: PadMode::Constant,
                pads: vec![1, 2, 1, 0, 0, 3, 2, 2],
                value: 1.5,
            },
        ),
        (
            vec![2, 5, 3, 4],
            PadParams {
                mode: PadMode::Reflect,
                pads: vec![0, 1, 2, 3, 1, 2, 1, 3],
                value: 0.0,
            },
        ),
        (
            vec![2, 5, 3, 4],
            PadParams {
                mode: PadMode::Edge,
                pads: vec![1, 3, 0, 2, 2, 1, 3, 0],
                value: 0.0,
            },
        ),
        (
            vec![6, 3, 5],
            PadParams {
                mode: PadMode::Reflect,
                pads: vec![2, 1, 4, 3, 2, 0],
                value: 0.0,
            },
        ),
        (
            vec![3, 7],
            PadParams {
                mode: PadMode::Constant,
                pads: vec![2, 1, 0, 3],
                value: -2.0,
            },
        ),
    ];
    let mut rng = Rng::new(51);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for (shape, params) in &cases {
            let xv = rng.vec(shape.iter().product(), -2.0, 2.0);
            let x = Tensor::from_data(&d, "x", shape, p, &xv).unwrap();
            let y = pad(&mut rec, &x, params, "y").unwrap();
            let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
            let (oshape, want) = pad_ref(&xr, shape, params);
            assert_eq!(y.shape(), &oshape[..]);
            checks.push((format!("{shape:?} {params:?} {p:?}"), y, want));
        }
        rec.submit_and_wait().unwrap();
        for (what, y, want) in &checks {
            assert_close(what, &y.download().unwrap(), want, 0.0);
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn pad_errors() {
    let reflect = PadParams {
        mode: PadMode::Reflect,
        pads: vec![0, 0, 3, 0, 0, 0, 0, 0],
        value: 0.0,
    };
    let e = pad_output_shape(&[1, 2, 3, 4], &reflect).unwrap_err();
    assert!(e.to_string().contains("smaller than its size"), "{e}");
    let short = PadParams {
        pads: vec![1, 1],
        ..reflect.clone()
    };
    assert!(pad_output_shape(&[1, 2, 3, 4], &short).is_err());
    assert!(pad_output_shape(&[1, 1, 2, 3, 4], &reflect).is_err());
}
