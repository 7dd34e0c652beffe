#version 450
// matmul_const_coop_splitk.comp for a B stored by rows on 32-row tiles.
#define SPLIT_K
#define ROWS_B
#define TM 32u
#include "matmul_coop_body.glsl"
