#version 450
// MatMul with a constant B (weights read through fetch_weight, packed [K, N]; by rows, B^T: texel
// (n/4) * K + k holding 4 consecutive n, in matmul_const_coop_rows.comp) on cooperative matrices
// (VK_NV_cooperative_matrix: fp16 16x16 A times 16x8 B into fp32 16x8, one subgroup of 32 each).
// Only the scalar case (output C == 1, A not transposed, fp16 storage): vk_backend::kernels::matmul
// picks it when the device has the feature. Same push constants as matmul_const.comp; a workgroup
// computes a 64x64 output tile of one output layer (the dispatch uses COOP_TILE). Its 512
// invocations are four K groups of four subgroups: K goes through shared memory 64 at a time,
// each group staging and multiplying its 16 of them into its own 32x32 quarters' accumulators
// while it loads its next ones into registers; at the end the groups' tiles are summed through
// shared memory. On an H200 a 128-token prefill's MLP projection ([1, 128, 2048] x [2048,
// 6656]) took 543 us with one group taking K 16 at a time and nothing in flight (6.4 TFLOP/s,
// session 18), 326-376 us with one group taking 64 with the next step's loads in flight, and 153
// us with four groups (session 25, run 9): the one group left each scheduler a single subgroup
// that waited out every latency alone. A MatMul with fewer 64-row tiles than multiprocessors
// runs on 32-row tiles (matmul_const_coop_m32.comp): twice the workgroups, and a step's loads
// nearly halved (the 1.34 B prefill's key/value, query/output and down projections: 72 -> 51,
// 91 -> 63 and 232 -> 180 us, session 26, run 2). Accumulation is fp32, and bias, alpha and
// activation are applied on the way out, as in matmul_body.glsl. Body:
// include/matmul_coop_body.glsl.
#include "matmul_coop_body.glsl"
