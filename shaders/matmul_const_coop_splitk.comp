#version 450
// matmul_const_coop.comp over one span of the reduction, storing the span's unscaled tile in the
// fp32 partial results (include/matmul_partials.glsl) for matmul_splitk_combine.comp to finish:
// vk_backend::kernels::matmul_split_k_shape splits a MatMul whose tiles leave most of the
// multiprocessors idle while each walks a long reduction (BERT-base's MLP down projection: 48
// 32-row tiles walking K 3072, one step of 64 at a time).
#define SPLIT_K
#include "matmul_coop_body.glsl"
