#version 450
// MatMul with a constant B (weights read through fetch_weight, packed [K, N]; by rows, B^T: texel
// (n/4) * K + k holding 4 consecutive n, in matmul_const_coop_rows.comp) on cooperative matrices
// (VK_NV_cooperative_matrix: fp16 16x16 A times 16x8 B into fp32 16x8, one subgroup of 32 each).
// Only the scalar case (output C == 1, A not transposed, fp16 storage): vk_backend::kernels::matmul
// picks it when the device has the feature. Same push constants as matmul_const.comp; a workgroup
// computes a 64x64 output tile of one output layer (the dispatch uses COOP_TILE), its four
// subgroups 32x32 quarters. K goes through shared memory TK = 64 at a time as fp16, and the next
// step's A and B values are loaded into registers while the tensor cores work on this one: with
// 16 at a time and nothing in flight across the barriers, a 128-token prefill's MLP projection
// ([1, 128, 2048] x [2048, 6656]) took 543 us on an H200 (6.4 TFLOP/s; session 18), bound by the
// load latency of each of its 128 steps. Accumulation is fp32, and bias, alpha and activation are
// applied on the way out, as in matmul_body.glsl. Body: include/matmul_coop_body.glsl.
#include "matmul_coop_body.glsl"
