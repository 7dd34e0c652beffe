//! Compute kernels: Rust wrappers that pick a pipeline, bind tensors, fill push constants and
//! record a dispatch. See `vk-backend/KERNELS.md` for how to add one.

mod attention;
mod cache;
mod conv;
mod conv_transpose;
mod copy;
mod elementwise;
mod heads;
mod launch;
mod lookup;
mod lstm;
mod matmul;
mod norm;
mod pad;
mod pool;
mod push;
mod readback;
mod reduce;
mod resize;
mod rope;
mod scan;
mod scatter;
mod select;
mod window;

pub use attention::{
    attention_into, attention_packed_into, attention_packed_kv_shapes, attention_packed_out_shape,
    attention_partials_shape, attention_shape, attention_uses_tensor_cores, AttentionInputs,
    AttentionOpts, SplitHeads, ATTENTION_MAX_HEAD_DIM,
};
pub use cache::kv_write_into;
pub use conv::{
    conv2d, conv2d_add_into, conv2d_into, conv2d_is_depthwise, conv2d_kernel, conv2d_output_shape,
    conv2d_split_add_into, conv2d_split_shape, Conv2dParams, ConvKernel, ConvOperands, ConvWeights,
    CoopTile,
};
pub use conv_transpose::{
    conv_transpose2d, conv_transpose2d_into, conv_transpose2d_output_shape, ConvTranspose2dParams,
};
pub use copy::{
    cast, cast_into, concat, concat_by_texels, concat_into, concat_shape, expand_into, gather,
    gather_elements_into, gather_into, gather_shape, reshape, reshape_into, reshape_needs_copy,
    slice, slice_into, slice_shape, split, split_into, tile, tile_into, tile_shape, transpose,
    transpose_as_into, transpose_into, transpose_shape, CastTo,
};
pub use elementwise::{
    binary, binary_into, unary, unary_into, weight_copy_into, BinaryOp, UnaryOp,
};
pub use heads::heads_from_rows_into;
pub use lookup::{gather_rows_into, RowTable};
pub use lstm::{lstm, lstm_into, lstm_output_shapes, LstmOutputs, LstmWeights};
pub use matmul::{
    coop_cols, coop_min_tiles, coop_rows, matmul, matmul_into, matmul_pack_a_into,
    matmul_packed_a_shape, matmul_packed_into, matmul_packed_out_into, matmul_packed_out_shape,
    matmul_shape, matmul_split_into, matmul_split_k_shape, matmul_tensor_bias_into,
    uses_cooperative_matrix, MatBias, MatMulOpts, MatRhs,
};
pub use norm::{
    layernorm, layernorm_into, norm_packed_into, norm_packed_out_shape, norm_rows,
    residual_norm_into, rmsnorm_into, softmax, softmax_into, NormRows, NormSpec, Residual,
};
pub use pad::{pad, pad_into, pad_output_shape, PadMode, PadParams};
pub use pool::{
    global_avg_pool, global_avg_pool_into, pool2d, pool2d_into, pool2d_output_shape, Pool2dParams,
    PoolKind,
};
pub use push::{dispatch_1d, PushConstants};
pub use readback::{read_back, readback_bytes, readback_into, readback_size};
pub use reduce::{reduce, reduce_into, reduce_shape, ReduceOp};
pub use resize::{resize, resize_into, CoordMode, NearestMode, ResizeMode, ResizeParams};
pub use rope::rope_into;
pub use scan::{cumsum, cumsum_into, CumSumParams};
pub use scatter::{scatter_nd_into, ScatterReduction};
pub use select::{compare, compare_into, trilu, trilu_into, where_into, where_select, CompareOp};
pub use window::Window2d;
