#version 450
// MatMul/Gemm, activation x constant B [K, N] read through fetch_weight (see include/matmul_body.glsl).
#define MATMUL_WEIGHTS
#define MATMUL_CONST_B
#include "matmul_body.glsl"
