#version 450
// MatMul/Gemm, activation x constant B [K, N] read through fetch_weight, run-time bias tensor C
// (see include/matmul_body.glsl).
#define MATMUL_WEIGHTS
#define MATMUL_CONST_B
#define MATMUL_TENSOR_BIAS
#include "matmul_body.glsl"
