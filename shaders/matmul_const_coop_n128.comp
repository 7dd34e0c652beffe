#version 450
// matmul_const_coop.comp on 32x128 tiles (vk_backend::kernels::coop_tile): as many workgroups as
// 64x64 tiles, each loading a fifth fewer texels a step for the same outputs (32 rows of A, 32
// texels of four columns of B, against 64 and 16): A is one value a texel where its C is 1, so
// its loads are most of a step's.
#define TM 32u
#define TN 128u
#include "matmul_coop_body.glsl"
