//! Reductions (Sum, Mean, Max, Min, ArgMax, ArgMin; any axes; keepdims) vs. an f64 CPU reference.
//! Tolerance on |got - ref| / max(1, |ref|): fp32 1e-5 * n, fp16 2e-3 (inputs rounded to fp16
//! first; sums accumulate in fp32). Arg outputs must match exactly.

use vk_backend::kernels::{reduce, ReduceOp};
use vk_backend::testing::{assert_close, assert_no_validation_messages, device, Rng};
use vk_backend::{Precision, QueueKind, Recorder, Tensor};

fn reduce_ref(
    op: ReduceOp,
    x: &[f64],
    shape: &[usize],
    axes: &[usize],
    keep: bool,
) -> (Vec<usize>, Vec<f64>) {
    let out_shape: Vec<usize> = shape
        .iter()
        .enumerate()
        .filter_map(|(i, &d)| match (axes.contains(&i), keep) {
            (true, true) => Some(1),
            (true, false) => None,
            _ => Some(d),
        })
        .collect();
    let kept: Vec<usize> = shape
        .iter()
        .enumerate()
        .map(|(i, &d)| if axes.contains(&i) { 1 } else { d })
        .collect();
    let n_out: usize = kept.iter().product();
    let mut groups: Vec<Vec<(usize, f64)>> = vec![Vec::new(); n_out];
    for (f, &v) in x.iter().enumerate() {
        let mut idx = vec![0; shape.len()];
        let mut t = f;
        for d in (0..shape.len()).rev() {
            idx[d] = t % shape[d];
            t /= shape[d];
        }
        let mut o = 0;
        for d in 0..shape.len() {
            o = o * kept[d] + if axes.contains(&d) { 0 } else { idx[d] };
        }
        // Position along the (single) arg axis.
        let pos = axes.first().map(|&a| idx[a]).unwrap_or(0);
        groups[o].push((pos, v));
    }
    let out = groups
        .iter()
        .map(|g| {
            let vals = g.iter().map(|p| p.1);
            match op {
                ReduceOp::Sum => vals.sum(),
                ReduceOp::Mean => vals.sum::<f64>() / g.len() as f64,
                ReduceOp::Max => vals.fold(f64::NEG_INFINITY, f64::max),
                ReduceOp::Min => vals.fold(f64::INFINITY, f64::min),
                ReduceOp::ArgMax { select_last_index } | ReduceOp::ArgMin { select_last_index } => {
                    let is_max = matches!(op, ReduceOp::ArgMax { .. });
                    let mut best = g[0];
                    for &(p, v) in &g[1..] {
                        let better = if is_max { v > best.1 } else { v < best.1 };
                        if better || (select_last_index && v == best.1) {
                            best = (p, v);
                        }
                    }
                    best.0 as f64
                }
            }
        })
        .collect();
    (out_shape, out)
}

#[test]
fn reductions_any_axes() {
    let d = device();
    let cases: &[(&[usize], &[i64], bool)] = &[
        (&[2, 5, 3, 7], &[1], true),
        (&[2, 5, 3, 7], &[1], false),
        (&[2, 5, 3, 7], &[2, 3], true),
        (&[2, 5, 3, 7], &[-1], false),
        (&[2, 5, 3, 7], &[0, 2], false),
        (&[2, 5, 3, 7], &[], false),
        (&[3, 6, 9], &[0], false),
        (&[3, 6, 9], &[2], true),
        (&[4, 3, 2, 5, 6], &[1], false),
        (&[9], &[0], true),
    ];
    let ops = [ReduceOp::Sum, ReduceOp::Mean, ReduceOp::Max, ReduceOp::Min];
    let mut rng = Rng::new(31);
    for p in [Precision::F32, Precision::F16] {
        let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
        let mut checks = Vec::new();
        for &(shape, axes, keep) in cases {
            let r = shape.len() as i64;
            let ax: Vec<usize> = if axes.is_empty() {
                (0..shape.len()).collect()
            } else {
                axes.iter().map(|&a| ((a + r) % r) as usize).collect()
            };
            let mut op_list: Vec<ReduceOp> = ops.to_vec();
            if ax.len() == 1 {
                for last in [false, true] {
                    op_list.push(ReduceOp::ArgMax {
                        select_last_index: last,
                    });
                    op_list.push(ReduceOp::ArgMin {
                        select_last_index: last,
                    });
                }
            }
            for op in op_list {
                // Arg ops: few distinct values so ties happen.
                let xv: Vec<f32> =
                    if matches!(op, ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. }) {
                        rng.vec(shape.iter().product(), 0.0, 4.0)
                            .iter()
                            .map(|v| v.floor())
                            .collect()
                    } else {
                        rng.vec(shape.iter().product(), -2.0, 2.0)
                    };
                let x = Tensor::from_data(&d, "x", shape, p, &xv).unwrap();
                let out = reduce(&mut rec, op, &x, axes, keep, "y").unwrap();
                let xr: Vec<f64> = xv.iter().map(|&v| p.round(v) as f64).collect();
                let (s, want) = reduce_ref(op, &xr, shape, &ax, keep);
                assert_eq!(out.shape(), &s[..], "{op:?} {shape:?} {axes:?} {keep}");
                let n = xr.len() as f64;
                let tol = match (op, p) {
                    (ReduceOp::ArgMax { .. } | ReduceOp::ArgMin { .. }, _) => 0.0,
                    (_, Precision::F16) => 2e-3,
                    (_, Precision::F32) => 1e-5 * n.sqrt().max(1.0),
                };
                checks.push((
                    format!("{op:?} {shape:?} axes {axes:?} keep {keep} {p:?}"),
                    out,
                    want,
                    tol,
                ));
            }
        }
        rec.submit_and_wait().unwrap();
        for (what, out, want, tol) in checks {
            assert_close(&what, &out.download().unwrap(), &want, tol);
        }
    }
    assert_no_validation_messages(&d);
}

#[test]
fn arg_needs_one_axis() {
    let d = device();
    let x = Tensor::new(&d, "x", &[2, 3], Precision::F32).unwrap();
    let mut rec = Recorder::new(&d, QueueKind::Compute).unwrap();
    let op = ReduceOp::ArgMax {
        select_last_index: false,
    };
    let e = reduce(&mut rec, op, &x, &[0, 1], false, "y").unwrap_err();
    assert!(e.to_string().contains("exactly one axis"), "{e}");
    let e = reduce(&mut rec, ReduceOp::Sum, &x, &[5], false, "y").unwrap_err();
    assert!(e.to_string().contains("out of range"), "{e}");
}
