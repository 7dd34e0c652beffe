//! Compute kernels: Rust wrappers that pick a pipeline, bind tensors, fill push constants and
//! record a dispatch. See `vk-backend/KERNELS.md` for how to add one.

mod elementwise;
mod norm;
mod push;
mod reduce;

pub use elementwise::{
    binary, binary_into, unary, unary_into, weight_copy_into, BinaryOp, UnaryOp,
};
pub use norm::{layernorm, layernorm_into, softmax, softmax_into};
pub use push::{dispatch_1d, PushConstants};
pub use reduce::{reduce, reduce_into, reduce_shape, ReduceOp};
