//! Pass behaviour on small fixtures: If folding on a bound input, Transpose absorbed into MatMul,
//! a head split's Reshape folded into its Transpose, and the view rule of the layout pass.
use std::path::PathBuf;

use texstream::ir::passes::{layout::is_view, optimize};
use texstream::ir::{Op, ReshapeKind, UnaryOp};
use texstream::onnx::{import, ImportOptions};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

fn static_if(sr: &str) -> texstream::onnx::Model {
    let mut o = ImportOptions::default();
    o.add_binding(&format!("sr={sr}")).unwrap();
    import(&fixture("static_if.onnx"), &o).unwrap()
}

#[test]
fn if_on_bound_input_is_inlined() {
    let m = static_if("16000");
    assert!(m
        .graph
        .nodes
        .iter()
        .any(|n| n.op == Op::Unary(UnaryOp::Relu)));
    assert!(!m
        .graph
        .nodes
        .iter()
        .any(|n| n.op == Op::Unary(UnaryOp::Neg)));
    let m = static_if("8000");
    assert!(m
        .graph
        .nodes
        .iter()
        .any(|n| n.op == Op::Unary(UnaryOp::Neg)));
    assert_eq!(
        m.graph.inputs.len(),
        1,
        "bound input is a constant, not a graph input"
    );
}

#[test]
fn transpose_is_absorbed_into_matmul() {
    let mut m = static_if("16000");
    let r = optimize(&mut m.graph);
    assert_eq!(r.transposes_absorbed, 1);
    assert!(m.graph.nodes.iter().any(|n| matches!(
        n.op,
        Op::MatMul {
            transpose_a: true,
            transpose_b: false,
            ..
        }
    )));
    assert!(!m
        .graph
        .nodes
        .iter()
        .any(|n| matches!(n.op, Op::Transpose { .. })));
    assert_eq!(m.graph.port_shape(&m.graph.outputs[0]), &[1, 1, 6, 3]);
}

#[test]
fn view_rule() {
    let r = Op::Reshape {
        kind: ReshapeKind::Reshape,
        shape: vec![],
    };
    // Dropping / adding leading 1s keeps (N, C, H, W).
    assert!(is_view(&r, &[1, 8, 5, 7], &[8, 5, 7]));
    assert!(is_view(&r, &[3, 5], &[1, 1, 3, 5]));
    // Merging H and W (keeping C) changes texel coordinates but not the linear C4 order.
    assert!(is_view(&r, &[1, 8, 5, 7], &[1, 8, 1, 35]));
    // Rank 3 is [C, H, W]: [1, 8, 35] puts the 8 channels on H, which reorders texels.
    assert!(!is_view(&r, &[1, 8, 5, 7], &[1, 8, 35]));
    // Moving channels into W (flatten for a classifier) reorders texels.
    assert!(!is_view(&r, &[1, 8, 5, 7], &[1, 280]));
    // [1, C, 1, 1] -> [1, C]: C becomes W, so the packed order changes (a real copy).
    assert!(!is_view(&r, &[1, 8, 1, 1], &[1, 8]));
    // Swapping size-1 axes is a view; moving channels into N is not.
    let t = Op::Transpose {
        perm: vec![1, 0, 2, 3],
        read_as: None,
    };
    assert!(is_view(&t, &[1, 1, 5, 7], &[1, 1, 5, 7]));
    assert!(!is_view(&t, &[1, 8, 5, 7], &[8, 1, 5, 7]));
    let t = Op::Transpose {
        perm: vec![0, 1, 3, 2],
        read_as: None,
    };
    assert!(!is_view(&t, &[1, 8, 5, 7], &[1, 8, 7, 5]));
}

/// erf, independent of the code under test: Maclaurin series for |x| < 3 (converges to f64
/// precision there), Abramowitz & Stegun 7.1.26 beyond (|error| < 1.5e-7, where erf is ~1).
fn erf(x: f64) -> f64 {
    if x.abs() < 3.0 {
        let (mut sum, mut term, mut n) = (x, x, 0.0);
        while term.abs() > 1e-17 * sum.abs().max(1e-300) {
            n += 1.0;
            term *= -x * x / n;
            sum += term / (2.0 * n + 1.0);
        }
        return 2.0 / std::f64::consts::PI.sqrt() * sum;
    }
    let t = 1.0 / (1.0 + 0.3275911 * x.abs());
    let poly = ((((1.061405429 * t - 1.453152027) * t + 1.421413741) * t - 0.284496736) * t
        + 0.254829592)
        * t;
    (1.0 - poly * (-x * x).exp()).copysign(x)
}

#[test]
fn layer_norm_gelu_hardswish_fusions_match_onnxruntime() {
    let mut o = ImportOptions::default();
    o.add_input_spec("x=2x4x6").unwrap();
    let mut m = import(&fixture("patterns.onnx"), &o).unwrap();
    let r = optimize(&mut m.graph);
    assert_eq!(
        (r.layer_norms_fused, r.gelu_fused, r.hardswish_fused),
        (1, 1, 1),
        "{r:?}"
    );
    let g = &m.graph;
    assert_eq!(g.nodes.len(), 3, "{:?}", g.op_histogram());
    let Op::LayerNorm {
        axis: 2,
        epsilon,
        rms: false,
        residual: false,
    } = g.nodes[0].op
    else {
        panic!("{:?}", g.nodes[0].op)
    };
    assert_eq!(g.nodes[1].op, Op::Unary(UnaryOp::Gelu));
    assert_eq!(g.nodes[2].op, Op::Unary(UnaryOp::HardSwish));
    let konst = |i: usize| g.constants[&g.nodes[0].input(i).unwrap()].as_f32();
    let (gamma, beta) = (konst(1), konst(2));
    let text = std::fs::read_to_string(fixture("patterns_ref.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    let get = |k: &str| {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect::<Vec<f64>>()
    };
    let (x, want) = (get("x"), get("y"));
    for row in 0..8 {
        let xs = &x[row * 6..row * 6 + 6];
        let mean = xs.iter().sum::<f64>() / 6.0;
        let var = xs.iter().map(|a| (a - mean).powi(2)).sum::<f64>() / 6.0;
        for j in 0..6 {
            let ln =
                (xs[j] - mean) / (var + epsilon as f64).sqrt() * gamma[j] as f64 + beta[j] as f64;
            let ge = 0.5 * ln * (1.0 + erf(ln / std::f64::consts::SQRT_2));
            let y = ge * (ge + 3.0).clamp(0.0, 6.0) / 6.0;
            let w = want[row * 6 + j];
            assert!(
                (y - w).abs() < 1e-5,
                "row {row} col {j}: {y} vs onnxruntime {w}"
            );
        }
    }
}

/// A `[1, T, K] x W[K, N] + b -> Softmax(axis 2)` head, A read transposed or not.
fn head_graph(
    transpose_a: bool,
    t: usize,
    k: usize,
    n: usize,
    w: &[f32],
    b: &[f32],
) -> texstream::ir::Graph {
    use texstream::ir::{Activation, DType, Graph, Node, Port, TensorData};
    let mut g = Graph::default();
    let a_shape = if transpose_a {
        vec![1, k, t]
    } else {
        vec![1, t, k]
    };
    let x = g.add_tensor("x", a_shape, DType::F32);
    let wt = g.add_tensor("w", vec![k, n], DType::F32);
    let bt = g.add_tensor("b", vec![n], DType::F32);
    let logits = g.add_tensor("logits", vec![1, t, n], DType::F32);
    let probs = g.add_tensor("probs", vec![1, t, n], DType::F32);
    g.constants
        .insert(wt, TensorData::from_f32(vec![k, n], w.to_vec()));
    g.constants
        .insert(bt, TensorData::from_f32(vec![n], b.to_vec()));
    g.nodes.push(Node {
        name: "head".into(),
        op: Op::MatMul {
            transpose_a,
            transpose_b: false,
            activation: Activation::None,
        },
        inputs: vec![Some(x), Some(wt), Some(bt)],
        outputs: vec![logits],
    });
    g.nodes.push(Node {
        name: "softmax".into(),
        op: Op::Softmax { axis: 2 },
        inputs: vec![Some(logits)],
        outputs: vec![probs],
    });
    g.inputs.push(Port::new("x", x));
    g.outputs.push(Port::new("probs", probs));
    g
}

#[test]
fn batch1_head_runs_with_rows_in_lanes_and_matches_a_reference() {
    use texstream::packed::{pack_graph, PackOptions, Precision};
    use texstream::runtime::{Executable, HostTensor};
    let (t, k, n) = (12usize, 10usize, 2000usize);
    let mut s = 7u64;
    let mut rnd = move || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((s >> 33) as f64 / (1u64 << 31) as f64 * 2.0 - 1.0) as f32
    };
    let w: Vec<f32> = (0..k * n).map(|_| rnd()).collect();
    let b: Vec<f32> = (0..n).map(|_| rnd()).collect();
    let x: Vec<f32> = (0..t * k).map(|_| rnd()).collect();
    let device = vk_backend::testing::device();
    for transpose_a in [false, true] {
        let mut g = head_graph(transpose_a, t, k, n, &w, &b);
        let r = optimize(&mut g);
        assert_eq!(r.head_rows_packed, 1, "transpose_a {transpose_a}");
        // The head now runs on [1, 4, T/4, N]; the caller still sees [1, T, N].
        let port = &g.outputs[0];
        assert_eq!(g.tensors[port.tensor].shape, vec![1, 4, t / 4, n]);
        assert_eq!(g.port_shape(port), &[1, t, n]);
        let packed = pack_graph(
            g,
            "head",
            r,
            Default::default(),
            PackOptions::new(Precision::F32),
        )
        .unwrap();
        let mut exe = Executable::new(&device, &packed.header, &packed).unwrap();
        let out = exe
            .run(&[(
                "x".into(),
                HostTensor::new(
                    if transpose_a {
                        vec![1, k, t]
                    } else {
                        vec![1, t, k]
                    },
                    x.clone(),
                ),
            )])
            .unwrap();
        let got = &out[0].1;
        assert_eq!(got.shape, vec![1, t, n]);
        // f64 reference: row i of A is x[i, :] (or column i of the stored [K, T]).
        for i in 0..t {
            let a = |kk: usize| {
                if transpose_a {
                    x[kk * t + i] as f64
                } else {
                    x[i * k + kk] as f64
                }
            };
            let logits: Vec<f64> = (0..n)
                .map(|j| b[j] as f64 + (0..k).map(|kk| a(kk) * w[kk * n + j] as f64).sum::<f64>())
                .collect();
            let m = logits.iter().cloned().fold(f64::MIN, f64::max);
            let z: f64 = logits.iter().map(|l| (l - m).exp()).sum();
            for (j, l) in logits.iter().enumerate() {
                let want = (l - m).exp() / z;
                let got = got.data[i * n + j] as f64;
                assert!(
                    (got - want).abs() <= 1e-6 + 1e-4 * want,
                    "row {i} col {j}: {got} vs {want}"
                );
            }
        }
    }
    // A head whose logits feed anything but Softmax / the output stays as it is, and so does
    // one whose row count is not a multiple of 4.
    let mut g = head_graph(false, t, k, n, &w, &b);
    g.nodes[1].op = Op::Unary(UnaryOp::Relu);
    assert_eq!(optimize(&mut g).head_rows_packed, 0);
    let mut g = head_graph(true, t - 1, k, n, &w, &b);
    assert_eq!(optimize(&mut g).head_rows_packed, 0);
    vk_backend::testing::assert_no_validation_messages(&device);
}

/// `x [1, S, H * D] -> Neg -> Reshape [1, S, H, D] -> Transpose perm -> Neg`: the exporters' head
/// split between two other nodes.
fn head_split_graph(s: usize, h: usize, d: usize, perm: &[usize]) -> texstream::ir::Graph {
    use texstream::ir::{DType, Graph, Node, Port};
    let mut g = Graph::default();
    let x = g.add_tensor("x", vec![1, s, h * d], DType::F32);
    let a = g.add_tensor("a", vec![1, s, h * d], DType::F32);
    let r = g.add_tensor("r", vec![1, s, h, d], DType::F32);
    let split = [1, s, h, d];
    let t_shape: Vec<usize> = perm.iter().map(|&p| split[p]).collect();
    let t = g.add_tensor("t", t_shape.clone(), DType::F32);
    let y = g.add_tensor("y", t_shape, DType::F32);
    let node = |name: &str, op: Op, i: usize, o: usize| Node {
        name: name.into(),
        op,
        inputs: vec![Some(i)],
        outputs: vec![o],
    };
    g.nodes.push(node("neg0", Op::Unary(UnaryOp::Neg), x, a));
    let reshape = Op::Reshape {
        kind: ReshapeKind::Reshape,
        shape: split.to_vec(),
    };
    g.nodes.push(node("split", reshape, a, r));
    let transpose = Op::Transpose {
        perm: perm.to_vec(),
        read_as: None,
    };
    g.nodes.push(node("heads", transpose, r, t));
    g.nodes.push(node("neg1", Op::Unary(UnaryOp::Neg), t, y));
    g.inputs.push(Port::new("x", x));
    g.outputs.push(Port::new("y", y));
    g
}

#[test]
fn a_head_split_is_one_copy_and_matches_a_reference() {
    use texstream::packed::{pack_graph, PackOptions, Precision};
    use texstream::runtime::{Executable, HostTensor};
    let (s, h, d) = (9usize, 3usize, 8usize);
    let x: Vec<f32> = (0..s * h * d).map(|i| (i as f32 * 0.37).sin()).collect();
    let device = vk_backend::testing::device();
    for perm in [[0usize, 2, 1, 3], [0, 2, 3, 1]] {
        let mut g = head_split_graph(s, h, d, &perm);
        let r = optimize(&mut g);
        assert_eq!(r.reshapes_folded, 1, "perm {perm:?}");
        assert_eq!(r.layout_copies, 1, "perm {perm:?}");
        assert!(!g.nodes.iter().any(|n| matches!(n.op, Op::Reshape { .. })));
        let packed = pack_graph(
            g,
            "heads",
            r,
            Default::default(),
            PackOptions::new(Precision::F32),
        )
        .unwrap();
        let mut exe = Executable::new(&device, &packed.header, &packed).unwrap();
        let out = exe
            .run(&[("x".into(), HostTensor::new(vec![1, s, h * d], x.clone()))])
            .unwrap();
        // Reference by index: output (0, i1, i2, i3) under perm reads x[0, sq, head, dim].
        let split = [1, s, h, d];
        let shape: Vec<usize> = perm.iter().map(|&p| split[p]).collect();
        let got = &out[0].1;
        assert_eq!(got.shape, shape);
        for (f, &v) in got.data.iter().enumerate() {
            let mut idx = [0usize; 4];
            let mut rest = f;
            for a in (0..4).rev() {
                idx[perm[a]] = rest % shape[a];
                rest /= shape[a];
            }
            let (sq, head, dim) = (idx[1], idx[2], idx[3]);
            assert_eq!(
                v,
                x[sq * h * d + head * d + dim],
                "perm {perm:?} element {f}"
            );
        }
    }
    // A split read by two nodes, or exported as it is, stays its own copy.
    let mut g = head_split_graph(s, h, d, &[0, 2, 1, 3]);
    let r_out = g.nodes[1].outputs[0];
    g.outputs.push(texstream::ir::Port::new("r", r_out));
    assert_eq!(optimize(&mut g).reshapes_folded, 0);
    vk_backend::testing::assert_no_validation_messages(&device);
}

/// GELU as the exporters write it: the erf or the tanh core, in each multiplication order, the
/// tanh core's cube as `Pow(x, 3)` or `x * x * x`.
#[derive(Clone, Copy, Debug)]
enum GeluForm {
    /// (x * (1 + core)) * 0.5
    Last,
    /// (x * 0.5) * (1 + core), TorchScript
    Half,
    /// x * (0.5 * (1 + core)), dynamo
    Dynamo,
}

fn gelu_graph(tanh: bool, cube_by_pow: bool, form: GeluForm, n: usize) -> texstream::ir::Graph {
    use texstream::ir::{BinaryOp, DType, Graph, Node, Port, TensorData};
    let mut g = Graph::default();
    let x = g.add_tensor("x", vec![1, n], DType::F32);
    let mut k = 0;
    let mut constant = |g: &mut Graph, v: f32| {
        k += 1;
        let c = g.add_tensor(format!("c{k}"), vec![], DType::F32);
        g.constants.insert(c, TensorData::from_f32(vec![], vec![v]));
        c
    };
    let binary = |g: &mut Graph, op: BinaryOp, a: usize, b: usize| {
        let y = g.add_tensor(format!("t{}", g.tensors.len()), vec![1, n], DType::F32);
        g.nodes.push(Node {
            name: format!("n{}", g.nodes.len()),
            op: Op::Binary(op),
            inputs: vec![Some(a), Some(b)],
            outputs: vec![y],
        });
        y
    };
    let unary = |g: &mut Graph, op: UnaryOp, a: usize| {
        let y = g.add_tensor(format!("t{}", g.tensors.len()), vec![1, n], DType::F32);
        g.nodes.push(Node {
            name: format!("n{}", g.nodes.len()),
            op: Op::Unary(op),
            inputs: vec![Some(a)],
            outputs: vec![y],
        });
        y
    };
    let core = if tanh {
        let cube = if cube_by_pow {
            let three = constant(&mut g, 3.0);
            binary(&mut g, BinaryOp::Pow, x, three)
        } else {
            let square = binary(&mut g, BinaryOp::Mul, x, x);
            binary(&mut g, BinaryOp::Mul, square, x)
        };
        let c = constant(&mut g, 0.044715);
        let term = binary(&mut g, BinaryOp::Mul, c, cube);
        let inner = binary(&mut g, BinaryOp::Add, x, term);
        let s = constant(&mut g, 0.797_884_6);
        let arg = binary(&mut g, BinaryOp::Mul, inner, s);
        unary(&mut g, UnaryOp::Tanh, arg)
    } else {
        let r2 = constant(&mut g, std::f32::consts::SQRT_2);
        let arg = binary(&mut g, BinaryOp::Div, x, r2);
        unary(&mut g, UnaryOp::Erf, arg)
    };
    let one = constant(&mut g, 1.0);
    let plus = binary(&mut g, BinaryOp::Add, core, one);
    let half = constant(&mut g, 0.5);
    let y = match form {
        GeluForm::Last => {
            let p = binary(&mut g, BinaryOp::Mul, x, plus);
            binary(&mut g, BinaryOp::Mul, p, half)
        }
        GeluForm::Half => {
            let h = binary(&mut g, BinaryOp::Mul, x, half);
            binary(&mut g, BinaryOp::Mul, h, plus)
        }
        GeluForm::Dynamo => {
            let h = binary(&mut g, BinaryOp::Mul, half, plus);
            binary(&mut g, BinaryOp::Mul, x, h)
        }
    };
    g.inputs.push(Port::new("x", x));
    g.outputs.push(Port::new("y", y));
    g
}

#[test]
fn gelu_in_every_exported_form_is_one_kernel_and_matches_a_reference() {
    use texstream::packed::{pack_graph, PackOptions, Precision};
    use texstream::runtime::{Executable, HostTensor};
    let n = 64;
    let x: Vec<f32> = (0..n).map(|i| (i as f32 - 32.0) * 0.19).collect();
    let device = vk_backend::testing::device();
    let cases = [
        (false, true, GeluForm::Last),
        (false, true, GeluForm::Half),
        (false, true, GeluForm::Dynamo),
        (true, true, GeluForm::Half),
        (true, true, GeluForm::Dynamo),
        (true, false, GeluForm::Last),
    ];
    for (tanh, pow, form) in cases {
        let what = format!("tanh {tanh}, pow {pow}, {form:?}");
        let mut g = gelu_graph(tanh, pow, form, n);
        let r = optimize(&mut g);
        assert_eq!(r.gelu_fused, 1, "{what}");
        let want_op = if tanh {
            UnaryOp::GeluTanh
        } else {
            UnaryOp::Gelu
        };
        assert_eq!(g.nodes.len(), 1, "{what}: {:?}", g.nodes);
        assert_eq!(g.nodes[0].op, Op::Unary(want_op), "{what}");
        let packed = pack_graph(
            g,
            "gelu",
            r,
            Default::default(),
            PackOptions::new(Precision::F32),
        )
        .unwrap();
        let mut exe = Executable::new(&device, &packed.header, &packed).unwrap();
        let out = exe
            .run(&[("x".into(), HostTensor::new(vec![1, n], x.clone()))])
            .unwrap();
        for (i, (&got, &v)) in out[0].1.data.iter().zip(&x).enumerate() {
            let v = v as f64;
            let want = if tanh {
                let c = (2.0 / std::f64::consts::PI).sqrt();
                0.5 * v * (1.0 + (c * (v + 0.044715 * v * v * v)).tanh())
            } else {
                0.5 * v * (1.0 + erf(v / std::f64::consts::SQRT_2))
            };
            assert!(
                (got as f64 - want).abs() <= 1e-5 + 1e-5 * want.abs(),
                "{what}: x[{i}] = {v}: {got} vs {want}"
            );
        }
    }
    // A core whose argument another node also reads is left alone.
    let mut g = gelu_graph(false, true, GeluForm::Dynamo, n);
    let arg = g.nodes[0].outputs[0];
    g.outputs.push(texstream::ir::Port::new("arg", arg));
    assert_eq!(optimize(&mut g).gelu_fused, 0);
    vk_backend::testing::assert_no_validation_messages(&device);
}

/// `x -> Relu -> r -> Reshape -> y` with `y` the graph output, and (with `reread`) `y` also
/// read by a Neg whose output is a second graph output.
fn reshaped_output_graph(reread: bool) -> texstream::ir::Graph {
    use texstream::ir::{DType, Graph, Node, Port};
    let mut g = Graph::default();
    let x = g.add_tensor("x", vec![3, 10], DType::F32);
    let r = g.add_tensor("r", vec![3, 10], DType::F32);
    let y = g.add_tensor("y", vec![1, 5, 6], DType::F32);
    g.nodes.push(Node {
        name: "relu".into(),
        op: Op::Unary(UnaryOp::Relu),
        inputs: vec![Some(x)],
        outputs: vec![r],
    });
    g.nodes.push(Node {
        name: "reshape".into(),
        op: Op::Reshape {
            kind: ReshapeKind::Reshape,
            shape: vec![1, 5, 6],
        },
        inputs: vec![Some(r)],
        outputs: vec![y],
    });
    g.inputs.push(Port::new("x", x));
    g.outputs.push(Port::new("y", y));
    if reread {
        let z = g.add_tensor("z", vec![1, 5, 6], DType::F32);
        g.nodes.push(Node {
            name: "neg".into(),
            op: Op::Unary(UnaryOp::Neg),
            inputs: vec![Some(y)],
            outputs: vec![z],
        });
        g.outputs.push(Port::new("z", z));
    }
    g
}

#[test]
fn an_output_reshape_is_the_tensor_shown_in_its_shape() {
    use texstream::packed::{pack_graph, PackOptions, Precision};
    use texstream::runtime::{Executable, HostTensor};
    let device = vk_backend::testing::device();
    let x: Vec<f32> = (0..30).map(|i| i as f32 * 0.37 - 5.0).collect();
    for reread in [false, true] {
        let mut g = reshaped_output_graph(reread);
        let r = optimize(&mut g);
        // Read by the Neg too, the Reshape stays (and copies: outputs keep their own images).
        assert_eq!(r.output_reshapes_removed, usize::from(!reread));
        let port = &g.outputs[0];
        assert_eq!(g.port_shape(port), &[1, 5, 6]);
        let shown = if reread { vec![1, 5, 6] } else { vec![3, 10] };
        assert_eq!(g.tensors[port.tensor].shape, shown);
        assert_eq!(
            g.nodes.iter().any(|n| matches!(n.op, Op::Reshape { .. })),
            reread
        );
        let packed = pack_graph(
            g,
            "reshaped",
            r,
            Default::default(),
            PackOptions::new(Precision::F32),
        )
        .unwrap();
        let mut exe = Executable::new(&device, &packed.header, &packed).unwrap();
        let out = exe
            .run(&[("x".into(), HostTensor::new(vec![3, 10], x.clone()))])
            .unwrap();
        let (name, y) = &out[0];
        assert_eq!(name, "y");
        assert_eq!(y.shape, vec![1, 5, 6]);
        let want: Vec<f32> = x.iter().map(|v| v.max(0.0)).collect();
        assert_eq!(y.data, want);
        if reread {
            let z = &out[1].1;
            assert_eq!(z.data, want.iter().map(|v| -v).collect::<Vec<_>>());
        }
    }
    vk_backend::testing::assert_no_validation_messages(&device);
}
