//! The op-converter registry: one converter per ONNX op type (domain ai.onnx, opsets 11–18),
//! written in the family modules below. The importer looks converters up with [`converter`], and
//! [`SUPPORTED_OPS`] is the registry's op types. Adding an op: write its converter in its family
//! module, then add its row to [`REGISTRY`].
mod args;
mod array;
mod constant;
mod control;
mod elementwise;
mod linalg;
mod nn;
mod normalization;
mod recurrent;
mod reduce;
mod resize;

use super::error::ImportError;
use super::import::{Ctx, NodeRef};
use crate::ir::{BinaryOp, ReduceOp, UnaryOp};
use elementwise::{binary, unary};

type R<T> = Result<T, ImportError>;

/// Converts one ONNX node into IR nodes, constants or aliases in the import context, with the
/// op's ONNX attribute defaults.
pub(super) type Converter = fn(&mut Ctx, &NodeRef) -> R<()>;

/// Op type → converter, in alphabetical order.
const REGISTRY: &[(&str, Converter)] = &[
    ("Abs", |c, n| unary(c, n, UnaryOp::Abs)),
    ("Add", |c, n| binary(c, n, BinaryOp::Add)),
    ("And", |c, n| binary(c, n, BinaryOp::And)),
    ("ArgMax", reduce::arg_max),
    ("AveragePool", nn::average_pool),
    ("BatchNormalization", normalization::batch_norm),
    ("Cast", elementwise::cast),
    ("Clip", elementwise::clip),
    ("Concat", array::concat),
    ("Constant", constant::constant),
    ("ConstantOfShape", constant::constant_of_shape),
    ("Conv", nn::conv),
    ("ConvTranspose", nn::conv_transpose),
    ("Cos", |c, n| unary(c, n, UnaryOp::Cos)),
    ("CumSum", reduce::cumsum),
    ("Div", |c, n| binary(c, n, BinaryOp::Div)),
    ("Dropout", control::dropout),
    ("Equal", |c, n| binary(c, n, BinaryOp::Equal)),
    ("Erf", |c, n| unary(c, n, UnaryOp::Erf)),
    ("Exp", |c, n| unary(c, n, UnaryOp::Exp)),
    ("Expand", array::expand),
    ("Flatten", array::flatten),
    ("Gather", array::gather),
    ("GatherElements", array::gather_elements),
    ("GatherND", array::gather_nd),
    ("Gelu", elementwise::gelu),
    ("Gemm", linalg::gemm),
    ("GlobalAveragePool", nn::global_average_pool),
    ("Greater", |c, n| binary(c, n, BinaryOp::Greater)),
    ("GreaterOrEqual", |c, n| {
        elementwise::or_equal(c, n, BinaryOp::Less)
    }),
    ("HardSigmoid", elementwise::hard_sigmoid),
    ("HardSwish", |c, n| unary(c, n, UnaryOp::HardSwish)),
    ("Identity", control::identity),
    ("If", control::inline_if),
    ("IsNaN", |c, n| unary(c, n, UnaryOp::IsNaN)),
    ("LayerNormalization", normalization::layer_norm),
    ("LeakyRelu", elementwise::leaky_relu),
    ("Less", |c, n| binary(c, n, BinaryOp::Less)),
    ("LessOrEqual", |c, n| {
        elementwise::or_equal(c, n, BinaryOp::Greater)
    }),
    ("Log", |c, n| unary(c, n, UnaryOp::Log)),
    ("LSTM", recurrent::lstm),
    ("MatMul", linalg::matmul),
    ("MaxPool", nn::max_pool),
    ("Mod", elementwise::modulo),
    ("Mul", |c, n| binary(c, n, BinaryOp::Mul)),
    ("Neg", |c, n| unary(c, n, UnaryOp::Neg)),
    ("Not", |c, n| unary(c, n, UnaryOp::Not)),
    ("Or", |c, n| binary(c, n, BinaryOp::Or)),
    ("Pad", array::pad),
    ("Pow", |c, n| binary(c, n, BinaryOp::Pow)),
    ("PRelu", |c, n| binary(c, n, BinaryOp::PRelu)),
    ("Range", constant::range),
    ("Reciprocal", |c, n| unary(c, n, UnaryOp::Reciprocal)),
    ("ReduceMax", |c, n| reduce::reduce(c, n, ReduceOp::Max)),
    ("ReduceMean", |c, n| reduce::reduce(c, n, ReduceOp::Mean)),
    ("ReduceMin", |c, n| reduce::reduce(c, n, ReduceOp::Min)),
    ("ReduceSum", |c, n| reduce::reduce(c, n, ReduceOp::Sum)),
    ("Relu", |c, n| unary(c, n, UnaryOp::Relu)),
    ("Reshape", array::reshape),
    ("Resize", resize::resize),
    ("ScatterND", array::scatter_nd),
    ("Shape", constant::shape),
    ("Sigmoid", |c, n| unary(c, n, UnaryOp::Sigmoid)),
    ("Sin", |c, n| unary(c, n, UnaryOp::Sin)),
    ("Size", constant::size),
    ("Slice", array::slice),
    ("Softmax", normalization::softmax),
    ("Split", array::split),
    ("Sqrt", |c, n| unary(c, n, UnaryOp::Sqrt)),
    ("Squeeze", array::squeeze),
    ("Sub", |c, n| binary(c, n, BinaryOp::Sub)),
    ("Tanh", |c, n| unary(c, n, UnaryOp::Tanh)),
    ("Tile", array::tile),
    ("Transpose", array::transpose),
    ("Trilu", elementwise::trilu),
    ("Unsqueeze", array::unsqueeze),
    ("Where", elementwise::where_),
];

/// Every ONNX op type the importer handles: the registry's op types, in its order. Shape ops
/// (Shape, Size, ConstantOfShape, Range) are always folded; If is folded when its condition is a
/// constant after folding; Identity and Dropout are removed.
pub const SUPPORTED_OPS: &[&str] = &op_types();

const fn op_types() -> [&'static str; REGISTRY.len()] {
    let mut names = [""; REGISTRY.len()];
    let mut i = 0;
    while i < REGISTRY.len() {
        names[i] = REGISTRY[i].0;
        i += 1;
    }
    names
}

/// The converter registered for `op_type` (ai.onnx domain), if any.
pub(super) fn converter(op_type: &str) -> Option<Converter> {
    REGISTRY
        .iter()
        .find(|(name, _)| *name == op_type)
        .map(|&(_, convert)| convert)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_is_sorted_without_repeats() {
        for pair in SUPPORTED_OPS.windows(2) {
            assert!(
                pair[0].to_lowercase() < pair[1].to_lowercase(),
                "{} must come before {} exactly once",
                pair[1],
                pair[0]
            );
        }
        assert!(converter("Conv").is_some() && converter("FancyOp").is_none());
    }
}
