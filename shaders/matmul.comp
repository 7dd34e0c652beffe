#version 450
// MatMul/Gemm, activation x activation, no bias (see include/matmul_body.glsl).
#include "matmul_body.glsl"
