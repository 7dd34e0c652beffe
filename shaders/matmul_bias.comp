#version 450
// MatMul/Gemm, activation x activation, bias read through fetch_weight (see include/matmul_body.glsl).
#define MATMUL_WEIGHTS
#include "matmul_body.glsl"
