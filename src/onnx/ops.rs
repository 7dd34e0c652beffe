//! Per-op conversion from ONNX nodes to IR ops, with ONNX attribute defaults per opset version.
use super::attrs::Attrs;
use super::error::ImportError;
use super::import::{Ctx, NodeRef};
use super::tensor::{dtype_from_onnx, tensor_from_proto};
use crate::ir::*;

type R<T> = Result<T, ImportError>;

fn norm_axis(ctx: &Ctx, n: &NodeRef, axis: i64, rank: usize) -> R<usize> {
    let a = if axis < 0 { axis + rank as i64 } else { axis };
    if a < 0 || a >= rank as i64 {
        return Err(ctx.node_err(
            n,
            &ctx.first_output(n),
            format!("axis {axis} out of range for rank {rank}"),
        ));
    }
    Ok(a as usize)
}

fn norm_axes(ctx: &Ctx, n: &NodeRef, axes: &[i64], rank: usize) -> R<Vec<usize>> {
    let mut v = axes
        .iter()
        .map(|&a| norm_axis(ctx, n, a, rank))
        .collect::<R<Vec<_>>>()?;
    v.sort_unstable();
    v.dedup();
    Ok(v)
}

/// Axes from attribute (older opsets) or from input #1 (newer opsets), whichever is present.
fn axes_of(ctx: &Ctx, n: &NodeRef, input_idx: usize) -> R<Option<Vec<i64>>> {
    if let Some(a) = Attrs(n.proto).ints("axes") {
        return Ok(Some(a));
    }
    Ok(ctx.const_input(n, input_idx, "axes")?.map(|t| t.as_i64()))
}

fn usizes(ctx: &Ctx, n: &NodeRef, v: &[i64], what: &str) -> R<Vec<usize>> {
    v.iter()
        .map(|&x| {
            usize::try_from(x).map_err(|_| {
                ctx.node_err(
                    n,
                    &ctx.first_output(n),
                    format!("negative {what} {x} unsupported"),
                )
            })
        })
        .collect()
}

/// Resolves kernel/strides/dilations/pads/auto_pad into a [`Window`].
fn window(ctx: &Ctx, n: &NodeRef, x: TensorId, kernel: &[usize], transpose: bool) -> R<Window> {
    let a = Attrs(n.proto);
    let sr = kernel.len();
    if sr == 0 || sr > 2 {
        return Err(ctx.node_err(
            n,
            &ctx.first_output(n),
            format!("only 1D and 2D windows are supported, kernel is {kernel:?}"),
        ));
    }
    let strides = usizes(
        ctx,
        n,
        &a.ints("strides").unwrap_or_else(|| vec![1; sr]),
        "stride",
    )?;
    let dil = usizes(
        ctx,
        n,
        &a.ints("dilations").unwrap_or_else(|| vec![1; sr]),
        "dilation",
    )?;
    let mut pads = usizes(
        ctx,
        n,
        &a.ints("pads").unwrap_or_else(|| vec![0; 2 * sr]),
        "pad",
    )?;
    if strides.len() != sr
        || dil.len() != sr
        || pads.len() != 2 * sr
        || strides.contains(&0)
        || dil.contains(&0)
    {
        return Err(ctx.node_err(
            n,
            &ctx.first_output(n),
            "strides/dilations/pads do not match the kernel rank",
        ));
    }
    let auto = a.string_or("auto_pad", "NOTSET");
    let xs = ctx.shape(x);
    if xs.len() != sr + 2 {
        return Err(ctx.node_err(
            n,
            &ctx.g.tensors[x].name,
            format!("expected a rank-{} input, got {xs:?}", sr + 2),
        ));
    }
    match auto.as_str() {
        "NOTSET" => {}
        "VALID" => pads = vec![0; 2 * sr],
        "SAME_UPPER" | "SAME_LOWER" if !transpose => {
            for i in 0..sr {
                let len = xs[2 + i];
                let out = len.div_ceil(strides[i]);
                let need =
                    (out.saturating_sub(1) * strides[i] + kernel[i].saturating_sub(1) * dil[i] + 1)
                        .saturating_sub(len);
                let (lo, hi) = if auto == "SAME_UPPER" {
                    (need / 2, need - need / 2)
                } else {
                    (need - need / 2, need / 2)
                };
                pads[i] = lo;
                pads[i + sr] = hi;
            }
        }
        other => {
            return Err(ctx.node_err(
                n,
                &ctx.first_output(n),
                format!("auto_pad '{other}' unsupported"),
            ))
        }
    }
    Ok(if sr == 1 {
        Window {
            kernel: [1, kernel[0]],
            strides: [1, strides[0]],
            dilations: [1, dil[0]],
            pads: [0, pads[0], 0, pads[1]],
            spatial_rank: 1,
        }
    } else {
        Window {
            kernel: [kernel[0], kernel[1]],
            strides: [strides[0], strides[1]],
            dilations: [dil[0], dil[1]],
            pads: [pads[0], pads[1], pads[2], pads[3]],
            spatial_rank: 2,
        }
    })
}

fn unary_op(ctx: &Ctx, n: &NodeRef) -> R<Option<UnaryOp>> {
    let a = Attrs(n.proto);
    Ok(Some(match n.op {
        "Relu" => UnaryOp::Relu,
        "LeakyRelu" => UnaryOp::LeakyRelu {
            alpha: a.float_or("alpha", 0.01),
        },
        "Sigmoid" => UnaryOp::Sigmoid,
        "HardSigmoid" => UnaryOp::HardSigmoid {
            alpha: a.float_or("alpha", 0.2),
            beta: a.float_or("beta", 0.5),
        },
        "HardSwish" => UnaryOp::HardSwish,
        "Tanh" => UnaryOp::Tanh,
        "Erf" => UnaryOp::Erf,
        "Gelu" => {
            if a.string_or("approximate", "none") != "none" {
                return Err(ctx.node_err(
                    n,
                    &ctx.first_output(n),
                    "only exact (erf) Gelu is supported",
                ));
            }
            UnaryOp::Gelu
        }
        "Exp" => UnaryOp::Exp,
        "Sqrt" => UnaryOp::Sqrt,
        "Reciprocal" => UnaryOp::Reciprocal,
        "Neg" => UnaryOp::Neg,
        "Abs" => UnaryOp::Abs,
        "Log" => UnaryOp::Log,
        "Sin" => UnaryOp::Sin,
        "Cos" => UnaryOp::Cos,
        "Not" => UnaryOp::Not,
        "Clip" => {
            let min = ctx
                .const_input(n, 1, "Clip min")?
                .filter(|t| t.numel() > 0)
                .map(|t| t.values.get_f(0) as f32)
                .unwrap_or(f32::NEG_INFINITY);
            let max = ctx
                .const_input(n, 2, "Clip max")?
                .filter(|t| t.numel() > 0)
                .map(|t| t.values.get_f(0) as f32)
                .unwrap_or(f32::INFINITY);
            UnaryOp::Clip { min, max }
        }
        _ => return Ok(None),
    }))
}

fn binary_op(op: &str) -> Option<BinaryOp> {
    Some(match op {
        "Add" => BinaryOp::Add,
        "Sub" => BinaryOp::Sub,
        "Mul" => BinaryOp::Mul,
        "Div" => BinaryOp::Div,
        "Pow" => BinaryOp::Pow,
        "Equal" => BinaryOp::Equal,
        "Less" => BinaryOp::Less,
        "Greater" => BinaryOp::Greater,
        "And" => BinaryOp::And,
        "Or" => BinaryOp::Or,
        "PRelu" => BinaryOp::PRelu,
        _ => return None,
    })
}

/// Normalizes ONNX Slice parameters to per-axis (start, end, step) for one axis of size d.
fn norm_slice(start: i64, end: i64, step: i64, d: i64) -> (i64, i64) {
    if d == 0 {
        return (0, 0);
    }
    let fix = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = (fix(start), fix(end));
    if step > 0 {
        (s.clamp(0, d), e.clamp(0, d))
    } else {
        (s.clamp(0, d - 1), e.clamp(-1, d - 1))
    }
}

pub(super) fn convert(ctx: &mut Ctx, n: &NodeRef) -> R<()> {
    let a = Attrs(n.proto);
    let out0 = ctx.first_output(n);
    if let Some(u) = unary_op(ctx, n)? {
        let x = ctx.need_input(n, 0)?;
        ctx.emit(n, Op::Unary(u), vec![Some(x)])?;
        return Ok(());
    }
    if let Some(b) = binary_op(n.op) {
        let (x, y) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
        ctx.emit(n, Op::Binary(b), vec![Some(x), Some(y)])?;
        return Ok(());
    }
    match n.op {
        "Identity" | "Dropout" => {
            if n.proto.output.get(1).is_some_and(|s| !s.is_empty()) {
                return Err(ctx.node_err(
                    n,
                    &n.proto.output[1],
                    "Dropout mask output is not supported",
                ));
            }
            // Dropout (opset 12+) in training mode with a non-zero ratio draws a random mask;
            // only inference (or ratio 0) is the identity.
            if n.op == "Dropout" {
                let training = ctx
                    .const_input(n, 2, "Dropout training_mode")?
                    .is_some_and(|t| t.numel() > 0 && t.values.get_i(0) != 0);
                if training {
                    let ratio = match ctx.const_input(n, 1, "Dropout ratio (in training mode)")? {
                        Some(r) if r.numel() > 0 => r.values.get_f(0),
                        _ => 0.5,
                    };
                    if ratio != 0.0 {
                        return Err(ctx.node_err(
                            n,
                            &out0,
                            "Dropout in training mode (training_mode=true, ratio > 0) is not supported",
                        ));
                    }
                }
            }
            let x = ctx.need_input(n, 0)?;
            ctx.alias_output(n, 0, x);
        }
        "Constant" => {
            let data = if let Some(t) = a.tensor("value") {
                tensor_from_proto(t, ctx.model_dir).map_err(|e| ctx.node_err(n, &out0, e))?
            } else if let Some(f) = a.float("value_float") {
                TensorData::from_f32(vec![], vec![f])
            } else if let Some(f) = a.floats("value_floats") {
                TensorData::from_f32(vec![f.len()], f)
            } else if let Some(i) = a.int("value_int") {
                TensorData::from_i64(vec![], vec![i])
            } else if let Some(i) = a.ints("value_ints") {
                TensorData::from_i64(vec![i.len()], i)
            } else {
                return Err(ctx.node_err(n, &out0, "Constant without a supported value attribute"));
            };
            ctx.const_output(n, 0, data);
        }
        "Shape" => {
            let x = ctx.need_input(n, 0)?;
            let s: Vec<i64> = ctx.shape(x).iter().map(|&d| d as i64).collect();
            let r = s.len() as i64;
            let clampi = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
            let (st, en) = (clampi(a.int_or("start", 0)), clampi(a.int_or("end", r)));
            let v = if st < en { s[st..en].to_vec() } else { vec![] };
            ctx.const_output(n, 0, TensorData::from_i64(vec![v.len()], v));
        }
        "Size" => {
            let x = ctx.need_input(n, 0)?;
            let s = ctx.g.tensors[x].numel() as i64;
            ctx.const_output(n, 0, TensorData::from_i64(vec![], vec![s]));
        }
        "ConstantOfShape" => {
            let shape = ctx
                .const_input(n, 0, "shape")?
                .ok_or_else(|| ctx.node_err(n, &out0, "missing shape"))?
                .as_i64();
            let shape =
                super::tensor::dims_to_shape(&shape).map_err(|e| ctx.node_err(n, &out0, e))?;
            let value = match a.tensor("value") {
                Some(t) => {
                    tensor_from_proto(t, ctx.model_dir).map_err(|e| ctx.node_err(n, &out0, e))?
                }
                None => TensorData::from_f32(vec![1], vec![0.0]),
            };
            if value.numel() != 1 {
                return Err(ctx.node_err(n, &out0, "ConstantOfShape value must have one element"));
            }
            let cnt: usize = shape.iter().product();
            if cnt > crate::ir::eval::MAX_FOLD_ELEMENTS {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    format!("ConstantOfShape result {shape:?} is too large"),
                ));
            }
            let v = value.values.get_f(0);
            ctx.const_output(
                n,
                0,
                TensorData::from_f64s(value.dtype, shape, std::iter::repeat_n(v, cnt)),
            );
        }
        "Range" => {
            let get = |i: usize, what: &str| -> R<&TensorData> {
                ctx.const_input(n, i, what)?
                    .filter(|t| t.numel() == 1)
                    .ok_or_else(|| ctx.node_err(n, &out0, format!("missing or non-scalar {what}")))
            };
            let (s, l, d) = (get(0, "start")?, get(1, "limit")?, get(2, "delta")?);
            let dt = s.dtype;
            let (s, l, d) = (s.values.get_f(0), l.values.get_f(0), d.values.get_f(0));
            let cnt = ((l - s) / d).ceil().max(0.0);
            if d == 0.0 || !cnt.is_finite() || cnt > crate::ir::eval::MAX_FOLD_ELEMENTS as f64 {
                return Err(ctx.node_err(n, &out0, "Range has a zero delta or too many elements"));
            }
            let cnt = cnt as usize;
            ctx.const_output(
                n,
                0,
                TensorData::from_f64s(dt, vec![cnt], (0..cnt).map(|i| s + i as f64 * d)),
            );
        }
        "Conv" | "ConvTranspose" => {
            let transpose = n.op == "ConvTranspose";
            let x = ctx.need_input(n, 0)?;
            let w = ctx.need_input(n, 1)?;
            let ws = ctx.konst(w).map(|t| t.shape.clone()).ok_or_else(|| {
                ctx.node_err(
                    n,
                    &ctx.g.tensors[w].name,
                    "weight must be a constant initializer",
                )
            })?;
            let kernel = ws.get(2..).unwrap_or(&[]).to_vec();
            if let Some(k) = a.ints("kernel_shape") {
                if usizes(ctx, n, &k, "kernel")? != kernel {
                    return Err(ctx.node_err(
                        n,
                        &ctx.g.tensors[w].name,
                        format!("kernel_shape {k:?} != weight shape {ws:?}"),
                    ));
                }
            }
            let win = window(ctx, n, x, &kernel, transpose)?;
            let group = a.int_or("group", 1).max(1) as usize;
            let b = ctx.input(n, 2)?;
            if let Some(b) = b {
                if !ctx.g.is_const(b) {
                    return Err(ctx.node_err(
                        n,
                        &ctx.g.tensors[b].name,
                        "bias must be a constant initializer",
                    ));
                }
            }
            let op = if transpose {
                if a.has("output_shape") {
                    return Err(ctx.node_err(
                        n,
                        &out0,
                        "ConvTranspose output_shape attribute is not supported; use pads",
                    ));
                }
                let op = a.ints("output_padding").unwrap_or_default();
                let op = usizes(ctx, n, &op, "output_padding")?;
                let output_padding = match (win.spatial_rank, op.as_slice()) {
                    (_, []) => [0, 0],
                    (1, [w]) => [0, *w],
                    (2, [h, w]) => [*h, *w],
                    _ => return Err(ctx.node_err(n, &out0, "bad output_padding")),
                };
                Op::ConvTranspose {
                    window: win,
                    group,
                    output_padding,
                    activation: Activation::None,
                }
            } else {
                Op::Conv {
                    window: win,
                    group,
                    activation: Activation::None,
                }
            };
            ctx.emit(n, op, vec![Some(x), Some(w), b])?;
        }
        "MatMul" => {
            let (x, y) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
            ctx.emit(
                n,
                Op::MatMul {
                    transpose_a: false,
                    transpose_b: false,
                    activation: Activation::None,
                },
                vec![Some(x), Some(y)],
            )?;
        }
        "Gemm" => {
            let (x, y, c) = (
                ctx.need_input(n, 0)?,
                ctx.need_input(n, 1)?,
                ctx.input(n, 2)?,
            );
            let op = Op::Gemm {
                alpha: a.float_or("alpha", 1.0),
                beta: a.float_or("beta", 1.0),
                trans_a: a.int_or("transA", 0) != 0,
                trans_b: a.int_or("transB", 0) != 0,
                activation: Activation::None,
            };
            ctx.emit(n, op, vec![Some(x), Some(y), c])?;
        }
        "Where" => {
            let ins = vec![
                Some(ctx.need_input(n, 0)?),
                Some(ctx.need_input(n, 1)?),
                Some(ctx.need_input(n, 2)?),
            ];
            ctx.emit(n, Op::Where, ins)?;
        }
        "Softmax" => {
            let x = ctx.need_input(n, 0)?;
            let rank = ctx.shape(x).len();
            let axis = norm_axis(
                ctx,
                n,
                a.int_or("axis", if ctx.opset < 13 { 1 } else { -1 }),
                rank,
            )?;
            if ctx.opset < 13 && axis + 1 < rank {
                // Opset < 13 softmax coerces to 2D at `axis`: flatten, softmax the last axis, restore.
                let s = ctx.shape(x).to_vec();
                let flat = vec![s[..axis].iter().product(), s[axis..].iter().product()];
                let f = ctx.emit_internal(
                    &format!("{}/coerce2d", n.name),
                    n,
                    Op::Reshape {
                        kind: ReshapeKind::Flatten,
                        shape: flat,
                    },
                    vec![Some(x)],
                )?;
                let sm = ctx.emit_internal(
                    &format!("{}/softmax2d", n.name),
                    n,
                    Op::Softmax { axis: 1 },
                    vec![Some(f)],
                )?;
                ctx.emit(
                    n,
                    Op::Reshape {
                        kind: ReshapeKind::Reshape,
                        shape: s,
                    },
                    vec![Some(sm)],
                )?;
            } else {
                ctx.emit(n, Op::Softmax { axis }, vec![Some(x)])?;
            }
        }
        "LayerNormalization" => {
            let x = ctx.need_input(n, 0)?;
            if n.proto.output.iter().skip(1).any(|o| !o.is_empty()) {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    "LayerNormalization Mean/InvStdDev outputs are not supported",
                ));
            }
            let axis = norm_axis(ctx, n, a.int_or("axis", -1), ctx.shape(x).len())?;
            let ins = vec![Some(x), ctx.input(n, 1)?, ctx.input(n, 2)?];
            ctx.emit(
                n,
                Op::LayerNorm {
                    axis,
                    epsilon: a.float_or("epsilon", 1e-5),
                },
                ins,
            )?;
        }
        "BatchNormalization" => {
            if n.proto.output.iter().skip(1).any(|o| !o.is_empty())
                || a.int_or("training_mode", 0) != 0
            {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    "BatchNormalization in training mode is not supported",
                ));
            }
            let x = ctx.need_input(n, 0)?;
            let mut ins = vec![Some(x)];
            for (i, what) in ["scale", "B", "mean", "var"].iter().enumerate() {
                ctx.const_input(n, i + 1, what)?
                    .ok_or_else(|| ctx.node_err(n, what, "missing BatchNormalization parameter"))?;
                ins.push(ctx.input(n, i + 1)?);
            }
            ctx.emit(
                n,
                Op::BatchNorm {
                    epsilon: a.float_or("epsilon", 1e-5),
                },
                ins,
            )?;
        }
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" => {
            let x = ctx.need_input(n, 0)?;
            let rank = ctx.shape(x).len();
            let op = match n.op {
                "ReduceMean" => ReduceOp::Mean,
                "ReduceSum" => ReduceOp::Sum,
                "ReduceMax" => ReduceOp::Max,
                _ => ReduceOp::Min,
            };
            let axes = axes_of(ctx, n, 1)?.unwrap_or_default();
            if axes.is_empty() && a.int_or("noop_with_empty_axes", 0) != 0 {
                ctx.alias_output(n, 0, x);
                return Ok(());
            }
            let axes = if axes.is_empty() {
                (0..rank).collect()
            } else {
                norm_axes(ctx, n, &axes, rank)?
            };
            ctx.emit(
                n,
                Op::Reduce {
                    op,
                    axes,
                    keepdims: a.int_or("keepdims", 1) != 0,
                },
                vec![Some(x)],
            )?;
        }
        "ArgMax" => {
            let x = ctx.need_input(n, 0)?;
            let axis = norm_axis(ctx, n, a.int_or("axis", 0), ctx.shape(x).len())?;
            let op = Op::ArgMax {
                axis,
                keepdims: a.int_or("keepdims", 1) != 0,
                select_last_index: a.int_or("select_last_index", 0) != 0,
            };
            ctx.emit(n, op, vec![Some(x)])?;
        }
        "MaxPool" | "AveragePool" => {
            let x = ctx.need_input(n, 0)?;
            if n.proto.output.get(1).is_some_and(|s| !s.is_empty()) {
                return Err(ctx.node_err(
                    n,
                    &n.proto.output[1],
                    "MaxPool Indices output is not supported",
                ));
            }
            let k = a
                .ints("kernel_shape")
                .ok_or_else(|| ctx.node_err(n, &out0, "missing kernel_shape"))?;
            let k = usizes(ctx, n, &k, "kernel")?;
            let win = window(ctx, n, x, &k, false)?;
            let ceil_mode = a.int_or("ceil_mode", 0) != 0;
            let op = if n.op == "MaxPool" {
                Op::MaxPool {
                    window: win,
                    ceil_mode,
                }
            } else {
                Op::AveragePool {
                    window: win,
                    ceil_mode,
                    count_include_pad: a.int_or("count_include_pad", 0) != 0,
                }
            };
            ctx.emit(n, op, vec![Some(x)])?;
        }
        "GlobalAveragePool" => {
            let x = ctx.need_input(n, 0)?;
            ctx.emit(n, Op::GlobalAveragePool, vec![Some(x)])?;
        }
        "Resize" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let mode = match a.string_or("mode", "nearest").as_str() {
                "nearest" => ResizeMode::Nearest,
                "linear" => ResizeMode::Linear,
                m => {
                    return Err(ctx.node_err(
                        n,
                        &out0,
                        format!("Resize mode '{m}' is not supported"),
                    ))
                }
            };
            let coord = match a
                .string_or("coordinate_transformation_mode", "half_pixel")
                .as_str()
            {
                "half_pixel" => CoordMode::HalfPixel,
                "pytorch_half_pixel" => CoordMode::PytorchHalfPixel,
                "align_corners" => CoordMode::AlignCorners,
                "asymmetric" => CoordMode::Asymmetric,
                m => {
                    return Err(ctx.node_err(
                        n,
                        &out0,
                        format!("coordinate_transformation_mode '{m}' is not supported"),
                    ))
                }
            };
            let nearest = match a.string_or("nearest_mode", "round_prefer_floor").as_str() {
                "round_prefer_floor" => NearestMode::RoundPreferFloor,
                "round_prefer_ceil" => NearestMode::RoundPreferCeil,
                "floor" => NearestMode::Floor,
                "ceil" => NearestMode::Ceil,
                m => {
                    return Err(ctx.node_err(
                        n,
                        &out0,
                        format!("nearest_mode '{m}' is not supported"),
                    ))
                }
            };
            if a.has("axes") || a.string_or("keep_aspect_ratio_policy", "stretch") != "stretch" {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    "Resize axes / keep_aspect_ratio_policy are not supported",
                ));
            }
            let scales = ctx
                .const_input(n, 2, "scales")?
                .map(|t| t.as_f32())
                .filter(|v| !v.is_empty());
            let sizes = ctx
                .const_input(n, 3, "sizes")?
                .map(|t| t.as_i64())
                .filter(|v| !v.is_empty());
            let from_scales = sizes.is_none();
            let (scales, sizes) = match (scales, sizes) {
                (_, Some(sz)) => {
                    let sz = usizes(ctx, n, &sz, "size")?;
                    if sz.len() != xs.len() {
                        return Err(ctx.node_err(
                            n,
                            &out0,
                            format!("Resize sizes {sz:?} for input {xs:?}"),
                        ));
                    }
                    (
                        sz.iter()
                            .zip(&xs)
                            .map(|(&o, &i)| o as f32 / i.max(1) as f32)
                            .collect(),
                        sz,
                    )
                }
                (Some(sc), None) => {
                    if sc.len() != xs.len() || sc.iter().any(|&s| !(s > 0.0 && s.is_finite())) {
                        return Err(ctx.node_err(
                            n,
                            &out0,
                            format!("Resize scales {sc:?} for input {xs:?}"),
                        ));
                    }
                    let sz = xs
                        .iter()
                        .zip(&sc)
                        .map(|(&d, &s)| (d as f64 * s as f64).floor() as usize)
                        .collect();
                    (sc, sz)
                }
                (None, None) => {
                    return Err(ctx.node_err(n, &out0, "Resize needs constant scales or sizes"))
                }
            };
            ctx.emit(
                n,
                Op::Resize {
                    mode,
                    coord,
                    nearest,
                    scales,
                    sizes,
                    from_scales,
                },
                vec![Some(x)],
            )?;
        }
        "Concat" => {
            let ins = (0..n.proto.input.len())
                .map(|i| ctx.input(n, i))
                .collect::<R<Vec<_>>>()?;
            let first = ins
                .iter()
                .flatten()
                .next()
                .copied()
                .ok_or_else(|| ctx.node_err(n, &out0, "Concat without inputs"))?;
            let axis = norm_axis(
                ctx,
                n,
                a.int("axis")
                    .ok_or_else(|| ctx.node_err(n, &out0, "missing axis"))?,
                ctx.shape(first).len(),
            )?;
            ctx.emit(n, Op::Concat { axis }, ins)?;
        }
        "Split" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let axis = norm_axis(ctx, n, a.int_or("axis", 0), xs.len())?;
            let split = match a.ints("split") {
                Some(s) => Some(s),
                None => ctx.const_input(n, 1, "split")?.map(|t| t.as_i64()),
            };
            let splits = match split {
                Some(s) => usizes(ctx, n, &s, "split")?,
                None => {
                    let k = a
                        .int("num_outputs")
                        .map(|v| v as usize)
                        .unwrap_or(n.proto.output.len())
                        .max(1);
                    let d = xs[axis];
                    let each = d.div_ceil(k);
                    (0..k)
                        .map(|i| each.min(d.saturating_sub(i * each)))
                        .collect()
                }
            };
            ctx.emit(n, Op::Split { axis, splits }, vec![Some(x)])?;
        }
        "Slice" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let get = |i: usize, what: &str| -> R<Option<Vec<i64>>> {
                Ok(ctx.const_input(n, i, what)?.map(|t| t.as_i64()))
            };
            let starts =
                get(1, "starts")?.ok_or_else(|| ctx.node_err(n, &out0, "missing starts"))?;
            let ends = get(2, "ends")?.ok_or_else(|| ctx.node_err(n, &out0, "missing ends"))?;
            let axes = get(3, "axes")?.unwrap_or_else(|| (0..starts.len() as i64).collect());
            let steps = get(4, "steps")?.unwrap_or_else(|| vec![1; starts.len()]);
            if ends.len() != starts.len()
                || axes.len() != starts.len()
                || steps.len() != starts.len()
                || steps.contains(&0)
            {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    "Slice starts/ends/axes/steps lengths differ or a step is 0",
                ));
            }
            let r = xs.len();
            let mut st = vec![0i64; r];
            let mut en: Vec<i64> = xs.iter().map(|&d| d as i64).collect();
            let mut sp = vec![1i64; r];
            for i in 0..starts.len() {
                let ax = norm_axis(ctx, n, axes[i], r)?;
                let (s, e) = norm_slice(starts[i], ends[i], steps[i], xs[ax] as i64);
                st[ax] = s;
                en[ax] = e;
                sp[ax] = steps[i];
            }
            ctx.emit(
                n,
                Op::Slice {
                    starts: st,
                    ends: en,
                    steps: sp,
                },
                vec![Some(x)],
            )?;
        }
        "Transpose" => {
            let x = ctx.need_input(n, 0)?;
            let r = ctx.shape(x).len();
            let perm = a
                .ints("perm")
                .unwrap_or_else(|| (0..r as i64).rev().collect());
            let perm = usizes(ctx, n, &perm, "perm")?;
            let mut sorted = perm.clone();
            sorted.sort_unstable();
            if sorted != (0..r).collect::<Vec<_>>() {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    format!("perm {perm:?} is not a permutation of rank {r}"),
                ));
            }
            ctx.emit(n, Op::Transpose { perm }, vec![Some(x)])?;
        }
        "Reshape" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let spec = ctx
                .const_input(n, 1, "shape")?
                .ok_or_else(|| ctx.node_err(n, &out0, "missing shape"))?
                .as_i64();
            let allowzero = a.int_or("allowzero", 0) != 0;
            let mut shape = Vec::with_capacity(spec.len());
            let mut infer_at = None;
            for (i, &d) in spec.iter().enumerate() {
                match d {
                    -1 if infer_at.is_none() => {
                        infer_at = Some(i);
                        shape.push(1);
                    }
                    0 if !allowzero => {
                        shape.push(*xs.get(i).ok_or_else(|| {
                            ctx.node_err(n, &out0, "0 in shape beyond input rank")
                        })?)
                    }
                    d if d >= 0 => shape.push(d as usize),
                    _ => {
                        return Err(ctx.node_err(
                            n,
                            &out0,
                            format!("invalid reshape target {spec:?}"),
                        ))
                    }
                }
            }
            let total: usize = xs.iter().product();
            if let Some(i) = infer_at {
                // The target comes from the file: its product may overflow.
                let rest = shape
                    .iter()
                    .try_fold(1usize, |a, &d| a.checked_mul(d))
                    .unwrap_or(0);
                if rest == 0 || !total.is_multiple_of(rest) {
                    return Err(ctx.node_err(
                        n,
                        &out0,
                        format!("cannot reshape {xs:?} to {spec:?}"),
                    ));
                }
                shape[i] = total / rest;
            }
            ctx.emit(
                n,
                Op::Reshape {
                    kind: ReshapeKind::Reshape,
                    shape,
                },
                vec![Some(x)],
            )?;
        }
        "Flatten" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let ax = a.int_or("axis", 1);
            let ax = if ax < 0 { ax + xs.len() as i64 } else { ax };
            if ax < 0 || ax > xs.len() as i64 {
                return Err(ctx.node_err(n, &out0, format!("Flatten axis {ax} out of range")));
            }
            let ax = ax as usize;
            let shape = vec![xs[..ax].iter().product(), xs[ax..].iter().product()];
            ctx.emit(
                n,
                Op::Reshape {
                    kind: ReshapeKind::Flatten,
                    shape,
                },
                vec![Some(x)],
            )?;
        }
        "Squeeze" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let axes = match axes_of(ctx, n, 1)? {
                Some(ax) => norm_axes(ctx, n, &ax, xs.len())?,
                None => (0..xs.len()).filter(|&i| xs[i] == 1).collect(),
            };
            if let Some(&bad) = axes.iter().find(|&&i| xs[i] != 1) {
                return Err(ctx.node_err(n, &out0, format!("cannot squeeze axis {bad} of {xs:?}")));
            }
            let shape = (0..xs.len())
                .filter(|i| !axes.contains(i))
                .map(|i| xs[i])
                .collect();
            ctx.emit(
                n,
                Op::Reshape {
                    kind: ReshapeKind::Squeeze,
                    shape,
                },
                vec![Some(x)],
            )?;
        }
        "Unsqueeze" => {
            let x = ctx.need_input(n, 0)?;
            let xs = ctx.shape(x).to_vec();
            let ax = axes_of(ctx, n, 1)?.ok_or_else(|| ctx.node_err(n, &out0, "missing axes"))?;
            let r = xs.len() + ax.len();
            let axes = norm_axes(ctx, n, &ax, r)?;
            let mut it = xs.iter();
            let shape = (0..r)
                .map(|i| {
                    if axes.contains(&i) {
                        Some(1)
                    } else {
                        it.next().copied()
                    }
                })
                .collect::<Option<Vec<_>>>();
            let shape = shape.ok_or_else(|| ctx.node_err(n, &out0, "repeated Unsqueeze axes"))?;
            ctx.emit(
                n,
                Op::Reshape {
                    kind: ReshapeKind::Unsqueeze,
                    shape,
                },
                vec![Some(x)],
            )?;
        }
        "Pad" => {
            let x = ctx.need_input(n, 0)?;
            let r = ctx.shape(x).len();
            let mode = match a.string_or("mode", "constant").as_str() {
                "constant" => PadMode::Constant,
                "reflect" => PadMode::Reflect,
                "edge" => PadMode::Edge,
                m => {
                    return Err(ctx.node_err(n, &out0, format!("Pad mode '{m}' is not supported")))
                }
            };
            let raw = ctx
                .const_input(n, 1, "pads")?
                .ok_or_else(|| ctx.node_err(n, &out0, "missing pads"))?
                .as_i64();
            let value = ctx
                .const_input(n, 2, "constant_value")?
                .filter(|t| t.numel() > 0)
                .map(|t| t.values.get_f(0) as f32)
                .unwrap_or(0.0);
            let axes = match ctx.const_input(n, 3, "axes")? {
                Some(t) => norm_axes(ctx, n, &t.as_i64(), r)?,
                None => (0..r).collect(),
            };
            if raw.len() != 2 * axes.len() {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    format!("Pad has {} pads for {} axes", raw.len(), axes.len()),
                ));
            }
            let raw = usizes(ctx, n, &raw, "pad")?;
            let mut pads = vec![0; 2 * r];
            for (i, &ax) in axes.iter().enumerate() {
                pads[ax] = raw[i];
                pads[ax + r] = raw[i + axes.len()];
            }
            ctx.emit(n, Op::Pad { mode, pads, value }, vec![Some(x)])?;
        }
        "Gather" => {
            let (x, i) = (ctx.need_input(n, 0)?, ctx.need_input(n, 1)?);
            let axis = norm_axis(ctx, n, a.int_or("axis", 0), ctx.shape(x).len())?;
            ctx.emit(n, Op::Gather { axis }, vec![Some(x), Some(i)])?;
        }
        "Cast" => {
            let x = ctx.need_input(n, 0)?;
            let to =
                dtype_from_onnx(a.int_or("to", 0) as i32).map_err(|e| ctx.node_err(n, &out0, e))?;
            ctx.emit(n, Op::Cast { to }, vec![Some(x)])?;
        }
        "Expand" => {
            let x = ctx.need_input(n, 0)?;
            let s = ctx
                .const_input(n, 1, "shape")?
                .ok_or_else(|| ctx.node_err(n, &out0, "missing shape"))?
                .as_i64();
            let s = usizes(ctx, n, &s, "dimension")?;
            let shape =
                infer::broadcast(ctx.shape(x), &s).map_err(|e| ctx.node_err(n, &out0, e))?;
            ctx.emit(n, Op::Expand { shape }, vec![Some(x)])?;
        }
        "Tile" => {
            let x = ctx.need_input(n, 0)?;
            let rep = ctx
                .const_input(n, 1, "repeats")?
                .ok_or_else(|| ctx.node_err(n, &out0, "missing repeats"))?
                .as_i64();
            let repeats = usizes(ctx, n, &rep, "repeat")?;
            if repeats.len() != ctx.shape(x).len() {
                return Err(ctx.node_err(n, &out0, "Tile repeats length != rank"));
            }
            ctx.emit(n, Op::Tile { repeats }, vec![Some(x)])?;
        }
        "LSTM" => {
            if a.string_or("direction", "forward") != "forward"
                || a.int_or("layout", 0) != 0
                || a.has("clip")
                || a.int_or("input_forget", 0) != 0
            {
                return Err(ctx.node_err(
                    n,
                    &out0,
                    "only forward LSTM with layout 0, no clip, no input_forget is supported",
                ));
            }
            if let Some(acts) = a.strings("activations") {
                if acts != ["Sigmoid", "Tanh", "Tanh"] {
                    return Err(ctx.node_err(
                        n,
                        &out0,
                        format!("LSTM activations {acts:?} are not supported"),
                    ));
                }
            }
            let hidden = a
                .int("hidden_size")
                .filter(|&h| h > 0)
                .ok_or_else(|| ctx.node_err(n, &out0, "missing hidden_size"))?
                as usize;
            if ctx.input(n, 4)?.is_some() {
                return Err(ctx.node_err(n, &out0, "LSTM sequence_lens is not supported"));
            }
            let x = ctx.need_input(n, 0)?;
            let isz = ctx.shape(x).get(2).copied().unwrap_or(0);
            for (i, what, want) in [
                (1, "W", vec![1, 4 * hidden, isz]),
                (2, "R", vec![1, 4 * hidden, hidden]),
                (3, "B", vec![1, 8 * hidden]),
            ] {
                if i < 3 || ctx.input(n, i)?.is_some() {
                    let t = ctx
                        .const_input(n, i, what)?
                        .ok_or_else(|| ctx.node_err(n, what, "missing LSTM weight"))?;
                    if t.shape != want {
                        let msg = format!("LSTM {what} has shape {:?}, expected {want:?}", t.shape);
                        return Err(ctx.node_err(n, what, msg));
                    }
                }
            }
            let ins = (0..7).map(|i| ctx.input(n, i)).collect::<R<Vec<_>>>()?;
            ctx.emit(
                n,
                Op::Lstm {
                    hidden_size: hidden,
                },
                ins,
            )?;
        }
        other => {
            return Err(ImportError::UnknownOp {
                file: ctx.file.clone(),
                node: n.name.clone(),
                op: other.to_string(),
                domain: String::new(),
            })
        }
    }
    Ok(())
}
