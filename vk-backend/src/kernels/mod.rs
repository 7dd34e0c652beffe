//! Compute kernels: Rust wrappers that pick a pipeline, bind tensors, fill push constants and
//! record a dispatch. See `vk-backend/KERNELS.md` for how to add one.

mod conv;
mod elementwise;
mod push;
mod window;

pub use conv::{
    conv2d, conv2d_into, conv2d_is_depthwise, conv2d_output_shape, Conv2dParams, ConvWeights,
};
pub use elementwise::{
    binary, binary_into, unary, unary_into, weight_copy_into, BinaryOp, UnaryOp,
};
pub use push::{dispatch_1d, PushConstants};
pub use window::Window2d;
