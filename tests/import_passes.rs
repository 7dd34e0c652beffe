//! Pass behaviour on small fixtures: If folding on a bound input, Transpose absorbed into MatMul,
//! and the view rule of the layout pass.
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
    let y = m.graph.outputs[0].tensor;
    assert_eq!(m.graph.tensors[y].shape, vec![1, 1, 6, 3]);
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
    };
    assert!(is_view(&t, &[1, 1, 5, 7], &[1, 1, 5, 7]));
    assert!(!is_view(&t, &[1, 8, 5, 7], &[8, 1, 5, 7]));
    let t = Op::Transpose {
        perm: vec![0, 1, 3, 2],
    };
    assert!(!is_view(&t, &[1, 8, 5, 7], &[1, 8, 7, 5]));
}
