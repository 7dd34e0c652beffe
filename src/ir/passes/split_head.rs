//! Wide output heads split along their columns, so no single step needs the whole matrix.
//!
//! Weights stream in pages and a step can only run once every page it reads is resident, so the
//! largest step's weights set the smallest cap a workload can run under. A classifier or
//! recognizer head is usually that step: PP-OCR's recognizer ends in a `[120, 18710]` MatMul
//! (4.3 MiB of fp16, six 1 MiB pages at once, a third of the whole OCR workload's weights). The
//! head's columns are independent, so `Y = A x B + bias` runs as `Yi = A x Bi + bias_i` over
//! column blocks of at most [`MAX_PIECE_VALUES`] weights, and a Concat along the last axis
//! rebuilds `Y` for the Softmax that follows. The rewrite applies to MatMuls with a constant 2-D
//! B of more than [`MAX_WEIGHT_VALUES`] values whose output only flows through last-axis Softmax
//! into graph outputs (a head); the same values come out, in the same order.
//!
//! A head tied to the embedding (`Gemm(A, E, transB)` where a Gather also reads `E` by ids) is
//! split the same way without copying `E`: each piece is a `Gemm` over a row range of the one
//! packed table (`b_rows`), so its step reads only the pages of those rows, and the smallest cap
//! no longer holds the table. A piece holds as many weights as the largest other step reads (at
//! least half a page), so it needs no more pages at once than the model already does, and a
//! decoder's head runs as a few wide dispatches: the 1.34 B scale decoder's (50304 rows of 2048)
//! as 8 pieces, not the 393 of half a page each that took a dispatch apiece every token.
use crate::ir::{Graph, Node, Op, TensorData, TensorId, Values};

/// Weights above which a head is split (1 MiB of fp16).
pub const MAX_WEIGHT_VALUES: usize = 1 << 19;
/// Most weights in one piece (half a 1 MiB fp16 page: a piece spans at most two pages).
pub const MAX_PIECE_VALUES: usize = 1 << 18;

/// Rows below which a constant table is not a row table.
pub const ROW_TABLE_MIN_ROWS: usize = 64;

/// Float constants `[rows, width]` that a Gather along axis 0 reads by run-time ids (a
/// vocabulary embedding, a position table): packed by rows (`packed::WeightKind::Rows`), so a lookup
/// touches only the pages of its rows and a tied head shares the same pages.
pub fn row_tables(g: &Graph) -> std::collections::HashSet<TensorId> {
    g.nodes
        .iter()
        .filter(|n| matches!(n.op, Op::Gather { axis: 0 }))
        .filter_map(|n| {
            let (t, ids) = (n.input(0)?, n.input(1)?);
            let d = g.constants.get(&t)?;
            (d.dtype.is_float()
                && d.shape.len() == 2
                && d.shape[0] >= ROW_TABLE_MIN_ROWS
                && !g.is_const(ids))
            .then_some(t)
        })
        .collect()
}

/// Splits every eligible head; returns how many.
/// Tied heads split when their table is over `page_values` values, into pieces of at most half
/// that (so a piece spans at most two pages).
pub fn split_wide_heads(g: &mut Graph, page_values: usize) -> usize {
    let mut count = 0;
    let mut i = 0;
    let tables = row_tables(g);
    let tied_piece_values = (page_values / 2).max(largest_step_values(g, &tables));
    while i < g.nodes.len() {
        if eligible(g, i) {
            i += rewrite(g, i);
            count += 1;
        } else if tied_eligible(g, &tables, i, page_values) {
            i += rewrite_tied(g, i, tied_piece_values);
            count += 1;
        }
        i += 1;
    }
    count
}

/// The most constant float weights one node reads, over the nodes that read no row table (the
/// lookups read rows of theirs; the tied heads are what is being split).
fn largest_step_values(g: &Graph, tables: &std::collections::HashSet<TensorId>) -> usize {
    g.nodes
        .iter()
        .filter(|n| n.inputs.iter().flatten().all(|t| !tables.contains(t)))
        .map(|n| {
            n.inputs
                .iter()
                .flatten()
                .filter_map(|t| g.constants.get(t))
                .filter(|d| d.dtype.is_float())
                .map(|d| d.numel())
                .sum::<usize>()
        })
        .max()
        .unwrap_or(0)
}

/// A Gemm `A x B^T` (no C) over a wide row table that a Gather also reads: the output head tied
/// to the embedding. Its pieces read row ranges of the one packed table (`Gemm::b_rows`), so
/// the lookup and the head keep sharing its pages.
fn tied_eligible(
    g: &Graph,
    tables: &std::collections::HashSet<TensorId>,
    i: usize,
    page_values: usize,
) -> bool {
    let n = &g.nodes[i];
    let Op::Gemm {
        trans_a: false,
        trans_b: true,
        b_rows: None,
        ..
    } = n.op
    else {
        return false;
    };
    let (Some(a), Some(b), Some(&y)) = (n.input(0), n.input(1), n.outputs.first()) else {
        return false;
    };
    let wide = g.constants.get(&b).is_some_and(|d| d.numel() > page_values);
    wide && tables.contains(&b)
        && n.input(2).is_none()
        && !g.is_const(a)
        && feeds_only_outputs(g, y)
}

/// Rows of the table per piece: at most `piece_values` weights, whole texel blocks.
fn tied_piece_rows(width: usize, piece_values: usize) -> usize {
    ((piece_values / width.max(1)) / 4 * 4).max(4)
}

/// Replaces the tied head at `i` by row-range pieces and a Concat; returns the nodes inserted.
fn rewrite_tied(g: &mut Graph, i: usize, piece_values: usize) -> usize {
    let node = g.nodes[i].clone();
    let (Some(b), Some(_)) = (node.input(1), node.outputs.first()) else {
        return 0;
    };
    let Some([rows, width]) = g.constants.get(&b).map(|d| [d.shape[0], d.shape[1]]) else {
        return 0;
    };
    let Op::Gemm {
        alpha,
        beta,
        activation,
        ..
    } = node.op
    else {
        return 0;
    };
    let step = tied_piece_rows(width, piece_values);
    let pieces = (0..rows)
        .step_by(step)
        .map(|r0| {
            let r1 = (r0 + step).min(rows);
            let op = Op::Gemm {
                alpha,
                beta,
                trans_a: false,
                trans_b: true,
                activation,
                b_rows: Some([r0, r1]),
            };
            (op, vec![node.inputs[0], Some(b), None], r1 - r0)
        })
        .collect();
    splice_pieces(g, i, "rows", pieces)
}

/// Replaces node `i` by `pieces` (op, inputs, width along the output's last axis), each writing
/// the next block of columns of its output, and a last-axis Concat of them into that output.
/// `tag` names the pieces; returns the nodes inserted.
fn splice_pieces(
    g: &mut Graph,
    i: usize,
    tag: &str,
    pieces: Vec<(Op, Vec<Option<TensorId>>, usize)>,
) -> usize {
    let name = g.nodes[i].name.clone();
    let y = g.nodes[i].outputs[0];
    let y_shape = g.tensors[y].shape.clone();
    let dtype = g.tensors[y].dtype;
    let mut nodes = Vec::new();
    let mut parts = Vec::new();
    for (k, (op, inputs, width)) in pieces.into_iter().enumerate() {
        let mut shape = y_shape.clone();
        if let Some(last) = shape.last_mut() {
            *last = width;
        }
        let part = g.add_tensor(format!("{name}.{tag}{k}"), shape, dtype);
        parts.push(Some(part));
        nodes.push(Node {
            name: format!("{name}:{tag}{k}"),
            op,
            inputs,
            outputs: vec![part],
        });
    }
    nodes.push(Node {
        name: format!("{name}:concat"),
        op: Op::Concat {
            axis: y_shape.len() - 1,
        },
        inputs: parts,
        outputs: vec![y],
    });
    let inserted = nodes.len() - 1;
    g.nodes.splice(i..=i, nodes);
    inserted
}

fn eligible(g: &Graph, i: usize) -> bool {
    let n = &g.nodes[i];
    let Op::MatMul { .. } = n.op else {
        return false;
    };
    let (Some(a), Some(b), Some(&y)) = (n.input(0), n.input(1), n.outputs.first()) else {
        return false;
    };
    let wide = g.constants.get(&b).is_some_and(|d| {
        d.shape.len() == 2 && d.numel() > MAX_WEIGHT_VALUES && matches!(d.values, Values::F(_))
    });
    let bias_ok = n.input(2).is_none_or(|c| {
        g.constants
            .get(&c)
            .is_some_and(|d| d.numel() == last_dim(g, y))
    });
    wide && bias_ok && !g.is_const(a) && feeds_only_outputs(g, y)
}

fn last_dim(g: &Graph, t: TensorId) -> usize {
    g.tensors[t].shape.last().copied().unwrap_or(0)
}

/// `t` reaches graph outputs only through last-axis Softmax nodes.
fn feeds_only_outputs(g: &Graph, t: TensorId) -> bool {
    let cons = g.consumers();
    let rank = g.tensors[t].shape.len();
    let mut cur = t;
    loop {
        match cons[cur].as_slice() {
            [] => return g.is_output(cur),
            [c] if !g.is_output(cur) => match g.nodes[*c].op {
                Op::Softmax { axis } if axis + 1 == rank => cur = g.nodes[*c].outputs[0],
                // The decoders' logits reshape `[1, V]` to `[1, 1, V]`.
                Op::Reshape { .. } => cur = g.nodes[*c].outputs[0],
                _ => return false,
            },
            _ => return false,
        }
    }
}

/// Columns `[c0, c1)` of a `[K, N]` matrix, or rows of its `[N, K]` transpose.
fn columns(d: &TensorData, transposed: bool, c0: usize, c1: usize) -> TensorData {
    let v = d.as_f32();
    let (rows, cols) = (d.shape[0], d.shape[1]);
    let (shape, values) = if transposed {
        (vec![c1 - c0, cols], v[c0 * cols..c1 * cols].to_vec())
    } else {
        let values = (0..rows)
            .flat_map(|r| v[r * cols + c0..r * cols + c1].iter().copied())
            .collect();
        (vec![rows, c1 - c0], values)
    };
    TensorData {
        dtype: d.dtype,
        shape,
        values: Values::F(values),
    }
}

/// Returns how many nodes it inserted after the MatMul.
fn rewrite(g: &mut Graph, i: usize) -> usize {
    let node = g.nodes[i].clone();
    let Op::MatMul { transpose_b, .. } = node.op else {
        return 0;
    };
    let (Some(b), Some(&y)) = (node.input(1), node.outputs.first()) else {
        return 0;
    };
    let Some(weights) = g.constants.get(&b).cloned() else {
        return 0;
    };
    let bias = node.input(2).and_then(|c| g.constants.get(&c).cloned());
    let n = last_dim(g, y);
    let pieces = weights.numel().div_ceil(MAX_PIECE_VALUES);
    let width = n.div_ceil(pieces);
    let mut parts = Vec::new();
    for (k, c0) in (0..n).step_by(width).enumerate() {
        let c1 = (c0 + width).min(n);
        let bk = g.add_constant(
            format!("{}.b{k}", node.name),
            columns(&weights, transpose_b, c0, c1),
        );
        let biask = bias.as_ref().map(|d| {
            let v = d.as_f32()[c0..c1].to_vec();
            g.add_constant(
                format!("{}.bias{k}", node.name),
                TensorData {
                    dtype: d.dtype,
                    shape: vec![c1 - c0],
                    values: Values::F(v),
                },
            )
        });
        parts.push((
            node.op.clone(),
            vec![node.inputs[0], Some(bk), biask],
            c1 - c0,
        ));
    }
    let inserted = splice_pieces(g, i, "cols", parts);
    g.prune_constants();
    inserted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Activation, DType, Port};

    fn head(transpose_b: bool, n: usize, k: usize) -> Graph {
        let mut g = Graph::default();
        let a = g.add_tensor("a", vec![1, 4, 3, k], DType::F32);
        let y = g.add_tensor("y", vec![1, 4, 3, n], DType::F32);
        let p = g.add_tensor("p", vec![1, 4, 3, n], DType::F32);
        let wv: Vec<f32> = (0..k * n)
            .map(|i| ((i * 31 % 97) as f32 - 48.0) / 61.0)
            .collect();
        let shape = if transpose_b { vec![n, k] } else { vec![k, n] };
        let w = g.add_constant("w", TensorData::from_f32(shape, wv));
        let bias: Vec<f32> = (0..n).map(|i| (i % 13) as f32 / 7.0).collect();
        let bias = g.add_constant("bias", TensorData::from_f32(vec![n], bias));
        g.nodes = vec![
            Node {
                name: "head".into(),
                op: Op::MatMul {
                    transpose_a: false,
                    transpose_b,
                    activation: Activation::None,
                },
                inputs: vec![Some(a), Some(w), Some(bias)],
                outputs: vec![y],
            },
            Node {
                name: "softmax".into(),
                op: Op::Softmax { axis: 3 },
                inputs: vec![Some(y)],
                outputs: vec![p],
            },
        ];
        g.inputs = vec![Port::new("a", a)];
        g.outputs = vec![Port::new("p", p)];
        g
    }

    /// `A x B + bias` in f64 from a graph's (single) MatMul node's constants, per column.
    fn product(g: &Graph, a: &[f64], node: &Node, m: usize, k: usize) -> Vec<f64> {
        let Op::MatMul { transpose_b, .. } = node.op else {
            panic!("not a MatMul")
        };
        let w = &g.constants[&node.inputs[1].unwrap()];
        let bias = g.constants[&node.inputs[2].unwrap()].as_f32();
        let n = bias.len();
        let wv = w.as_f32();
        let at = |r: usize, c: usize| {
            if transpose_b {
                wv[c * k + r]
            } else {
                wv[r * n + c]
            }
        };
        (0..m)
            .flat_map(|row| (0..n).map(move |c| (row, c)))
            .map(|(row, c)| {
                bias[c] as f64
                    + (0..k)
                        .map(|r| a[row * k + r] * at(r, c) as f64)
                        .sum::<f64>()
            })
            .collect()
    }

    #[test]
    fn column_pieces_concatenate_to_the_whole_head() {
        let (k, n) = (120, 5000); // 600,000 weights: three pieces
        for transpose_b in [false, true] {
            let before = head(transpose_b, n, k);
            let mut after = before.clone();
            assert_eq!(split_wide_heads(&mut after, MAX_WEIGHT_VALUES), 1);
            let ops: Vec<&str> = after.nodes.iter().map(|n| n.op.name()).collect();
            assert_eq!(ops, ["MatMul", "MatMul", "MatMul", "Concat", "Softmax"]);
            let a: Vec<f64> = (0..12 * k)
                .map(|i| ((i * 7 % 23) as f64 - 11.0) / 9.0)
                .collect();
            let whole = product(&before, &a, &before.nodes[0], 12, k);
            // Concatenate the pieces' rows along the last axis.
            let pieces: Vec<Vec<f64>> = after.nodes[..3]
                .iter()
                .map(|p| product(&after, &a, p, 12, k))
                .collect();
            let widths: Vec<usize> = after.nodes[..3]
                .iter()
                .map(|p| *after.tensors[p.outputs[0]].shape.last().unwrap())
                .collect();
            assert_eq!(widths.iter().sum::<usize>(), n);
            assert!(widths.iter().all(|&w| w * k <= MAX_PIECE_VALUES));
            let joined: Vec<f64> = (0..12)
                .flat_map(|row| {
                    let pieces = &pieces;
                    let widths = &widths;
                    (0..3).flat_map(move |p| {
                        pieces[p][row * widths[p]..(row + 1) * widths[p]].to_vec()
                    })
                })
                .collect();
            assert_eq!(joined, whole);
            assert_eq!(
                after.tensors[after.nodes[3].outputs[0]].shape,
                vec![1, 4, 3, n]
            );
        }
    }

    #[test]
    fn leaves_small_and_inner_matmuls_alone() {
        let mut g = head(false, 100, 120);
        assert_eq!(split_wide_heads(&mut g, MAX_WEIGHT_VALUES), 0);
        // A wide MatMul whose output feeds something other than Softmax is not a head.
        let mut g = head(false, 5000, 120);
        g.nodes[1].op = Op::Unary(crate::ir::UnaryOp::Relu);
        assert_eq!(split_wide_heads(&mut g, MAX_WEIGHT_VALUES), 0);
    }

    /// A head tied to an embedding that a Gather reads: pieces over row ranges of the one table,
    /// whole texel blocks, covering every row once, in order, and no copy of the table.
    #[test]
    fn tied_head_splits_into_row_ranges_of_the_one_table() {
        let (rows, k) = (1000, 64);
        let mut g = Graph::default();
        let ids = g.add_tensor("ids", vec![1], DType::I64);
        let a = g.add_tensor("a", vec![1, k], DType::F32);
        let e = g.add_tensor("e", vec![1, k], DType::F32);
        let y = g.add_tensor("y", vec![1, rows], DType::F32);
        let wv: Vec<f32> = (0..rows * k).map(|i| (i % 89) as f32).collect();
        let w = g.add_constant("table", TensorData::from_f32(vec![rows, k], wv));
        g.nodes = vec![
            Node {
                name: "embed".into(),
                op: Op::Gather { axis: 0 },
                inputs: vec![Some(w), Some(ids)],
                outputs: vec![e],
            },
            Node {
                name: "head".into(),
                op: Op::Gemm {
                    alpha: 1.0,
                    beta: 1.0,
                    trans_a: false,
                    trans_b: true,
                    activation: Activation::None,
                    b_rows: None,
                },
                inputs: vec![Some(a), Some(w), None],
                outputs: vec![y],
            },
        ];
        g.inputs = vec![Port::new("ids", ids), Port::new("a", a)];
        g.outputs = vec![Port::new("e", e), Port::new("y", y)];
        // 64000 values over pages of 16384: pieces of at most 8192 values = 128 rows.
        assert_eq!(split_wide_heads(&mut g, 16384), 1);
        let ranges: Vec<[usize; 2]> = g
            .nodes
            .iter()
            .filter_map(|n| match n.op {
                Op::Gemm { b_rows, .. } => {
                    assert_eq!(n.input(1), Some(w), "every piece reads the one table");
                    b_rows
                }
                _ => None,
            })
            .collect();
        assert_eq!(ranges.len(), 8);
        let mut next = 0;
        for [r0, r1] in &ranges {
            assert_eq!(*r0, next);
            assert!(r0 % 4 == 0 && r1 - r0 <= 128);
            next = *r1;
        }
        assert_eq!(next, rows);
        let concat = g.nodes.last().expect("concat");
        assert_eq!(concat.op, Op::Concat { axis: 1 });
        assert_eq!(concat.outputs, vec![y]);
        assert_eq!(g.constants.len(), 1, "no copy of the table");
    }
}
