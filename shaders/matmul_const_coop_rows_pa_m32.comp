#version 450
// matmul_const_coop.comp reading A from its [4, K/4, M] copy (PACKED_A); see include/matmul_coop_body.glsl.
#define ROWS_B
#define PACKED_A
#define TM 32u
#include "matmul_coop_body.glsl"
