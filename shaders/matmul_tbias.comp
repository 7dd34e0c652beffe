#version 450
// MatMul/Gemm, activation x activation, run-time bias tensor C (see include/matmul_body.glsl).
#define MATMUL_TENSOR_BIAS
#include "matmul_body.glsl"
